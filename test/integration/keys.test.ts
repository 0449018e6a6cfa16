import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { manualClock } from '../../src/lib/clock.js';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { testBackends } from '../helpers/postgres.js';
import { expectProblem } from '../helpers/problem.js';

describe.each(testBackends())('API keys (API.md §2) on $kind', (backend) => {
  let t: TestApp;
  const clock = manualClock(new Date('2026-03-01T12:00:00.000Z'));
  beforeEach(async () => {
    clock.set(new Date('2026-03-01T12:00:00.000Z'));
    t = await createTestApp({ backend, overrides: { clock } });
  });
  afterEach(async () => t.close());

  const createKey = async (body: Record<string, unknown>, as?: string) => {
    const res = await t.request({ method: 'POST', url: '/auth/api-keys', body, as });
    expect(res.statusCode, res.body).toBe(201);
    return res.json() as { id: string; key: string; scopes: string[]; prefix: string; status: string };
  };
  /** GET /auth/me as `key`; a missing key must fail here, not fall back to the admin key. */
  const me = (key: string) => {
    expect(key).toMatch(/^sb_[0-9A-Za-z]{40}$/);
    return t.request({ method: 'GET', url: '/auth/me', as: key });
  };
  /** PUT /auth/api-keys/:id (rotate) expecting 200 and a new secret. */
  const rotate = async (id: string, body: Record<string, unknown> = {}) => {
    const res = await t.request({ method: 'PUT', url: `/auth/api-keys/${id}`, body });
    expect(res.statusCode, res.body).toBe(200);
    return res.json() as { id: string; key: string; rotatedAt: string };
  };

  it('creates a key whose secret has the documented format and is shown only on create', async () => {
    const res = await t.request({ method: 'POST', url: '/auth/api-keys', body: { name: 'ci' } });
    expect(res.statusCode).toBe(201);
    const key = res.json();
    expect(key.key).toMatch(/^sb_[0-9A-Za-z]{40}$/);
    expect(key).toMatchObject({ name: 'ci', scopes: ['read', 'write'], status: 'active', prefix: key.key.slice(0, 10) });
    expect(key.id).toMatch(/^key_/);
    expect(res.headers.location).toBe(`/auth/api-keys/${key.id}`);

    const list = await t.request({ method: 'GET', url: '/auth/api-keys' });
    expect(list.statusCode).toBe(200);
    expect(list.body).not.toContain(key.key);
    expect(list.json().data.map((k: { id: string }) => k.id)).toContain(key.id);
    for (const k of list.json().data) expect(k).not.toHaveProperty('key');
  });

  it('stores only a SHA-256 hash of the secret', async () => {
    const { key } = await createKey({ name: 'stored' });
    const rows = await t.ctx.db.kysely.selectFrom('api_keys').selectAll().execute();
    expect(JSON.stringify(rows)).not.toContain(key);
    const { createHash } = await import('node:crypto');
    expect(rows.map((r) => r.hash)).toContain(createHash('sha256').update(key).digest('hex'));
  });

  it('answers /auth/me with the calling key and its workspace', async () => {
    const { id, key } = await createKey({ name: 'reader', scopes: ['read'] });
    const res = await me(key);
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({ key: { id, name: 'reader', scopes: ['read'] }, workspace: { name: 'default' } });
  });

  it('enforces scopes: admin implies write implies read', async () => {
    const reader = await createKey({ name: 'r', scopes: ['read'] });
    const writer = await createKey({ name: 'w', scopes: ['write'] });
    const admin = await createKey({ name: 'a', scopes: ['admin'] });
    expect([reader.scopes, writer.scopes, admin.scopes]).toEqual([['read'], ['write'], ['admin']]); // each holds only what it was given
    const read = (key: string) => t.request({ method: 'GET', url: '/personas', as: key });
    const write = (key: string, name: string) => t.request({ method: 'POST', url: '/personas', as: key, body: { name, instructions: 'b' } });
    const manage = (key: string) => t.request({ method: 'GET', url: '/auth/api-keys', as: key });

    expect((await read(reader.key)).statusCode).toBe(200);
    expectProblem(await write(reader.key, 'by reader'), 403, 'forbidden');
    expectProblem(await manage(reader.key), 403, 'forbidden');

    expect((await read(writer.key)).statusCode).toBe(200);
    expect((await write(writer.key, 'by writer')).statusCode).toBe(201);
    expectProblem(await manage(writer.key), 403, 'forbidden');
    expectProblem(await t.request({ method: 'POST', url: '/auth/api-keys', as: writer.key, body: { name: 'x', scopes: ['read'] } }), 403, 'forbidden');

    // A key holding `admin` alone reads, writes and manages keys.
    expect((await read(admin.key)).statusCode).toBe(200);
    const created = await write(admin.key, 'by admin');
    expect(created.statusCode, created.body).toBe(201);
    expect((await manage(admin.key)).statusCode).toBe(200);
    expect((await read(admin.key)).json().data.map((p: { name: string }) => p.name).sort()).toEqual(['by admin', 'by writer']);
  });

  it('lets a key grant only scopes it has', async () => {
    const admin = await createKey({ name: 'a2', scopes: ['admin'] });
    // `admin` alone implies everything, so it may grant read and write.
    expect((await t.request({ method: 'POST', url: '/auth/api-keys', as: admin.key, body: { name: 'x', scopes: ['read', 'write', 'admin'] } })).statusCode).toBe(201);
    // Any member reaches key creation now (API.md §14; people's keys: test/integration/members.test.ts),
    // so the service decides: a service key without admin makes no key at all, over HTTP or not.
    const writer = await createKey({ name: 'w', scopes: ['read', 'write'] });
    expectProblem(await t.request({ method: 'POST', url: '/auth/api-keys', as: writer.key, body: { name: 'y', scopes: ['read'] } }), 403, 'forbidden');
    const actor = (await t.ctx.services.auth.authenticate(writer.key))!;
    await expect(t.ctx.services.auth.createKey(actor, { name: 'y', scopes: ['admin'] })).rejects.toMatchObject({ status: 403 });
    await expect(t.ctx.services.auth.createKey(actor, { name: 'y', scopes: ['read'] })).rejects.toMatchObject({ status: 403 });
  });

  it('expires keys at expiresAt and refuses a past expiry', async () => {
    expectProblem(await t.request({ method: 'POST', url: '/auth/api-keys', body: { name: 'old', expiresAt: '2026-02-01T00:00:00Z' } }), 400, 'validation_failed', 'expiresAt');

    const key = await createKey({ name: 'short', expiresAt: '2026-03-01T13:00:00Z' });
    expect((await me(key.key)).statusCode).toBe(200);
    clock.advance(60 * 60 * 1000);
    const res = await me(key.key);
    expect(res.statusCode).toBe(401);
    expect(res.headers['www-authenticate']).toMatch(/^Bearer/);
    const list = await t.request({ method: 'GET', url: '/auth/api-keys' });
    expect(list.json().data.find((k: { id: string }) => k.id === key.id).status).toBe('expired');
  });

  it('rotates: same id, new secret; without grace the old secret stops at once', async () => {
    const key = await createKey({ name: 'rot' });
    expect((await me(key.key)).statusCode).toBe(200); // warm the auth cache
    const rotated = await rotate(key.id);
    expect(rotated.id).toBe(key.id);
    expect(rotated.key).not.toBe(key.key);
    expect(rotated.rotatedAt).toBe('2026-03-01T12:00:00.000Z');
    expect((await me(key.key)).statusCode).toBe(401);
    expect((await me(rotated.key)).statusCode).toBe(200);
  });

  it('rotates with a grace period; a second rotation ends the older secret at once', async () => {
    const key = await createKey({ name: 'grace' });
    const first = await rotate(key.id, { gracePeriodSeconds: 300 });
    expect((await me(key.key)).statusCode).toBe(200);
    expect((await me(first.key)).statusCode).toBe(200);
    clock.advance(299_000);
    expect((await me(key.key)).statusCode).toBe(200);
    clock.advance(2_000);
    expect((await me(key.key)).statusCode).toBe(401);

    const second = await rotate(key.id, { gracePeriodSeconds: 300 });
    const third = await rotate(key.id, { gracePeriodSeconds: 300 });
    expect((await me(second.key)).statusCode).toBe(200); // the one replaced last: in its grace period
    expect((await me(first.key)).statusCode).toBe(401); // older: ended at once
    expect((await me(third.key)).statusCode).toBe(200);
  });

  it('validates the grace period range', async () => {
    const key = await createKey({ name: 'g' });
    for (const gracePeriodSeconds of [-1, 604_801, 1.5, '10']) {
      expectProblem(await t.request({ method: 'PUT', url: `/auth/api-keys/${key.id}`, body: { gracePeriodSeconds } }), 400, 'validation_failed', 'gracePeriodSeconds');
    }
  });

  it('revokes at once, even from the auth cache, and a revoked key cannot be rotated', async () => {
    const key = await createKey({ name: 'rev' });
    expect((await me(key.key)).statusCode).toBe(200);
    expect((await t.request({ method: 'DELETE', url: `/auth/api-keys/${key.id}` })).statusCode).toBe(204);
    expect((await me(key.key)).statusCode).toBe(401);
    expectProblem(await t.request({ method: 'PUT', url: `/auth/api-keys/${key.id}`, body: {} }), 409, 'conflict');
    const list = await t.request({ method: 'GET', url: '/auth/api-keys' });
    expect(list.json().data.find((k: { id: string }) => k.id === key.id).status).toBe('revoked');
  });

  it('refuses to revoke the last active admin key, but allows it once another exists', async () => {
    const meRes = (await me(t.adminKey)).json();
    const res = await t.request({ method: 'DELETE', url: `/auth/api-keys/${meRes.key.id}` });
    expect(res.statusCode).toBe(409);
    expect(res.json().code).toBe('conflict');
    const other = await createKey({ name: 'admin2', scopes: ['admin'] });
    expect((await t.request({ method: 'DELETE', url: `/auth/api-keys/${meRes.key.id}` })).statusCode).toBe(204);
    expect((await me(t.adminKey)).statusCode).toBe(401);
    // now `other` is the last one
    expect((await t.request({ method: 'DELETE', url: `/auth/api-keys/${other.id}`, as: other.key })).statusCode).toBe(409);
  });

  it('keeps lastUsedAt in memory and flushes it without a write per request', async () => {
    const key = await createKey({ name: 'used' });
    clock.advance(5_000);
    expect((await me(key.key)).statusCode).toBe(200);
    const row = await t.ctx.db.kysely.selectFrom('api_keys').select('last_used_at').where('id', '=', key.id).executeTakeFirstOrThrow();
    expect(row.last_used_at).toBeNull(); // not written on the request path
    const listed = (await t.request({ method: 'GET', url: '/auth/api-keys' })).json();
    expect(listed.data.find((k: { id: string }) => k.id === key.id).lastUsedAt).toBe('2026-03-01T12:00:05.000Z');
    await t.ctx.services.auth.flushUsage();
    const after = await t.ctx.db.kysely.selectFrom('api_keys').select('last_used_at').where('id', '=', key.id).executeTakeFirstOrThrow();
    expect(after.last_used_at).toBe('2026-03-01T12:00:05.000Z');
  });

  it('treats keys of another workspace as missing (404), and a foreign rotate or revoke changes nothing', async () => {
    const other = await t.ctx.services.auth.createWorkspace('other');
    const key = await createKey({ name: 'mine' });
    const ownersView = async () => (await t.request({ method: 'GET', url: '/auth/api-keys' })).json().data.find((k: { id: string }) => k.id === key.id);
    const before = await ownersView();
    expect(before).toMatchObject({ status: 'active', rotatedAt: null });
    for (const [method, body] of [['PUT', {}], ['PUT', { gracePeriodSeconds: 60 }], ['DELETE', undefined]] as const) {
      expectProblem(await t.request({ method, url: `/auth/api-keys/${key.id}`, body, as: other.key.key }), 404, 'not_found');
    }
    // Re-read as the owner: neither rotated nor revoked, and the owner's secret still works.
    expect(await ownersView()).toEqual(before);
    const stillMine = await me(key.key);
    expect(stillMine.statusCode, stillMine.body).toBe(200);
    expect(stillMine.json().key.id).toBe(key.id);
    const list = (await t.request({ method: 'GET', url: '/auth/api-keys', as: other.key.key })).json();
    expect(list.data.map((k: { id: string }) => k.id)).toEqual([other.key.id]);
  });

  it('pages the key list with a cursor', async () => {
    for (let i = 0; i < 4; i++) {
      clock.advance(1);
      await createKey({ name: `k${i}` });
    }
    const first = (await t.request({ method: 'GET', url: '/auth/api-keys?limit=2' })).json();
    expect(first.data.map((k: { name: string }) => k.name)).toEqual(['k3', 'k2']);
    const second = (await t.request({ method: 'GET', url: `/auth/api-keys?limit=2&cursor=${first.nextCursor}` })).json();
    expect(second.data.map((k: { name: string }) => k.name)).toEqual(['k1', 'k0']);
    const third = (await t.request({ method: 'GET', url: `/auth/api-keys?limit=2&cursor=${second.nextCursor}` })).json();
    expect(third.data.map((k: { name: string }) => k.name)).toEqual(['bootstrap']);
    expect(third.nextCursor).toBeNull();
  });
});

describe.each(testBackends())('SWITCHBOARD_ADMIN_KEY on $kind', (backend) => {
  it('ensures that exact secret is an admin key of the default workspace', async () => {
    const secret = `sb_${'A'.repeat(40)}`;
    const t = await createTestApp({ backend, env: { SWITCHBOARD_ADMIN_KEY: secret } });
    try {
      const res = await t.request({ method: 'GET', url: '/auth/me', as: secret });
      expect(res.statusCode).toBe(200);
      expect(res.json()).toMatchObject({ key: { scopes: ['read', 'write', 'admin'] }, workspace: { name: 'default' } });
      // Running bootstrap again (a restart) neither duplicates it nor creates a bootstrap key.
      expect(await t.ctx.services.auth.bootstrap(secret)).toBeNull();
      const keys = (await t.request({ method: 'GET', url: '/auth/api-keys', as: secret })).json();
      expect(keys.data).toHaveLength(1);
    } finally {
      await t.close();
    }
  });
});
