// Teams and handoffs are people (API.md §14, issue 41 item 6), on both backends: a team's members are
// people of the workspace; accepting, answering, handing back and resolving act as the signed-in user
// (or the key's owner); an `agent` sees and works only their own teams' handoffs (another team's is a
// 404) and may ask personas but not change them; naming another member is an admin's act, recorded
// with `onBehalfOf`; every such change writes its audit event, never the message text.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Role } from '../../src/core/auth/roles.js';
import { createPeopleStore } from '../../src/core/people/people.store.js';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { createPersona, createTeam, workspaceOf } from '../helpers/factories.js';
import { testBackends } from '../helpers/postgres.js';
import { expectProblem } from '../helpers/problem.js';

interface Person {
  userId: string;
  email: string;
  /** A request as this person, with their sign-in cookie and CSRF token. */
  request(method: 'GET' | 'POST' | 'PUT', url: string, body?: unknown): ReturnType<TestApp['request']>;
}

describe.each(testBackends())('handoffs worked by people on $kind', (backend) => {
  let t: TestApp;
  let workspaceId: string;
  let n = 0;

  beforeAll(async () => {
    t = await createTestApp({ backend });
    workspaceId = await workspaceOf(t);
  });
  afterAll(async () => t?.close());

  /** A person of the default workspace with `role`, signed in (through the stores: the sign-in routes are another part's). */
  async function person(role: Role, name: string): Promise<Person> {
    const people = createPeopleStore(t.ctx.db.kysely);
    const userId = t.ctx.ids('usr');
    const email = `${name}.${++n}@example.com`;
    const at = new Date().toISOString();
    await people.insertUser({ id: userId, email, email_key: email.toLowerCase(), name, status: 'active', password: null, created_at: at, last_seen_at: null });
    await people.insertMembership({ workspace_id: workspaceId, user_id: userId, role, joined_at: at });
    const { token, csrfToken } = await t.ctx.services.loginSessions.start(userId, workspaceId, 'password', undefined);
    return {
      userId,
      email,
      request: (method, url, body) =>
        t.request({ method, url, as: null, headers: { cookie: `sb_session=${token}`, ...(method === 'GET' ? {} : { 'x-csrf-token': csrfToken }) }, ...(body === undefined ? {} : { body }) }),
    };
  }

  const ok = async (res: Promise<{ statusCode: number; body: string; json: () => any }>, status = 200) => {
    const r = await res;
    expect(r.statusCode, r.body).toBe(status);
    return r.json();
  };
  /** A team of these people and a persona handing over to it; a handoff opened through the API. */
  async function teamWithHandoff(members: Person[]) {
    const team = await createTeam(t, { name: `Team ${++n}`, members: members.map((m) => m.userId) });
    const persona = await createPersona(t, { name: 'Desk', teamId: team.id });
    const session = await ok(t.request({ method: 'POST', url: '/query', body: { personaId: persona.id, message: 'Hello' } }));
    const handoff = await ok(t.request({ method: 'POST', url: `/sessions/${session.sessionId}/handoff`, body: {} }), 201);
    return { team, persona, handoff };
  }
  const events = (action: string, targetId: string) =>
    t.ctx.db.kysely.selectFrom('audit_events').selectAll().where('workspace_id', '=', workspaceId).where('action', '=', action).where('target_id', '=', targetId).execute();

  it('an agent sees and works only their own team’s handoffs, as themselves; another team’s is a 404', async () => {
    const [ana, ben] = [await person('agent', 'ana'), await person('agent', 'ben')];
    const mine = await teamWithHandoff([ana]);
    const theirs = await teamWithHandoff([ben]);

    const listed = await ok(ana.request('GET', '/handoffs?limit=100'));
    expect(listed.data.map((h: { id: string }) => h.id)).toEqual([mine.handoff.id]);
    expect((await ok(ana.request('GET', `/handoffs/${mine.handoff.id}`))).id).toBe(mine.handoff.id);
    expectProblem(await ana.request('GET', `/handoffs/${theirs.handoff.id}`), 404, 'not_found');
    for (const path of ['accept', 'return', 'resolve']) expectProblem(await ana.request('POST', `/handoffs/${theirs.handoff.id}/${path}`, {}), 404, 'not_found');
    expectProblem(await ana.request('POST', `/handoffs/${theirs.handoff.id}/messages`, { text: 'Hi' }), 404, 'not_found');
    // The admin key still sees both.
    const all = (await ok(t.request({ method: 'GET', url: '/handoffs?limit=100' }))).data.map((h: { id: string }) => h.id);
    expect(all).toEqual(expect.arrayContaining([mine.handoff.id, theirs.handoff.id]));

    // Works it without naming anyone: the member is the signed-in person.
    expect(await ok(ana.request('POST', `/handoffs/${mine.handoff.id}/accept`, {}))).toMatchObject({ status: 'accepted', member: ana.email });
    expect(await ok(ana.request('POST', `/handoffs/${mine.handoff.id}/messages`, { text: 'A secret answer' }), 201)).toMatchObject({ author: `human:${ana.email}` });
    expect(await ok(ana.request('POST', `/handoffs/${mine.handoff.id}/resolve`, {}))).toMatchObject({ status: 'resolved', endedBy: ana.email });

    const [accept] = await events('handoff.accept', mine.handoff.id);
    expect(accept).toMatchObject({ actor_type: 'user', actor_id: ana.userId, target_type: 'handoff', on_behalf_of: null, outcome: 'success' });
    const [reply] = await events('handoff.reply', mine.handoff.id);
    expect(reply).toMatchObject({ actor_id: ana.userId });
    expect(JSON.stringify(reply)).not.toContain('A secret answer');
    expect(await events('handoff.resolve', mine.handoff.id)).toHaveLength(1);
    // Nothing was written for the other team's refused attempts.
    expect(await events('handoff.accept', theirs.handoff.id)).toHaveLength(0);
  });

  it('naming another member is an admin’s act: an agent gets 403, an admin 200 with onBehalfOf in the audit log', async () => {
    const [cy, di] = [await person('agent', 'cy'), await person('agent', 'di')];
    const admin = await person('admin', 'boss');
    const { handoff } = await teamWithHandoff([cy, di]);

    expectProblem(await cy.request('POST', `/handoffs/${handoff.id}/accept`, { member: di.email }), 403, 'forbidden');
    expectProblem(await cy.request('POST', `/handoffs/${handoff.id}/accept`, { member: di.userId }), 403, 'forbidden');
    expect((await ok(t.request({ method: 'GET', url: `/handoffs/${handoff.id}` }))).status).toBe('offered');
    // Naming yourself is still yourself.
    const mine = await teamWithHandoff([cy]);
    expect(await ok(cy.request('POST', `/handoffs/${mine.handoff.id}/accept`, { member: cy.email.toUpperCase() }))).toMatchObject({ member: cy.email });

    // The admin is not in the team: acting as themselves is a 400; naming a member works and is recorded.
    expectProblem(await admin.request('POST', `/handoffs/${handoff.id}/accept`, {}), 400, 'validation_failed', 'member');
    expect(await ok(admin.request('POST', `/handoffs/${handoff.id}/accept`, { member: di.userId }))).toMatchObject({ status: 'accepted', member: di.email });
    const [event] = await events('handoff.accept', handoff.id);
    expect(event).toMatchObject({ actor_type: 'user', actor_id: admin.userId, on_behalf_of: di.email });
    expect(await ok(admin.request('POST', `/handoffs/${handoff.id}/return`, { member: di.email }))).toMatchObject({ status: 'returned', endedBy: di.email });
    expect((await events('handoff.return', handoff.id))[0]).toMatchObject({ actor_id: admin.userId, on_behalf_of: di.email });
  });

  it('a write key made for one member no longer answers as another (the issue’s "Why"); it answers as its owner', async () => {
    const [eve, fay] = [await person('editor', 'eve'), await person('editor', 'fay')];
    const { handoff } = await teamWithHandoff([eve, fay]);
    const admin = await t.ctx.services.auth.authenticate(t.adminKey);
    const made = await t.ctx.services.auth.createKey(admin!, { name: 'eve’s key', scopes: ['read', 'write'] });
    await t.ctx.db.kysely.updateTable('api_keys').set({ user_id: eve.userId }).where('id', '=', made.id).execute();
    const asEve = (url: string, body: unknown) => t.request({ method: 'POST', url, body, as: made.key });

    expectProblem(await asEve(`/handoffs/${handoff.id}/accept`, { member: fay.email }), 403, 'forbidden');
    expect(await ok(asEve(`/handoffs/${handoff.id}/accept`, {}))).toMatchObject({ member: eve.email });
    expectProblem(await asEve(`/handoffs/${handoff.id}/messages`, { member: fay.email, text: 'As Fay' }), 403, 'forbidden');
    expect(await ok(asEve(`/handoffs/${handoff.id}/messages`, { text: 'As Eve' }), 201)).toMatchObject({ author: `human:${eve.email}` });
    expect((await events('handoff.accept', handoff.id))[0]).toMatchObject({ actor_type: 'key', actor_id: made.id, on_behalf_of: null });
  });

  it('an agent may ask a persona but not create one; a viewer may not ask; a read-only key still may not', async () => {
    const agent = await person('agent', 'gil');
    const viewer = await person('viewer', 'hal');
    const persona = await createPersona(t, { name: 'Helper' });
    const answer = await ok(agent.request('POST', '/query', { personaId: persona.id, message: 'Hi' }));
    expect(answer.response.length).toBeGreaterThan(0);
    expect((await agent.request('POST', '/v1/chat/completions', { model: persona.id, messages: [{ role: 'user', content: 'Hi' }] })).statusCode).toBe(200);
    expectProblem(await agent.request('POST', '/personas', { name: 'Mine', instructions: 'No.' }), 403, 'forbidden');
    expectProblem(await viewer.request('POST', '/query', { personaId: persona.id, message: 'Hi' }), 403, 'forbidden');
    expectProblem(await viewer.request('POST', `/api/ai-sdk/agents/${persona.id}/chat`, { messages: [{ role: 'user', content: 'Hi' }], stream: false }), 403, 'forbidden');
    const admin = await t.ctx.services.auth.authenticate(t.adminKey);
    const reader = (await t.ctx.services.auth.createKey(admin!, { name: 'reader', scopes: ['read'] })).key;
    expectProblem(await t.request({ method: 'POST', url: '/query', body: { personaId: persona.id, message: 'Hi' }, as: reader }), 403, 'forbidden');
    expect((await t.request({ method: 'POST', url: '/v1/chat/completions', body: { model: persona.id, messages: [{ role: 'user', content: 'Hi' }] }, as: reader })).statusCode).toBe(403);
    // A viewer reads, but works no handoff (accept needs the agent role).
    const { handoff } = await teamWithHandoff([viewer]);
    expectProblem(await viewer.request('POST', `/handoffs/${handoff.id}/accept`, {}), 403, 'forbidden');
  });

  it('team members are people of the workspace: anyone else is a 400 naming the field; changes are audited', async () => {
    const ivy = await person('agent', 'ivy');
    const res = await t.request({ method: 'POST', url: '/business/teams', body: { name: 'People', members: [ivy.userId, 'nobody@example.com'] } });
    expectProblem(res, 400, 'validation_failed', 'members.1');
    expectProblem(await t.request({ method: 'POST', url: '/business/teams', body: { name: 'People', members: ['usr_missing'] } }), 400, 'validation_failed', 'members.0');
    expectProblem(await t.request({ method: 'POST', url: '/business/teams', body: { name: 'People', members: [ivy.userId, ivy.email.toUpperCase()] } }), 400, 'validation_failed', 'members.1');

    const team = await ok(t.request({ method: 'POST', url: '/business/teams', body: { name: 'People', members: [ivy.userId] } }), 201);
    expect(team.members.map((m: { email: string }) => m.email)).toEqual([ivy.email]);
    expectProblem(await t.request({ method: 'POST', url: `/business/teams/${team.id}/members`, body: { email: 'stranger@example.com' } }), 400, 'validation_failed', 'email');
    expectProblem(await t.request({ method: 'POST', url: `/business/teams/${team.id}/members`, body: { userId: 'usr_nobody' } }), 400, 'validation_failed', 'userId');
    expectProblem(await t.request({ method: 'POST', url: `/business/teams/${team.id}/members`, body: {} }), 400, 'validation_failed', 'email');
    const jo = await person('agent', 'jo');
    expect((await ok(t.request({ method: 'POST', url: `/business/teams/${team.id}/members`, body: { userId: jo.userId, role: 'lead' } }), 201)).members[1]).toMatchObject({ email: jo.email, role: 'lead' });
    await ok(t.request({ method: 'PUT', url: `/business/teams/${team.id}/availability`, body: { status: 'busy' } }));
    await ok(t.request({ method: 'PUT', url: `/business/teams/${team.id}/handoff`, body: { offerSeconds: 60 } }));

    const actions = await t.ctx.db.kysely.selectFrom('audit_events').select(['action', 'changes']).where('target_id', '=', team.id).orderBy('at').orderBy('id').execute();
    expect(actions.map((a) => a.action).sort()).toEqual(['team.availability', 'team.create', 'team.member_add', 'team.update']);
    expect(actions.find((a) => a.action === 'team.update')?.changes).toBe(JSON.stringify(['handoff.offerSeconds']));
    // A refused change wrote nothing.
    expect(await t.ctx.db.kysely.selectFrom('audit_events').select('id').where('action', '=', 'team.create').where('target_id', 'is', null).execute()).toHaveLength(0);
  });
});
