import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { brotliCompressSync, deflateRawSync, deflateSync, gzipSync } from 'node:zlib';
import { afterEach, describe, expect, it } from 'vitest';
import { ValidationError } from '../../src/errors.js';
import {
  assertPublicUrl,
  fetchUrl,
  isBlockedAddress,
  UrlFetchError,
  type LookupFn,
  type UrlFetchOptions,
} from '../../src/core/knowledge/url-fetch.js';

const T = { timeout: 10_000 };

// --- isBlockedAddress ---------------------------------------------------------------------------

describe('isBlockedAddress', () => {
  it.each([
    ['0.0.0.0'], ['0.255.255.255'],
    ['10.0.0.0'], ['10.255.255.255'],
    ['100.64.0.0'], ['100.127.255.255'],
    ['127.0.0.1'], ['127.255.255.255'],
    ['169.254.0.0'], ['169.254.169.254'], ['169.254.255.255'],
    ['172.16.0.0'], ['172.31.255.255'],
    ['192.0.0.0'], ['192.0.0.255'],
    ['192.0.2.0'], ['192.0.2.255'],
    ['192.168.0.0'], ['192.168.255.255'],
    ['198.18.0.0'], ['198.19.255.255'],
    ['198.51.100.0'], ['198.51.100.255'],
    ['203.0.113.0'], ['203.0.113.255'],
    ['224.0.0.0'], ['239.255.255.255'],
    ['240.0.0.0'], ['255.255.255.254'], ['255.255.255.255'],
    ['::'], ['::1'], ['0:0:0:0:0:0:0:1'],
    ['fc00::'], ['fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff'], ['fd00:ec2::254'],
    ['fe80::'], ['fe80::1%eth0'], ['febf:ffff::1'],
    ['ff00::'], ['ff02::1'],
    ['2001:db8::'], ['2001:db8:ffff:ffff:ffff:ffff:ffff:ffff'],
    ['[::1]'],
  ])('blocks %s', (address) => {
    expect(isBlockedAddress(address)).toBe(true);
  });

  it.each([
    ['::ffff:127.0.0.1'], ['::ffff:7f00:1'], ['::ffff:10.0.0.1'], ['::ffff:169.254.169.254'], ['[::ffff:a9fe:a9fe]'],
    ['0:0:0:0:0:ffff:c0a8:0101'], ['::ffff:0:127.0.0.1'],
    ['::127.0.0.1'], ['::7f00:1'], ['::a00:1'],
    ['64:ff9b::127.0.0.1'], ['64:ff9b::a9fe:a9fe'], ['64:ff9b::10.1.2.3'], ['64:ff9b::ffff:ffff'],
  ])('blocks the mapped, compatible or NAT64 form %s', (address) => {
    expect(isBlockedAddress(address)).toBe(true);
  });

  it.each([
    ['8.8.8.8'], ['1.1.1.1'], ['1.0.0.0'], ['9.255.255.255'], ['11.0.0.0'],
    ['100.63.255.255'], ['100.128.0.0'], ['126.255.255.255'], ['128.0.0.0'],
    ['169.253.255.255'], ['169.255.0.0'], ['172.15.255.255'], ['172.32.0.0'],
    ['192.0.1.0'], ['192.0.3.0'], ['192.167.255.255'], ['192.169.0.0'],
    ['198.17.255.255'], ['198.20.0.0'], ['198.51.101.0'], ['203.0.114.0'], ['223.255.255.255'],
    ['2606:4700::1111'], ['2001:4860:4860::8888'], ['fbff:ffff::1'], ['fe7f::1'], ['2001:db9::1'], ['::2:0:0'],
    ['::ffff:8.8.8.8'], ['64:ff9b::8.8.8.8'], ['64:ff9b::101:101'],
  ])('lets %s through', (address) => {
    expect(isBlockedAddress(address)).toBe(false);
  });

  it.each([
    [''], ['localhost'], ['example.com'], ['127.1'], ['1.2.3'], ['256.1.1.1'], ['01.2.3.4'], [' 8.8.8.8'],
    ['0x7f000001'], ['2130706433'], ['::ffff:999.1.1.1'], ['1::2::3'], ['gggg::1'], ['[8.8.8.8]'],
  ])('treats unparseable %j as blocked', (address) => {
    expect(isBlockedAddress(address)).toBe(true);
  });
});

// --- assertPublicUrl ----------------------------------------------------------------------------

function recordingLookup(answers: Record<string, string[]>): LookupFn & { calls: string[] } {
  const calls: string[] = [];
  const fn = async (hostname: string) => {
    calls.push(hostname);
    const found = answers[hostname];
    if (!found) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' });
    return found.map((address) => ({ address, family: (address.includes(':') ? 6 : 4) as 4 | 6 }));
  };
  return Object.assign(fn, { calls });
}

async function refusal(promise: Promise<unknown>): Promise<ValidationError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(ValidationError);
  return error as ValidationError;
}

describe('assertPublicUrl', () => {
  const lookup = recordingLookup({
    'public.example.test': ['93.184.215.14', '2606:2800:21f:cb07:6820:80da:af6b:8b2c'],
    'mixed.example.test': ['93.184.215.14', '10.0.0.5'],
    'mapped.example.test': ['::ffff:192.168.1.1'],
  });
  const options: UrlFetchOptions = { allowPrivate: false, maxBytes: 1000, lookup };

  it.each([
    ['http://127.0.0.1:1/', /loopback address \(127\.0\.0\.1\)/],
    ['http://localhost/', /local host name \(localhost\)/],
    ['http://LOCALHOST./', /local host name/],
    ['http://app.localhost/', /local host name/],
    ['http://printer.local/', /local host name/],
    ['http://metadata.google.internal/', /local host name/],
    ['http://[::1]/', /loopback address \(::1\)/],
    ['http://[::ffff:127.0.0.1]/', /loopback address/],
    ['http://10.1.2.3/', /private address \(10\.1\.2\.3\)/],
    ['http://169.254.169.254/latest/meta-data/', /link-local address \(169\.254\.169\.254\)/],
    ['http://[fd00:ec2::254]/', /private address/],
    ['http://0x7f000001/', /loopback address \(127\.0\.0\.1\)/],
    ['http://2130706433/', /loopback address \(127\.0\.0\.1\)/],
    ['http://0177.0.0.1/', /loopback address/],
    ['http://0/', /unspecified address/],
    ['ftp://example.com/', /http or https/],
    ['file:///etc/passwd', /http or https/],
    ['javascript:alert(1)', /http or https/],
    ['http://user:pass@example.com/', /user name or password/],
    ['http://user@example.com/', /user name or password/],
    ['http://example.com:0/', /invalid port/],
    ['not a url', /not a valid URL/],
  ])('refuses %s without contacting anything', async (url, why) => {
    lookup.calls.length = 0;
    const error = await refusal(assertPublicUrl(url, options));
    expect(error.errors?.[0]?.path).toBe('url');
    expect(error.errors?.[0]?.message).toMatch(why);
    expect(error.status).toBe(400);
    expect(error.code).toBe('validation_failed');
    expect(lookup.calls).toEqual([]);
  });

  it('refuses a name when any of its addresses is private, and says which', async () => {
    const error = await refusal(assertPublicUrl('https://mixed.example.test/page', options));
    expect(error.errors?.[0]).toEqual({
      path: 'url',
      message: 'resolves to a private address (10.0.0.5); URLs must point to the public internet',
    });
    await refusal(assertPublicUrl('https://mapped.example.test/', options));
  });

  it('refuses a name that does not resolve', async () => {
    const error = await refusal(assertPublicUrl('https://nowhere.example.test/', options));
    expect(error.errors?.[0]?.message).toMatch(/does not resolve/);
  });

  it('names the field it was given', async () => {
    const error = await refusal(assertPublicUrl('http://10.0.0.1/', options, 'source.url'));
    expect(error.errors?.[0]?.path).toBe('source.url');
  });

  it('accepts a name that resolves only to public addresses', async () => {
    const url = await assertPublicUrl('https://public.example.test/docs?a=1', options);
    expect(url).toBeInstanceOf(URL);
    expect(url.href).toBe('https://public.example.test/docs?a=1');
    await expect(assertPublicUrl('http://8.8.8.8/', options)).resolves.toBeInstanceOf(URL);
  });

  it('accepts private addresses and local names when allowPrivate is set, still refusing bad schemes', async () => {
    const open = { ...options, allowPrivate: true, lookup: recordingLookup({ localhost: ['127.0.0.1'] }) };
    await expect(assertPublicUrl('http://127.0.0.1:1/', open)).resolves.toBeInstanceOf(URL);
    await expect(assertPublicUrl('http://localhost:3000/', open)).resolves.toBeInstanceOf(URL);
    await refusal(assertPublicUrl('file:///etc/passwd', open));
  });
});

// --- fetchUrl against loopback servers -----------------------------------------------------------

type Handler = (req: IncomingMessage, res: ServerResponse) => void;
const servers: Server[] = [];

async function listen(handler: Handler, host = '127.0.0.1', port = 0): Promise<{ server: Server; port: number }> {
  const server = createServer(handler);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  servers.push(server);
  return { server, port: (server.address() as AddressInfo).port };
}

afterEach(async () => {
  await Promise.all(
    servers.splice(0).map(
      (server) =>
        new Promise<void>((resolve) => {
          server.closeAllConnections();
          server.close(() => resolve());
        }),
    ),
  );
});

const NAME = 'docs.example.test';
const loopbackOnly = (address: string): boolean => address === '127.0.0.1';

function options(extra: Partial<UrlFetchOptions> = {}): UrlFetchOptions & { lookup: LookupFn & { calls: string[] } } {
  return {
    allowPrivate: false,
    maxBytes: 100_000,
    timeoutMs: 5_000,
    isAllowedAddress: loopbackOnly,
    lookup: recordingLookup({ [NAME]: ['127.0.0.1'] }),
    ...extra,
  } as UrlFetchOptions & { lookup: LookupFn & { calls: string[] } };
}

async function fetchError(promise: Promise<unknown>): Promise<UrlFetchError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(UrlFetchError);
  return error as UrlFetchError;
}

/** Waits for a condition set by a server callback, failing after `ms`. */
async function eventually(check: () => boolean, ms = 2_000): Promise<void> {
  const start = Date.now();
  while (!check()) {
    if (Date.now() - start > ms) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 10));
  }
}

/**
 * Whether this host lets a server bind 127.0.0.2 (Linux does; macOS only with an alias). The tests
 * whose point is that a second loopback address never sees a request need that listener, so where
 * it cannot be had they are reported skipped rather than passing without it.
 */
const SECOND_LOOPBACK = await new Promise<boolean>((resolve) => {
  const probe = createServer();
  probe.once('error', () => resolve(false));
  probe.listen(0, '127.0.0.2', () => probe.close(() => resolve(true)));
});
const withSecondLoopback = it.skipIf(!SECOND_LOOPBACK);

/** A second listener on 127.0.0.2 with the same port. */
async function listenAlso(handler: Handler, port: number): Promise<Server> {
  return (await listen(handler, '127.0.0.2', port)).server;
}

describe('fetchUrl', () => {
  it('fetches a document through the guard and describes it', T, async () => {
    const seen: IncomingMessage[] = [];
    const { port } = await listen((req, res) => {
      seen.push(req);
      if (req.url === '/files/Guide%20One.html') {
        res.writeHead(200, { 'content-type': 'Text/HTML; Charset="UTF-8"' });
        return res.end('<h1>Hello</h1>');
      }
      res.writeHead(200, {
        'content-type': 'application/pdf',
        'content-disposition': 'attachment; filename="../report.pdf"',
      });
      res.end('%PDF-1.7');
    });
    const opts = options();
    const doc = await fetchUrl(`http://${NAME}:${port}/files/Guide%20One.html`, opts);
    expect(doc).toEqual({
      url: `http://${NAME}:${port}/files/Guide%20One.html`,
      mediaType: 'text/html',
      charset: 'utf-8',
      filename: 'Guide One.html',
      body: Buffer.from('<h1>Hello</h1>'),
    });
    expect(opts.lookup.calls).toEqual([NAME]);
    expect(seen[0]?.headers.host).toBe(`${NAME}:${port}`);
    expect(seen[0]?.headers['user-agent']).toBe('Switchboard/0.1 (+knowledge ingestion)');
    expect(seen[0]?.headers.accept).toMatch(/text\/html.*application\/pdf/);
    expect(seen[0]?.headers['accept-encoding']).toBe('gzip, deflate, br');

    const pdf = await fetchUrl(`http://${NAME}:${port}/download?id=1`, options({ userAgent: 'test-agent' }));
    expect(pdf).toMatchObject({ mediaType: 'application/pdf', charset: null, filename: 'report.pdf' });
    expect(pdf.body.toString()).toBe('%PDF-1.7');
    expect(seen[1]?.headers['user-agent']).toBe('test-agent');
  });

  it('prefers filename* and falls back to null without a name anywhere', T, async () => {
    const { port } = await listen((req, res) => {
      if (req.url === '/star') res.setHeader('content-disposition', `attachment; filename="x.txt"; filename*=UTF-8''r%C3%A9sum%C3%A9.txt`);
      res.end('ok');
    });
    expect((await fetchUrl(`http://${NAME}:${port}/star`, options())).filename).toBe('résumé.txt');
    expect(await fetchUrl(`http://${NAME}:${port}/`, options())).toMatchObject({ filename: null, mediaType: null });
  });

  it.each([
    ['gzip', gzipSync],
    ['deflate', deflateSync],
    ['deflate', deflateRawSync],
    ['br', brotliCompressSync],
  ] as const)('decompresses a %s body', T, async (encoding, compress) => {
    const text = '<p>compressed knowledge</p>'.repeat(200);
    const { port } = await listen((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/html', 'content-encoding': encoding });
      res.end(compress(Buffer.from(text)));
    });
    const doc = await fetchUrl(`http://${NAME}:${port}/`, options());
    expect(doc.body.toString()).toBe(text);
  });

  it('follows a redirect chain, re-checking each hop, to the final URL', T, async () => {
    const paths: string[] = [];
    const { port } = await listen((req, res) => {
      paths.push(req.url ?? '');
      if (req.url === '/a') return res.writeHead(302, { location: '/b' }).end();
      if (req.url === '/b') return res.writeHead(301, { location: `http://${NAME}:${port}/c?x=1` }).end();
      if (req.url === '/c?x=1') return res.writeHead(307, { location: 'd' }).end();
      res.writeHead(200, { 'content-type': 'text/plain' }).end('final');
    });
    const opts = options();
    const doc = await fetchUrl(`http://${NAME}:${port}/a`, opts);
    expect(doc.url).toBe(`http://${NAME}:${port}/d`);
    expect(doc.body.toString()).toBe('final');
    expect(paths).toEqual(['/a', '/b', '/c?x=1', '/d']);
    expect(opts.lookup.calls).toEqual([NAME, NAME, NAME, NAME]);
  });

  it('refuses a redirect to the metadata address', T, async () => {
    const { port } = await listen((_req, res) => {
      res.writeHead(302, { location: 'http://169.254.169.254/latest/meta-data/' }).end();
    });
    const error = await fetchError(fetchUrl(`http://${NAME}:${port}/`, options()));
    expect(error.message).toBe('Redirect to http://169.254.169.254/latest/meta-data/ refused: link-local address');
  });

  it('refuses a redirect to a name that resolves to a blocked address, and to other schemes', T, async () => {
    const { port } = await listen((req, res) => {
      if (req.url === '/ftp') return res.writeHead(301, { location: 'ftp://example.com/x' }).end();
      if (req.url === '/local') return res.writeHead(301, { location: 'http://localhost/' }).end();
      res.writeHead(303, { location: `http://evil.example.test:${port}/` }).end();
    });
    const opts = options({ lookup: recordingLookup({ [NAME]: ['127.0.0.1'], 'evil.example.test': ['10.0.0.7'] }) });
    expect((await fetchError(fetchUrl(`http://${NAME}:${port}/`, opts))).message).toBe(
      `Redirect to http://evil.example.test:${port}/ refused: evil.example.test resolves to a private address (10.0.0.7)`,
    );
    expect((await fetchError(fetchUrl(`http://${NAME}:${port}/ftp`, opts))).message).toMatch(
      /^Redirect to ftp:\/\/example\.com\/x refused: not an http or https URL$/,
    );
    expect((await fetchError(fetchUrl(`http://${NAME}:${port}/local`, opts))).message).toMatch(
      /^Redirect to http:\/\/localhost\/ refused: local host name/,
    );
  });

  withSecondLoopback('refuses a redirect to another loopback address, which never sees a request', T, async () => {
    const paths: string[] = [];
    const handler: Handler = (req, res) => {
      paths.push(req.url ?? '');
      if (req.url === '/hop') return res.writeHead(302, { location: `http://127.0.0.2:${port}/second` }).end();
      res.end('should not be reached');
    };
    const { port } = await listen(handler);
    await listenAlso(handler, port);
    const error = await fetchError(fetchUrl(`http://${NAME}:${port}/hop`, options()));
    expect(error.message).toBe(`Redirect to http://127.0.0.2:${port}/second refused: loopback address`);
    expect(paths).toEqual(['/hop']);
  });

  it('stops a redirect loop', T, async () => {
    let requests = 0;
    const { port } = await listen((_req, res) => {
      requests++;
      res.writeHead(302, { location: '/loop' }).end();
    });
    const error = await fetchError(fetchUrl(`http://${NAME}:${port}/loop`, options()));
    expect(error.message).toMatch(/refused: too many redirects \(more than 5\)/);
    expect(requests).toBe(6);
    const once = await fetchError(fetchUrl(`http://${NAME}:${port}/loop`, options({ maxRedirects: 0 })));
    expect(once.message).toMatch(/too many redirects/);
  });

  it('refuses a declared Content-Length over maxBytes', T, async () => {
    const { port } = await listen((_req, res) => {
      res.writeHead(200, { 'content-length': 5_000 }).end(Buffer.alloc(5_000));
    });
    const error = await fetchError(fetchUrl(`http://${NAME}:${port}/`, options({ maxBytes: 1_000 })));
    expect(error.message).toBe('The document is larger than 1000 bytes');
    await expect(fetchUrl(`http://${NAME}:${port}/`, options({ maxBytes: 5_000 }))).resolves.toMatchObject({
      body: Buffer.alloc(5_000),
    });
  });

  it('stops reading a chunked body past maxBytes and closes the socket', T, async () => {
    let serverSawClose = false;
    let written = 0;
    const { port } = await listen((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      const timer = setInterval(() => {
        written += 16_384;
        res.write(Buffer.alloc(16_384, 'a'));
      }, 5);
      res.on('close', () => {
        clearInterval(timer);
        serverSawClose = true;
      });
    });
    const error = await fetchError(fetchUrl(`http://${NAME}:${port}/`, options({ maxBytes: 50_000 })));
    expect(error.message).toMatch(/larger than 50000 bytes/);
    await eventually(() => serverSawClose);
    expect(written).toBeLessThan(2_000_000);
  });

  it('refuses a gzip bomb by its decompressed size', T, async () => {
    const bomb = gzipSync(Buffer.alloc(20_000_000));
    expect(bomb.length).toBeLessThan(50_000);
    const { port } = await listen((_req, res) => {
      res.writeHead(200, { 'content-encoding': 'gzip', 'content-length': bomb.length }).end(bomb);
    });
    const error = await fetchError(fetchUrl(`http://${NAME}:${port}/`, options({ maxBytes: 100_000 })));
    expect(error.message).toBe('The document is larger than 100000 bytes');
  });

  it('times out a server that never answers', T, async () => {
    let sockets = 0;
    const { server, port } = await listen(() => undefined);
    server.on('connection', (socket: Socket) => {
      sockets++;
      socket.on('close', () => sockets--);
    });
    const started = Date.now();
    const error = await fetchError(fetchUrl(`http://${NAME}:${port}/`, options({ timeoutMs: 300 })));
    // Not left hanging (the server never answers); far above 0.3 s for a loaded machine.
    expect(Date.now() - started).toBeLessThan(10_000);
    expect(error.message).toBe(`${NAME} did not answer within 0.3 s`);
    await eventually(() => sockets === 0);
  });

  it('applies the deadline to the whole fetch, redirects included', T, async () => {
    const { port } = await listen((_req, res) => {
      setTimeout(() => res.writeHead(302, { location: '/again' }).end(), 120);
    });
    const started = Date.now();
    const error = await fetchError(fetchUrl(`http://${NAME}:${port}/`, options({ timeoutMs: 300, maxRedirects: 20 })));
    // 20 redirects of 120 ms each would take 2.4 s and end otherwise: the message shows the whole-fetch deadline.
    expect(error.message).toMatch(/did not answer within 0\.3 s/);
  });

  it('names the status of a non-2xx answer', T, async () => {
    const { port } = await listen((req, res) => {
      res.writeHead(req.url === '/gone' ? 500 : 404).end('nope');
    });
    expect((await fetchError(fetchUrl(`http://${NAME}:${port}/missing`, options()))).message).toBe(
      'The server answered 404 Not Found',
    );
    expect((await fetchError(fetchUrl(`http://${NAME}:${port}/gone`, options()))).message).toBe(
      'The server answered 500 Internal Server Error',
    );
  });

  it('rejects with the abort reason, promptly', T, async () => {
    const { port } = await listen(() => undefined);
    const controller = new AbortController();
    const reason = new Error('user cancelled');
    setTimeout(() => controller.abort(reason), 50);
    const started = Date.now();
    await expect(fetchUrl(`http://${NAME}:${port}/`, options({ signal: controller.signal }))).rejects.toBe(reason);
    // The server never answers: settling at all shows the abort ended it (the bound is for a loaded machine).
    expect(Date.now() - started).toBeLessThan(10_000);
    await expect(fetchUrl(`http://${NAME}:${port}/`, options({ signal: controller.signal }))).rejects.toBe(reason);
  });

  it('refuses loopback with the default predicate and reaches it with allowPrivate', T, async () => {
    let requests = 0;
    const { port } = await listen((_req, res) => {
      requests++;
      res.end('local');
    });
    const guarded = { allowPrivate: false, maxBytes: 1_000, timeoutMs: 2_000 };
    const error = await fetchError(fetchUrl(`http://127.0.0.1:${port}/`, guarded));
    expect(error.message).toBe(`Refused to fetch http://127.0.0.1:${port}/: loopback address`);
    expect(requests).toBe(0);
    const doc = await fetchUrl(`http://127.0.0.1:${port}/`, { ...guarded, allowPrivate: true });
    expect(doc.body.toString()).toBe('local');
  });

  it('reports a refused connection readably', T, async () => {
    const { server, port } = await listen(() => undefined);
    await new Promise<void>((resolve) => server.close(() => resolve()));
    const error = await fetchError(fetchUrl(`http://${NAME}:${port}/`, options()));
    expect(error.message).toBe(`Could not connect to ${NAME}: connection refused`);
  });
});

describe('fetchUrl against DNS rebinding', () => {
  withSecondLoopback('connects only to the vetted first answer, never to a later one', T, async () => {
    let secondConnections = 0;
    const { port } = await listen((req, res) => {
      if (req.url === '/again') return res.writeHead(302, { location: '/final' }).end();
      res.end('vetted');
    });
    const second = await listenAlso((_req, res) => res.end('rebound'), port);
    second.on('connection', () => secondConnections++);

    let answers = [['127.0.0.1'], ['127.0.0.2']];
    const calls: string[] = [];
    const rebinding: LookupFn = async (hostname) => {
      calls.push(hostname);
      const next = answers.shift() ?? ['127.0.0.2'];
      return next.map((address) => ({ address, family: 4 as const }));
    };
    const doc = await fetchUrl(`http://${NAME}:${port}/`, options({ lookup: rebinding }));
    expect(doc.body.toString()).toBe('vetted');
    expect(calls).toEqual([NAME]); // the connection used the pinned answer, not a fresh lookup

    // On the next hop the name now answers 127.0.0.2: that hop is refused, not connected.
    answers = [['127.0.0.1'], ['127.0.0.2']];
    const error = await fetchError(fetchUrl(`http://${NAME}:${port}/again`, options({ lookup: rebinding })));
    expect(error.message).toBe(
      `Redirect to http://${NAME}:${port}/final refused: ${NAME} resolves to a loopback address (127.0.0.2)`,
    );
    expect(secondConnections).toBe(0);
  });
});
