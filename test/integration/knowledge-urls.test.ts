// API.md §4: URL sources and the SSRF guard, against real HTTP servers on loopback. The guard stays
// on: tests inject a resolver (docs.example.test → 127.0.0.1) and an address policy that allows
// exactly 127.0.0.1, so everything else private is still refused.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { gzipSync } from 'node:zlib';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { UrlFetchOptions } from '../../src/core/knowledge/url-fetch.js';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { testBackends } from '../helpers/postgres.js';
import { addSource } from '../helpers/factories.js';
import { expectProblem } from '../helpers/problem.js';
import { foundSources, MODES } from './knowledge-helpers.js';

interface Seen {
  path: string;
  host: string | undefined;
  userAgent: string | undefined;
}

type Handler = (req: http.IncomingMessage, res: http.ServerResponse) => void;

interface LocalServer {
  port: number;
  seen: Seen[];
  routes: Map<string, Handler>;
  close(): Promise<void>;
}

async function startServer(host = '127.0.0.1'): Promise<LocalServer> {
  const seen: Seen[] = [];
  const routes = new Map<string, Handler>();
  const server = http.createServer((req, res) => {
    seen.push({ path: req.url ?? '', host: req.headers.host, userAgent: req.headers['user-agent'] });
    const handler = routes.get(req.url ?? '');
    if (handler) return handler(req, res);
    res.writeHead(404, { 'content-type': 'text/html' }).end('<html><body><h1>Not here</h1><p>Nothing at this path.</p></body></html>');
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, host, () => resolve());
  });
  return {
    port: (server.address() as AddressInfo).port,
    seen,
    routes,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

const html = (title: string, body: string): Handler => (_req, res) => {
  res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
  res.end(`<!doctype html><html><head><title>${title}</title></head><body><main><h1>${title}</h1><p>${body}</p></main></body></html>`);
};
const redirect = (location: string): Handler => (_req, res) => {
  res.writeHead(302, { location }).end();
};

const postUrl = (t: TestApp, url: string, extra: Record<string, unknown> = {}) =>
  t.request({ method: 'POST', url: '/knowledge', body: { kind: 'url', url, ...extra } });

describe.each(testBackends())('URL sources refused at once (no request leaves) on $kind', { timeout: 15_000 }, (backend) => {
  let t: TestApp;
  let server: LocalServer;
  beforeAll(async () => {
    t = await createTestApp({ backend });
    server = await startServer();
    server.routes.set('/', html('Loopback', 'must never be fetched'));
  });
  afterAll(async () => {
    await server.close();
    await t.close();
  });

  it('refuses loopback, private, link-local, metadata and non-http URLs with 400 path url', async () => {
    const p = server.port;
    const refused = [
      `http://127.0.0.1:${p}/`,
      `http://localhost:${p}/`,
      `http://LOCALHOST.:${p}/`,
      `http://app.localhost:${p}/`,
      'http://10.0.0.1/',
      'http://192.168.1.1/',
      'http://172.16.0.1/',
      'http://169.254.169.254/latest/meta-data/',
      'http://[fd00:ec2::254]/',
      `http://[::1]:${p}/`,
      `http://[::ffff:127.0.0.1]:${p}/`,
      `http://0.0.0.0:${p}/`,
      `http://2130706433:${p}/`, // 127.0.0.1 as one number
      `http://0x7f.1:${p}/`,
      'http://metadata.google.internal/',
      'ftp://x',
      'file:///etc/passwd',
      'gopher://127.0.0.1/',
      'http://user:secret@docs.example.com/',
      'not a url',
      '',
    ];
    for (const url of refused) {
      const body = expectProblem(await postUrl(t, url), 400, 'validation_failed', 'url');
      expect(body.errors?.[0]?.message.length, url).toBeGreaterThan(0);
    }
    expect(server.seen).toEqual([]);
    expect((await t.request({ method: 'GET', url: '/knowledge' })).json().data).toEqual([]);
  });

  it('refuses the same on PUT, leaving the source as it was', async () => {
    const s = await addSource(t, { kind: 'text', name: 'Plain', content: 'plain words' });
    expectProblem(await t.request({ method: 'PUT', url: `/knowledge/${s.id}`, body: { kind: 'url', url: `http://127.0.0.1:${server.port}/` } }), 400, 'validation_failed', 'url');
    expect(server.seen).toEqual([]);
    expect((await t.request({ method: 'GET', url: `/knowledge/${s.id}` })).json()).toMatchObject({ kind: 'text', status: 'ready', updatedAt: s.updatedAt });
  });
});

describe.each(testBackends())('URL sources fetched through the guard on $kind', { timeout: 15_000 }, (backend) => {
  let t: TestApp;
  let server: LocalServer;
  let other: LocalServer | undefined;
  const lookups: string[] = [];
  const fetch: Partial<UrlFetchOptions> = {
    lookup: async (h) => {
      lookups.push(h);
      if (h === 'docs.example.test') return [{ address: '127.0.0.1', family: 4 }];
      if (h === 'evil.example.test') return [{ address: '10.1.2.3', family: 4 }];
      // One good address is not enough: every address the name resolves to must be allowed.
      if (h === 'mixed.example.test') return [{ address: '127.0.0.1', family: 4 }, { address: '::1', family: 6 }];
      return [];
    },
    isAllowedAddress: (a) => a === '127.0.0.1',
  };

  beforeAll(async () => {
    server = await startServer();
    t = await createTestApp({ backend, overrides: { fetch } });
  });
  afterEach(async () => {
    await other?.close();
    other = undefined;
  });
  afterAll(async () => {
    await server.close();
    await t.close();
  });

  const base = () => `http://docs.example.test:${server.port}`;
  const settle = async (id: string) => {
    await t.ctx.services.knowledge.idle();
    return (await t.request({ method: 'GET', url: `/knowledge/${id}` })).json();
  };

  it('fetches an HTML page: queued, then ready, named after its <title>, searchable', async () => {
    server.routes.set('/page', html('Marmot Field Guide', 'The alpine marmot whistles to warn the colony of eagles.'));
    const res = await postUrl(t, `${base()}/page`, { metadata: { from: 'web' } });
    expect(res.statusCode, res.body).toBe(202);
    const created = res.json();
    expect(created).toMatchObject({ kind: 'url', status: 'processing', metadata: { from: 'web' } });
    expect(res.headers.location).toBe(`/knowledge/${created.id}`);
    const s = await settle(created.id);
    expect(s).toMatchObject({ status: 'ready', error: null, name: 'Marmot Field Guide' });
    expect(s.chunkCount).toBeGreaterThan(0);
    expect(s.bytes).toBeGreaterThan(0);
    expect(server.seen.filter((r) => r.path === '/page')).toEqual([{ path: '/page', host: `docs.example.test:${server.port}`, userAgent: expect.stringMatching(/Switchboard/) }]);
    for (const mode of MODES) expect(await foundSources(t, { q: 'alpine marmot whistles', mode }), mode).toContain(s.id);
    const [hit] = (await t.request({ method: 'GET', url: '/knowledge/search?q=marmot%20eagles&mode=keyword' })).json().data;
    expect(hit).toMatchObject({ sourceId: s.id, sourceName: 'Marmot Field Guide', metadata: { from: 'web' } });

    // A given name is kept.
    server.routes.set('/named', html('Page title', 'The ibex climbs dam walls for salt.'));
    const named = await settle((await postUrl(t, `${base()}/named`, { name: 'My ibex notes' })).json().id);
    expect(named).toMatchObject({ status: 'ready', name: 'My ibex notes' });
  });

  it('follows a redirect that stays on allowed addresses', async () => {
    server.routes.set('/old', redirect('/new'));
    server.routes.set('/new', html('Moved page', 'The pika stores hay for the winter.'));
    const s = await settle((await postUrl(t, `${base()}/old`)).json().id);
    expect(s).toMatchObject({ status: 'ready', name: 'Moved page' });
    expect(await foundSources(t, { q: 'pika hay', mode: 'keyword' })).toContain(s.id);
  });

  it('fails a source redirected to a metadata or private address, without contacting it', async () => {
    server.routes.set('/to-metadata', redirect('http://169.254.169.254/latest/meta-data/'));
    const meta = await settle((await postUrl(t, `${base()}/to-metadata`)).json().id);
    expect(meta).toMatchObject({ status: 'failed', chunkCount: 0 });
    expect(meta.error).toMatch(/redirect/i);
    expect(meta.error).toContain('169.254.169.254');

    other = await startServer('127.0.0.2');
    other.routes.set('/second', html('Second', 'must never be fetched'));
    server.routes.set('/to-other', redirect(`http://127.0.0.2:${other.port}/second`));
    const hop = await settle((await postUrl(t, `${base()}/to-other`)).json().id);
    expect(hop).toMatchObject({ status: 'failed', chunkCount: 0 });
    expect(hop.error).toMatch(/redirect/i);
    expect(hop.error).toContain('127.0.0.2');
    expect(other.seen).toEqual([]);
    expect(server.seen.some((r) => r.path === '/second')).toBe(false);
  });

  it('fails a source whose page answers 404 or is not a document', async () => {
    const missing = await settle((await postUrl(t, `${base()}/missing`)).json().id);
    expect(missing).toMatchObject({ status: 'failed', chunkCount: 0 });
    expect(missing.error).toMatch(/404/);
    server.routes.set('/image', (_req, res) => {
      res.writeHead(200, { 'content-type': 'image/png' }).end(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]));
    });
    const image = await settle((await postUrl(t, `${base()}/image`)).json().id);
    expect(image).toMatchObject({ status: 'failed' });
    expect(image.error).toMatch(/image\/png/);
  });

  it('refuses at POST a host that does not resolve or resolves to a refused address', async () => {
    const before = server.seen.length;
    expectProblem(await postUrl(t, `http://nowhere.example.test:${server.port}/`), 400, 'validation_failed', 'url');
    const evil = expectProblem(await postUrl(t, `http://evil.example.test:${server.port}/`), 400, 'validation_failed', 'url');
    expect(evil.errors?.[0]?.message).toContain('10.1.2.3');
    const mixed = expectProblem(await postUrl(t, `http://mixed.example.test:${server.port}/`), 400, 'validation_failed', 'url');
    expect(mixed.errors?.[0]?.message).toContain('::1');
    expect(lookups).toContain('evil.example.test');
    expect(server.seen.length).toBe(before);
  });

  it('reads a gzip-encoded page', async () => {
    server.routes.set('/gzip', (_req, res) => {
      const page = '<html><head><title>Zipped</title></head><body><p>The hedgehog hibernates under leaves.</p></body></html>';
      res.writeHead(200, { 'content-type': 'text/html', 'content-encoding': 'gzip' }).end(gzipSync(page));
    });
    const s = await settle((await postUrl(t, `${base()}/gzip`)).json().id);
    expect(s).toMatchObject({ status: 'ready', name: 'Zipped' });
    expect(await foundSources(t, { q: 'hedgehog hibernates', mode: 'keyword' })).toContain(s.id);
  });

  it('fetches again on PUT with an empty body', async () => {
    let version = 1;
    server.routes.set('/changing', (req, res) =>
      html('Changing page', version === 1 ? 'The first version talks about beavers.' : 'The second version talks about otters.')(req, res),
    );
    const s = await settle((await postUrl(t, `${base()}/changing`)).json().id);
    expect(s.status).toBe('ready');
    expect(await foundSources(t, { q: 'beavers', mode: 'keyword' })).toContain(s.id);
    version = 2;
    const res = await t.request({ method: 'PUT', url: `/knowledge/${s.id}`, body: {} });
    expect(res.statusCode, res.body).toBe(202);
    expect(res.json().status).toBe('processing');
    const again = await settle(s.id);
    expect(again).toMatchObject({ status: 'ready', kind: 'url', name: 'Changing page' });
    expect(server.seen.filter((r) => r.path === '/changing').length).toBe(2);
    expect(await foundSources(t, { q: 'otters', mode: 'keyword' })).toContain(s.id);
    expect(await foundSources(t, { q: 'beavers', mode: 'keyword' })).not.toContain(s.id);
  });
});

describe.each(testBackends())('URL size and time caps on $kind', { timeout: 15_000 }, (backend) => {
  let t: TestApp;
  let server: LocalServer;
  beforeAll(async () => {
    server = await startServer();
    t = await createTestApp({
      backend,
      env: { SWITCHBOARD_UPLOAD_LIMIT_MB: '1' },
      overrides: { fetch: { lookup: async () => [{ address: '127.0.0.1', family: 4 }], isAllowedAddress: (a) => a === '127.0.0.1', timeoutMs: 500 } },
    });
  });
  afterAll(async () => {
    await server.close();
    await t.close();
  });

  it('fails a page larger than the upload limit, declared or streamed', async () => {
    const big = Buffer.alloc(1_500_000, 'a');
    server.routes.set('/declared', (_req, res) => res.writeHead(200, { 'content-type': 'text/plain', 'content-length': big.length }).end(big));
    server.routes.set('/streamed', (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain' }); // chunked: no length to check up front
      res.end(big);
    });
    for (const path of ['/declared', '/streamed']) {
      const res = await postUrl(t, `http://big.example.test:${server.port}${path}`);
      expect(res.statusCode, res.body).toBe(202);
      await t.ctx.services.knowledge.idle();
      const s = (await t.request({ method: 'GET', url: `/knowledge/${res.json().id}` })).json();
      expect(s, path).toMatchObject({ status: 'failed', chunkCount: 0 });
      expect(s.error, path).toMatch(/larger than/);
    }
  });

  it('fails a page that does not answer in time', async () => {
    server.routes.set('/hang', () => {}); // never answers; close() ends the socket
    const started = Date.now();
    const res = await postUrl(t, `http://slow.example.test:${server.port}/hang`);
    expect(res.statusCode, res.body).toBe(202);
    await t.ctx.services.knowledge.idle();
    const s = (await t.request({ method: 'GET', url: `/knowledge/${res.json().id}` })).json();
    expect(s).toMatchObject({ status: 'failed', chunkCount: 0 });
    expect(s.error).toMatch(/did not answer within 0\.5 s/);
    expect(Date.now() - started).toBeLessThan(5_000);
  });
});

describe.each(testBackends())('SWITCHBOARD_ALLOW_PRIVATE_URLS=1 on $kind', { timeout: 15_000 }, (backend) => {
  let t: TestApp;
  let server: LocalServer;
  beforeAll(async () => {
    server = await startServer();
    t = await createTestApp({ backend, env: { SWITCHBOARD_ALLOW_PRIVATE_URLS: '1' } });
  });
  afterAll(async () => {
    await server.close();
    await t.close();
  });

  it('accepts and fetches a loopback URL', async () => {
    server.routes.set('/intranet', html('Intranet', 'The wombat digs burrows with its claws.'));
    const res = await postUrl(t, `http://127.0.0.1:${server.port}/intranet`);
    expect(res.statusCode, res.body).toBe(202);
    await t.ctx.services.knowledge.idle();
    const s = (await t.request({ method: 'GET', url: `/knowledge/${res.json().id}` })).json();
    expect(s).toMatchObject({ status: 'ready', name: 'Intranet' });
    expect(server.seen.map((r) => r.path)).toEqual(['/intranet']);
    expect(await foundSources(t, { q: 'wombat burrows', mode: 'keyword' })).toContain(s.id);
    // Still http(s) only.
    expectProblem(await postUrl(t, 'ftp://127.0.0.1/'), 400, 'validation_failed', 'url');
  });
});
