import { type Kysely, sql } from 'kysely';
import type { MigrationDialect } from '../dialect.js';

/**
 * What tells the other instances that rows an in-memory cache holds have changed (DESIGN.md, "One
 * machine or many": a change sequence in a table is the truth). One row per topic (`keys`, ...),
 * its `seq` bumped in the database by the writer after each change; every instance reads the rows
 * a few times a second and drops what it cached of a topic whose `seq` moved (change-signals.ts).
 */
export async function up(db: Kysely<unknown>, d: MigrationDialect): Promise<void> {
  await sql`
    CREATE TABLE change_signals (
      topic ${d.text} PRIMARY KEY,
      seq ${d.int} NOT NULL
    )`.execute(db);
}
