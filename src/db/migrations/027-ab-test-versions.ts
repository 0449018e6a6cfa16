import { type Kysely, sql } from 'kysely';
import type { MigrationDialect } from '../dialect.js';

/**
 * A/B tests between persona versions, with guardrails and promotion (issue 28): a variant may pin
 * a version of its persona (`per_…@3`, null = the current one); a test may declare limits B must
 * keep (JSON), records why it stopped (`manual` or the guardrail B broke), and which variant was
 * promoted once it finished (a promoted test routes new conversations to that variant).
 */
export async function up(db: Kysely<unknown>, d: MigrationDialect): Promise<void> {
  await sql`ALTER TABLE ab_tests ADD COLUMN version_a ${d.int}`.execute(db);
  await sql`ALTER TABLE ab_tests ADD COLUMN version_b ${d.int}`.execute(db);
  await sql`ALTER TABLE ab_tests ADD COLUMN guardrails ${d.text} NOT NULL DEFAULT '{}'`.execute(db);
  await sql`ALTER TABLE ab_tests ADD COLUMN stop_reason ${d.text}`.execute(db);
  await sql`ALTER TABLE ab_tests ADD COLUMN promoted ${d.text} CHECK (promoted IN ('A', 'B'))`.execute(db);
  await sql`ALTER TABLE ab_tests ADD COLUMN promoted_at ${d.text}`.execute(db);
}
