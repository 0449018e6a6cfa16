// PGlite: PostgreSQL compiled to WebAssembly, in this process, with the pgvector extension the
// Debian server lacks. It speaks to the real `pg` driver through its node-postgres connection, so
// the backend's own pool and SQL run unchanged. One connection only (DESIGN.md: PGlite for
// in-process dialect checks).
import { PGlite } from '@electric-sql/pglite';
import { createPgConfig } from '@electric-sql/pglite/node-postgres';
import { vector } from '@electric-sql/pglite-pgvector';
import { openPostgres, type PostgresDb } from '../../src/db/postgres/connection.js';

export async function openPglite(): Promise<{ db: PostgresDb; close(): Promise<void> }> {
  const lite = await PGlite.create({ extensions: { vector } });
  const db = await openPostgres({ url: 'postgres://pglite@in-process/postgres', poolSize: 1, startupDeadlineMs: 10_000, connect: { ...createPgConfig(lite), connectionString: undefined } });
  return {
    db,
    async close() {
      await db.close();
      await lite.close();
    },
  };
}
