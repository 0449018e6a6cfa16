import { type Kysely, sql } from 'kysely';
import type { MigrationDialect } from '../dialect.js';

/**
 * Which instance is processing a knowledge source, and until when (API.md §13): the instance that
 * accepts or takes over a source leases it and renews the lease while it runs the job; a source
 * whose lease has lapsed (its instance died, or handed it over when draining) is taken over by
 * another instance on the same PostgreSQL database. On SQLite, one process: a start resumes every
 * unfinished source, as before.
 */
export async function up(db: Kysely<unknown>, d: MigrationDialect): Promise<void> {
  await sql`ALTER TABLE knowledge_sources ADD COLUMN lease_owner ${d.text}`.execute(db);
  await sql`ALTER TABLE knowledge_sources ADD COLUMN lease_until ${d.text}`.execute(db);
  await sql`CREATE INDEX knowledge_sources_leases ON knowledge_sources (lease_until) WHERE status = 'processing'`.execute(db);
}
