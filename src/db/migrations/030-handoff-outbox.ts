import { type Kysely, sql } from 'kysely';
import type { MigrationDialect } from '../dialect.js';

/**
 * What a handed-off conversation sends to a user on a channel (issue 29): a person's reply, a
 * notice ("a person joined"). Written in the transaction that stores the message, then delivered by
 * whichever instance claims it (a claim lapses, so a dead instance's deliveries are taken over),
 * retried with back-off, and marked sent: stored before it is sent, sent until it is acknowledged.
 */
export async function up(db: Kysely<unknown>, d: MigrationDialect): Promise<void> {
  await sql`
    CREATE TABLE handoff_outbox (
      seq ${d.serialKey},
      workspace_id ${d.text} NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
      handoff_id ${d.text} NOT NULL,
      channel_id ${d.text} NOT NULL,
      conversation_id ${d.text} NOT NULL,
      message_id ${d.text} NOT NULL,
      text ${d.text} NOT NULL,
      status ${d.text} NOT NULL CHECK (status IN ('pending', 'sent', 'failed')),
      attempts ${d.int} NOT NULL DEFAULT 0,
      next_at ${d.text} NOT NULL,
      claimed_by ${d.text},
      claimed_until ${d.text},
      error ${d.text},
      created_at ${d.text} NOT NULL,
      sent_at ${d.text}
    ) ${d.strict}`.execute(db);
  await sql`CREATE INDEX handoff_outbox_due ON handoff_outbox (next_at) WHERE status = 'pending'`.execute(db);
}
