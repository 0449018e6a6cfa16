import { type Kysely, sql } from 'kysely';
import type { MigrationDialect } from '../dialect.js';

/**
 * OpenAI-compatible clients (`/v1/chat/completions`) resend the whole conversation every turn and
 * keep no session id. Each answer records a hash of the conversation up to and including it, keyed
 * by workspace, model (persona or A/B test id) and the client's `user`; the next turn's earlier
 * messages hash to the same value and find the session to continue. Deleting a session drops its keys.
 */
export async function up(db: Kysely<unknown>, d: MigrationDialect): Promise<void> {
  await sql`
    CREATE TABLE openai_threads (
      workspace_id ${d.text} NOT NULL,
      model ${d.text} NOT NULL,
      user_key ${d.text} NOT NULL,
      history_hash ${d.text} NOT NULL,
      session_id ${d.text} NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
      created_at ${d.text} NOT NULL,
      PRIMARY KEY (workspace_id, model, user_key, history_hash)
    ) ${d.strictWithoutRowid}`.execute(db);
  await sql`CREATE INDEX openai_threads_session ON openai_threads (session_id)`.execute(db);
}
