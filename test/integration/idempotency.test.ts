import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { buildApp } from '../../src/app.js';
import { manualClock } from '../../src/lib/clock.js';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { hashRequestBody } from '../../src/core/idempotency/idempotency.service.js';
import { postgresUrl, testBackends } from '../helpers/postgres.js';
import { workspaceOf } from '../helpers/factories.js';
import { expectProblem } from '../helpers/problem.js';
import { expectSealed } from '../helpers/sealed.js';

describe.each(testBackends())('Idempotency-Key (API.md §1) on $kind', (backend) => {
  let t: TestApp;
  const clock = manualClock(new Date('2026-05-01T00:00:00.000Z'));
  beforeEach(async () => {
    clock.set(new Date('2026-05-01T00:00:00.000Z'));
    t = await createTestApp({ backend, overrides: { clock } });
  });
  afterEach(async () => t.close());

  const post = (url: string, body: unknown, key: string, as?: string) =>
    t.request({ method: 'POST', url, body, as, headers: { 'idempotency-key': key } });
  const count = async () => (await t.request({ method: 'GET', url: '/personas' })).json().data.length;

  it('replays the first response and creates nothing new', async () => {
    const body = { name: 'Once', instructions: 'i' };
    const first = await post('/personas', body, 'abc-1');
    expect(first.statusCode).toBe(201);
    const again = await post('/personas', { instructions: 'i', name: 'Once' }, 'abc-1'); // same body, other key order
    expect(again.statusCode).toBe(201);
    expect(again.json()).toEqual(first.json());
    expect(again.headers.location).toBe(first.headers.location);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(await count()).toBe(1);
  });

  it('treats /api/x and /x as the same path', async () => {
    const body = { name: 'Alias', instructions: 'i' };
    expect((await post('/personas', body, 'k')).statusCode).toBe(201);
    expect((await post('/api/personas', body, 'k')).json().name).toBe('Alias');
    expect(await count()).toBe(1);
  });

  it('answers 409 for the same key with a different body', async () => {
    expect((await post('/personas', { name: 'A', instructions: 'i' }, 'k2')).statusCode).toBe(201);
    expectProblem(await post('/personas', { name: 'B', instructions: 'i' }, 'k2'), 409, 'conflict');
    expect(await count()).toBe(1);
  });

  it('answers 409 while the first request is still running', async () => {
    await t.ctx.services.idempotency.begin(
      { workspaceId: (await t.request({ method: 'GET', url: '/auth/me' })).json().workspace.id, method: 'POST', path: '/personas', key: 'busy' },
      'whatever',
    );
    expectProblem(await post('/personas', { name: 'A', instructions: 'i' }, 'busy'), 409, 'conflict');
    expect(await count()).toBe(0);
  });

  it('scopes keys to the workspace and the path', async () => {
    const other = (await t.ctx.services.auth.createWorkspace('other')).key.key;
    const body = { name: 'Same', instructions: 'i' };
    const a = await post('/personas', body, 'shared');
    expect(a.statusCode).toBe(201);
    const b = await post('/personas', body, 'shared', other);
    expect(b.statusCode).toBe(201);
    expect(b.headers['idempotent-replayed']).toBeUndefined();
    expect(b.json().id).not.toBe(a.json().id);
    const key = await post('/auth/api-keys', { name: 'x' }, 'shared');
    expect(key.statusCode).toBe(201);
    expect(key.json().id).toMatch(/^key_/);
  });

  it('keeps responses 24 hours, encrypted at rest (a new key secret included)', async () => {
    const first = await post('/auth/api-keys', { name: 'ci' }, 'key-create');
    expect(first.statusCode, first.body).toBe(201);
    const secret = first.json().key as string;
    const rows = await t.ctx.db.kysely.selectFrom('idempotency_keys').selectAll().execute();
    expect(rows).toHaveLength(1);
    expect(JSON.stringify(rows)).not.toContain(secret);
    const sealed = expectSealed(t, rows[0]!.response!, `idempotency:${await workspaceOf(t)}:POST:/auth/api-keys:key-create`);
    expect(JSON.parse(JSON.parse(sealed).body).key).toBe(secret);
    expect((await post('/auth/api-keys', { name: 'ci' }, 'key-create')).json().key).toBe(secret);

    // Still the first response at the last millisecond of the 24 hours, a new key one past them.
    clock.advance(24 * 3600 * 1000);
    const last = await post('/auth/api-keys', { name: 'ci' }, 'key-create');
    expect(last.headers['idempotent-replayed']).toBe('true');
    expect(last.json().key).toBe(secret);
    clock.advance(1);
    const later = await post('/auth/api-keys', { name: 'ci' }, 'key-create');
    expect(later.statusCode).toBe(201);
    expect(later.headers['idempotent-replayed']).toBeUndefined();
    expect(later.json().id).not.toBe(first.json().id);
  });

  it('does not claim the key for a request that fails validation, and rejects malformed keys', async () => {
    // Validation runs before the key is claimed: the corrected request may reuse it.
    expect((await post('/personas', { name: '' }, 'k4')).statusCode).toBe(400);
    const fixed = await post('/personas', { name: 'Fixed', instructions: 'i' }, 'k4');
    expect(fixed.statusCode).toBe(201);
    expect(fixed.headers['idempotent-replayed']).toBeUndefined();

    const res = await t.request({ method: 'POST', url: '/personas', body: { name: 'A', instructions: 'i' }, headers: { 'idempotency-key': 'has space' } });
    expectProblem(res, 400, 'validation_failed', 'Idempotency-Key');
  });

  it('keeps a 4xx answered by the service: the same problem, with the first request id', async () => {
    const refused = await post('/auth/api-keys', { name: 'past', expiresAt: '2020-01-01T00:00:00Z' }, 'k5');
    const problem = expectProblem(refused, 400, 'validation_failed', 'expiresAt');
    const replay = await post('/auth/api-keys', { name: 'past', expiresAt: '2020-01-01T00:00:00Z' }, 'k5');
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.statusCode).toBe(400);
    expect(replay.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(replay.json()).toEqual(problem);
    // API.md §1: the body keeps the first request's id; the replay's own is in its header.
    expect(replay.headers['x-request-id']).not.toBe(problem.requestId);
  });

  it('forgets a 5xx answer so the client can retry', async () => {
    const app = await buildApp(t.ctx);
    let calls = 0;
    app.post('/flaky', { config: { idempotent: true } }, async (_req, reply) => {
      calls += 1;
      if (calls === 1) throw new Error('database hiccup');
      return reply.code(201).send({ calls });
    });
    await app.ready();
    const send = () =>
      app.inject({ method: 'POST', url: '/flaky', payload: {}, headers: { authorization: `Bearer ${t.adminKey}`, 'idempotency-key': 'retry-me' } });
    expect((await send()).statusCode).toBe(500);
    const second = await send();
    expect(second.statusCode).toBe(201);
    expect(second.json()).toEqual({ calls: 2 });
    const third = await send();
    expect(third.headers['idempotent-replayed']).toBe('true');
    expect(third.json()).toEqual({ calls: 2 });
    await app.close();
  });

  it('holds for the creates of A/B tests and channels: one object, the same 201 and Location replayed', async () => {
    const a = await post('/personas', { name: 'A', instructions: 'i' }, 'pa');
    const b = await post('/personas', { name: 'B', instructions: 'i' }, 'pb');
    const creates: Array<[string, Record<string, unknown>]> = [
      ['/business/ab-tests', { name: 'Tone', personaA: a.json().id, personaB: b.json().id }],
      ['/business/channels', { type: 'webhook', name: 'Site', personaId: a.json().id, credentials: { secret: 'a-webhook-secret-of-16+' } }],
    ];
    for (const [url, body] of creates) {
      const first = await post(url, body, `create-${url}`);
      expect(first.statusCode, first.body).toBe(201);
      expect(first.headers.location).toBe(`${url}/${first.json().id}`);
      const again = await post(url, body, `create-${url}`);
      expect(again.headers['idempotent-replayed'], url).toBe('true');
      expect(again.json()).toEqual(first.json());
      expect((await t.request({ method: 'GET', url })).json().data, url).toHaveLength(1);
    }
  });

  it('ignores the header on routes that create nothing', async () => {
    const p = (await t.request({ method: 'POST', url: '/personas', body: { name: 'P', instructions: 'i' } })).json();
    const res = await t.request({ method: 'PUT', url: `/personas/${p.id}`, body: { name: 'Q' }, headers: { 'idempotency-key': 'k' } });
    expect(res.statusCode).toBe(200);
    expect(await t.ctx.db.kysely.selectFrom('idempotency_keys').selectAll().execute()).toHaveLength(0);
  });
});

describe.runIf(postgresUrl() !== null)('Idempotency-Key records of instances that died (API.md §13)', () => {
  let t: TestApp;
  beforeEach(async () => {
    t = await createTestApp({ backend: { kind: 'postgres' } });
  });
  afterEach(async () => t.close());

  /** A `running` record of POST /personas with key `key`, as if `owner` had begun it a moment ago. */
  async function runningRecord(key: string, owner: string) {
    await t.ctx.db.kysely
      .insertInto('idempotency_keys')
      .values({
        workspace_id: await workspaceOf(t),
        method: 'POST',
        path: '/personas',
        key,
        request_hash: hashRequestBody({ name: 'Retried', instructions: 'i' }),
        state: 'running',
        status_code: null,
        response: null,
        created_at: new Date().toISOString(),
        owner,
      })
      .execute();
  }
  const lease = (owner: string, untilMs: number) => t.ctx.db.kysely.insertInto('leases').values({ name: `instance:${owner}`, owner, until_ms: untilMs, note: null }).execute();
  const retry = (key: string) => t.request({ method: 'POST', url: '/personas', body: { name: 'Retried', instructions: 'i' }, headers: { 'idempotency-key': key } });

  it('leaves a live instance its request (409), and runs again at once one whose instance died or is this one before a restart', async () => {
    await runningRecord('alive-1', 'host-a:/data');
    await lease('host-a:/data', Date.now() + 60_000);
    expectProblem(await retry('alive-1'), 409, 'conflict');

    await runningRecord('dead-1', 'host-b:/data');
    await lease('host-b:/data', Date.now() - 1);
    expect((await retry('dead-1')).statusCode).toBe(201);

    await runningRecord('gone-1', 'host-c:/data');
    expect((await retry('gone-1')).statusCode).toBe(201);

    // This instance's own record that it is not running: its previous run died with it.
    const self = (await t.ctx.db.kysely.selectFrom('leases').select('owner').where('name', 'like', 'instance:%').executeTakeFirstOrThrow()).owner;
    await runningRecord('mine-1', self);
    expect((await retry('mine-1')).statusCode).toBe(201);
  });
});
