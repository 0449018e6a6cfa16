import { type Kysely, sql } from 'kysely';
import type { MigrationDialect } from '../dialect.js';

/**
 * Teams working handoffs where they chat (issue 29): a team may name a desk, one of the workspace's
 * Slack or Discord channels and a conversation in it (a team channel, or `dm`: each offer goes to the
 * offered member's direct messages), and each member their user id there. A handoff's card (the
 * conversation so far and an Accept button) starts a desk thread; what happens next is posted in it,
 * and the accepting member's replies in it reach the user. Desk posts go through the handoff outbox
 * (`kind`): stored before they are sent, sent until acknowledged, by whichever instance claims them.
 */
export async function up(db: Kysely<unknown>, d: MigrationDialect): Promise<void> {
  await sql`ALTER TABLE teams ADD COLUMN desk_channel_id ${d.text}`.execute(db);
  await sql`ALTER TABLE teams ADD COLUMN desk_conversation ${d.text}`.execute(db);
  await sql`ALTER TABLE team_members ADD COLUMN chat_user_id ${d.text}`.execute(db);
  await sql`ALTER TABLE handoff_outbox ADD COLUMN kind ${d.text} NOT NULL DEFAULT 'user'`.execute(db);
  await sql`ALTER TABLE handoff_outbox ADD COLUMN buttons ${d.text}`.execute(db);
  await sql`ALTER TABLE handoff_outbox ADD COLUMN member_key ${d.text}`.execute(db);
  await sql`
    CREATE TABLE handoff_desk_threads (
      seq ${d.serialKey},
      workspace_id ${d.text} NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
      handoff_id ${d.text} NOT NULL,
      channel_id ${d.text} NOT NULL,
      conversation_id ${d.text} NOT NULL,
      member_key ${d.text},
      created_at ${d.text} NOT NULL
    ) ${d.strict}`.execute(db);
  await sql`CREATE UNIQUE INDEX handoff_desk_threads_conversation ON handoff_desk_threads (channel_id, conversation_id)`.execute(db);
  await sql`CREATE INDEX handoff_desk_threads_handoff ON handoff_desk_threads (handoff_id, seq)`.execute(db);
}
