import { type Kysely, sql } from 'kysely';

/**
 * A/B tests between two personas (API.md §8). Assignment is a hash of (test, user or session), so
 * it needs no table; each answer and rating records its test and variant, and results are read
 * from those records through the partial indexes below.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE ab_tests (
      id TEXT PRIMARY KEY,
      workspace_id TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
      name TEXT NOT NULL,
      persona_a TEXT NOT NULL,
      persona_b TEXT NOT NULL,
      traffic_split REAL NOT NULL CHECK (traffic_split BETWEEN 0 AND 1),
      status TEXT NOT NULL CHECK (status IN ('draft', 'running', 'completed')),
      created_at TEXT NOT NULL,
      started_at TEXT,
      ended_at TEXT
    ) STRICT`.execute(db);
  await sql`CREATE INDEX ab_tests_workspace ON ab_tests (workspace_id, created_at, id)`.execute(db);
  await sql`CREATE INDEX ab_tests_running ON ab_tests (workspace_id, persona_a, persona_b) WHERE status = 'running'`.execute(db);
  await sql`CREATE INDEX interactions_ab_test ON interactions (ab_test_id, variant) WHERE ab_test_id IS NOT NULL`.execute(db);
  await sql`CREATE INDEX feedback_ab_test ON feedback (ab_test_id, variant) WHERE ab_test_id IS NOT NULL`.execute(db);
}
