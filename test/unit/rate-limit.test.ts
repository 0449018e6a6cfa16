// The per-key rate limit's windows (API.md §1), on a bare fastify app with a movable clock: a window
// ends and a new one starts with the full budget; past `maxTracked` the oldest window is forgotten.
// The contract on the real app (headers on every response, 429 with Retry-After, per key and per
// address, unknown routes) is in test/integration/errors.test.ts.
import Fastify, { type FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { errorHandler } from '../../src/http/error-handler.js';
import { registerRateLimit } from '../../src/http/rate-limit.js';

describe('rate limit windows', () => {
  let app: FastifyInstance | undefined;
  afterEach(async () => app?.close());

  async function limited(options: { max: number; maxTracked?: number }, clock: { ms: number }) {
    app = Fastify();
    app.decorateRequest('principal', null);
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
