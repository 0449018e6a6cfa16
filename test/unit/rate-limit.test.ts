// The per-key rate limit's windows (API.md §1), on a bare fastify app with a movable clock: a window
// ends and a new one starts with the full budget; past `maxTracked` the oldest window is forgotten.
// The contract on the real app (headers on every response, 429 with Retry-After, per key and per
// address, unknown routes) is in test/integration/errors.test.ts.
import Fastify, { type FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { errorHandler } from '../../src/http/error-handler.js';
import { type RateClaims, registerRateLimit, registerSharedRateLimit } from '../../src/http/rate-limit.js';

describe('rate limit windows', () => {
  let app: FastifyInstance | undefined;
  afterEach(async () => app?.close());

  async function limited(options: { max: number; maxTracked?: number }, clock: { ms: number }) {
    app = Fastify();
    app.decorateRequest('actor', null);
    app.setErrorHandler(errorHandler);
    registerRateLimit(app, { ...options, windowMs: 60_000, now: () => clock.ms });
    app.get('/', async () => 'ok');
    await app.ready();
    return (ip: string) => app!.inject({ method: 'GET', url: '/', remoteAddress: ip });
  }

  it('counts down a window and starts a full one when it ends', async () => {
    const clock = { ms: 1_000_000 };
    const get = await limited({ max: 2 }, clock);
    expect((await get('10.0.0.1')).headers).toMatchObject({ 'ratelimit-limit': '2', 'ratelimit-remaining': '1', 'ratelimit-reset': '60' });
    clock.ms += 20_500;
    expect((await get('10.0.0.1')).headers).toMatchObject({ 'ratelimit-remaining': '0', 'ratelimit-reset': '40' });
    const refused = await get('10.0.0.1');
    expect(refused.statusCode).toBe(429);
    expect(refused.headers['retry-after']).toBe('40');
    clock.ms += 39_500; // the window's last millisecond has passed
    const again = await get('10.0.0.1');
    expect(again.statusCode).toBe(200);
    expect(again.headers).toMatchObject({ 'ratelimit-remaining': '1', 'ratelimit-reset': '60' });
  });

  it('forgets the oldest window past maxTracked, and only then', async () => {
    const clock = { ms: 1_000_000 };
    const get = await limited({ max: 1, maxTracked: 2 }, clock);
    expect((await get('10.0.0.1')).statusCode).toBe(200);
    expect((await get('10.0.0.2')).statusCode).toBe(200);
    expect((await get('10.0.0.1')).statusCode).toBe(429); // two tracked: still counted
    expect((await get('10.0.0.3')).statusCode).toBe(200); // a third: the oldest (10.0.0.1) goes
    expect((await get('10.0.0.2')).statusCode).toBe(429);
    expect((await get('10.0.0.1')).statusCode).toBe(200);
  });
});

describe('rate limit shared by instances (registerSharedRateLimit)', () => {
  let app: FastifyInstance | undefined;
  afterEach(async () => app?.close());

  /** The database's side of `rate_claim`, in memory: one window per key, handed out a claim at a time. */
  function budget(clock: { ms: number }) {
    const windows = new Map<string, { started: number; used: number }>();
    const calls: number[] = [];
    const claims: RateClaims = async (key, nowMs, windowMs, max, want) => {
      calls.push(want);
      let w = windows.get(key);
      if (!w || w.started + windowMs <= nowMs) windows.set(key, (w = { started: nowMs, used: 0 }));
      const granted = Math.max(0, Math.min(want, max - w.used));
      w.used += granted;
      return { startedMs: w.started, used: w.used, granted };
    };
    return { claims, calls, clock };
  }

  async function limited(max: number, claims: RateClaims, clock: { ms: number }, onClaimError?: (err: unknown) => void) {
    app = Fastify();
    app.decorateRequest('actor', null);
    app.setErrorHandler(errorHandler);
    registerSharedRateLimit(app, { max, windowMs: 60_000, now: () => clock.ms, claims, ...(onClaimError ? { onClaimError } : {}) });
    app.get('/', async () => 'ok');
    await app.ready();
    return () => app!.inject({ method: 'GET', url: '/', remoteAddress: '10.0.0.1' });
  }

  it('claims 1 % of the limit at a time, refuses from memory once nothing is left, and starts a full window when it ends', async () => {
    const clock = { ms: 1_000_000 };
    const shared = budget(clock);
    const get = await limited(300, shared.claims, clock);
    const statuses: number[] = [];
    for (let i = 0; i < 310; i++) statuses.push((await get()).statusCode);
    expect(statuses.filter((s) => s === 200)).toHaveLength(300);
    expect(statuses.slice(300)).toEqual(Array(10).fill(429));
    // 100 claims of 3, one that found nothing left; no claim for the refusals after it.
    expect(shared.calls).toHaveLength(101);
    expect(shared.calls.every((want) => want === 3)).toBe(true);
    const refused = await get();
    expect(refused.headers).toMatchObject({ 'ratelimit-remaining': '0', 'retry-after': '60' });
    clock.ms += 60_000;
    expect((await get()).statusCode).toBe(200);
  });

  it('admits requests while the budget cannot be read, and says so', async () => {
    const clock = { ms: 1_000_000 };
    const errors: unknown[] = [];
    const get = await limited(2, async () => Promise.reject(new Error('connection refused')), clock, (err) => errors.push(err));
    const statuses = [await get(), await get(), await get()].map((r) => r.statusCode);
    expect(statuses).toEqual([200, 200, 200]);
    expect(errors).toHaveLength(3);
  });
});
