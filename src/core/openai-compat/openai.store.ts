import type { Kysely } from 'kysely';
import type { Database } from '../../db/schema.js';

/** The session an OpenAI-compatible conversation continues, found by the hash of its turns (migration 012). */
export interface ThreadKey {
  workspaceId: string;
  model: string;
  /** The request's `user`, or '' without one. */
  userKey: string;
  historyHash: string;
}

export function createOpenAiThreadStore(k: Kysely<Database>) {
  const where = (key: ThreadKey) =>
    k
      .selectFrom('openai_threads')
      .where('workspace_id', '=', key.workspaceId)
      .where('model', '=', key.model)
      .where('user_key', '=', key.userKey)
      .where('history_hash', '=', key.historyHash);
  return {
    async find(key: ThreadKey): Promise<string | undefined> {
      return (await where(key).select('session_id').executeTakeFirst())?.session_id;
    },
    /** Records (or moves to the latest session) the conversation that ends with an answer. */
    async save(key: ThreadKey, sessionId: string, now: string): Promise<void> {
      await k
        .insertInto('openai_threads')
        .values({ workspace_id: key.workspaceId, model: key.model, user_key: key.userKey, history_hash: key.historyHash, session_id: sessionId, created_at: now })
        .onConflict((oc) => oc.columns(['workspace_id', 'model', 'user_key', 'history_hash']).doUpdateSet({ session_id: sessionId, created_at: now }))
        .execute();
    },
  };
}

export type OpenAiThreadStore = ReturnType<typeof createOpenAiThreadStore>;
