import type { SqlBackend } from '../../db/backend.js';

/** The session an OpenAI-compatible conversation continues, found by the hash of its turns (migration 012). */
export interface ThreadKey {
  workspaceId: string;
  model: string;
  /** The request's `user`, or '' without one. */
  userKey: string;
  historyHash: string;
}

/** Records (or moves to the latest session) the conversation that ends with an answer; grouped with the answer's writes. */
export interface ThreadWrites {
  save(key: ThreadKey, sessionId: string, now: string): Promise<void>;
}

/**
 * Every completion records its thread and every follow-up looks one up, so the lookup is a prepared
 * read and the record joins the backend's grouped writes (one commit per event-loop turn with the
 * exchange writes): built with Kysely and committed alone they cost ~50 µs a completion (issue 18,
 * profile of `POST /v1/chat/completions`).
 */
export function createOpenAiThreadStore(db: SqlBackend, writes: ThreadWrites) {
  const findSession = db.prepare<{ session_id: string }>(
    'SELECT session_id FROM openai_threads WHERE workspace_id = ? AND model = ? AND user_key = ? AND history_hash = ?',
  );
  return {
    find: async (key: ThreadKey): Promise<string | undefined> =>
      (await findSession.first(key.workspaceId, key.model, key.userKey, key.historyHash))?.session_id,
    save: writes.save,
  };
}

export type OpenAiThreadStore = ReturnType<typeof createOpenAiThreadStore>;
