import { type Kysely, sql } from 'kysely';
import type { MigrationDialect } from '../dialect.js';

/**
 * Human handoff (issue 29): a persona may belong to a team, whose members take over conversations
 * the persona should not answer, by the persona's rules (JSON `handoff`); a team says how long an
 * offer waits for its member before it goes to the next one. A handoff is one conversation's time
 * with a person: queued → offered → accepted → resolved or returned; at most one is open per
 * session; a deleted session's handoff keeps its numbers (its session id cleared). Messages gain their author: null for the persona (or the user), `human:<email>` for a
 * team member's reply, `system` for a notice ("a person joined").
 */
export async function up(db: Kysely<unknown>, d: MigrationDialect): Promise<void> {
  await sql`ALTER TABLE personas ADD COLUMN team_id ${d.text}`.execute(db);
  await sql`ALTER TABLE personas ADD COLUMN handoff ${d.text} NOT NULL DEFAULT '{}'`.execute(db);
  await sql`ALTER TABLE teams ADD COLUMN offer_seconds ${d.int} NOT NULL DEFAULT 120`.execute(db);
  await sql`ALTER TABLE messages ADD COLUMN author ${d.text}`.execute(db);
  await sql`
    CREATE TABLE handoffs (
      id ${d.text} PRIMARY KEY,
      workspace_id ${d.text} NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
      session_id ${d.text} REFERENCES sessions(id) ON DELETE SET NULL,
      persona_id ${d.text} NOT NULL,
      team_id ${d.text} NOT NULL,
      status ${d.text} NOT NULL CHECK (status IN ('queued', 'offered', 'accepted', 'resolved', 'returned')),
      trigger ${d.text} NOT NULL CHECK (trigger IN ('user', 'tool', 'rule', 'api')),
      reason ${d.text} NOT NULL,
      member ${d.text},
      offer_until ${d.text},
      passed ${d.text} NOT NULL DEFAULT '[]',
      offers ${d.int} NOT NULL DEFAULT 0,
      accepted_at ${d.text},
      first_reply_at ${d.text},
      ended_at ${d.text},
      ended_by ${d.text},
      created_at ${d.text} NOT NULL,
      updated_at ${d.text} NOT NULL,
      rev ${d.int} NOT NULL DEFAULT 0
    ) ${d.strict}`.execute(db);
  await sql`CREATE INDEX handoffs_workspace ON handoffs (workspace_id, created_at, id)`.execute(db);
  await sql`CREATE UNIQUE INDEX handoffs_open_session ON handoffs (session_id) WHERE status IN ('queued', 'offered', 'accepted')`.execute(db);
  await sql`CREATE INDEX handoffs_open ON handoffs (status, offer_until) WHERE status IN ('queued', 'offered')`.execute(db);
}
