import { type Kysely, sql } from 'kysely';
import type { MigrationDialect } from '../dialect.js';

/**
 * A/B tests between two personas (API.md §8). Assignment is a hash of (test, user or session), so
 * it needs no table; each answer and rating records its test and variant, and results are read
 * from those records through the partial indexes below.
 */
export async function up(db: Kysely<unknown>, d: MigrationDialect): Promise<void> {
  await sql`
    CREATE TABLE ab_tests (
      id ${d.text} PRIMARY KEY,
      workspace_id ${d.text} NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
      name ${d.text} NOT NULL,
      persona_a ${d.text} NOT NULL,
      persona_b ${d.text} NOT NULL,
      traffic_split ${d.real} NOT NULL CHECK (traffic_split BETWEEN 0 AND 1),
      status ${d.text} NOT NULL CHECK (status IN ('draft', 'running', 'completed')),
      created_at ${d.text} NOT NULL,
      started_at ${d.text},
      ended_at ${d.text}
    ) ${d.strict}`.execute(db);
  await sql`CREATE INDEX ab_tests_workspace ON ab_tests (workspace_id, created_at, id)`.execute(db);
  await sql`CREATE INDEX ab_tests_running ON ab_tests (workspace_id, persona_a, persona_b) WHERE status = 'running'`.execute(db);
  await sql`CREATE INDEX interactions_ab_test ON interactions (ab_test_id, variant) WHERE ab_test_id IS NOT NULL`.execute(db);
  await sql`CREATE INDEX feedback_ab_test ON feedback (ab_test_id, variant) WHERE ab_test_id IS NOT NULL`.execute(db);
}
