import { type Kysely, sql } from 'kysely';
import type { MigrationDialect } from '../dialect.js';

/**
 * Which instance runs the request behind a `running` Idempotency-Key record (API.md §1, §13): when
 * that instance died (its instance lease lapsed, migration 020) the retry on another instance runs
 * the request again at once, instead of answering 409 "still being processed" for ten minutes.
 */
export async function up(db: Kysely<unknown>, d: MigrationDialect): Promise<void> {
  await sql`ALTER TABLE idempotency_keys ADD COLUMN owner ${d.text}`.execute(db);
}
