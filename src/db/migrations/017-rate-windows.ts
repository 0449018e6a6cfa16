import { type Kysely, sql } from 'kysely';
import type { MigrationDialect } from '../dialect.js';

/**
 * The per-key rate limit (API.md §1) as one budget across every instance on a PostgreSQL database
 * (API.md §13): each key's (or client address's) current window and what it has handed out.
 * Instances claim a few requests at a time (`rate_claim`, src/db/postgres/rate-claims.ts) and
 * spend them from memory. On SQLite, one process, the limit stays in memory and the table unused.
 */
export async function up(db: Kysely<unknown>, d: MigrationDialect): Promise<void> {
  await sql`
    CREATE TABLE rate_windows (
      key ${d.text} PRIMARY KEY,
      started_ms ${d.int} NOT NULL,
      used ${d.int} NOT NULL
    )`.execute(db);
  if (d.kind !== 'postgres') return;
  // One call, one round trip: the key's window (a new one when it has ended), and up to p_want of
  // what is left of it. Windows ended twice over are swept now and then, so the table holds the
  // keys of the last two windows only.
  await sql`
    CREATE FUNCTION rate_claim(p_key TEXT, p_now BIGINT, p_window BIGINT, p_max BIGINT, p_want BIGINT,
      OUT o_started BIGINT, OUT o_used BIGINT, OUT o_granted BIGINT)
    LANGUAGE plpgsql AS $$
    DECLARE
      v_started BIGINT;
      v_used BIGINT;
    BEGIN
      INSERT INTO rate_windows AS w (key, started_ms, used) VALUES (p_key, p_now, 0) ON CONFLICT (key) DO NOTHING;
      SELECT w.started_ms, w.used INTO v_started, v_used FROM rate_windows w WHERE w.key = p_key FOR UPDATE;
      IF v_started + p_window <= p_now THEN
        v_started := p_now;
        v_used := 0;
      END IF;
      o_granted := GREATEST(0, LEAST(p_want, p_max - v_used));
      o_used := v_used + o_granted;
      o_started := v_started;
      UPDATE rate_windows w SET started_ms = o_started, used = o_used WHERE w.key = p_key;
      IF random() < 0.01 THEN
        DELETE FROM rate_windows w WHERE w.started_ms < p_now - 2 * p_window;
      END IF;
    END $$`.execute(db);
}
