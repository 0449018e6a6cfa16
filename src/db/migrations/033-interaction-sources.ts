import { type Kysely, sql } from 'kysely';
import type { MigrationDialect } from '../dialect.js';

/**
 * How many knowledge sources each answer's retrieval found (issue 29): a persona's
 * `handoff.noKnowledge` rule hands a conversation to its team after that many answers in a row found
 * none. Null on failed answers, on messages handed over without an answer, and on rows recorded before.
 */
export async function up(db: Kysely<unknown>, d: MigrationDialect): Promise<void> {
  await sql`ALTER TABLE interactions ADD COLUMN sources ${d.int}`.execute(db);
}
