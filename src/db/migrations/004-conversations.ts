import { type Kysely, sql } from 'kysely';

/**
 * Sessions and their messages (API.md §5), one interaction record per answer and the feedback on
 * answers. Interactions and feedback outlive their session (analytics keep the numbers): their
 * session and message ids and free text are cleared when it is deleted, so neither references it.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE sessions (
      id TEXT PRIMARY KEY,
      workspace_id TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
      persona_id TEXT NOT NULL,
      ab_test_id TEXT,
      variant TEXT,
      channel_id TEXT,
      user_id TEXT,
      title TEXT NOT NULL,
      message_count INTEGER NOT NULL,
      created_at TEXT NOT NULL,
      last_message_at TEXT NOT NULL
    ) STRICT`.execute(db);
  await sql`CREATE INDEX sessions_workspace ON sessions (workspace_id, created_at, id)`.execute(db);
  await sql`CREATE INDEX sessions_persona ON sessions (workspace_id, persona_id, created_at, id)`.execute(db);
  await sql`CREATE INDEX sessions_user ON sessions (workspace_id, user_id, created_at, id) WHERE user_id IS NOT NULL`.execute(db);
  await sql`CREATE INDEX sessions_channel ON sessions (workspace_id, channel_id, created_at, id) WHERE channel_id IS NOT NULL`.execute(db);

  await sql`
    CREATE TABLE messages (
      seq INTEGER PRIMARY KEY,
      id TEXT NOT NULL UNIQUE,
      session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
      role TEXT NOT NULL CHECK (role IN ('user', 'assistant', 'tool')),
      content TEXT NOT NULL,
      tool_calls TEXT,
      tool_call_id TEXT,
      created_at TEXT NOT NULL
    ) STRICT`.execute(db);
  await sql`CREATE INDEX messages_session ON messages (session_id, seq)`.execute(db);

  await sql`
    CREATE TABLE interactions (
      seq INTEGER PRIMARY KEY,
      workspace_id TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
      session_id TEXT,
      message_id TEXT,
      persona_id TEXT NOT NULL,
      ab_test_id TEXT,
      variant TEXT,
      channel_id TEXT,
      user_id TEXT,
      model TEXT NOT NULL,
      started_at TEXT NOT NULL,
      latency_ms INTEGER NOT NULL,
      ttft_ms INTEGER,
      prompt_tokens INTEGER NOT NULL,
      completion_tokens INTEGER NOT NULL,
      tool_calls INTEGER NOT NULL,
      error TEXT,
      rating INTEGER,
      metadata TEXT
    ) STRICT`.execute(db);
  await sql`CREATE INDEX interactions_workspace ON interactions (workspace_id, started_at)`.execute(db);
  await sql`CREATE INDEX interactions_session ON interactions (session_id) WHERE session_id IS NOT NULL`.execute(db);
  await sql`CREATE INDEX interactions_message ON interactions (message_id) WHERE message_id IS NOT NULL`.execute(db);

  await sql`
    CREATE TABLE feedback (
      seq INTEGER PRIMARY KEY,
      workspace_id TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
      session_id TEXT,
      message_id TEXT,
      persona_id TEXT NOT NULL,
      ab_test_id TEXT,
      variant TEXT,
      rating INTEGER NOT NULL CHECK (rating BETWEEN 1 AND 5),
      comment TEXT,
      created_at TEXT NOT NULL
    ) STRICT`.execute(db);
  await sql`CREATE INDEX feedback_workspace ON feedback (workspace_id, created_at)`.execute(db);
  await sql`CREATE INDEX feedback_session ON feedback (session_id) WHERE session_id IS NOT NULL`.execute(db);
}
