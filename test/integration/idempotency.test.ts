import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { buildApp } from '../../src/app.js';
import { manualClock } from '../../src/lib/clock.js';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { workspaceOf } from '../helpers/factories.js';
import { expectSealed } from '../helpers/sealed.js';

describe('Idempotency-Key (API.md §1)', () => {
  let t: TestApp;
  const clock = manualClock(new Date('2026-05-01T00:00:00.000Z'));
  beforeEach(async () => {
    clock.set(new Date('2026-05-01T00:00:00.000Z'));
    t = await createTestApp({ overrides: { clock } });
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
    const res = await post('/personas', { name: 'B', instructions: 'i' }, 'k2');
    expect(res.statusCode).toBe(409);
    expect(res.json().code).toBe('conflict');
    expect(await count()).toBe(1);
  });

  it('answers 409 while the first request is still running', async () => {
    await t.ctx.services.idempotency.begin(
      { workspaceId: (await t.request({ method: 'GET', url: '/auth/me' })).json().workspace.id, method: 'POST', path: '/personas', key: 'busy' },
      'whatever',
    );
    const res = await post('/personas', { name: 'A', instructions: 'i' }, 'busy');
    expect(res.statusCode).toBe(409);
  });

  it('scopes keys to the workspace and the path', async () => {
    const other = (await t.ctx.services.auth.createWorkspace('other')).key.key;
    const body = { name: 'Same', instructions: 'i' };
    const a = await post('/personas', body, 'shared');
    const b = await post('/personas', body, 'shared', other);
    expect(b.statusCode).toBe(201);
    expect(b.json().id).not.toBe(a.json().id);
    const key = await post('/auth/api-keys', { name: 'x' }, 'shared');
    expect(key.statusCode).toBe(201);
    expect(key.json().id).toMatch(/^key_/);
  });

  it('keeps responses 24 hours, encrypted at rest (a new key secret included)', async () => {
    const first = await post('/auth/api-keys', { name: 'ci' }, 'key-create');
    const secret = first.json().key as string;
    const rows = await t.ctx.db.kysely.selectFrom('idempotency_keys').selectAll().execute();
    expect(rows).toHaveLength(1);
    expect(JSON.stringify(rows)).not.toContain(secret);
    const sealed = expectSealed(t, rows[0]!.response!, `idempotency:${await workspaceOf(t)}:POST:/auth/api-keys:key-create`);
    expect(JSON.parse(JSON.parse(sealed).body).key).toBe(secret);
    expect((await post('/auth/api-keys', { name: 'ci' }, 'key-create')).json().key).toBe(secret);

    clock.advance(24 * 3600 * 1000 + 1);
    const later = await post('/auth/api-keys', { name: 'ci' }, 'key-create');
    expect(later.statusCode).toBe(201);
    expect(later.json().id).not.toBe(first.json().id);
  });

  it('does not claim the key for a request that fails validation, and rejects malformed keys', async () => {
    // Validation runs before the key is claimed: the corrected request may reuse it.
    expect((await post('/personas', { name: '' }, 'k4')).statusCode).toBe(400);
    const fixed = await post('/personas', { name: 'Fixed', instructions: 'i' }, 'k4');
    expect(fixed.statusCode).toBe(201);
    expect(fixed.headers['idempotent-replayed']).toBeUndefined();

    const res = await t.request({ method: 'POST', url: '/personas', body: { name: 'A', instructions: 'i' }, headers: { 'idempotency-key': 'has space' } });
    expect(res.statusCode).toBe(400);
    expect(res.json().errors[0].path).toBe('Idempotency-Key');
  });

  it('keeps a 4xx answered by the service but forgets a 5xx', async () => {
    const conflict = await post('/auth/api-keys', { name: 'past', expiresAt: '2020-01-01T00:00:00Z' }, 'k5');
    expect(conflict.statusCode).toBe(400);
    const replay = await post('/auth/api-keys', { name: 'past', expiresAt: '2020-01-01T00:00:00Z' }, 'k5');
    expect(replay.headers['idempotent-replayed']).toBe('true');

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
