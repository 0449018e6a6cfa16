// API.md §14 "Members" and "Keys belong to people" through the HTTP API, on both backends:
// invitations and their one-use links, roles and the last owner, keys capped by their owner's role
// and revoked when it drops, and a removed member's cookie, keys and OAuth grants ending at once.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { manualClock } from '../../src/lib/clock.js';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { invitePerson, PERSON_PASSWORD } from '../helpers/factories.js';
import { authorize, mcpStatus } from '../helpers/oauth.js';
import { testBackends } from '../helpers/postgres.js';
import { expectProblem } from '../helpers/problem.js';
import { writeBarrier } from '../helpers/write-barrier.js';
import { listen } from './chat-helpers.js';

describe.each(testBackends())('members, invitations and keys of people (API.md §14) on $kind', (backend) => {
  let t: TestApp;
  const clock = manualClock(new Date('2026-03-01T12:00:00.000Z'));
  const barrier = writeBarrier();
  beforeEach(async () => {
    clock.set(new Date('2026-03-01T12:00:00.000Z'));
    t = await createTestApp({ backend, overrides: { clock, writeGate: barrier.gate } });
  });
  afterEach(async () => t.close());

  type Person = Awaited<ReturnType<typeof invitePerson>>;
  /** A request with a person's cookie (and their CSRF token, for changes). */
  const as = (p: Person, opts: { method: 'GET' | 'POST' | 'PUT' | 'DELETE'; url: string; body?: unknown }) =>
    t.request({ ...opts, as: null, headers: { cookie: p.cookie, 'x-csrf-token': p.csrfToken } });
  const invite = (body: Record<string, unknown>, key?: string) => t.request({ method: 'POST', url: '/members/invitations', body, ...(key ? { as: key } : {}) });
  const tokenOf = (res: { json(): unknown }) => new URL((res.json() as { url: string }).url).hash.slice(1);
  const accept = (body: Record<string, unknown>) => t.request({ method: 'POST', url: '/auth/invitations/accept', as: null, body });
  const events = async (action?: string) => {
    let q = t.ctx.db.kysely.selectFrom('audit_events').selectAll().orderBy('at').orderBy('id');
    if (action) q = q.where('action', '=', action);
    return q.execute();
  };
  const personKey = async (p: Person, body: Record<string, unknown>) => {
    const res = await as(p, { method: 'POST', url: '/auth/api-keys', body });
    expect(res.statusCode, res.body).toBe(201);
    return res.json() as { id: string; key: string; scopes: string[]; userId: string | null };
  };
  const otherWorkspace = async () => (await t.ctx.services.auth.createWorkspace('other')).key.key;

  it('invites by e-mail; the one-use link signs the new member in, and they are listed', async () => {
    const res = await invite({ email: 'Ada@Example.com', role: 'editor' });
    expect(res.statusCode, res.body).toBe(201);
    const { invitation, url } = res.json();
    expect(invitation).toEqual({ id: expect.stringMatching(/^inv_/), email: 'Ada@Example.com', role: 'editor', expiresAt: '2026-03-08T12:00:00.000Z' });
    // The public URL: SWITCHBOARD_PUBLIC_URL (the CLI's test sets it), else the listen address.
    expect(url).toMatch(/^http:\/\/[^/]+\/console\/invite#sbi_[0-9A-Za-z]{43}$/);
    expect(res.headers.location).toBe(`/members/invitations/${invitation.id}`);

    const pending = await t.request({ method: 'GET', url: '/members/invitations' });
    expect(pending.statusCode).toBe(200);
    expect(pending.json()).toEqual({ data: [invitation], nextCursor: null });
    expect(pending.body).not.toContain(tokenOf(res));

    const joined = await accept({ token: tokenOf(res), name: 'Ada', password: PERSON_PASSWORD });
    expect(joined.statusCode, joined.body).toBe(201);
    expect(String(joined.headers['set-cookie'])).toMatch(/^sb_session=sbs_[0-9A-Za-z]{43}; Path=\/; HttpOnly; SameSite=Lax/);
    const body = joined.json();
    expect(body).toMatchObject({ user: { email: 'Ada@Example.com', name: 'Ada', status: 'active' }, memberships: [{ workspace: { name: 'default' }, role: 'editor' }] });
    expect(body.csrfToken).toEqual(expect.any(String));

    const members = await t.request({ method: 'GET', url: '/members' });
    expect(members.json()).toEqual({
      data: [{ userId: body.user.id, email: 'Ada@Example.com', name: 'Ada', role: 'editor', status: 'active', joinedAt: '2026-03-01T12:00:00.000Z', lastSeenAt: expect.any(String) }],
      nextCursor: null,
    });
    expect((await t.request({ method: 'GET', url: '/members/invitations' })).json().data).toEqual([]);
    // The session works: an editor writes.
    const cookie = String(joined.headers['set-cookie']).split(';')[0]!;
    const persona = await t.request({ method: 'POST', url: '/personas', as: null, headers: { cookie, 'x-csrf-token': body.csrfToken }, body: { name: 'P', instructions: 'x' } });
    expect(persona.statusCode, persona.body).toBe(201);

    const join = await events('member.join');
    expect(join).toEqual([expect.objectContaining({ actor_type: 'user', actor_id: body.user.id, target_type: 'member', target_id: body.user.id })]);
    expect((await events('member.invite')).map((e) => e.target_id)).toEqual([invitation.id]);
    expect(JSON.stringify(await events())).not.toContain(tokenOf(res));
  });

  it('pages members like every list', async () => {
    for (const n of [1, 2, 3]) {
      clock.advance(1000);
      await invitePerson(t, { email: `p${n}@example.com`, role: 'viewer' });
    }
    const first = await t.request({ method: 'GET', url: '/members?limit=2' });
    expect(first.json().data.map((m: { email: string }) => m.email)).toEqual(['p3@example.com', 'p2@example.com']);
    const next = await t.request({ method: 'GET', url: `/members?limit=2&cursor=${first.json().nextCursor}` });
    expect(next.json()).toEqual({ data: [expect.objectContaining({ email: 'p1@example.com' })], nextCursor: null });
  });

  it('refuses bad invitations: the field named, the role too high, an e-mail already a member', async () => {
    expectProblem(await invite({ email: 'not-an-email', role: 'editor' }), 400, 'validation_failed', 'email');
    expectProblem(await invite({ email: 'a@example.com', role: 'root' }), 400, 'validation_failed', 'role');
    expectProblem(await invite({ email: 'a@example.com', role: 'editor', id: 'inv_x' }), 400, 'validation_failed');
    const admin = await invitePerson(t, { email: 'admin@example.com', role: 'admin' });
    expectProblem(await as(admin, { method: 'POST', url: '/members/invitations', body: { email: 'o@example.com', role: 'owner' } }), 403, 'forbidden');
    expect((await as(admin, { method: 'POST', url: '/members/invitations', body: { email: 'b@example.com', role: 'admin' } })).statusCode).toBe(201);
    const editor = await invitePerson(t, { email: 'ed@example.com', role: 'editor' });
    expectProblem(await as(editor, { method: 'POST', url: '/members/invitations', body: { email: 'c@example.com', role: 'viewer' } }), 403, 'forbidden');
    expectProblem(await as(editor, { method: 'GET', url: '/members' }), 403, 'forbidden');
    expectProblem(await as(editor, { method: 'GET', url: '/members/invitations' }), 403, 'forbidden');
    // An owner's invitation is revoked by an owner only.
    const ownerInvite = (await invite({ email: 'o2@example.com', role: 'owner' })).json().invitation.id;
    expectProblem(await as(admin, { method: 'DELETE', url: `/members/invitations/${ownerInvite}` }), 403, 'forbidden');
    expectProblem(await invite({ email: 'ED@example.com', role: 'viewer' }), 409, 'conflict');
    expectProblem(await t.request({ method: 'POST', url: '/members/invitations', as: null, body: { email: 'd@example.com', role: 'viewer' } }), 401, 'unauthorized');
  });

  it('revokes a pending invitation: its link is gone (410), a second revoke 409, another workspace 404', async () => {
    const res = await invite({ email: 'x@example.com', role: 'viewer' });
    const { id } = res.json().invitation;
    const otherKey = await otherWorkspace();
    expectProblem(await t.request({ method: 'DELETE', url: `/members/invitations/${id}`, as: otherKey }), 404, 'not_found');
    expect((await t.request({ method: 'DELETE', url: `/members/invitations/${id}` })).statusCode).toBe(204);
    expectProblem(await t.request({ method: 'DELETE', url: `/members/invitations/${id}` }), 409, 'conflict');
    expectProblem(await t.request({ method: 'DELETE', url: '/members/invitations/inv_nope' }), 404, 'not_found');
    expectProblem(await accept({ token: tokenOf(res), name: 'X', password: PERSON_PASSWORD }), 410, 'gone');
    expect((await t.request({ method: 'GET', url: '/members/invitations' })).json().data).toEqual([]);
    expect((await events('invitation.revoke')).map((e) => e.target_id)).toEqual([id]);
  });

  it('accepts a link once, for 7 days; a new password of 12 characters at least; an existing user gives theirs', async () => {
    const res = await invite({ email: 'new@example.com', role: 'viewer' });
    expectProblem(await accept({ token: tokenOf(res), name: 'N', password: 'short' }), 400, 'validation_failed', 'password');
    expectProblem(await accept({ token: tokenOf(res), name: 'N' }), 400, 'validation_failed', 'password');
    expect((await accept({ token: tokenOf(res), name: 'N', password: PERSON_PASSWORD })).statusCode).toBe(201);
    expectProblem(await accept({ token: tokenOf(res), name: 'N', password: PERSON_PASSWORD }), 410, 'gone');
    expectProblem(await accept({ token: 'sbi_unknown', name: 'N', password: PERSON_PASSWORD }), 410, 'gone');

    const late = await invite({ email: 'late@example.com', role: 'viewer' });
    clock.advance(7 * 24 * 3600 * 1000);
    expectProblem(await accept({ token: tokenOf(late), name: 'L', password: PERSON_PASSWORD }), 410, 'gone');

    // new@example.com joins a second workspace with their own password.
    const otherKey = await otherWorkspace();
    const second = await invite({ email: 'NEW@example.com', role: 'editor' }, otherKey);
    expectProblem(await accept({ token: tokenOf(second), name: 'ignored', password: 'wrong password!' }), 401, 'unauthorized');
    const joined = await accept({ token: tokenOf(second), name: 'ignored', password: PERSON_PASSWORD });
    expect(joined.statusCode, joined.body).toBe(201);
    expect(joined.json().user.name).toBe('N');
    expect(joined.json().memberships.map((m: { role: string }) => m.role)).toEqual(['viewer', 'editor']);
    expect((await t.ctx.db.kysely.selectFrom('users').select('id').execute()).length).toBe(1);
  });

  it('changes roles; only an owner touches owner; an unknown role is a 400, another workspace a 404', async () => {
    const ed = await invitePerson(t, { email: 'ed@example.com', role: 'editor' });
    const res = await t.request({ method: 'PUT', url: `/members/${ed.userId}`, body: { role: 'agent' } });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toMatchObject({ userId: ed.userId, email: 'ed@example.com', role: 'agent', status: 'active' });
    expect(await events('member.role')).toEqual([expect.objectContaining({ target_id: ed.userId, changes: '["role"]', actor_type: 'key' })]);

    expectProblem(await t.request({ method: 'PUT', url: `/members/${ed.userId}`, body: { role: 'boss' } }), 400, 'validation_failed', 'role');
    expectProblem(await t.request({ method: 'PUT', url: `/members/${ed.userId}`, body: {} }), 400, 'validation_failed', 'role');
    expectProblem(await t.request({ method: 'PUT', url: '/members/usr_nobody', body: { role: 'viewer' } }), 404, 'not_found');
    const otherKey = await otherWorkspace();
    expectProblem(await t.request({ method: 'PUT', url: `/members/${ed.userId}`, as: otherKey, body: { role: 'viewer' } }), 404, 'not_found');
    expectProblem(await t.request({ method: 'DELETE', url: `/members/${ed.userId}`, as: otherKey }), 404, 'not_found');

    const admin = await invitePerson(t, { email: 'admin@example.com', role: 'admin' });
    const owner = await invitePerson(t, { email: 'owner@example.com', role: 'owner' });
    expectProblem(await as(admin, { method: 'PUT', url: `/members/${ed.userId}`, body: { role: 'owner' } }), 403, 'forbidden');
    expectProblem(await as(admin, { method: 'PUT', url: `/members/${owner.userId}`, body: { role: 'editor' } }), 403, 'forbidden');
    expectProblem(await as(admin, { method: 'DELETE', url: `/members/${owner.userId}` }), 403, 'forbidden');
    expect((await as(admin, { method: 'PUT', url: `/members/${ed.userId}`, body: { role: 'viewer' } })).statusCode).toBe(200);
    expect((await as(owner, { method: 'PUT', url: `/members/${admin.userId}`, body: { role: 'owner' } })).json().role).toBe('owner');
    // A cookie request without its CSRF token changes nothing.
    expectProblem(await t.request({ method: 'PUT', url: `/members/${ed.userId}`, as: null, headers: { cookie: owner.cookie }, body: { role: 'editor' } }), 403, 'forbidden');
  });

  it('keeps the last owner: demoting or removing them is a 409', async () => {
    const a = await invitePerson(t, { email: 'a@example.com', role: 'owner' });
    expectProblem(await t.request({ method: 'PUT', url: `/members/${a.userId}`, body: { role: 'admin' } }), 409, 'conflict');
    expectProblem(await as(a, { method: 'DELETE', url: `/members/${a.userId}` }), 409, 'conflict');
    const b = await invitePerson(t, { email: 'b@example.com', role: 'owner' });
    expect((await as(b, { method: 'PUT', url: `/members/${a.userId}`, body: { role: 'admin' } })).statusCode).toBe(200);
    expectProblem(await as(b, { method: 'DELETE', url: `/members/${b.userId}` }), 409, 'conflict');
    expect((await as(b, { method: 'PUT', url: `/members/${a.userId}`, body: { role: 'owner' } })).statusCode).toBe(200);
    expect((await as(a, { method: 'DELETE', url: `/members/${b.userId}` })).statusCode).toBe(204);
  });

  it('of two owners demoted at once, exactly one goes (the last owner race)', async () => {
    const a = await invitePerson(t, { email: 'a@example.com', role: 'owner' });
    const b = await invitePerson(t, { email: 'b@example.com', role: 'owner' });
    barrier.arm('member.owners', 2);
    const [ra, rb] = await Promise.all([
      t.request({ method: 'PUT', url: `/members/${a.userId}`, body: { role: 'editor' } }),
      t.request({ method: 'DELETE', url: `/members/${b.userId}` }),
    ]);
    const codes = [ra.statusCode, rb.statusCode];
    expect(codes.filter((c) => c === 409), `${ra.body} ${rb.body}`).toHaveLength(1);
    expect(codes.filter((c) => c === 200 || c === 204)).toHaveLength(1);
    const owners = await t.ctx.db.kysely.selectFrom('memberships').select('user_id').where('role', '=', 'owner').execute();
    expect(owners).toHaveLength(1);
  });

  it('of two accepts of one link at once, exactly one joins', async () => {
    const res = await invite({ email: 'twice@example.com', role: 'viewer' });
    barrier.arm('invitation.accept', 2);
    const both = await Promise.all([1, 2].map(() => accept({ token: tokenOf(res), name: 'T', password: PERSON_PASSWORD })));
    expect(both.map((r) => r.statusCode).sort()).toEqual([201, 410]);
    expectProblem(both.find((r) => r.statusCode === 410)!, 410, 'gone');
    expect(await t.ctx.db.kysely.selectFrom('memberships').select('user_id').execute()).toHaveLength(1);
    expect(await events('member.join')).toHaveLength(1);
  });

  it('gives people keys of their own, never above their role', async () => {
    const ed = await invitePerson(t, { email: 'ed@example.com', role: 'editor' });
    const mine = await personKey(ed, { name: 'laptop' });
    expect(mine).toMatchObject({ scopes: ['read', 'write'], userId: ed.userId });
    expectProblem(await as(ed, { method: 'POST', url: '/auth/api-keys', body: { name: 'root', scopes: ['admin'] } }), 403, 'forbidden');
    // A key of theirs makes keys of theirs, within its own scopes.
    const readOnly = await personKey(ed, { name: 'reader', scopes: ['read'] });
    const viaKey = await t.request({ method: 'POST', url: '/auth/api-keys', as: mine.key, body: { name: 'ci', scopes: ['read'] } });
    expect(viaKey.statusCode, viaKey.body).toBe(201);
    expect(viaKey.json().userId).toBe(ed.userId);
    expectProblem(await t.request({ method: 'POST', url: '/auth/api-keys', as: readOnly.key, body: { name: 'up', scopes: ['write'] } }), 403, 'forbidden');
    expectProblem(await t.request({ method: 'POST', url: '/auth/api-keys', as: mine.key, body: { name: 'up', scopes: ['admin'] } }), 403, 'forbidden');
    // A viewer's default is what a viewer may hold.
    const viewer = await invitePerson(t, { email: 'v@example.com', role: 'viewer' });
    expect((await personKey(viewer, { name: 'v' })).scopes).toEqual(['read']);
    // A service key keeps making service keys, and only with admin.
    const service = await t.request({ method: 'POST', url: '/auth/api-keys', body: { name: 'svc', scopes: ['read'] } });
    expect(service.json().userId).toBeNull();
    expectProblem(await t.request({ method: 'POST', url: '/auth/api-keys', as: service.json().key, body: { name: 'x', scopes: ['read'] } }), 403, 'forbidden');

    // A non-admin lists only their own keys; an admin sees everyone's.
    const listed = await as(ed, { method: 'GET', url: '/auth/api-keys' });
    expect(listed.json().data.map((k: { id: string }) => k.id).sort()).toEqual([mine.id, readOnly.id, viaKey.json().id].sort());
    const all = await t.request({ method: 'GET', url: '/auth/api-keys' });
    expect(all.json().data.length).toBe(6);
    expectProblem(await t.request({ method: 'GET', url: '/auth/api-keys', as: service.json().key }), 403, 'forbidden');
    // Rotating and revoking: their own yes, another's needs admin.
    expectProblem(await as(viewer, { method: 'DELETE', url: `/auth/api-keys/${mine.id}` }), 403, 'forbidden');
    expectProblem(await as(viewer, { method: 'PUT', url: `/auth/api-keys/${mine.id}`, body: {} }), 403, 'forbidden');
    expect((await as(ed, { method: 'PUT', url: `/auth/api-keys/${readOnly.id}`, body: {} })).statusCode).toBe(200);
    expect((await as(ed, { method: 'DELETE', url: `/auth/api-keys/${readOnly.id}` })).statusCode).toBe(204);
    const admin = await invitePerson(t, { email: 'admin@example.com', role: 'admin' });
    expect((await as(admin, { method: 'DELETE', url: `/auth/api-keys/${viaKey.json().id}` })).statusCode).toBe(204);

    const keyEvents = (await events()).filter((e) => e.action.startsWith('key.'));
    expect(keyEvents.map((e) => [e.action, e.target_id, e.actor_id])).toEqual([
      ['key.create', mine.id, ed.userId],
      ['key.create', readOnly.id, ed.userId],
      ['key.create', viaKey.json().id, mine.id],
      ['key.create', expect.any(String), viewer.userId],
      ['key.create', service.json().id, expect.stringMatching(/^key_/)],
      ['key.rotate', readOnly.id, ed.userId],
      ['key.revoke', readOnly.id, ed.userId],
      ['key.revoke', viaKey.json().id, admin.userId],
    ]);
  });

  it('revokes at once the keys above a lowered role; a key within it keeps working, the session continues with the new role', async () => {
    const ed = await invitePerson(t, { email: 'ed@example.com', role: 'editor' });
    const writer = await personKey(ed, { name: 'writer', scopes: ['read', 'write'] });
    const reader = await personKey(ed, { name: 'reader', scopes: ['read'] });
    // Both keys are in the key cache now.
    expect((await t.request({ method: 'POST', url: '/personas', as: writer.key, body: { name: 'P', instructions: 'x' } })).statusCode).toBe(201);
    expect((await t.request({ method: 'GET', url: '/personas', as: reader.key })).statusCode).toBe(200);

    expect((await t.request({ method: 'PUT', url: `/members/${ed.userId}`, body: { role: 'viewer' } })).statusCode).toBe(200);
    expectProblem(await t.request({ method: 'GET', url: '/personas', as: writer.key }), 401, 'unauthorized');
    expect((await t.request({ method: 'GET', url: '/personas', as: reader.key })).statusCode).toBe(200);
    expect((await as(ed, { method: 'GET', url: '/personas' })).statusCode).toBe(200);
    expectProblem(await as(ed, { method: 'POST', url: '/personas', body: { name: 'Q', instructions: 'x' } }), 403, 'forbidden');

    const keys = (await t.request({ method: 'GET', url: '/auth/api-keys' })).json().data as { id: string; status: string }[];
    expect(keys.find((k) => k.id === writer.id)?.status).toBe('revoked');
    expect(keys.find((k) => k.id === reader.id)?.status).toBe('active');
    const adminKeyId = (await t.ctx.services.auth.authenticate(t.adminKey))!.id;
    // One change, one event: the role change names the keys it ended; no key.revoke of its own.
    expect((await events('member.role')).map((e) => [e.target_id, e.actor_id, e.changes])).toEqual([[ed.userId, adminKeyId, '["role","keys"]']]);
    expect(await events('key.revoke')).toEqual([]);
  });

  it('ends a removed member’s cookie, keys and OAuth grants at once (401)', async () => {
    const ed = await invitePerson(t, { email: 'ed@example.com', role: 'editor' });
    const key = await personKey(ed, { name: 'k' });
    const origin = await listen(t);
    const provider = await authorize(origin, key.key);
    const token = provider.saved!.access_token;
    expect((await mcpStatus(origin, token)).status).toBe(200);
    expect((await as(ed, { method: 'GET', url: '/personas' })).statusCode).toBe(200);
    expect((await t.request({ method: 'GET', url: '/personas', as: key.key })).statusCode).toBe(200);
    const grant = await t.ctx.db.kysely.selectFrom('oauth_grants').selectAll().where('key_id', '=', key.id).executeTakeFirstOrThrow();
    expect(await t.ctx.services.auth.keyValidSince(key.id, grant.created_at)).not.toBeNull();

    expect((await t.request({ method: 'DELETE', url: `/members/${ed.userId}` })).statusCode).toBe(204);
    expectProblem(await as(ed, { method: 'GET', url: '/personas' }), 401, 'unauthorized');
    expectProblem(await t.request({ method: 'GET', url: '/personas', as: key.key }), 401, 'unauthorized');
    // The grant rests on the key: revoking the key ends it (keyValidSince), and its row says so.
    expect(await t.ctx.services.auth.keyValidSince(key.id, grant.created_at)).toBeNull();
    expect((await mcpStatus(origin, token)).status).toBe(401);
    expect((await t.ctx.db.kysely.selectFrom('oauth_grants').select('revoked_at').where('id', '=', grant.id).executeTakeFirstOrThrow()).revoked_at).not.toBeNull();
    expectProblem(await t.request({ method: 'DELETE', url: `/members/${ed.userId}` }), 404, 'not_found');
    expect((await t.request({ method: 'GET', url: '/members' })).json().data).toEqual([]);
    // One change, one event: the removal names what ended with it.
    expect((await events()).filter((e) => e.action === 'member.remove' || e.action === 'key.revoke').map((e) => [e.action, e.target_id, e.changes])).toEqual([
      ['member.remove', ed.userId, '["sessions","keys","oauthGrants"]'],
    ]);
  });
});
