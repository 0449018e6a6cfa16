// Issue 15: clients without prior registration through Client ID Metadata Documents — the client id
// is an https URL; the document is fetched through the one address guard with size, time and
// redirect limits. Served here over HTTPS on 127.0.0.1 with a self-signed certificate made at test
// time; the server under test trusts it through the fetch options' `extraCa` (a context override:
// NODE_EXTRA_CA_CERTS is only read when a process starts, and vitest's workers are already running).
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { auth } from '@modelcontextprotocol/sdk/client/auth.js';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp, tempDir } from '../helpers/app.js';
import { testBackends } from '../helpers/postgres.js';
import { codeOf, consentOverHttp, LOOPBACK_REDIRECT, OAUTH_WAIT_MS, TestOAuthProvider } from '../helpers/oauth.js';
import { listen } from './chat-helpers.js';

function selfSignedCertificate(): { key: string; cert: string } {
  const dir = tempDir('switchboard-tls-');
  try {
    execFileSync('openssl', [
      'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '1',
      '-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1',
      '-keyout', path.join(dir, 'key.pem'), '-out', path.join(dir, 'cert.pem'),
    ], { stdio: 'ignore', timeout: 10_000 });
    return { key: fs.readFileSync(path.join(dir, 'key.pem'), 'utf8'), cert: fs.readFileSync(path.join(dir, 'cert.pem'), 'utf8') };
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

describe.each(testBackends())('OAuth clients identified by a Client ID Metadata Document on $kind', { timeout: 20_000 }, (backend) => {
  let tls: { key: string; cert: string };
  let docs: Server;
  let docsOrigin: string;
  const hits = new Map<string, number>();
  const held: Array<() => void> = [];
  let t: TestApp;
  let origin: string;

  const clientDoc = (url: string, extra: Record<string, unknown> = {}) => ({
    client_id: url,
    client_name: 'Metadata Client',
    redirect_uris: [LOOPBACK_REDIRECT],
    grant_types: ['authorization_code', 'refresh_token'],
    response_types: ['code'],
    token_endpoint_auth_method: 'none',
    ...extra,
  });

  beforeAll(async () => {
    tls = selfSignedCertificate();
    docs = createServer({ key: tls.key, cert: tls.cert }, (req, res) => {
      const p = req.url ?? '/';
      hits.set(p, (hits.get(p) ?? 0) + 1);
      const url = `${docsOrigin}${p}`;
      const json = (body: unknown) => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(body));
      if (p === '/client.json' || p === '/other-client.json') return json(clientDoc(url));
      if (p === '/big.json') return json(clientDoc(url, { padding: 'x'.repeat(70 * 1024) }));
      if (p === '/mismatch.json') return json(clientDoc(`${docsOrigin}/client.json`));
      if (p === '/secret.json') return json(clientDoc(url, { token_endpoint_auth_method: 'client_secret_basic' }));
      if (p === '/text') return res.writeHead(200, { 'content-type': 'text/plain' }).end('client: me');
      if (p === '/redirect.json') return res.writeHead(302, { location: '/client.json' }).end();
      if (p === '/slow.json') return void held.push(() => res.destroy());
      res.writeHead(404).end();
    });
    await new Promise<void>((resolve) => docs.listen(0, '127.0.0.1', resolve));
    docsOrigin = `https://127.0.0.1:${(docs.address() as AddressInfo).port}`;
    t = await createTestApp({ backend, env: { SWITCHBOARD_ALLOW_PRIVATE_URLS: '1' }, overrides: { fetch: { extraCa: tls.cert, timeoutMs: 1_000 } } });
    origin = await listen(t);
  });
  afterAll(async () => {
    for (const release of held) release();
    await t?.close();
    docs?.closeAllConnections();
    await new Promise((resolve) => docs?.close(resolve));
  });

  /** The authorization page for a metadata-document client id (built as the SDK would). */
  async function authorizePage(app: TestApp, clientId: string) {
    const q = new URLSearchParams({
      response_type: 'code',
      client_id: clientId,
      redirect_uri: LOOPBACK_REDIRECT,
      code_challenge: 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM',
      code_challenge_method: 'S256',
      resource: 'http://127.0.0.1:3000/mcp',
      state: 's',
    });
    return app.request({ method: 'GET', url: `/oauth/authorize?${q}`, as: null });
  }

  it('connects a metadata-document client end to end with the SDK, without registering it', async () => {
    const clientId = `${docsOrigin}/client.json`;
    const provider = new TestOAuthProvider({ clientMetadataUrl: clientId });
    const serverUrl = `${origin}/mcp`;
    expect(await auth(provider, { serverUrl })).toBe('REDIRECT');
    expect(provider.client?.client_id).toBe(clientId);
    const authUrl = provider.authorizationUrl!;
    expect(authUrl.searchParams.get('client_id')).toBe(clientId);
    const page = await (await fetch(authUrl, { signal: AbortSignal.timeout(OAUTH_WAIT_MS) })).text();
    expect(page).toContain('Metadata Client');
    expect(page).toContain(`Identified by its metadata at <code>127.0.0.1:${new URL(docsOrigin).port}</code>`);

    const transport = new StreamableHTTPClientTransport(new URL(serverUrl), { authProvider: provider });
    await transport.finishAuth(codeOf(await consentOverHttp(authUrl, t.adminKey), origin));
    const client = new Client({ name: 'cimd-test', version: '1.0.0' });
    await client.connect(transport);
    expect((await client.listTools()).tools.length).toBeGreaterThan(0);
    await client.close();

    expect(await t.ctx.db.kysely.selectFrom('oauth_clients').select('client_id').execute()).toEqual([]);
    // Cached: two authorizations, one fetch.
    expect(hits.get('/client.json')).toBe(1);
    const grants = (await t.request({ method: 'GET', url: '/auth/oauth/grants' })).json().data;
    expect(grants[0]).toMatchObject({ clientId, clientName: 'Metadata Client' });
  });

  it('enforces the document\'s redirect_uris', async () => {
    const q = new URLSearchParams({ response_type: 'code', client_id: `${docsOrigin}/other-client.json`, redirect_uri: 'http://127.0.0.1:7/elsewhere', state: 's' });
    const res = await t.request({ method: 'GET', url: `/oauth/authorize?${q}`, as: null });
    expect(res.statusCode).toBe(400);
    expect(res.headers.location).toBeUndefined();
    expect(res.body).toContain('Unregistered redirect URI');
  });

  it('refuses documents that are too large, too slow, not JSON, redirected, for another id, or with a secret', async () => {
    const cases: Array<[string, RegExp]> = [
      ['/big.json', /larger than 65536 bytes/],
      ['/slow.json', /did not answer within 1 s/],
      ['/text', /not JSON/],
      ['/redirect.json', /too many redirects|refused/],
      ['/mismatch.json', /another client_id/],
      ['/secret.json', /token_endpoint_auth_method must be &quot;none&quot;/],
      ['/missing.json', /404/],
    ];
    for (const [p, reason] of cases) {
      const res = await authorizePage(t, `${docsOrigin}${p}`);
      expect(res.statusCode, p).toBe(400);
      expect(res.headers.location, p).toBeUndefined();
      expect(res.headers['content-type']).toMatch(/^text\/html/);
      expect(res.body, p).toMatch(reason);
    }
  });

  it('refuses a document on a private address without SWITCHBOARD_ALLOW_PRIVATE_URLS', async () => {
    const closed = await createTestApp({ backend, overrides: { fetch: { extraCa: tls.cert } } });
    try {
      const before = hits.get('/client.json') ?? 0;
      const res = await authorizePage(closed, `${docsOrigin}/client.json`);
      expect(res.statusCode).toBe(400);
      expect(res.body).toMatch(/loopback address/);
      expect(hits.get('/client.json') ?? 0).toBe(before);
    } finally {
      await closed.close();
    }
  });

  it('checks the certificate: without the test CA the self-signed server is refused', async () => {
    const strict = await createTestApp({ backend, env: { SWITCHBOARD_ALLOW_PRIVATE_URLS: '1' } });
    try {
      const res = await authorizePage(strict, `${docsOrigin}/client.json`);
      expect(res.statusCode).toBe(400);
      expect(res.body).toMatch(/could not be fetched.*(self-signed|certificate)/s);
    } finally {
      await strict.close();
    }
  });
});
