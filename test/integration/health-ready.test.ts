/**
 * API.md §13: `GET /health/ready` is what a load balancer asks. 200 while the instance can serve;
 * 503 `draining` once it is stopping (while in-flight answers still finish: test/e2e/drain.test.ts),
 * 503 `unavailable` while its database does not answer. `GET /health` stays the liveness check.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { healthRoutes } from '../../src/http/health.routes.js';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { postgresUrl, testBackends, withClient } from '../helpers/postgres.js';

describe.each(testBackends())('GET /health/ready on $kind', (backend) => {
  let t: TestApp | undefined;
  afterEach(async () => {
    await t?.close();
    t = undefined;
  });

  it('answers 200 ready, never cached, while the instance can serve', async () => {
    t = await createTestApp({ backend });
    const res = await t.request({ method: 'GET', url: '/health/ready', as: null });
    expect(res.statusCode).toBe(200);
    expect(res.headers['cache-control']).toBe('no-store');
    expect(res.json()).toEqual({ status: 'ready', database: 'ok', databaseKind: backend.kind });
  });

  it('answers 503 draining while the server stops (the route as the stopping app registers it)', async () => {
    // The app's own instance turns when close() starts, after which inject cannot reach it; the
    // drain itself is tested on the built server (test/e2e/drain.test.ts).
    t = await createTestApp({ backend, extend: (app, ctx) => void app.register(healthRoutes(ctx, () => true), { prefix: '/stopping' }) });
    // Registered outside the app's public group, so it takes a key here.
    const res = await t.request({ method: 'GET', url: '/stopping/health/ready' });
    expect(res.statusCode).toBe(503);
    expect(res.headers['cache-control']).toBe('no-store');
    expect(res.json()).toEqual({ status: 'draining', database: 'ok', databaseKind: backend.kind });
  });
});

describe.each(testBackends().filter((b) => b.kind === 'postgres'))('GET /health/ready on $kind, database down', (backend) => {
  let t: TestApp | undefined;
  afterEach(async () => {
    await t?.close();
    t = undefined;
  });

  it('answers 503 unavailable while the database refuses connections, and 200 again once it is back', async () => {
    t = await createTestApp({ backend });
    const url = t.ctx.config.database!.url;
    const name = new URL(url).pathname.slice(1);
    const admin = postgresUrl()!;
    const allow = (on: boolean) => withClient(admin, (c) => c.query(`ALTER DATABASE "${name}" WITH ALLOW_CONNECTIONS ${on}`));

    await allow(false);
    try {
      await withClient(admin, (c) => c.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()', [name]));
      // A pooled connection may be told of its end only when it is next used: ask until the pool has none left.
      await expect
        .poll(async () => (await t!.request({ method: 'GET', url: '/health/ready', as: null })).json(), { timeout: 10_000 })
        .toEqual({ status: 'unavailable', database: 'error', databaseKind: 'postgres' });
      const res = await t.request({ method: 'GET', url: '/health/ready', as: null });
      expect(res.statusCode).toBe(503);
      expect((await t.request({ method: 'GET', url: '/health', as: null })).statusCode).toBe(503);
    } finally {
      await allow(true);
    }
    await expect.poll(async () => (await t!.request({ method: 'GET', url: '/health/ready', as: null })).statusCode, { timeout: 10_000 }).toBe(200);
  });
});
