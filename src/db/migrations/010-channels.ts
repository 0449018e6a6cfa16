import { type Kysely, sql } from 'kysely';

/**
 * Channels (API.md §9): Slack, Discord and webhook connections routed to a persona or an A/B test.
 * Credentials are one AES-256-GCM sealed JSON value. The inbox stores every inbound message before
 * it is answered (one row per platform delivery id, so a retried delivery is a no-op); a
 * conversation maps a platform thread or channel to its session; `channel_messages` maps the
 * platform ids of the bot's replies to the answer, so a reaction becomes feedback on it.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE channels (
      id TEXT PRIMARY KEY,
      workspace_id TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
      type TEXT NOT NULL CHECK (type IN ('slack', 'discord', 'webhook')),
      name TEXT NOT NULL,
      persona_id TEXT,
      ab_test_id TEXT,
      settings TEXT NOT NULL,
      secrets TEXT NOT NULL,
      created_at TEXT NOT NULL,
      updated_at TEXT NOT NULL,
      CHECK ((persona_id IS NULL) <> (ab_test_id IS NULL))
    ) STRICT`.execute(db);
  await sql`CREATE INDEX channels_workspace ON channels (workspace_id, created_at, id)`.execute(db);
  await sql`CREATE INDEX channels_persona ON channels (workspace_id, persona_id) WHERE persona_id IS NOT NULL`.execute(db);

  await sql`
    CREATE TABLE channel_inbox (
      seq INTEGER PRIMARY KEY,
      channel_id TEXT NOT NULL REFERENCES channels(id) ON DELETE CASCADE,
      external_id TEXT NOT NULL,
      conversation_id TEXT NOT NULL,
      payload TEXT NOT NULL,
      status TEXT NOT NULL CHECK (status IN ('pending', 'answering', 'answered', 'failed', 'expired')),
      received_at TEXT NOT NULL,
      answered_at TEXT,
      UNIQUE (channel_id, external_id)
    ) STRICT`.execute(db);
  await sql`CREATE INDEX channel_inbox_open ON channel_inbox (channel_id, received_at) WHERE status IN ('pending', 'answering')`.execute(db);

  await sql`
    CREATE TABLE channel_conversations (
      channel_id TEXT NOT NULL REFERENCES channels(id) ON DELETE CASCADE,
      conversation_id TEXT NOT NULL,
      session_id TEXT NOT NULL,
      PRIMARY KEY (channel_id, conversation_id)
    ) STRICT, WITHOUT ROWID`.execute(db);

  await sql`
    CREATE TABLE channel_messages (
      channel_id TEXT NOT NULL REFERENCES channels(id) ON DELETE CASCADE,
      external_id TEXT NOT NULL,
      session_id TEXT,
      message_id TEXT,
      created_at TEXT NOT NULL,
      PRIMARY KEY (channel_id, external_id)
    ) STRICT, WITHOUT ROWID`.execute(db);
}
