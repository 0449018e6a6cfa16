import type { Kysely } from 'kysely';
import type { Database } from '../db/schema.js';

/**
 * SQL for MCP Streamable HTTP sessions (migration 019): the row is the session, so whichever
 * instance a request reaches can continue it (API.md §13). Times are milliseconds since the epoch.
 */
export function createMcpSessionStore(db: Kysely<Database>) {
  return {
    /** Records a new session, then ends the owner's least recently used beyond `maxPerOwner`; answers the ids ended. */
    async open(row: { id: string; owner: string; protocol_version: string; client: string; created_at: string; last_seen_ms: number }, maxPerOwner: number) {
      await db.insertInto('mcp_sessions').values(row).execute();
      // Two instances opening at once each prune after their own insert: the later prune sees both, so at most maxPerOwner remain.
      const ended = await db
        .deleteFrom('mcp_sessions')
        .where('owner', '=', row.owner)
        .where(
          'id',
          'not in',
          db.selectFrom('mcp_sessions').select('id').where('owner', '=', row.owner).orderBy('last_seen_ms', 'desc').orderBy('id', 'desc').limit(maxPerOwner),
        )
        .returning('id')
        .execute();
      return ended.map((r) => r.id);
    },

    /**
     * The session's initialize parameters, marking it used now; undefined when it ended, idled out
     * (last used before `idleSinceMs`) or belongs to another owner. One round trip per request.
     */
    async use(id: string, owner: string, nowMs: number, idleSinceMs: number) {
      return db
        .updateTable('mcp_sessions')
        .set({ last_seen_ms: nowMs })
        .where('id', '=', id)
        .where('owner', '=', owner)
        .where('last_seen_ms', '>=', idleSinceMs)
        .returning(['client', 'protocol_version'])
        .executeTakeFirst();
    },

    /** Ends a session; true when it was still open. */
    async end(id: string) {
      const result = await db.deleteFrom('mcp_sessions').where('id', '=', id).executeTakeFirst();
      return result.numDeletedRows > 0n;
    },

    /** Of these ids, the sessions still open. */
    async stillOpen(ids: string[]) {
      const open = new Set<string>();
      for (let i = 0; i < ids.length; i += 500) {
        const rows = await db.selectFrom('mcp_sessions').select('id').where('id', 'in', ids.slice(i, i + 500)).execute();
        for (const r of rows) open.add(r.id);
      }
      return open;
    },

    /** Keeps a client's answer to a request another instance's server of the session sent. */
    addReply: (sessionId: string, message: string, nowMs: number) => db.insertInto('mcp_replies').values({ session_id: sessionId, message, created_ms: nowMs }).execute(),

    /** The answers kept after `seq` for these sessions, oldest first. */
    repliesAfter: (seq: number, sessionIds: string[]) =>
      sessionIds.length === 0
        ? Promise.resolve([])
        : db.selectFrom('mcp_replies').select(['seq', 'session_id', 'message']).where('seq', '>', seq).where('session_id', 'in', sessionIds).orderBy('seq').execute(),

    /** The last answer's place (where an instance starts reading). */
    lastReply: async () => Number((await db.selectFrom('mcp_replies').select((eb) => eb.fn.max('seq').as('seq')).executeTakeFirst())?.seq ?? 0),

    purgeReplies: (beforeMs: number) => db.deleteFrom('mcp_replies').where('created_ms', '<', beforeMs).execute(),

    /** Ends the sessions unused since `idleSinceMs` (any instance may run it; it is idempotent); answers how many. */
    async endIdle(idleSinceMs: number) {
      const result = await db.deleteFrom('mcp_sessions').where('last_seen_ms', '<', idleSinceMs).executeTakeFirst();
      return Number(result.numDeletedRows);
    },
  };
}

export type McpSessionStore = ReturnType<typeof createMcpSessionStore>;
