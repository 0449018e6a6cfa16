import type { FastifyInstance } from 'fastify';
import { RateLimitedError } from '../errors.js';

export interface RateLimitOptions {
  /** Requests per window and key; beyond it → 429. */
  max: number;
  windowMs?: number;
  /** Keys tracked at most; past it the oldest window is forgotten (memory stays bounded under many addresses). */
  maxTracked?: number;
  /** Milliseconds since the epoch (tests move it). */
  now?: () => number;
}

interface Window {
  count: number;
  resetAtMs: number;
}

/**
 * The per-key rate limit of API.md §1: a fixed window per API key (per client address for requests
 * without a valid key), started by the key's first request. Every response carries
 * `RateLimit-Limit`, `RateLimit-Remaining` and `RateLimit-Reset` (seconds until the window ends);
 * past the limit the request is refused with 429 and `Retry-After`, unknown routes included.
 *
 * One callback hook between authentication's two steps (auth-hooks.ts), answered from memory with
 * no promise: @fastify/rate-limit's async hooks and promise-wrapped store cost ~3 µs a request
 * (issue 18, pinned `GET /personas`). Windows all last `windowMs` and enter the map when they
 * start, so the map is ordered by end: ended windows are dropped from its front as new ones start,
 * and at `maxTracked` the oldest goes first.
 */
export function registerRateLimit(app: FastifyInstance, options: RateLimitOptions): void {
  const { max } = options;
  const windowMs = options.windowMs ?? 60_000;
  const maxTracked = options.maxTracked ?? 100_000;
  const now = options.now ?? Date.now;
  const windows = new Map<string, Window>();

  function start(key: string, nowMs: number): Window {
    windows.delete(key);
    for (const [oldest, w] of windows) {
      if (w.resetAtMs > nowMs && windows.size < maxTracked) break;
      windows.delete(oldest);
    }
    const w = { count: 0, resetAtMs: nowMs + windowMs };
    windows.set(key, w);
    return w;
  }

  app.addHook('onRequest', (request, reply, done) => {
    const nowMs = now();
    const key = request.principal ? `key:${request.principal.keyId}` : `ip:${request.ip}`;
    let w = windows.get(key);
    if (w === undefined || w.resetAtMs <= nowMs) w = start(key, nowMs);
    w.count++;
    const resetSeconds = Math.ceil((w.resetAtMs - nowMs) / 1000);
    reply.header('ratelimit-limit', max);
    reply.header('ratelimit-remaining', Math.max(0, max - w.count));
    reply.header('ratelimit-reset', resetSeconds);
    done(w.count > max ? new RateLimitedError(Math.max(1, resetSeconds)) : undefined);
  });
}
