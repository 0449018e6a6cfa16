// API.md §14 "Audit log": reading and exporting it (admin and up, the workspace's only), refusals
// (403s of the API and of MCP tools) as events, the retention sweep, MCP changes audited like HTTP
// ones, and a change and its event landing or failing together.
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemActor } from '../../src/core/auth/actor.js';
import { auditRow } from '../../src/core/audit/audit.js';
import { createPeopleStore } from '../../src/core/people/people.store.js';
import { hashPassword } from '../../src/core/people/passwords.js';
import { manualClock } from '../../src/lib/clock.js';
import { randomIds } from '../../src/lib/ids.js';
import { createTestApp, TEST_SCRYPT, type TestApp } from '../helpers/app.js';
import { createPersona, workspaceOf } from '../helpers/factories.js';
import { callError, callOk, connectInMemory } from '../helpers/mcp.js';
import { testBackends } from '../helpers/postgres.js';
import { expectProblem } from '../helpers/problem.js';

interface Event {
  id: string;
  at: string;
  workspaceId: string;
  actor: { type: string; id: string; name: string };
  action: string;
  target: { type: string; id: string | null };
  outcome: string;
  requestId: string | null;
  ip: string | null;
  userAgent: string | null;
  changes?: string[];
}

describe.each(testBackends())('the audit log on $kind', { timeout: 60_000 }, (backend) => {
  let t: TestApp;
  let workspaceId: string;
  let adminKeyId: string;
  const clock = manualClock(new Date('2026-03-01T12:00:00.000Z'));

  /** A key of the default workspace with these scopes. */
  const key = async (name: string, scopes: string[]) => {
    const res = await t.request({ method: 'POST', url: '/auth/api-keys', body: { name, scopes } });
    expect(res.statusCode, res.body).toBe(201);
    return res.json() as { id: string; key: string };
  };
  const list = async (query = '', as?: string) => {
    const res = await t.request({ method: 'GET', url: `/audit${query}`, ...(as ? { as } : {}) });
    expect(res.statusCode, res.body).toBe(200);
    return res.json() as { data: Event[]; nextCursor: string | null };
  };

  beforeAll(async () => {
    t = await createTestApp({ backend, overrides: { clock } });
    workspaceId = await workspaceOf(t);
    adminKeyId = (await t.ctx.services.auth.authenticate(t.adminKey))!.id;
  });
  afterAll(async () => t?.close());

  it('lists the workspace’s events newest first with who, what, where from and which fields changed', async () => {
    const p = await createPersona(t, { name: 'Ada' });
    clock.advance(1000);
    const put = await t.request({ method: 'PUT', url: `/personas/${p.id}`, body: { name: 'Grace', maxTokens: 200 }, headers: { 'user-agent': 'audit-test/1' } });
    expect(put.statusCode).toBe(200);
    const { data } = await list(`?targetId=${p.id}`);
    expect(data.map((e) => e.action)).toEqual(['persona.update', 'persona.create']);
    expect(data[0]).toEqual({
      id: expect.stringMatching(/^aud_/),
      at: '2026-03-01T12:00:01.000Z',
      workspaceId,
      actor: { type: 'key', id: adminKeyId, name: expect.any(String) },
      action: 'persona.update',
      target: { type: 'persona', id: p.id },
      outcome: 'success',
      requestId: put.headers['x-request-id'],
      ip: '127.0.0.1',
      userAgent: 'audit-test/1',
      changes: ['name', 'maxTokens'],
    });
    // Field names only, never their values.
    expect(JSON.stringify(data)).not.toContain('Grace');
    // A PUT that changes nothing is no change: no event.
    await t.request({ method: 'PUT', url: `/personas/${p.id}`, body: { name: 'Grace' } });
    expect((await list(`?targetId=${p.id}`)).data).toHaveLength(2);
  });

  it('writes one event for a request replayed with its Idempotency-Key (the service runs once)', async () => {
    const send = () => t.request({ method: 'POST', url: '/personas', headers: { 'idempotency-key': `audit-${backend.kind}` }, body: { name: 'Once', instructions: 'Hi.' } });
    const first = await send();
    const again = await send();
    expect(again.json().id).toBe(first.json().id);
    expect((await list(`?targetId=${first.json().id}`)).data.map((e) => e.action)).toEqual(['persona.create']);
  });

  it('pages with a cursor and filters by actor, action, target and time; bad filters are 400s naming the field', async () => {
    const other = await key('filters', ['read', 'write']);
    const made: string[] = [];
    for (let i = 0; i < 5; i++) {
      clock.advance(1000);
      made.push((await createPersona(t, { name: `F${i}` }, other.key)).id);
    }
    const first = await list(`?actor=${other.id}&limit=2`);
    expect(first.data.map((e) => e.target.id)).toEqual([made[4], made[3]]);
    const second = await list(`?actor=${other.id}&limit=2&cursor=${first.nextCursor}`);
    const third = await list(`?actor=${other.id}&limit=2&cursor=${second.nextCursor}`);
    expect([...second.data, ...third.data].map((e) => e.target.id)).toEqual([made[2], made[1], made[0]]);
    expect(third.nextCursor).toBeNull();

    const since = new Date(clock.now().getTime() - 2500).toISOString();
    const until = new Date(clock.now().getTime()).toISOString();
    expect((await list(`?actor=${other.id}&since=${since}&until=${until}`)).data.map((e) => e.target.id)).toEqual([made[3], made[2]]);
    expect((await list(`?actor=${other.id}&action=persona.delete`)).data).toEqual([]);
    expect((await list(`?targetType=persona&action=persona.create&actor=${other.id}&limit=100`)).data).toHaveLength(5);

    expectProblem(await t.request({ method: 'GET', url: '/audit?since=yesterday' }), 400, 'validation_failed', 'since');
    expectProblem(await t.request({ method: 'GET', url: '/audit?until=2026-13-01' }), 400, 'validation_failed', 'until');
    expectProblem(await t.request({ method: 'GET', url: '/audit?cursor=nope' }), 400, 'validation_failed', 'cursor');
    expectProblem(await t.request({ method: 'GET', url: '/audit?who=me' }), 400, 'validation_failed');
  });

  it('shows only the caller’s workspace', async () => {
    const other = await t.ctx.services.auth.createWorkspace('audit-other');
    const theirs = await createPersona(t, { name: 'Theirs' }, other.key.key);
    expect((await list(`?targetId=${theirs.id}`)).data).toEqual([]);
    const seen = await list('?limit=100', other.key.key);
    expect(seen.data.map((e) => e.target.id)).toEqual([theirs.id]);
    expect(seen.data.every((e) => e.workspaceId === other.workspace.id)).toBe(true);
  });

  it('is for admins: a lower caller gets 403, and the refusal is itself an event', async () => {
    const writer = await key('writer', ['read', 'write']);
    const refused = await t.request({ method: 'GET', url: '/audit', as: writer.key });
    expectProblem(refused, 403, 'forbidden');
    const reader = await key('reader', ['read']);
    expectProblem(await t.request({ method: 'POST', url: '/personas', as: reader.key, body: { name: 'X', instructions: 'Y' } }), 403, 'forbidden');

    const denied = (await list('?action=request.denied&limit=100')).data;
    expect(denied.find((e) => e.actor.id === writer.id)).toMatchObject({
      outcome: 'denied',
      target: { type: 'route', id: 'GET /audit' },
      requestId: refused.headers['x-request-id'],
    });
    expect(denied.find((e) => e.actor.id === reader.id)).toMatchObject({ outcome: 'denied', target: { type: 'route', id: 'POST /personas' } });
    // No route edits or deletes an event.
    for (const method of ['PUT', 'PATCH', 'DELETE'] as const) {
      expect((await t.request({ method, url: `/audit/${denied[0]!.id}` })).statusCode).toBe(404);
    }
  });

  it('records a signed-in person’s refusal for a missing CSRF token, as that person', async () => {
    const people = createPeopleStore(t.ctx.db.kysely);
    const userId = `usr_audit${backend.kind}`;
    await people.insertUser({ id: userId, email: `${userId}@example.com`, email_key: `${userId}@example.com`, name: 'Margaret', status: 'active', password: await hashPassword('a long enough password', TEST_SCRYPT), created_at: clock.now().toISOString(), last_seen_at: null });
    await people.insertMembership({ workspace_id: workspaceId, user_id: userId, role: 'admin', joined_at: clock.now().toISOString() });
    const { token } = await t.ctx.services.loginSessions.start(userId, workspaceId, 'password', undefined);
    const res = await t.request({ method: 'POST', url: '/personas', as: null, headers: { cookie: `sb_session=${token}` }, body: { name: 'X', instructions: 'Y' } });
    expectProblem(res, 403, 'forbidden');
    const { data } = await list(`?actor=${userId}`);
    expect(data).toEqual([expect.objectContaining({ actor: { type: 'user', id: userId, name: 'Margaret' }, action: 'request.denied', outcome: 'denied', target: { type: 'route', id: 'POST /personas' } })]);
  });

  it('exports every matching event as NDJSON or CSV (header row, quoting, no formulas); another format is a 400', async () => {
    const odd = await key('=HYPERLINK("http://evil.example"),"x"', ['read', 'write']);
    const p = await createPersona(t, { name: 'Exported' }, odd.key);
    const nd = await t.request({ method: 'GET', url: `/audit/export?format=ndjson&actor=${odd.id}` });
    expect(nd.statusCode).toBe(200);
    expect(nd.headers['content-type']).toMatch(/^application\/x-ndjson/);
    expect(nd.headers['content-disposition']).toMatch(/^attachment; filename="switchboard-audit-\d{4}-\d{2}-\d{2}\.ndjson"$/);
    const lines = nd.body.trim().split('\n').map((l) => JSON.parse(l) as Event);
    expect(lines).toEqual([expect.objectContaining({ action: 'persona.create', target: { type: 'persona', id: p.id }, actor: { type: 'key', id: odd.id, name: expect.any(String) } })]);

    const csv = await t.request({ method: 'GET', url: `/audit/export?format=csv&actor=${odd.id}` });
    expect(csv.statusCode).toBe(200);
    expect(csv.headers['content-type']).toMatch(/^text\/csv/);
    const rows = csv.body.split('\r\n');
    expect(rows[0]).toBe('id,at,workspaceId,actorType,actorId,actorName,onBehalfOf,action,targetType,targetId,outcome,requestId,ip,userAgent,changes');
    expect(rows[1]).toContain(`,key,${odd.id},"'=HYPERLINK(""http://evil.example""),""x""",,persona.create,persona,${p.id},success,`);
    expect(rows[2]).toBe('');

    // Everything, past one export batch: as many lines as the list has events.
    let total = 0;
    for (let cursor: string | null = ''; cursor !== null; ) {
      const page = await list(`?limit=100${cursor ? `&cursor=${cursor}` : ''}`);
      total += page.data.length;
      cursor = page.nextCursor;
    }
    const all = await t.request({ method: 'GET', url: '/audit/export?format=ndjson' });
    expect(all.body.trim().split('\n')).toHaveLength(total);

    expectProblem(await t.request({ method: 'GET', url: '/audit/export?format=xml' }), 400, 'validation_failed', 'format');
    expectProblem(await t.request({ method: 'GET', url: '/audit/export' }), 400, 'validation_failed', 'format');
    expectProblem(await t.request({ method: 'GET', url: '/audit/export?format=csv', as: odd.key }), 403, 'forbidden');
  });

  it('audits changes made through MCP as the caller, and records a tool the caller may not call', async () => {
    const client = await connectInMemory(t);
    const made = await callOk<{ id: string }>(client, 'create_persona', { name: 'Via MCP', instructions: 'Hi.' });
    expect((await list(`?targetId=${made.id}`)).data).toEqual([expect.objectContaining({ action: 'persona.create', actor: expect.objectContaining({ type: 'key', id: adminKeyId }) })]);
    await client.close();

    const reader = await key('mcp-reader', ['read']);
    const readOnly = await connectInMemory(t, reader.key);
    expect(await callError(readOnly, 'delete_persona', { id: made.id })).toMatch(/needs the "write" scope/);
    await readOnly.close();
    expect((await list(`?actor=${reader.id}`)).data).toEqual([
      expect.objectContaining({ action: 'request.denied', outcome: 'denied', target: { type: 'mcp_tool', id: 'delete_persona' } }),
    ]);
    // Asking a persona is conversation: no event.
    const before = (await list('?limit=100')).data.length;
    await callOk(await connectInMemory(t), 'ask_persona', { personaId: made.id, message: 'Hello?' });
    expect((await list('?limit=100')).data.length).toBe(before);
  });

  it('deletes events past the retention window, in batches, and keeps the rest', async () => {
    const retention = t.ctx.config.auditRetentionDays;
    const old = new Date(clock.now().getTime() - (retention + 1) * 86_400_000);
    const ids = randomIds;
    const actor = systemActor(workspaceId);
    const rows = Array.from({ length: 2300 }, () => auditRow(ids, { now: () => old }, actor, { action: 'persona.update', target: { type: 'persona', id: 'per_old' } }));
    for (let i = 0; i < rows.length; i += 500) await t.ctx.db.kysely.insertInto('audit_events').values(rows.slice(i, i + 500)).execute();
    const count = async () => Number((await t.ctx.db.kysely.selectFrom('audit_events').select((eb) => eb.fn.countAll().as('n')).executeTakeFirstOrThrow()).n);
    const before = await count();
    expect(await t.ctx.services.audit.purgeExpired()).toBe(2300);
    expect(await count()).toBe(before - 2300);
    // What is within the window stays, up to its last day.
    clock.advance(retention * 86_400_000 - 60_000);
    expect(await t.ctx.services.audit.purgeExpired()).toBe(0);
    clock.advance(24 * 3_600_000);
    expect(await t.ctx.services.audit.purgeExpired()).toBeGreaterThan(0);
  });
});

describe.each(testBackends())('a change and its audit event on $kind', { timeout: 60_000 }, (backend) => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp({ backend });
    // A test-only refusal on this database: any event of these actions cannot be written.
    const refused = "('persona.delete', 'session.delete', 'knowledge.create', 'ab_test.create')";
    if (backend.kind === 'sqlite') {
      await sql.raw(`CREATE TRIGGER refuse_audit BEFORE INSERT ON audit_events WHEN NEW.action IN ${refused} BEGIN SELECT RAISE(ABORT, 'audit refused'); END`).execute(t.ctx.db.kysely);
    } else {
      await sql.raw(`CREATE FUNCTION refuse_audit() RETURNS trigger AS $$ BEGIN IF NEW.action IN ${refused} THEN RAISE EXCEPTION 'audit refused'; END IF; RETURN NEW; END $$ LANGUAGE plpgsql`).execute(t.ctx.db.kysely);
      await sql.raw('CREATE TRIGGER refuse_audit BEFORE INSERT ON audit_events FOR EACH ROW EXECUTE FUNCTION refuse_audit()').execute(t.ctx.db.kysely);
    }
  });
  afterAll(async () => t?.close());

  it('rolls the change back when its event cannot be written', async () => {
    const p = await createPersona(t);
    expect((await t.request({ method: 'DELETE', url: `/personas/${p.id}` })).statusCode).toBe(500);
    expect((await t.request({ method: 'GET', url: `/personas/${p.id}` })).statusCode).toBe(200);

    const asked = (await t.request({ method: 'POST', url: '/query', body: { personaId: p.id, message: 'Hi' } })).json();
    expect((await t.request({ method: 'DELETE', url: `/sessions/${asked.sessionId}` })).statusCode).toBe(500);
    expect((await t.request({ method: 'GET', url: `/sessions/${asked.sessionId}` })).statusCode).toBe(200);

    expect((await t.request({ method: 'POST', url: '/knowledge', body: { kind: 'text', name: 'Never', content: 'Never stored.' } })).statusCode).toBe(500);
    expect((await t.request({ method: 'GET', url: '/knowledge' })).json().data).toEqual([]);

    const other = await createPersona(t, { name: 'B' });
    expect((await t.request({ method: 'POST', url: '/business/ab-tests', body: { name: 'AB', personaA: p.id, personaB: other.id } })).statusCode).toBe(500);
    expect((await t.request({ method: 'GET', url: '/business/ab-tests' })).json().data).toEqual([]);

    // And an event that can be written lands with its change.
    expect((await t.request({ method: 'PUT', url: `/personas/${p.id}`, body: { name: 'Changed' } })).statusCode).toBe(200);
    const events = await t.ctx.db.kysely.selectFrom('audit_events').select(['action', 'target_id']).where('target_id', '=', p.id).execute();
    expect(events.map((e) => e.action).sort()).toEqual(['persona.create', 'persona.update']);
  });
});
