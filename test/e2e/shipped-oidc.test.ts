// OIDC sign-in as shipped (DESIGN.md "Tests run what ships"): `node dist/src/main.js serve` with a
// real provider (oidc-provider on 127.0.0.1); openid-client is imported by the built server at the
// first sign-in. The browser's steps go over real HTTP: start, the provider's pages, the callback,
// then a read with the session cookie.
import fs from 'node:fs';
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateKeySecret } from '../../src/core/auth/keys.js';
import { startOidcProvider, type TestOidcProvider } from '../fakes/oidc-provider.js';
import { tempDir } from '../helpers/app.js';
import { type BuiltServer, builtServers, MAIN } from '../helpers/built-server.js';

const TIMEOUT_MS = 5_000;

/** A port nothing listens on now (the redirect URI registered at the provider names it before the server starts). */
async function freePort(): Promise<number> {
  const probe = net.createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const { port } = probe.address() as net.AddressInfo;
  await new Promise<void>((resolve) => probe.close(() => resolve()));
  return port;
}

describe('OIDC sign-in on the built server', { timeout: 60_000 }, () => {
  const dataDir = tempDir('switchboard-shipped-oidc-');
  let idp: TestOidcProvider;
  let server: BuiltServer;
  let stop: () => void = () => {};

  beforeAll(async () => {
    expect(fs.existsSync(MAIN), 'dist/ is built by npm test (or npm run build:server)').toBe(true);
    const port = await freePort();
    const base = `http://127.0.0.1:${port}`;
    idp = await startOidcProvider({ clientId: 'switchboard', clientSecret: 'built-server-client-secret', redirectUri: `${base}/auth/oidc/callback` });
    idp.accounts.set('ada', { email: 'ada@example.com', email_verified: true, name: 'Ada', groups: ['editor'] });
    const built = builtServers({
      dataDir,
      adminKey: generateKeySecret(),
      env: {
        PORT: String(port),
        SWITCHBOARD_PUBLIC_URL: base,
        SWITCHBOARD_OIDC_ISSUER: idp.url,
        SWITCHBOARD_OIDC_CLIENT_ID: 'switchboard',
        SWITCHBOARD_OIDC_CLIENT_SECRET: 'built-server-client-secret',
        SWITCHBOARD_OIDC_DEFAULT_ROLE: 'viewer',
        SWITCHBOARD_OIDC_ROLE_CLAIM: 'groups',
      },
    });
    stop = built.killAll;
    server = await built.serve();
  });

  afterAll(async () => {
    stop();
    await idp?.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  it('signs a person in and the session cookie reads the API', async () => {
    const started = await fetch(`${server.url}/auth/oidc/start?returnTo=%2Fconsole%2F`, { redirect: 'manual', signal: AbortSignal.timeout(TIMEOUT_MS) });
    expect(started.status, await started.clone().text()).toBe(302);
    const state = /^sb_oidc=([^;]+)/.exec(started.headers.getSetCookie().find((c) => c.startsWith('sb_oidc=')) ?? '')?.[1];
    expect(state).toBeDefined();
    const back = await idp.signIn(started.headers.get('location')!, 'ada', `${server.url}/auth/oidc/callback`);

    const done = await fetch(back, { redirect: 'manual', headers: { cookie: `sb_oidc=${state}` }, signal: AbortSignal.timeout(TIMEOUT_MS) });
    expect(done.status, await done.clone().text()).toBe(302);
    expect(done.headers.get('location')).toBe('/console/');
    const session = /^sb_session=([^;]+)/.exec(done.headers.getSetCookie().find((c) => c.startsWith('sb_session=')) ?? '')?.[1];
    expect(session).toBeDefined();

    const read = await fetch(`${server.url}/personas`, { headers: { cookie: `sb_session=${session}` }, signal: AbortSignal.timeout(TIMEOUT_MS) });
    expect(read.status, await read.clone().text()).toBe(200);
    // A change by the cookie without the session's CSRF token is refused, as for any sign-in.
    const write = await fetch(`${server.url}/personas`, {
      method: 'POST',
      headers: { cookie: `sb_session=${session}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'Desk', instructions: 'Answer briefly.' }),
      signal: AbortSignal.timeout(TIMEOUT_MS),
    });
    expect(write.status).toBe(403);
  });
});
