// Signing in with a password (API.md §14): the session cookie and its CSRF token, the same 401 for
// an unknown e-mail and a wrong password, the attempt limits kept in the database, idle and absolute
// ends, a person's own sessions, GET /auth/me, and the audit events of each, on both backends.
import { afterEach, describe, expect, it } from 'vitest';
import { generateKeySecret, hashKey, keyPrefix } from '../../src/core/auth/keys.js';
import { FAILURE_WINDOW_MS } from '../../src/core/people/sign-in.service.js';
import { manualClock } from '../../src/lib/clock.js';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { captureLogs } from '../helpers/mcp-tools.js';
import { addPerson, PASSWORD, signIn } from '../helpers/people.js';
import { type TestBackend, testBackends } from '../helpers/postgres.js';
import { expectProblem } from '../helpers/problem.js';

const IDLE_MINUTES = 30;
const MAX_HOURS = 2;

let t: TestApp;
let clock: ReturnType<typeof manualClock>;
afterEach(async () => t?.close());

async function start(backend: TestBackend, env: Record<string, string> = {}, logger?: ReturnType<typeof captureLogs>['logger']) {
  clock = manualClock(new Date('2026-03-01T09:00:00.000Z'));
  t = await createTestApp({
    backend,
    env: { SWITCHBOARD_SESSION_IDLE_MINUTES: String(IDLE_MINUTES), SWITCHBOARD_SESSION_MAX_HOURS: String(MAX_HOURS), ...env },
    overrides: { clock, ...(logger ? { logger } : {}) },
  });
  return t;
}
const attempt = (email: string, password: string, remoteAddress = '127.0.0.1', extra: Record<string, unknown> = {}) =>
  t.request({ method: 'POST', url: '/auth/sessions', as: null, remoteAddress, body: { email, password, ...extra } });
const me = (headers: Record<string, string>) => t.request({ method: 'GET', url: '/auth/me', as: null, headers });
const audit = (action: string) => t.ctx.db.kysely.selectFrom('audit_events').selectAll().where('action', '=', action).orderBy('at').orderBy('id').execute();

// What the SQL does (failures, sessions, audit rows in the change's transaction): on both backends.
describe.each(testBackends())('sign-in on $kind', (backend) => {
  it('signs in with the cookie and its CSRF token, acts as the person, and signs out', async () => {
    await start(backend);
    const ann = await addPerson(t, { email: 'Ann@Example.com', role: 'editor' });
    // The e-mail is found whatever its case.
    const signed = await signIn(t, 'ann@example.COM');
    expect(signed.body).toEqual({
      user: { id: ann.id, email: 'Ann@Example.com', name: 'Ann', status: 'active', createdAt: expect.any(String), lastSeenAt: clock.now().toISOString() },
      memberships: [{ workspace: { id: ann.workspaceId, name: 'default' }, role: 'editor' }],
      csrfToken: expect.stringMatching(/^[0-9A-Za-z_-]{43}$/),
    });
    // HttpOnly, SameSite=Lax, the whole site, until the absolute end; not Secure on an http public URL.
    expect(signed.setCookie).toMatch(/^sb_session=sbs_[0-9A-Za-z]{43}; Path=\/; HttpOnly; SameSite=Lax; Max-Age=7200$/);

    const who = await me(signed.headers());
    expect(who.statusCode, who.body).toBe(200);
    expect(who.json()).toEqual({ user: expect.objectContaining({ id: ann.id }), workspace: { id: ann.workspaceId, name: 'default' }, role: 'editor', csrfToken: signed.csrfToken });

    const out = await t.request({ method: 'DELETE', url: '/auth/sessions/current', as: null, headers: signed.headers(true) });
    expect(out.statusCode, out.body).toBe(204);
    expect(out.headers['set-cookie']).toMatch(/^sb_session=; Path=\/; HttpOnly; SameSite=Lax; Max-Age=0$/);
    expectProblem(await me(signed.headers()), 401, 'unauthorized');

    const [signin] = await audit('session.signin');
    expect(signin).toMatchObject({ workspace_id: ann.workspaceId, actor_type: 'user', actor_id: ann.id, outcome: 'success', target_type: 'session', ip: '127.0.0.1' });
    const [signout] = await audit('session.signout');
    expect(signout).toMatchObject({ actor_id: ann.id, outcome: 'success', target_id: signin!.target_id });
  });

  it('answers an unknown e-mail, a wrong password and a disabled person with the same 401, recording denials only for known e-mails', async () => {
    await start(backend);
    const ann = await addPerson(t, { email: 'ann@example.com', role: 'viewer' });
    const second = await t.ctx.services.auth.createWorkspace('second');
    await addPerson(t, { email: 'ann@example.com', role: 'admin', workspaceId: second.workspace.id });
    await addPerson(t, { email: 'gone@example.com', role: 'admin', status: 'disabled' });

    const wrong = await attempt('ann@example.com', 'not the password at all');
    const unknown = await attempt('nobody@example.com', 'not the password at all');
    const disabled = await attempt('gone@example.com', PASSWORD);
    const strip = (res: typeof wrong) => {
      const { requestId: _, ...rest } = expectProblem(res, 401, 'unauthorized');
      return { body: rest, challenge: res.headers['www-authenticate'], cookie: res.headers['set-cookie'] };
    };
    expect(strip(unknown)).toEqual(strip(wrong));
    expect(strip(disabled)).toEqual(strip(wrong));
    expect(strip(wrong).cookie).toBeUndefined();

    // Ann's failure is in both of her workspaces; the unknown e-mail's nowhere.
    const denied = (await audit('session.signin')).filter((e) => e.outcome === 'denied');
    expect(denied.filter((e) => e.actor_id === ann.id).map((e) => e.workspace_id).sort()).toEqual([ann.workspaceId, second.workspace.id].sort());
    expect(denied.filter((e) => e.actor_id !== ann.id).map((e) => e.actor_name)).toEqual(['gone']);
  });

  it('signs in to the workspace asked for, by id or name; one the person is not a member of is 404', async () => {
    await start(backend);
    const second = await t.ctx.services.auth.createWorkspace('second');
    await addPerson(t, { email: 'ann@example.com', role: 'viewer' });
    await addPerson(t, { email: 'ann@example.com', role: 'admin', workspaceId: second.workspace.id });
    const third = await t.ctx.services.auth.createWorkspace('third');
    const inSecond = await signIn(t, 'ann@example.com', PASSWORD, 'second');
    expect((await me(inSecond.headers())).json()).toMatchObject({ workspace: { name: 'second' }, role: 'admin' });
    const byId = await signIn(t, 'ann@example.com', PASSWORD, second.workspace.id);
    expect((await me(byId.headers())).json()).toMatchObject({ workspace: { id: second.workspace.id } });
    // Without one: the default workspace.
    expect((await me((await signIn(t, 'ann@example.com')).headers())).json()).toMatchObject({ workspace: { name: 'default' }, role: 'viewer' });
    expectProblem(await attempt('ann@example.com', PASSWORD, '127.0.0.1', { workspace: third.workspace.id }), 404, 'not_found');
    expectProblem(await attempt('ann@example.com', PASSWORD, '127.0.0.1', { workspace: 'nope' }), 404, 'not_found');
  });

  it('limits failures per e-mail: the 11th attempt within 15 minutes is 429 until the first leaves the window, even with the right password', async () => {
    await start(backend, { SWITCHBOARD_RATE_LIMIT: '0' });
    await addPerson(t, { email: 'ann@example.com', role: 'viewer' });
    for (let i = 0; i < 10; i++) {
      expectProblem(await attempt('ann@example.com', `wrong password ${i}`), 401, 'unauthorized');
      clock.advance(1000);
    }
    // The first failure leaves the window at +900 s; it is +10 s now.
    const limited = expectProblem(await attempt('ann@example.com', PASSWORD), 429, 'rate_limited');
    expect(limited.detail).toMatch(/retry in 890 s/);
    expect((await attempt('ann@example.com', PASSWORD)).headers['retry-after']).toBe('890');
    // Another e-mail from the same address is not limited by Ann's failures.
    expectProblem(await attempt('bob@example.com', 'wrong password'), 401, 'unauthorized');
    clock.advance(FAILURE_WINDOW_MS - 10_000);
    await signIn(t, 'ann@example.com');
    // A success starts the e-mail's count again; rows past the window are purged at a failure.
    expectProblem(await attempt('ann@example.com', 'wrong again'), 401, 'unauthorized');
    const rows = await t.ctx.db.kysely.selectFrom('signin_failures').select(['email_key']).execute();
    expect(rows.map((r) => r.email_key).sort()).toEqual(['ann@example.com', 'bob@example.com']);
    clock.advance(FAILURE_WINDOW_MS);
    expectProblem(await attempt('carl@example.com', 'wrong password'), 401, 'unauthorized');
    expect(await t.ctx.db.kysely.selectFrom('signin_failures').select(['email_key']).execute()).toEqual([{ email_key: 'carl@example.com' }]);
  });

  it('limits failures per address (50 in 15 minutes), which a success there does not reset', async () => {
    await start(backend);
    await addPerson(t, { email: 'ann@example.com', role: 'viewer' });
    const attacker = '203.0.113.9';
    for (let i = 0; i < 49; i++) expectProblem(await attempt(`user${i % 7}-${i}@example.com`, 'guess guess guess', attacker), 401, 'unauthorized');
    await signIn(t, 'ann@example.com'); // from 127.0.0.1: the attacker's count is untouched
    expect((await attempt('ann@example.com', PASSWORD, attacker)).statusCode).toBe(201);
    expectProblem(await attempt('someone@example.com', 'guess guess guess', attacker), 401, 'unauthorized');
    const limited = await attempt('ann@example.com', PASSWORD, attacker);
    expectProblem(limited, 429, 'rate_limited');
    expect(limited.headers['retry-after']).toBe('900');
    // Another address signs in as ever.
    expect((await attempt('ann@example.com', PASSWORD, '198.51.100.7')).statusCode).toBe(201);
  });

  it('ends a session idle too long, and any session at its absolute end', async () => {
    await start(backend);
    await addPerson(t, { email: 'ann@example.com', role: 'viewer' });
    const idle = await signIn(t, 'ann@example.com');
    clock.advance((IDLE_MINUTES - 1) * 60_000);
    expect((await me(idle.headers())).statusCode).toBe(200); // use moves the idle end
    clock.advance((IDLE_MINUTES - 1) * 60_000);
    expect((await me(idle.headers())).statusCode).toBe(200);
    clock.advance(IDLE_MINUTES * 60_000);
    expectProblem(await me(idle.headers()), 401, 'unauthorized');

    const busy = await signIn(t, 'ann@example.com');
    const end = clock.now().getTime() + MAX_HOURS * 3_600_000;
    while (clock.now().getTime() + 10 * 60_000 < end) {
      clock.advance(10 * 60_000);
      expect((await me(busy.headers())).statusCode).toBe(200);
    }
    clock.set(new Date(end));
    expectProblem(await me(busy.headers()), 401, 'unauthorized');
  });

  it("lists the caller's own sessions, ends one, refuses another person's, and signs out everywhere", async () => {
    await start(backend);
    const ann = await addPerson(t, { email: 'ann@example.com', role: 'viewer' });
    await addPerson(t, { email: 'bob@example.com', role: 'viewer' });
    const laptop = await signIn(t, 'ann@example.com');
    clock.advance(1000);
    const phone = await signIn(t, 'ann@example.com');
    const bob = await signIn(t, 'bob@example.com');
    const list = async (headers: Record<string, string>, as?: string) => {
      const res = await t.request({ method: 'GET', url: '/auth/sessions', as: as ?? null, headers });
      expect(res.statusCode, res.body).toBe(200);
      return res.json() as { data: { id: string; current: boolean; method: string; ip: string }[]; nextCursor: string | null };
    };
    const mine = await list(laptop.headers());
    expect(mine.data.map((s) => s.current)).toEqual([false, true]); // newest first: the phone's, then this one
    expect(mine.data[0]).toMatchObject({ method: 'password', ip: '127.0.0.1', workspaceId: ann.workspaceId });
    const [phoneId, laptopId] = mine.data.map((s) => s.id) as [string, string];
    const bobId = (await list(bob.headers())).data[0]!.id;

    // Paged like every list.
    const page = (await t.request({ method: 'GET', url: '/auth/sessions?limit=1', as: null, headers: laptop.headers() })).json();
    expect(page.data).toHaveLength(1);
    expect(page.nextCursor).toEqual(expect.any(String));

    // A service key has none; a key of Ann's lists hers.
    expect(await list({}, t.adminKey)).toEqual({ data: [], nextCursor: null });
    const annKey = generateKeySecret();
    await t.ctx.db.kysely
      .insertInto('api_keys')
      .values({ id: 'key_ann', workspace_id: ann.workspaceId, name: 'ann', prefix: keyPrefix(annKey), hash: hashKey(annKey), scopes: '["read"]', created_at: clock.now().toISOString(), expires_at: null, revoked_at: null, rotated_at: null, last_used_at: null, previous_hash: null, previous_valid_until: null, user_id: ann.id })
      .execute();
    expect((await list({}, annKey)).data.map((s) => [s.id, s.current])).toEqual([[phoneId, false], [laptopId, false]]);
    expect((await t.request({ method: 'GET', url: '/auth/me', as: annKey })).json()).toMatchObject({ key: { id: 'key_ann' }, user: { id: ann.id }, role: 'viewer' });
    expectProblem(await t.request({ method: 'DELETE', url: '/auth/sessions/current', as: annKey }), 404, 'not_found');

    const del = (id: string) => t.request({ method: 'DELETE', url: `/auth/sessions/${id}`, as: null, headers: laptop.headers(true) });
    expectProblem(await del(bobId), 404, 'not_found');
    expect((await me(bob.headers())).statusCode).toBe(200);
    expect((await del(phoneId)).statusCode).toBe(204);
    expectProblem(await me(phone.headers()), 401, 'unauthorized');
    expectProblem(await del(phoneId), 404, 'not_found');

    const phone2 = await signIn(t, 'ann@example.com');
    const everywhere = await t.request({ method: 'DELETE', url: '/auth/sessions', as: null, headers: laptop.headers(true) });
    expect(everywhere.statusCode).toBe(204);
    expect(everywhere.headers['set-cookie']).toMatch(/Max-Age=0/);
    expectProblem(await me(laptop.headers()), 401, 'unauthorized');
    expectProblem(await me(phone2.headers()), 401, 'unauthorized');
    expect((await me(bob.headers())).statusCode).toBe(200);

    const signouts = await audit('session.signout');
    expect(signouts.map((e) => [e.actor_id, e.target_id])).toEqual([
      [ann.id, phoneId],
      [ann.id, null],
    ]);
  });

});

// The transport's rules (CSRF, a key over a cookie, fixation, bodies, logs): the same code on either backend.
describe('sign-in at the HTTP edge', () => {
  const backend: TestBackend = { kind: 'sqlite' };
  it('refuses a bad body naming the field', async () => {
    await start(backend);
    expectProblem(await t.request({ method: 'POST', url: '/auth/sessions', as: null, body: { email: 'a@example.com' } }), 400, 'validation_failed', 'password');
    expectProblem(await t.request({ method: 'POST', url: '/auth/sessions', as: null, body: { email: 'a@example.com', password: 'x', role: 'owner' } }), 400, 'validation_failed');
  });

  it('needs the CSRF token for a cookie request that changes something', async () => {
    await start(backend);
    await addPerson(t, { email: 'ann@example.com', role: 'editor' });
    const signed = await signIn(t, 'ann@example.com');
    const create = (headers: Record<string, string>) => t.request({ method: 'POST', url: '/personas', as: null, headers, body: { name: 'Desk', instructions: 'Help.' } });
    expectProblem(await create(signed.headers()), 403, 'forbidden');
    expectProblem(await create({ ...signed.headers(), 'x-csrf-token': 'x'.repeat(43) }), 403, 'forbidden');
    expect((await create(signed.headers(true))).statusCode).toBe(201);
    // Signing out too.
    expectProblem(await t.request({ method: 'DELETE', url: '/auth/sessions/current', as: null, headers: signed.headers() }), 403, 'forbidden');
  });

  it('lets a key win over a cookie', async () => {
    await start(backend);
    await addPerson(t, { email: 'ann@example.com', role: 'viewer' });
    const signed = await signIn(t, 'ann@example.com');
    const both = await t.request({ method: 'GET', url: '/auth/me', headers: signed.headers() });
    expect(both.json()).toMatchObject({ key: { name: 'bootstrap' }, role: 'owner' });
    expect(both.json().user).toBeUndefined();
    // The CSRF token is the cookie's alone: a key's answer has none; the cookie's has the sign-in's.
    expect(both.json().csrfToken).toBeUndefined();
    expect((await me({ cookie: signed.cookie })).json().csrfToken).toBe(signed.csrfToken);
    // A bad key beside a good cookie is a bad key.
    expectProblem(await t.request({ method: 'GET', url: '/auth/me', as: generateKeySecret(), headers: signed.headers() }), 401, 'unauthorized');
  });

  it('issues a new random session whatever cookie the browser brought (no fixation)', async () => {
    await start(backend);
    await addPerson(t, { email: 'ann@example.com', role: 'viewer' });
    const planted = `sbs_${'A'.repeat(43)}`;
    const res = await t.request({ method: 'POST', url: '/auth/sessions', as: null, headers: { cookie: `sb_session=${planted}` }, body: { email: 'ann@example.com', password: PASSWORD } });
    expect(res.statusCode).toBe(201);
    const issued = /sb_session=([^;]+)/.exec(String(res.headers['set-cookie']))![1];
    expect(issued).not.toBe(planted);
    expectProblem(await me({ cookie: `sb_session=${planted}` }), 401, 'unauthorized');
    expect((await me({ cookie: `sb_session=${issued}` })).statusCode).toBe(200);
    expect((await signIn(t, 'ann@example.com')).token).not.toBe(issued);
  });

  it('GET /auth/me: a service key keeps its shape, with the role of its scopes', async () => {
    await start(backend);
    const res = await t.request({ method: 'GET', url: '/auth/me' });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({
      key: expect.objectContaining({ name: 'bootstrap', scopes: ['read', 'write', 'admin'], status: 'active' }),
      workspace: { id: expect.stringMatching(/^wsp_/), name: 'default' },
      role: 'owner',
    });
  });

  it('never logs a password, a session cookie or a CSRF token', async () => {
    const logs = captureLogs();
    await start(backend, {}, logs.logger);
    await addPerson(t, { email: 'ann@example.com', role: 'viewer' });
    const secret = 'an unusual password 4711';
    await attempt('ann@example.com', secret);
    await t.request({ method: 'POST', url: '/auth/sessions', as: null, body: { email: 'ann@example.com', password: secret, extra: 1 } });
    await t.request({ method: 'POST', url: '/auth/sessions', as: null, body: `{"email":"ann@example.com","password":"${secret}"` });
    const signed = await signIn(t, 'ann@example.com');
    await t.request({ method: 'DELETE', url: '/auth/sessions/current', as: null, headers: signed.headers(true) });
    const text = logs.text();
    expect(text.length).toBeGreaterThan(0);
    expect(text).not.toContain(secret);
    expect(text).not.toContain(PASSWORD);
    expect(text).not.toContain(signed.token);
    expect(text).not.toContain(signed.csrfToken);
  });
});

describe('sign-in cookie on an https public URL', () => {
  it('is Secure', async () => {
    t = await createTestApp({ env: { SWITCHBOARD_PUBLIC_URL: 'https://switchboard.example.com' } });
    await addPerson(t, { email: 'ann@example.com', role: 'viewer' });
    const signed = await signIn(t, 'ann@example.com');
    expect(signed.setCookie).toMatch(/; HttpOnly; SameSite=Lax; Max-Age=\d+; Secure$/);
    const out = await t.request({ method: 'DELETE', url: '/auth/sessions/current', as: null, headers: signed.headers(true) });
    expect(out.headers['set-cookie']).toMatch(/Max-Age=0; Secure$/);
  });
});
