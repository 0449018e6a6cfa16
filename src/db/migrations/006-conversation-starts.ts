import { type Kysely, sql } from 'kysely';
import type { MigrationDialect } from '../dialect.js';

/**
 * Analytics count a conversation from the answer that opened its session (`new_session = 1`), not
 * from the session row: deleting a session removes its content, never its count (API.md §8).
 * Existing rows: the first answer of each session still linked to one.
 */
export async function up(db: Kysely<unknown>, d: MigrationDialect): Promise<void> {
  await sql`ALTER TABLE interactions ADD COLUMN new_session ${d.int} NOT NULL DEFAULT 0`.execute(db);
  await sql`
    UPDATE interactions SET new_session = 1
    WHERE seq IN (SELECT MIN(seq) FROM interactions WHERE session_id IS NOT NULL AND error IS NULL GROUP BY session_id)`.execute(db);
}
