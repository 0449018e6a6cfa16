/**
 * The rate limit's shared budget on PostgreSQL (migration 017's `rate_claim`): one round trip takes
 * a key's window and up to `want` requests of it for this instance to spend from memory.
 */
import type { RateClaim, RateClaims } from '../../http/rate-limit.js';
import type { SqlBackend } from '../backend.js';

export function createPostgresRateClaims({ prepare }: SqlBackend): RateClaims {
  const claim = prepare<{ o_started: number; o_used: number; o_granted: number }>(
    'SELECT o_started, o_used, o_granted FROM rate_claim(?::text, ?::bigint, ?::bigint, ?::bigint, ?::bigint)',
  );
  return async (key, nowMs, windowMs, max, want): Promise<RateClaim> => {
    const row = (await claim.first(key, nowMs, windowMs, max, want))!;
    return { startedMs: row.o_started, used: row.o_used, granted: row.o_granted };
  };
}
