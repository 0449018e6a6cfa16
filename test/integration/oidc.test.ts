// OIDC sign-in (issue 41 item 2, API.md §14) against a real provider (oidc-provider on 127.0.0.1),
// on both backends: the browser goes to the provider, through its login and consent pages, and
// back to our callback, which signs the person in with the session cookie. Refused: an unverified
// e-mail, a replayed callback, a state that is not the browser's, a provider that is not the
// configured issuer, a return address on another origin, an address outside the allowed domains.
// The role claim decides the default workspace's role at every sign-in; invitations let people in.
import crypto from 'node:crypto';
import { Writable } from 'node:stream';
import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/lib/logger.js';
import { startOidcProvider, type TestOidcProvider } from '../fakes/oidc-provider.js';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { testBackends } from '../helpers/postgres.js';
import { expectProblem } from '../helpers/problem.js';

const PUBLIC_URL = 'http://switchboard.test:8080';
const CALLBACK = `${PUBLIC_URL}/auth/oidc/callback`;
const CLIENT = { clientId: 'switchboard', clientSecret: 'provider-issued-client-secret' };
const sha256 = (text: string) => crypto.hash('sha256', text, 'hex');

/** The `name=value` of a Set-Cookie for `name`, and the whole line. */
function setCookie(res: LightMyRequestResponse, name: string): { value: string; line: string } | undefined {
  const raw = res.headers['set-cookie'];
  const lines = raw === undefined ? [] : Array.isArray(raw) ? raw : [raw];
  const line = lines.find((l) => l.startsWith(`${name}=`));
  return line === undefined ? undefined : { value: line.slice(name.length + 1).split(';')[0]!, line };
}

function oidcEnv(issuer: string, extra: Record<string, string> = {}): Record<string, string> {
  return {
    SWITCHBOARD_PUBLIC_URL: PUBLIC_URL,
    SWITCHBOARD_OIDC_ISSUER: issuer,
    SWITCHBOARD_OIDC_CLIENT_ID: CLIENT.clientId,
    SWITCHBOARD_OIDC_CLIENT_SECRET: CLIENT.clientSecret,
    ...extra,
  };
}

describe.each(testBackends())('OIDC sign-in on $kind', (backend) => {
  let idp: TestOidcProvider;
  let elsewhere: TestOidcProvider;
  /** Default role viewer for example.com, groups mapped to roles. */
  let t: TestApp;
  /** Invitations only: no default role, no role claim. */
  let invited: TestApp;
  /** Configured with an issuer whose discovery document names another. */
  let mismatched: TestApp;

  beforeAll(async () => {
    idp = await startOidcProvider({ ...CLIENT, redirectUri: CALLBACK });
    elsewhere = await startOidcProvider({ ...CLIENT, redirectUri: CALLBACK, issuerHost: 'localhost' });
    idp.accounts.set('ada', { email: 'ada@example.com', email_verified: true, name: 'Ada Lovelace', groups: ['sb-editors'] });
    idp.accounts.set('ursula', { email: 'ursula@example.com', email_verified: false, name: 'Ursula' });
    idp.accounts.set('eve', { email: 'eve@other.org', email_verified: true, name: 'Eve' });
    idp.accounts.set('zed', { email: 'Zed@Other.org', email_verified: true, name: 'Zed' });
    idp.accounts.set('ola', { email: 'ola@other.org', email_verified: true, name: 'Ola' });
    t = await createTestApp({
      backend,
      env: oidcEnv(idp.url, {
        SWITCHBOARD_OIDC_DEFAULT_ROLE: 'viewer',
        SWITCHBOARD_OIDC_ALLOWED_DOMAINS: 'example.com',
        SWITCHBOARD_OIDC_ROLE_CLAIM: 'groups',
        SWITCHBOARD_OIDC_ROLE_MAP: 'sb-admins=admin,sb-editors=editor',
      }),
    });
    invited = await createTestApp({ backend, env: oidcEnv(idp.url) });
    mismatched = await createTestApp({ backend, env: oidcEnv(elsewhere.url) });
  }, 60_000);
  afterAll(async () => {
    await Promise.all([t?.close(), invited?.close(), mismatched?.close()]);
    await Promise.all([idp?.close(), elsewhere?.close()]);
  });

  const start = (app: TestApp, query = '') => app.request({ method: 'GET', url: `/auth/oidc/start${query}`, as: null });
  const callback = (app: TestApp, url: string, state: string | undefined) =>
    app.request({ method: 'GET', url: url.slice(PUBLIC_URL.length), as: null, headers: state === undefined ? {} : { cookie: `sb_oidc=${state}` } });

  /** Start, the provider's pages as `login`, and the URL the provider sends the browser back to, with the browser's sb_oidc state. */
  async function toProvider(app: TestApp, login: string, query = '') {
    const started = await start(app, query);
    expect(started.statusCode, started.body).toBe(302);
    const state = setCookie(started, 'sb_oidc')!.value;
    const back = await idp.signIn(started.headers.location as string, login, CALLBACK);
    return { back, state };
  }

  /** A whole sign-in; returns the callback's answer. */
  async function signIn(app: TestApp, login: string, query = '') {
    const { back, state } = await toProvider(app, login, query);
    return callback(app, back, state);
  }

  const userByEmail = (app: TestApp, email: string) => app.ctx.db.kysely.selectFrom('users').selectAll().where('email_key', '=', email.toLowerCase()).executeTakeFirst();
  const countUsers = async (app: TestApp) => Number((await app.ctx.db.kysely.selectFrom('users').select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow()).n);
  const defaultWorkspace = async (app: TestApp) => (await app.ctx.db.kysely.selectFrom('workspaces').select('id').where('name', '=', 'default').executeTakeFirstOrThrow()).id;
  const roleOf = async (app: TestApp, userId: string) =>
    (await app.ctx.db.kysely.selectFrom('memberships').select('role').where('user_id', '=', userId).where('workspace_id', '=', await defaultWorkspace(app)).executeTakeFirst())?.role;
  const events = (app: TestApp, actorId: string) =>
    app.ctx.db.kysely.selectFrom('audit_events').selectAll().where('actor_id', '=', actorId).orderBy('at').orderBy('id').execute();

  function expectPage(res: LightMyRequestResponse, status: number, text: RegExp) {
    expect(res.statusCode, res.body).toBe(status);
    expect(res.headers['content-type']).toMatch(/^text\/html/);
    expect(res.body).toMatch(text);
    expect(setCookie(res, 'sb_session')).toBeUndefined();
  }

  it('tells a sign-in page, without a credential, that the provider is there: its host and where to start', async () => {
    const res = await t.request({ method: 'GET', url: '/auth/methods', as: null });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toEqual({ password: true, oidc: { name: new URL(idp.url).host, startUrl: '/auth/oidc/start' } });
    expect(res.body).not.toContain(CLIENT.clientId);
  });

  it('signs a person in: PKCE, state and nonce to the provider, back with the session cookie, to returnTo', async () => {
    const started = await start(t, '?returnTo=%2Fconsole%2Fpersonas%3Ftab%3D1');
    expect(started.statusCode, started.body).toBe(302);
    const to = new URL(started.headers.location as string);
    expect(to.origin).toBe(idp.url);
    expect(Object.fromEntries(to.searchParams)).toMatchObject({
      response_type: 'code',
      client_id: CLIENT.clientId,
      redirect_uri: CALLBACK,
      code_challenge_method: 'S256',
      scope: 'openid email profile',
    });
    for (const p of ['code_challenge', 'state', 'nonce']) expect(to.searchParams.get(p)).toMatch(/^[\w-]{40,}$/);
    const cookie = setCookie(started, 'sb_oidc')!;
    expect(cookie.value).toBe(to.searchParams.get('state'));
    expect(cookie.line).toMatch(/; Path=\/auth\/oidc; HttpOnly; SameSite=Lax; Max-Age=600$/);
    // The sign-in under way is in the database (any instance finishes it), by its state's hash only.
    const pending = await t.ctx.db.kysely.selectFrom('oidc_pending').selectAll().where('state_hash', '=', sha256(cookie.value)).executeTakeFirstOrThrow();
    expect(pending.return_to).toBe('/console/personas?tab=1');
    expect(pending.request).not.toContain(to.searchParams.get('nonce'));

    const back = await idp.signIn(to.href, 'ada', CALLBACK);
    const res = await callback(t, back, cookie.value);
    expect(res.statusCode, res.body).toBe(302);
    expect(res.headers.location).toBe('/console/personas?tab=1');
    const session = setCookie(res, 'sb_session')!;
    expect(session.line).toMatch(/; Path=\/; HttpOnly; SameSite=Lax/);
    expect(setCookie(res, 'sb_oidc')!.line).toMatch(/^sb_oidc=; Path=\/auth\/oidc;.*Max-Age=0/);

    // The cookie works over HTTP, and the page the redirect lands on gets the session's CSRF token
    // from GET /auth/me (a redirect carries no body): with it, the person changes things.
    const me = await t.request({ method: 'GET', url: '/auth/me', as: null, headers: { cookie: `sb_session=${session.value}` } });
    expect(me.statusCode, me.body).toBe(200);
    expect(me.json()).toMatchObject({ user: { email: 'ada@example.com' }, role: 'editor', csrfToken: expect.any(String) });
    expect((await t.request({ method: 'GET', url: '/personas', as: null })).statusCode).toBe(401);
    const actor = await t.ctx.services.loginSessions.authenticate(session.value);
    const user = (await userByEmail(t, 'ada@example.com'))!;
    expect(user).toMatchObject({ name: 'Ada Lovelace', status: 'active', password: null });
    // The groups claim gave editor (sb-editors=editor) in the default workspace from the first sign-in.
    expect(actor).toMatchObject({ kind: 'user', id: user.id, workspaceId: await defaultWorkspace(t), role: 'editor' });
    expect(await t.ctx.db.kysely.selectFrom('oidc_identities').selectAll().where('user_id', '=', user.id).execute()).toEqual([
      { issuer: idp.issuer, subject: 'ada', user_id: user.id, created_at: expect.any(String) },
    ]);
    const audit = await events(t, user.id);
    // Written in one transaction at the same moment: in no particular order.
    expect(audit.map((e) => [e.action, e.outcome, e.actor_type, e.target_type, e.workspace_id]).sort()).toEqual([
      ['member.join', 'success', 'user', 'member', actor!.workspaceId],
      ['session.signin', 'success', 'user', 'session', actor!.workspaceId],
    ]);
    expect(audit.find((e) => e.action === 'session.signin')!.target_id).toBe(actor!.loginSessionId);
    // With the token GET /auth/me gave, the person changes things; without it, not.
    const write = (csrf?: string) =>
      t.request({ method: 'POST', url: '/personas', as: null, body: { name: 'From OIDC', instructions: 'Hi.' }, headers: { cookie: `sb_session=${session.value}`, ...(csrf ? { 'x-csrf-token': csrf } : {}) } });
    expect((await write()).statusCode).toBe(403);
    expect((await write(me.json().csrfToken)).statusCode).toBe(201);
    expect(await t.ctx.db.kysely.selectFrom('oidc_pending').selectAll().where('state_hash', '=', sha256(cookie.value)).execute()).toEqual([]);

    // The same callback again (same URL, same cookie): its sign-in was taken; nobody is signed in.
    const replay = await callback(t, back, cookie.value);
    expectPage(replay, 400, /already completed or took too long/);
  });

  it('finishes a sign-in once when its callback arrives twice at the same moment', async () => {
    const { back, state } = await toProvider(t, 'ada');
    const answers = await Promise.all([callback(t, back, state), callback(t, back, state)]);
    expect(answers.map((r) => r.statusCode).sort()).toEqual([302, 400]);
  });

  it('maps the role claim at every sign-in, finds a returning person by subject, and leaves owners alone', async () => {
    const ada = idp.accounts.get('ada')!;
    ada.groups = ['sb-admins', 'sb-editors', 'unrelated'];
    expect((await signIn(t, 'ada')).statusCode).toBe(302);
    const user = (await userByEmail(t, 'ada@example.com'))!;
    expect(await roleOf(t, user.id)).toBe('admin');
    const changes = (await events(t, user.id)).filter((e) => e.action === 'member.role');
    expect(changes.map((e) => e.changes)).toEqual(['["role"]']);
    // A write key of hers, used (and so cached) while she may write.
    const { key } = await t.ctx.services.auth.createKeyInWorkspace('default', 'ada laptop', ['read', 'write']);
    await t.ctx.db.kysely.updateTable('api_keys').set({ user_id: user.id }).where('id', '=', key.id).execute();
    const write = () => t.request({ method: 'POST', url: '/personas', body: { name: 'Ada', instructions: 'Answer briefly.' }, as: key.key });
    expect((await write()).statusCode).toBe(201);

    // No value maps any more: the default role, and her key above it is revoked at once (401), as
    // when an admin lowers a role; the role change's one event names what ended with it.
    ada.groups = ['unrelated'];
    expect((await signIn(t, 'ada')).statusCode).toBe(302);
    expect(await roleOf(t, user.id)).toBe('viewer');
    expect((await write()).statusCode).toBe(401);
    expect((await events(t, user.id)).filter((e) => e.action === 'member.role').map((e) => e.changes)).toEqual(['["role"]', '["role","keys"]']);

    // The provider changed the e-mail: the subject still finds the same person; nobody new is made.
    const users = await countUsers(t);
    ada.email = 'ada.lovelace@example.com';
    ada.groups = ['sb-editors'];
    expect((await signIn(t, 'ada')).statusCode).toBe(302);
    expect(await countUsers(t)).toBe(users);
    expect(await roleOf(t, user.id)).toBe('editor');

    // An owner is never changed by the claim.
    await t.ctx.db.kysely.updateTable('memberships').set({ role: 'owner' }).where('user_id', '=', user.id).execute();
    ada.groups = [];
    expect((await signIn(t, 'ada')).statusCode).toBe(302);
    expect(await roleOf(t, user.id)).toBe('owner');
    ada.email = 'ada@example.com';
  });

  it('refuses an e-mail the provider has not verified, and creates nothing', async () => {
    const users = await countUsers(t);
    const res = await signIn(t, 'ursula');
    expectPage(res, 403, /has not verified that ursula@example\.com is yours/);
    expect(await countUsers(t)).toBe(users);
    expect(await t.ctx.db.kysely.selectFrom('oidc_identities').selectAll().where('subject', '=', 'ursula').execute()).toEqual([]);
  });

  it('refuses a callback whose state is not the browser cookie\'s, or without the cookie', async () => {
    const first = await toProvider(t, 'ada');
    const other = await start(t);
    const otherState = setCookie(other, 'sb_oidc')!.value;
    expectPage(await callback(t, first.back, otherState), 400, /does not belong to a sign-in started in this browser/);
    expectPage(await callback(t, first.back, undefined), 400, /does not belong to a sign-in started in this browser/);
    // The browser that started it still finishes it.
    expect((await callback(t, first.back, first.state)).statusCode).toBe(302);
  });

  it('refuses a provider that is not the configured issuer, at the start, with a page', async () => {
    const res = await start(mismatched);
    expectPage(res, 502, /did not describe itself as configured/);
    expect(setCookie(res, 'sb_oidc')!.line).toMatch(/Max-Age=0/);
    expect(await mismatched.ctx.db.kysely.selectFrom('oidc_pending').selectAll().execute()).toEqual([]);
  });

  it('refuses a returnTo on another origin with 400 naming returnTo, and takes one on the public origin', async () => {
    for (const bad of ['https://evil.example/console/', '//evil.example/x', '/\\evil.example', 'javascript:alert(1)']) {
      expectProblem(await start(t, `?returnTo=${encodeURIComponent(bad)}`), 400, 'validation_failed', 'returnTo');
    }
    const ok = await start(t, `?returnTo=${encodeURIComponent(`${PUBLIC_URL}/console/members`)}`);
    expect(ok.statusCode).toBe(302);
  });

  it('refuses a first sign-in from a domain that is not allowed, creating nothing', async () => {
    const users = await countUsers(t);
    expectPage(await signIn(t, 'eve'), 403, /Addresses at other\.org cannot join/);
    expect(await countUsers(t)).toBe(users);
    expect(await userByEmail(t, 'eve@other.org')).toBeUndefined();
  });

  it('lets the invited in: by the invitation started with, or any waiting for the e-mail; marks it used', async () => {
    const ws = await defaultWorkspace(invited);
    const now = Date.now();
    const invite = async (email: string, role: 'viewer' | 'editor' | 'admin', token: string) => {
      const id = `inv_${crypto.randomBytes(8).toString('hex')}`;
      await invited.ctx.db.kysely
        .insertInto('invitations')
        .values({ id, workspace_id: ws, purpose: 'invite', email, role, token_hash: sha256(token), created_by: null, created_at: new Date(now).toISOString(), expires_at: new Date(now + 7 * 86_400_000).toISOString(), used_at: null, revoked_at: null })
        .execute();
      return id;
    };

    // Without an invitation or a default role: refused, nothing made.
    expectPage(await signIn(invited, 'eve'), 403, /no account or invitation for eve@other\.org/);
    expect(await userByEmail(invited, 'eve@other.org')).toBeUndefined();

    // The invitation given at the start must be for the provider's e-mail.
    const forOla = await invite('ola@other.org', 'editor', 'token-for-ola');
    expectPage(await signIn(invited, 'eve', '?invitation=token-for-ola'), 403, /sent to another e-mail address/);
    expect(await userByEmail(invited, 'eve@other.org')).toBeUndefined();

    const res = await signIn(invited, 'ola', '?invitation=token-for-ola&returnTo=%2Fconsole%2F');
    expect(res.statusCode, res.body).toBe(302);
    const ola = (await userByEmail(invited, 'ola@other.org'))!;
    expect(await roleOf(invited, ola.id)).toBe('editor');
    const used = await invited.ctx.db.kysely.selectFrom('invitations').select('used_at').where('id', '=', forOla).executeTakeFirstOrThrow();
    expect(used.used_at).not.toBeNull();
    expect((await events(invited, ola.id)).map((e) => e.action).sort()).toEqual(['member.join', 'session.signin']);
    // Used once: the same invitation again is refused.
    expectPage(await signIn(invited, 'ola', '?invitation=token-for-ola'), 403, /already used, has expired or was revoked/);

    // A waiting invitation for the e-mail (any case) lets a first sign-in in without the token.
    const forZed = await invite('ZED@other.org', 'admin', 'token-for-zed');
    expect((await signIn(invited, 'zed')).statusCode).toBe(302);
    const zed = (await userByEmail(invited, 'zed@other.org'))!;
    expect(await roleOf(invited, zed.id)).toBe('admin');
    expect((await invited.ctx.db.kysely.selectFrom('invitations').select('used_at').where('id', '=', forZed).executeTakeFirstOrThrow()).used_at).not.toBeNull();
  });

  it('refuses a disabled person, with a denied sign-in event in their workspace', async () => {
    const user = (await userByEmail(t, 'ada@example.com'))!;
    await t.ctx.db.kysely.updateTable('users').set({ status: 'disabled' }).where('id', '=', user.id).execute();
    try {
      expectPage(await signIn(t, 'ada'), 403, /This account is disabled/);
      const denied = (await events(t, user.id)).filter((e) => e.outcome === 'denied' && e.action !== 'request.denied'); // the first test's write without its CSRF token was a refusal too
      expect(denied.map((e) => [e.action, e.workspace_id])).toEqual([['session.signin', await defaultWorkspace(t)]]);
    } finally {
      await t.ctx.db.kysely.updateTable('users').set({ status: 'active' }).where('id', '=', user.id).execute();
    }
  });
});

describe('OIDC sign-in not configured', () => {
  let t: TestApp;
  const lines: string[] = [];
  beforeAll(async () => {
    const logs = new Writable({
      write(chunk, _encoding, done) {
        lines.push(String(chunk));
        done();
      },
    });
    t = await createTestApp({ overrides: { logger: createLogger('info', logs) } });
  });
  afterAll(async () => t?.close());

  it('tells a sign-in page there is no provider: only the password', async () => {
    const res = await t.request({ method: 'GET', url: '/auth/methods', as: null });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toEqual({ password: true, oidc: null });
  });

  it('answers 404 saying so at both routes', async () => {
    for (const url of ['/auth/oidc/start', '/auth/oidc/callback?code=x&state=y']) {
      const body = expectProblem(await t.request({ method: 'GET', url, as: null }), 404, 'not_found');
      expect(body.detail).toMatch(/OIDC sign-in is not configured.*SWITCHBOARD_OIDC_ISSUER/);
    }
  });

  it('never writes the invitation token, code or state of its URLs into the request log', async () => {
    await t.request({ method: 'GET', url: '/auth/oidc/start?invitation=invitation-token-in-url', as: null });
    await t.request({ method: 'GET', url: '/auth/oidc/callback?code=code-in-url&state=state-in-url', as: null });
    await t.request({ method: 'GET', url: '/personas?limit=1', as: null });
    // The log is written (another route's request line is there), and holds none of them.
    expect(lines.some((l) => l.includes('/personas?limit=1'))).toBe(true);
    expect(lines.filter((l) => /invitation-token-in-url|code-in-url|state-in-url/.test(l))).toEqual([]);
  });
});
