import { type Kysely, sql } from 'kysely';

/**
 * OpenAI-compatible clients (`/v1/chat/completions`) resend the whole conversation every turn and
 * keep no session id. Each answer records a hash of the conversation up to and including it, keyed
 * by workspace, model (persona or A/B test id) and the client's `user`; the next turn's earlier
 * messages hash to the same value and find the session to continue. Deleting a session drops its keys.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE openai_threads (
      workspace_id TEXT NOT NULL,
      model TEXT NOT NULL,
      user_key TEXT NOT NULL,
      history_hash TEXT NOT NULL,
      session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
      created_at TEXT NOT NULL,
      PRIMARY KEY (workspace_id, model, user_key, history_hash)
    ) STRICT, WITHOUT ROWID`.execute(db);
  await sql`CREATE INDEX openai_threads_session ON openai_threads (session_id)`.execute(db);
}
