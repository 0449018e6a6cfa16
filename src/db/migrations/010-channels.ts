import { type Kysely, sql } from 'kysely';
import type { MigrationDialect } from '../dialect.js';

/**
 * Channels (API.md §9): Slack, Discord and webhook connections routed to a persona or an A/B test.
 * Credentials are one AES-256-GCM sealed JSON value. The inbox stores every inbound message before
 * it is answered (one row per platform delivery id, so a retried delivery is a no-op); a
 * conversation maps a platform thread or channel to its session; `channel_messages` maps the
 * platform ids of the bot's replies to the answer, so a reaction becomes feedback on it.
 */
export async function up(db: Kysely<unknown>, d: MigrationDialect): Promise<void> {
  await sql`
    CREATE TABLE channels (
      id ${d.text} PRIMARY KEY,
      workspace_id ${d.text} NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
      type ${d.text} NOT NULL CHECK (type IN ('slack', 'discord', 'webhook')),
      name ${d.text} NOT NULL,
      persona_id ${d.text},
      ab_test_id ${d.text},
      settings ${d.text} NOT NULL,
      secrets ${d.text} NOT NULL,
      created_at ${d.text} NOT NULL,
      updated_at ${d.text} NOT NULL,
      CHECK ((persona_id IS NULL) <> (ab_test_id IS NULL))
    ) ${d.strict}`.execute(db);
  await sql`CREATE INDEX channels_workspace ON channels (workspace_id, created_at, id)`.execute(db);
  await sql`CREATE INDEX channels_persona ON channels (workspace_id, persona_id) WHERE persona_id IS NOT NULL`.execute(db);

  await sql`
    CREATE TABLE channel_inbox (
      seq ${d.serialKey},
      channel_id ${d.text} NOT NULL REFERENCES channels(id) ON DELETE CASCADE,
      external_id ${d.text} NOT NULL,
      conversation_id ${d.text} NOT NULL,
      payload ${d.text} NOT NULL,
      status ${d.text} NOT NULL CHECK (status IN ('pending', 'answering', 'answered', 'failed', 'expired')),
      received_at ${d.text} NOT NULL,
      answered_at ${d.text},
      UNIQUE (channel_id, external_id)
    ) ${d.strict}`.execute(db);
  await sql`CREATE INDEX channel_inbox_open ON channel_inbox (channel_id, received_at) WHERE status IN ('pending', 'answering')`.execute(db);

  await sql`
    CREATE TABLE channel_conversations (
      channel_id ${d.text} NOT NULL REFERENCES channels(id) ON DELETE CASCADE,
      conversation_id ${d.text} NOT NULL,
      session_id ${d.text} NOT NULL,
      PRIMARY KEY (channel_id, conversation_id)
    ) ${d.strictWithoutRowid}`.execute(db);

  await sql`
    CREATE TABLE channel_messages (
      channel_id ${d.text} NOT NULL REFERENCES channels(id) ON DELETE CASCADE,
      external_id ${d.text} NOT NULL,
      session_id ${d.text},
      message_id ${d.text},
      created_at ${d.text} NOT NULL,
      PRIMARY KEY (channel_id, external_id)
    ) ${d.strictWithoutRowid}`.execute(db);
}
