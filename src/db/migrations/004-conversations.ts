import { type Kysely, sql } from 'kysely';
import type { MigrationDialect } from '../dialect.js';

/**
 * Sessions and their messages (API.md §5), one interaction record per answer and the feedback on
 * answers. Interactions and feedback outlive their session (analytics keep the numbers): their
 * session and message ids and free text are cleared when it is deleted, so neither references it.
 */
export async function up(db: Kysely<unknown>, d: MigrationDialect): Promise<void> {
  await sql`
    CREATE TABLE sessions (
      id ${d.text} PRIMARY KEY,
      workspace_id ${d.text} NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
      persona_id ${d.text} NOT NULL,
      ab_test_id ${d.text},
      variant ${d.text},
      channel_id ${d.text},
      user_id ${d.text},
      title ${d.text} NOT NULL,
      message_count ${d.int} NOT NULL,
      created_at ${d.text} NOT NULL,
      last_message_at ${d.text} NOT NULL
    ) ${d.strict}`.execute(db);
  await sql`CREATE INDEX sessions_workspace ON sessions (workspace_id, created_at, id)`.execute(db);
  await sql`CREATE INDEX sessions_persona ON sessions (workspace_id, persona_id, created_at, id)`.execute(db);
  await sql`CREATE INDEX sessions_user ON sessions (workspace_id, user_id, created_at, id) WHERE user_id IS NOT NULL`.execute(db);
  await sql`CREATE INDEX sessions_channel ON sessions (workspace_id, channel_id, created_at, id) WHERE channel_id IS NOT NULL`.execute(db);

  await sql`
    CREATE TABLE messages (
      seq ${d.serialKey},
      id ${d.text} NOT NULL UNIQUE,
      session_id ${d.text} NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
      role ${d.text} NOT NULL CHECK (role IN ('user', 'assistant', 'tool')),
      content ${d.text} NOT NULL,
      tool_calls ${d.text},
      tool_call_id ${d.text},
      created_at ${d.text} NOT NULL
    ) ${d.strict}`.execute(db);
  await sql`CREATE INDEX messages_session ON messages (session_id, seq)`.execute(db);

  await sql`
    CREATE TABLE interactions (
      seq ${d.serialKey},
      workspace_id ${d.text} NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
      session_id ${d.text},
      message_id ${d.text},
      persona_id ${d.text} NOT NULL,
      ab_test_id ${d.text},
      variant ${d.text},
      channel_id ${d.text},
      user_id ${d.text},
      model ${d.text} NOT NULL,
      started_at ${d.text} NOT NULL,
      latency_ms ${d.int} NOT NULL,
      ttft_ms ${d.int},
      prompt_tokens ${d.int} NOT NULL,
      completion_tokens ${d.int} NOT NULL,
      tool_calls ${d.int} NOT NULL,
      error ${d.text},
      rating ${d.int},
      metadata ${d.text}
    ) ${d.strict}`.execute(db);
  await sql`CREATE INDEX interactions_workspace ON interactions (workspace_id, started_at)`.execute(db);
  await sql`CREATE INDEX interactions_session ON interactions (session_id) WHERE session_id IS NOT NULL`.execute(db);
  await sql`CREATE INDEX interactions_message ON interactions (message_id) WHERE message_id IS NOT NULL`.execute(db);

  await sql`
    CREATE TABLE feedback (
      seq ${d.serialKey},
      workspace_id ${d.text} NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
      session_id ${d.text},
      message_id ${d.text},
      persona_id ${d.text} NOT NULL,
      ab_test_id ${d.text},
      variant ${d.text},
      rating ${d.int} NOT NULL CHECK (rating BETWEEN 1 AND 5),
      comment ${d.text},
      created_at ${d.text} NOT NULL
    ) ${d.strict}`.execute(db);
  await sql`CREATE INDEX feedback_workspace ON feedback (workspace_id, created_at)`.execute(db);
  await sql`CREATE INDEX feedback_session ON feedback (session_id) WHERE session_id IS NOT NULL`.execute(db);
}
