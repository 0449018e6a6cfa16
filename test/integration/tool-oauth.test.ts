// Tool servers that sign in with OAuth (issue 27 item 5, docs/tools.md#tool-servers-that-sign-in-with-oauth), through the API
// against an OAuth-protected MCP server with its own authorization server on 127.0.0.1
// (test/fakes/oauth-tool-server.ts): discovery, the client (metadata document, dynamic
// registration, pre-registered), consent, `iss`, refresh before expiry and after a 401, a refused
// refresh, the scope step-up, revocation, and one refresh among concurrent users of the database.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createToolOAuth } from '../../src/core/tools/tool-oauth.js';
import { createToolOAuthStore } from '../../src/core/tools/tool-oauth.store.js';
import { manualClock } from '../../src/lib/clock.js';
import { createLogger } from '../../src/lib/logger.js';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { testBackends } from '../helpers/postgres.js';
import { captureLogs, execute, LOOPBACK_ONLY, registerServer, toolText, waitFor } from '../helpers/mcp-tools.js';
import { expectProblem } from '../helpers/problem.js';
import { type OAuthToolServer, type OAuthToolServerOptions, startOAuthToolServer } from '../fakes/oauth-tool-server.js';

interface ServerView {
  id: string;
  status: string;
  error: string | null;
  tools: string[];
  oauth: { status: string; error: string | null; issuer: string | null; clientRegistration: string | null; scope: string | null; requestedScope: string | null; expiresAt: string | null } | null;
}

describe.each(testBackends())('tool servers behind OAuth on $kind', { timeout: 30_000 }, (backend) => {
  let t: TestApp;
  let base: string;
  const clock = manualClock(new Date());
  const fakes: OAuthToolServer[] = [];
  const logs = captureLogs();

  beforeAll(async () => {
    t = await createTestApp({ backend, env: { HOST: '127.0.0.1' }, overrides: { clock, logger: logs.logger, fetch: LOOPBACK_ONLY, toolHub: { backoffInitialMs: 100, callTimeoutMs: 5_000 } } });
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    base = `http://127.0.0.1:${(t.app.server.address() as { port: number }).port}`;
  });
  afterEach(async () => {
    await Promise.all(fakes.splice(0).map((f) => f.close()));
  });
  afterAll(async () => {
    await t?.close();
  });

  const fake = async (options: OAuthToolServerOptions = {}) => {
    const f = await startOAuthToolServer(options);
    fakes.push(f);
    return f;
  };
  const get = async (id: string) => (await t.request({ method: 'GET', url: `/api/mcp/servers/${id}` })).json() as ServerView;
  const authorize = async (id: string) => {
    const res = await t.request({ method: 'POST', url: `/api/mcp/servers/${id}/oauth/authorize` });
    expect(res.statusCode, res.body).toBe(200);
    return res.json() as { authorizationUrl: string; expiresAt: string };
  };
  /** The browser's way back: the callback on Switchboard, which redirects to the console. */
  const callback = (location: string) => fetch(location, { redirect: 'manual' });
  const connect = async (f: OAuthToolServer, id: string) => {
    const location = await f.consent((await authorize(id)).authorizationUrl);
    expect(location.startsWith(`${base}/oauth/callback?`)).toBe(true);
    const back = await callback(location);
    expect(back.status, await back.clone().text()).toBe(303);
    return back;
  };
  const whoami = async (name: string) => {
    const res = await execute(t, { toolName: name, action: 'whoami', parameters: {} });
    expect(res.statusCode, res.body).toBe(200);
    return JSON.parse(toolText(res.json())) as { client: string; scope: string };
  };

  it('asks for consent, signs in with its Client ID Metadata Document, and calls the tools', async () => {
    const f = await fake();
    const server = await registerServer(t, { name: 'notes', transport: 'http', url: f.url });
    expect(server).toMatchObject({ status: 'needs_consent', tools: [] });
    expect((server as unknown as ServerView).oauth).toMatchObject({ status: 'needs_consent', issuer: null, requestedScope: 'tools:read' });
    const refused = expectProblem(await execute(t, { toolName: 'notes', action: 'whoami', parameters: {} }), 502, 'upstream_error');
    // Said as such, not as an unreachable server retried with back-off.
    expect(refused.detail).toMatch(/^notes needs an admin to connect it/);
    // Two sentences, each ended: the reason, then the execution that recorded the call.
    expect(refused.detail).toMatch(/it asks for OAuth sign-in\. Recorded as execution exe_\w+\.$/);

    const { authorizationUrl, expiresAt } = await authorize(server.id);
    const url = new URL(authorizationUrl);
    expect(url.origin).toBe(f.origin);
    expect(Object.fromEntries(url.searchParams)).toMatchObject({
      response_type: 'code',
      client_id: `${base}/oauth/client.json`,
      redirect_uri: `${base}/oauth/callback`,
      code_challenge_method: 'S256',
      resource: f.url,
      scope: 'tools:read',
    });
    expect(url.searchParams.get('state')!.length).toBeGreaterThanOrEqual(32);
    expect(Date.parse(expiresAt)).toBeGreaterThan(clock.now().getTime());

    const back = await callback(await f.consent(authorizationUrl));
    expect(back.status).toBe(303);
    expect(back.headers.get('location')).toBe('/console/tools?connected=notes');
    expect(f.seen.metadataDocumentFetches).toBeGreaterThan(0);

    const now = await get(server.id);
    expect(now).toMatchObject({ status: 'connected', tools: ['whoami', 'admin_report'] });
    expect(now.oauth).toMatchObject({ status: 'connected', issuer: f.origin, clientRegistration: 'metadata_document', scope: 'tools:read', requestedScope: null, error: null });
    expect(await whoami('notes')).toMatchObject({ client: `${base}/oauth/client.json`, scope: 'tools:read' });

    // No token ever leaves: not in the server, the list, the executions.
    const everything = [(await t.request({ method: 'GET', url: '/api/mcp/servers?limit=100' })).body, (await t.request({ method: 'GET', url: '/api/mcp/executions?limit=100' })).body].join('\n');
    for (const token of f.seen.issuedAccessTokens) expect(everything).not.toContain(token);
    // Stored sealed.
    const row = await t.ctx.db.kysely.selectFrom('mcp_server_oauth').selectAll().where('server_id', '=', server.id).executeTakeFirstOrThrow();
    for (const token of f.seen.issuedAccessTokens) expect(row.tokens).not.toContain(token);
  });

  it('refreshes the token before it expires, and after the server refuses one, each time once', async () => {
    const f = await fake();
    const server = await registerServer(t, { name: 'refreshing', transport: 'http', url: f.url });
    await connect(f, server.id);
    await whoami('refreshing');
    const unauthorizedBefore = f.seen.unauthorized;

    // Due for refresh by Switchboard's clock: refreshed before use, no 401 on the way.
    clock.advance(2 * 3_600_000);
    await Promise.all([whoami('refreshing'), whoami('refreshing'), whoami('refreshing')]);
    expect(f.seen.refreshes).toBe(1);
    expect(f.seen.unauthorized).toBe(unauthorizedBefore);
    expect(Date.parse((await get(server.id)).oauth!.expiresAt!)).toBeGreaterThan(clock.now().getTime());

    // The server stops accepting the token early: one 401, one refresh, the call succeeds.
    f.expireAccessTokens();
    await whoami('refreshing');
    expect(f.seen.refreshes).toBe(2);
    expect(f.seen.unauthorized).toBe(unauthorizedBefore + 1);
  });

  it('waits for consent again when the authorization server refuses the refresh', async () => {
    const f = await fake();
    const server = await registerServer(t, { name: 'expiring', transport: 'http', url: f.url });
    await connect(f, server.id);
    await whoami('expiring');
    f.behaviour.refuseRefresh = true;
    f.expireAccessTokens();
    const failed = expectProblem(await execute(t, { toolName: 'expiring', action: 'whoami', parameters: {} }), 502, 'upstream_error');
    expect(failed.detail).toMatch(/needs an admin to connect it.*refused to refresh/);
    const now = await get(server.id);
    expect(now).toMatchObject({ status: 'needs_consent', tools: [] });
    expect(now.oauth).toMatchObject({ status: 'needs_consent', scope: null, expiresAt: null });
    expect(now.oauth!.error).toContain('invalid_grant');

    f.behaviour.refuseRefresh = false;
    await connect(f, server.id);
    expect(await whoami('expiring')).toMatchObject({ scope: 'tools:read' });
  });

  it('asks for more scope when a call answers insufficient_scope, and gets it on the next consent', async () => {
    const f = await fake();
    const server = await registerServer(t, { name: 'scoped', transport: 'http', url: f.url });
    await connect(f, server.id);
    const failed = expectProblem(await execute(t, { toolName: 'scoped', action: 'admin_report', parameters: {} }), 502, 'upstream_error');
    expect(failed.detail).toContain('tools:admin');
    const waiting = await get(server.id);
    // The tools it may use keep working meanwhile.
    expect(waiting.status).toBe('connected');
    expect(waiting.oauth).toMatchObject({ status: 'needs_consent', scope: 'tools:read', requestedScope: 'tools:read tools:admin' });
    expect(await whoami('scoped')).toMatchObject({ scope: 'tools:read' });

    const { authorizationUrl } = await authorize(server.id);
    expect(new URL(authorizationUrl).searchParams.get('scope')).toBe('tools:read tools:admin');
    expect((await callback(await f.consent(authorizationUrl))).status).toBe(303);
    const report = await execute(t, { toolName: 'scoped', action: 'admin_report', parameters: {} });
    expect(report.statusCode, report.body).toBe(200);
    expect(JSON.parse(toolText(report.json()))).toMatchObject({ tool: 'admin_report', scope: 'tools:read tools:admin' });
    expect((await get(server.id)).oauth).toMatchObject({ status: 'connected', requestedScope: null });
  });

  it('revokes the tokens at the authorization server and forgets them', async () => {
    const f = await fake();
    const server = await registerServer(t, { name: 'revoked', transport: 'http', url: f.url });
    const signOut = () => t.request({ method: 'DELETE', url: `/api/mcp/servers/${server.id}/oauth` });
    // Never signed in: nothing to sign out of.
    expect(expectProblem(await signOut(), 409, 'conflict').detail).toContain('not signed in');
    await connect(f, server.id);
    await whoami('revoked');
    const res = await signOut();
    expect(res.statusCode, res.body).toBe(200);
    expect(f.seen.revoked).toEqual(['refresh_token', 'access_token']);
    // A clean sign-out is no error: `oauth.error` is kept for a revocation that failed.
    const signedOut = res.json() as ServerView;
    expect(signedOut).toMatchObject({ status: 'needs_consent', oauth: { status: 'needs_consent', scope: null, error: null } });
    // The server says what it says before any sign-in.
    expect(signedOut.error).toMatch(/^revoked needs an admin to connect it/);
    // Nor does the server's next challenge make one of it.
    expect((await get(server.id)).oauth).toMatchObject({ status: 'needs_consent', error: null });
    expect(expectProblem(await signOut(), 409, 'conflict').detail).toContain('not signed in');
    expect(expectProblem(await execute(t, { toolName: 'revoked', action: 'whoami', parameters: {} }), 502, 'upstream_error').detail).toContain('needs an admin to connect it');
    const row = await t.ctx.db.kysely.selectFrom('mcp_server_oauth').select('tokens').where('server_id', '=', server.id).executeTakeFirstOrThrow();
    expect(row.tokens).toBeNull();
  });

  it('registers dynamically once per authorization server, however many consents start, one after another or together', async () => {
    const f = await fake({ metadataDocuments: false });
    const server = await registerServer(t, { name: 'registering', transport: 'http', url: f.url });
    const started = [];
    for (let i = 0; i < 3; i++) started.push(new URL((await authorize(server.id)).authorizationUrl));
    expect(f.seen.registrations).toBe(1);
    const clientId = started[0]!.searchParams.get('client_id');
    expect(clientId).toMatch(/^dyn-/);
    expect(started.map((u) => u.searchParams.get('client_id'))).toEqual([clientId, clientId, clientId]);
    // The first consent started still completes with that client.
    expect((await callback(await f.consent(started[0]!.href))).status).toBe(303);
    expect((await get(server.id)).oauth).toMatchObject({ status: 'connected', clientRegistration: 'dynamic' });
    expect((await whoami('registering')).client).toBe(clientId);

    // Two consents started together: the first one's registration is held at the authorization
    // server while the second starts, which waits for that client rather than registering its own.
    const g = await fake({ metadataDocuments: false });
    const together = await registerServer(t, { name: 'registering-together', transport: 'http', url: g.url });
    let release!: () => void;
    g.behaviour.registrationGate = new Promise<void>((resolve) => (release = resolve));
    const first = authorize(together.id);
    await waitFor(() => g.seen.registrations === 1, 8_000, 'the first consent to register');
    const waits = () => logs.text().split('\n').filter((line) => line.includes('waits for the client another consent is registering') && line.includes('"server":"registering-together"')).length;
    const second = authorize(together.id);
    await waitFor(() => waits() === 1 || g.seen.registrations > 1, 8_000, 'the second consent to wait for that client (or to register its own)');
    release();
    const ids = (await Promise.all([first, second])).map((a) => new URL(a.authorizationUrl).searchParams.get('client_id'));
    expect(g.seen.registrations).toBe(1);
    expect(ids[0]).toMatch(/^dyn-/);
    expect(ids[1]).toBe(ids[0]);
  });

  it('falls back to dynamic registration, or uses a pre-registered confidential client', async () => {
    const dynamic = await fake({ metadataDocuments: false });
    const d = await registerServer(t, { name: 'dynamic', transport: 'http', url: dynamic.url });
    await connect(dynamic, d.id);
    expect((await get(d.id)).oauth).toMatchObject({ status: 'connected', clientRegistration: 'dynamic' });
    expect(dynamic.seen.registrations).toBe(1);
    expect((await whoami('dynamic')).client).toMatch(/^dyn-/);
    // A second consent reuses the registered client.
    await connect(dynamic, d.id);
    expect(dynamic.seen.registrations).toBe(1);

    const fixed = await fake({ metadataDocuments: false, registration: false, preregistered: { clientId: 'switchboard-prod', clientSecret: 'shh-its-a-secret', redirectUri: `${base}/oauth/callback` } });
    const none = await registerServer(t, { name: 'unregistered', transport: 'http', url: fixed.url });
    const refused = expectProblem(await t.request({ method: 'POST', url: `/api/mcp/servers/${none.id}/oauth/authorize` }), 400, 'validation_failed');
    expect(refused.detail).toContain('oauth.clientId');

    const p = await registerServer(t, { name: 'preregistered', transport: 'http', url: fixed.url, oauth: { clientId: 'switchboard-prod', clientSecret: 'shh-its-a-secret' } });
    expect(JSON.stringify(p)).not.toContain('shh-its-a-secret');
    await connect(fixed, p.id);
    expect((await get(p.id)).oauth).toMatchObject({ status: 'connected', clientRegistration: 'preregistered' });
    expect(await whoami('preregistered')).toMatchObject({ client: 'switchboard-prod' });
    // The secret went as HTTP Basic, never in the form.
    expect(fixed.seen.tokenRequests.every((form) => !form.has('client_secret'))).toBe(true);
  });

  it('refuses an answer from another issuer, a replayed state, and a denial, saying why', async () => {
    const f = await fake();
    const server = await registerServer(t, { name: 'careful', transport: 'http', url: f.url });

    f.behaviour.issOverride = 'http://127.0.0.1:1/';
    const mixUp = await callback(await f.consent((await authorize(server.id)).authorizationUrl));
    expect(mixUp.status).toBe(400);
    expect(mixUp.headers.get('content-type')).toContain('text/html');
    expect(await mixUp.text()).toContain('is not');
    expect((await get(server.id)).oauth).toMatchObject({ status: 'error' });
    f.behaviour.issOverride = undefined;

    const denied = await callback(await f.consent((await authorize(server.id)).authorizationUrl, 'deny'));
    expect(denied.status).toBe(400);
    expect(await denied.text()).toContain('access_denied');

    const location = await f.consent((await authorize(server.id)).authorizationUrl);
    expect((await callback(location)).status).toBe(303);
    const replay = await callback(location);
    expect(replay.status).toBe(400);
    expect(await replay.text()).toContain('already used');
    // Parameters an authorization server adds of its own (OpenID's session_state) are no reason to refuse.
    const extra = await callback(`${location}&session_state=abc`);
    expect(extra.status).toBe(400);
    expect(await extra.text()).toContain('already used');
    expect((await get(server.id)).status).toBe('connected');
  });

  it('keeps each workspace’s servers to itself and checks what it is given', async () => {
    const f = await fake();
    const server = await registerServer(t, { name: 'private', transport: 'http', url: f.url });
    const otherKey = (await t.ctx.services.auth.createWorkspace('other')).key.key;
    expectProblem(await t.request({ method: 'POST', url: `/api/mcp/servers/${server.id}/oauth/authorize`, as: otherKey }), 404, 'not_found');
    expectProblem(await t.request({ method: 'DELETE', url: `/api/mcp/servers/${server.id}/oauth`, as: otherKey }), 404, 'not_found');
    expectProblem(
      await t.request({ method: 'POST', url: '/api/mcp/servers', body: { name: 'cmd', transport: 'stdio', command: 'x', oauth: { clientId: 'a' } } }),
      400,
      'validation_failed',
      'oauth',
    );
    expectProblem(await t.request({ method: 'POST', url: '/api/mcp/servers', body: { name: 'bad', transport: 'http', url: f.url, oauth: { clientId: '' } } }), 400, 'validation_failed', 'oauth.clientId');
    const doc = await fetch(`${base}/oauth/client.json`);
    expect(await doc.json()).toMatchObject({ client_id: `${base}/oauth/client.json`, redirect_uris: [`${base}/oauth/callback`], token_endpoint_auth_method: 'none' });
  });

  it('refreshes once when instances on one database find the token due together', async () => {
    const f = await fake();
    const server = await registerServer(t, { name: 'shared', transport: 'http', url: f.url });
    await connect(f, server.id);
    const row = await t.ctx.db.kysely.selectFrom('mcp_servers').selectAll().where('id', '=', server.id).executeTakeFirstOrThrow();
    // Three more "instances": each its own sign-in module and token source over the same database.
    const instances = [1, 2, 3].map(() =>
      createToolOAuth({ store: createToolOAuthStore(t.ctx.db.kysely), cipher: t.ctx.cipher, clock, logger: createLogger('silent') }).bearerFor(row, { allowPrivate: false, ...LOOPBACK_ONLY }),
    );
    const before = f.seen.refreshes;
    clock.advance(2 * 3_600_000);
    const tokens = await Promise.all(instances.map((i) => i.token()));
    expect(f.seen.refreshes).toBe(before + 1);
    expect(new Set(tokens).size).toBe(1);
    expect(tokens[0]).toBe(f.seen.issuedAccessTokens.at(-1));
  });
});
