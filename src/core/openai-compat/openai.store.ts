import type { Db } from '../../db/database.js';
import type { WriteGroup } from '../../db/write-group.js';

/** The session an OpenAI-compatible conversation continues, found by the hash of its turns (migration 012). */
export interface ThreadKey {
  workspaceId: string;
  model: string;
  /** The request's `user`, or '' without one. */
  userKey: string;
  historyHash: string;
}

/**
 * Every completion records its thread and every follow-up looks one up, so both are prepared
 * statements, and the record joins the context's write group (one commit per event-loop turn with
 * the exchange writes): built with Kysely and committed alone they cost ~50 µs a completion
 * (issue 18, profile of `POST /v1/chat/completions`).
 */
export function createOpenAiThreadStore({ sqlite }: Db, writes: WriteGroup) {
  const findSession = sqlite
    .prepare('SELECT session_id FROM openai_threads WHERE workspace_id = ? AND model = ? AND user_key = ? AND history_hash = ?')
    .pluck();
  const upsert = sqlite.prepare(
    `INSERT INTO openai_threads (workspace_id, model, user_key, history_hash, session_id, created_at) VALUES (?, ?, ?, ?, ?, ?)
     ON CONFLICT (workspace_id, model, user_key, history_hash) DO UPDATE SET session_id = excluded.session_id, created_at = excluded.created_at`,
  );
  return {
    find: async (key: ThreadKey): Promise<string | undefined> =>
      findSession.get(key.workspaceId, key.model, key.userKey, key.historyHash) as string | undefined,
    /** Records (or moves to the latest session) the conversation that ends with an answer. */
    save: (key: ThreadKey, sessionId: string, now: string): Promise<void> =>
      writes.run(() => void upsert.run(key.workspaceId, key.model, key.userKey, key.historyHash, sessionId, now)),
  };
}

export type OpenAiThreadStore = ReturnType<typeof createOpenAiThreadStore>;
