import { type Kysely, sql } from 'kysely';
import type { MigrationDialect } from '../dialect.js';

/**
 * Team members told of handoffs by a signed webhook (issue 29): a team may name a URL and a secret
 * (sealed); each event (offered, queued, accepted, a user's message, ended) is queued in the
 * transaction that makes it, and delivered like the handoff outbox: claimed, retried, taken over.
 */
export async function up(db: Kysely<unknown>, d: MigrationDialect): Promise<void> {
  await sql`ALTER TABLE teams ADD COLUMN notify_url ${d.text}`.execute(db);
  await sql`ALTER TABLE teams ADD COLUMN notify_secret ${d.text}`.execute(db);
  await sql`
    CREATE TABLE handoff_notifications (
      seq ${d.serialKey},
      workspace_id ${d.text} NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
      team_id ${d.text} NOT NULL,
      handoff_id ${d.text} NOT NULL,
      event ${d.text} NOT NULL,
      body ${d.text} NOT NULL,
      status ${d.text} NOT NULL CHECK (status IN ('pending', 'sent', 'failed')),
      attempts ${d.int} NOT NULL DEFAULT 0,
      next_at ${d.text} NOT NULL,
      claimed_by ${d.text},
      claimed_until ${d.text},
      error ${d.text},
      created_at ${d.text} NOT NULL,
      sent_at ${d.text}
    ) ${d.strict}`.execute(db);
  await sql`CREATE INDEX handoff_notifications_due ON handoff_notifications (next_at) WHERE status = 'pending'`.execute(db);
}
