import type { FastifyInstance, FastifyReply } from 'fastify';
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
    const key = request.actor ? `key:${request.actor.id}` : `ip:${request.ip}`;
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

/** What one claim of a shared window gave: the window's start, what it has handed out in all, and this claim's share. */
export interface RateClaim {
  startedMs: number;
  used: number;
  granted: number;
}

/** Takes up to `want` requests of `key`'s window (one started at `nowMs` when none is running) from the budget every instance shares. */
export type RateClaims = (key: string, nowMs: number, windowMs: number, max: number, want: number) => Promise<RateClaim>;

interface SharedWindow {
  resetAtMs: number;
  /** Requests this instance claimed and has not spent yet. */
  tokens: number;
  /** What the window had handed out to every instance at the last claim. */
  used: number;
  /** Nothing was left at the last claim: refused until the window ends. */
  exhausted: boolean;
  /** The claim in flight; requests arriving meanwhile wait for it. */
  claiming: Promise<void> | null;
}

/**
 * The same limit as one budget across every instance on a PostgreSQL database (API.md §13). Each
 * instance claims its key's requests from the database a few at a time (1 % of the limit, at least
 * one) and spends them from memory, so a key's requests cost a round trip one time in that many;
 * past the limit, refusals come from memory until the window ends. No instance can admit more than
 * it claimed, so the instances together never exceed the limit; requests claimed and not spent by
 * the window's end (at most a claim's worth per instance) are the most it can fall short by.
 * Windows start at the key's first request on any instance, as `registerRateLimit`'s do. The
 * database being unreachable must not stop traffic (DESIGN.md): requests are then admitted, with a
 * warning, until a claim succeeds again.
 */
export function registerSharedRateLimit(app: FastifyInstance, options: RateLimitOptions & { claims: RateClaims; onClaimError?: (err: unknown) => void }): void {
  const { max, claims } = options;
  const windowMs = options.windowMs ?? 60_000;
  const maxTracked = options.maxTracked ?? 100_000;
  const now = options.now ?? Date.now;
  const want = Math.max(1, Math.floor(max / 100));
  const windows = new Map<string, SharedWindow>();

  function answer(w: SharedWindow, reply: FastifyReply, nowMs: number, done: (err?: Error) => void) {
    const admitted = w.tokens > 0;
    if (admitted) w.tokens--;
    const resetSeconds = Math.max(0, Math.ceil((w.resetAtMs - nowMs) / 1000));
    reply.header('ratelimit-limit', max);
    // Spent by every instance as far as this one knows: handed out, less what it still holds.
    reply.header('ratelimit-remaining', Math.max(0, max - (w.used - w.tokens)));
    reply.header('ratelimit-reset', resetSeconds);
    done(admitted ? undefined : new RateLimitedError(Math.max(1, resetSeconds)));
  }

  function claim(key: string, w: SharedWindow, nowMs: number): Promise<void> {
    w.claiming ??= claims(key, nowMs, windowMs, max, want)
      .then(
        (got) => {
          w.resetAtMs = got.startedMs + windowMs;
          w.used = got.used;
          w.tokens += got.granted;
          w.exhausted = got.granted === 0;
        },
        (err: unknown) => {
          options.onClaimError?.(err);
          // Admit this request rather than refuse every request while the database is away.
          w.tokens += 1;
          w.used += 1;
        },
      )
      .finally(() => {
        w.claiming = null;
      });
    return w.claiming;
  }

  function decide(key: string, reply: FastifyReply, done: (err?: Error) => void) {
    const nowMs = now();
    let w = windows.get(key);
    if (w !== undefined && w.resetAtMs <= nowMs && w.claiming === null) {
      windows.delete(key);
      w = undefined;
    }
    if (w === undefined) {
      if (windows.size >= maxTracked) windows.delete(windows.keys().next().value!);
      w = { resetAtMs: nowMs + windowMs, tokens: 0, used: 0, exhausted: false, claiming: null };
      windows.set(key, w);
    }
    if (w.tokens > 0 || w.exhausted) return answer(w, reply, nowMs, done);
    const current = w;
    void claim(key, current, nowMs).then(() => {
      // Another request may have taken what this claim brought: then claim again, unless nothing is left.
      if (current.tokens > 0 || current.exhausted) answer(current, reply, now(), done);
      else decide(key, reply, done);
    });
  }

  app.addHook('onRequest', (request, reply, done) => {
    decide(request.actor ? `key:${request.actor.id}` : `ip:${request.ip}`, reply, done);
  });
}
