import { sql } from 'kysely';
import { type AuditRow, insertAudit } from '../audit/audit.js';
import type { SqlBackend } from '../../db/backend.js';
import type { InteractionsTable, MessageRow, MessagesTable, SessionRow } from '../../db/schema.js';
import { type PageRequest, paginate } from '../../lib/pagination.js';

/** A message to store; `author` only on a team member's reply or a notice (handoffs). */
export type NewMessage = Omit<MessagesTable, 'seq' | 'author'> & { author?: string | null };
/** `sources`: how many the answer's retrieval found; absent (null) when nothing was answered. */
export type NewInteraction = Omit<InteractionsTable, 'seq' | 'rating' | 'sources'> & { sources?: number | null };
/** One tool call of the answer, for analytics: `<toolName>.<action>` and whether it failed. */
export interface InteractionTool {
  name: string;
  isError: boolean;
}

export interface SessionFilter {
  personaId?: string | undefined;
  channelId?: string | undefined;
  userId?: string | undefined;
}

/** One exchange as it is written: the session (created when `isNew`), its new messages, the interaction. */
export interface ExchangeWrite {
  session: SessionRow;
  isNew: boolean;
  messages: NewMessage[];
  interaction: NewInteraction;
  /** The answer's tool calls, recorded with the interaction's time, persona and channel. */
  tools?: InteractionTool[];
}

/**
 * The answer path's writes. Each backend groups them per event-loop turn into one transaction and
 * settles each after its commit (src/db/sqlite/hot-writes.ts, src/db/postgres/hot-writes.ts).
 */
export interface ChatWrites {
  /** Stores one exchange atomically; false (nothing written) when its existing session is gone. */
  saveExchange(write: ExchangeWrite): Promise<boolean>;
  /** A failed or cancelled answer: numbers only, nothing joins a session. */
  recordInteraction(interaction: NewInteraction): Promise<void>;
  /**
   * Deletes the session and its messages; interactions and feedback keep their numbers only. Its
   * open handoff ends in the same transaction (`resolved` at `at`, by "session deleted"), so nobody
   * can take a conversation that is gone; `audit`, the deletion's event, too.
   */
  deleteSession(workspaceId: string, id: string, at: string, audit?: AuditRow): Promise<boolean>;
}

export function createChatStore(db: SqlBackend, writes: ChatWrites) {
  const k = db.kysely;
  // Every follow-up in a session reads it and its latest turns before answering.
  const sessionById = db.prepare<SessionRow>('SELECT * FROM sessions WHERE id = ? AND workspace_id = ?');
  const latestTurns = db.prepare<Pick<MessageRow, 'role' | 'content'>>(
    "SELECT role, content FROM messages WHERE session_id = ? AND role != 'tool' AND tool_calls IS NULL ORDER BY seq DESC LIMIT ?",
  );
  const unseen = db.prepare<Pick<MessageRow, 'id' | 'content' | 'author' | 'created_at'>>(
    `SELECT m.id, m.content, m.author, m.created_at FROM messages m
     WHERE m.session_id = ? AND m.seq > COALESCE((SELECT MAX(u.seq) FROM messages u WHERE u.session_id = ? AND u.role = 'user'), 0)
       AND m.role = 'assistant' AND m.author IS NOT NULL
       AND NOT EXISTS (SELECT 1 FROM interactions i WHERE i.workspace_id = ? AND i.message_id = m.id)
     ORDER BY m.seq LIMIT ?`,
  );

  return {
    findSession: (workspaceId: string, id: string): Promise<SessionRow | undefined> => sessionById.first(id, workspaceId),

    listSessions(workspaceId: string, page: PageRequest, filter: SessionFilter) {
      let q = k.selectFrom('sessions').selectAll().where('workspace_id', '=', workspaceId);
      if (filter.personaId !== undefined) q = q.where('persona_id', '=', filter.personaId);
      if (filter.channelId !== undefined) q = q.where('channel_id', '=', filter.channelId);
      if (filter.userId !== undefined) q = q.where('user_id', '=', filter.userId);
      return paginate(q, page);
    },

    messages: (sessionId: string): Promise<MessageRow[]> =>
      k.selectFrom('messages').selectAll().where('session_id', '=', sessionId).orderBy('seq').execute(),

    /** The latest `limit` user messages and answers (tool rounds left out), oldest first. */
    async history(sessionId: string, limit: number): Promise<Pick<MessageRow, 'role' | 'content'>[]> {
      return (await latestTurns.all(sessionId, limit)).reverse();
    },

    /** An answer (a final assistant message) of the session; the latest when `messageId` is undefined. */
    findAnswer: (sessionId: string, messageId: string | undefined) => {
      let q = k
        .selectFrom('messages')
        .select(['id'])
        .where('session_id', '=', sessionId)
        .where('role', '=', 'assistant')
        .where('tool_calls', 'is', null);
      if (messageId !== undefined) q = q.where('id', '=', messageId);
      return q.orderBy('seq', 'desc').limit(1).executeTakeFirst();
    },

    /**
     * How many of the session's latest answers in a row (counting back from the newest, at most
     * `limit`) are the persona's with no knowledge found (an interaction with `sources` 0). A
     * person's message or a notice (a handoff opened or ended) has no interaction, so it ends the
     * run, as does an answer recorded before sources were counted (null).
     */
    async noKnowledgeRun(workspaceId: string, sessionId: string, limit: number): Promise<number> {
      const rows = await k
        .selectFrom('messages')
        .leftJoin('interactions', (j) => j.onRef('interactions.message_id', '=', 'messages.id').on('interactions.workspace_id', '=', workspaceId))
        .select('interactions.sources')
        .where('messages.session_id', '=', sessionId)
        .where('messages.role', '=', 'assistant')
        .where('messages.tool_calls', 'is', null)
        .orderBy('messages.seq', 'desc')
        .limit(limit)
        .execute();
      const run = rows.findIndex((r) => r.sources !== 0);
      return run < 0 ? rows.length : run;
    },

    /**
     * What people and notices said since the user's latest message that no answer returned: the
     * catch-up a user of the HTTP API gets with their next message while a person has the
     * conversation, and after they handed it back (a turn's own answer, like the `/human` notice, is
     * its interaction's message). Prepared: every follow-up of an API user asks it.
     */
    unseenReplies: (workspaceId: string, sessionId: string, limit: number): Promise<Array<Pick<MessageRow, 'id' | 'content' | 'author' | 'created_at'>>> =>
      unseen.all(sessionId, sessionId, workspaceId, limit),

    /**
     * Messages of a session after the `after`-th, oldest first (tool rounds left out), each with its
     * position in the session (1 for its first message): a session's event stream. A position, not
     * the table's seq, which counts every workspace's messages and would show their number.
     */
    async messagesAfter(sessionId: string, after: number, limit: number) {
      const rows = await k
        .selectFrom((eb) =>
          eb
            .selectFrom('messages')
            .select(['id', 'role', 'content', 'author', 'created_at', 'tool_calls', sql<number>`row_number() OVER (ORDER BY seq)`.as('position')])
            .where('session_id', '=', sessionId)
            .as('m'),
        )
        .select(['m.position', 'm.id', 'm.role', 'm.content', 'm.author', 'm.created_at'])
        .where('m.position', '>', after)
        .where('m.role', '!=', 'tool')
        .where('m.tool_calls', 'is', null)
        .orderBy('m.position')
        .limit(limit)
        .execute();
      return rows.map((r) => ({ ...r, position: Number(r.position) }));
    },

    /** The position of a session's latest message: how many it has (0 when none). */
    latestPosition: async (sessionId: string): Promise<number> =>
      Number((await k.selectFrom('messages').select((eb) => eb.fn.countAll().as('n')).where('session_id', '=', sessionId).executeTakeFirst())?.n ?? 0),

    saveExchange: (write: ExchangeWrite) => writes.saveExchange(write),
    recordInteraction: (interaction: NewInteraction) => writes.recordInteraction(interaction),

    async addFeedback(row: { workspace_id: string; session_id: string; message_id: string | null; persona_id: string; ab_test_id: string | null; variant: 'A' | 'B' | null; channel_id: string | null; rating: number; comment: string | null; created_at: string }, audit?: AuditRow) {
      await k.transaction().execute(async (trx) => {
        await trx.insertInto('feedback').values(row).execute();
        if (audit) await insertAudit(trx, audit);
        if (row.message_id !== null) {
          await trx.updateTable('interactions').set({ rating: row.rating }).where('workspace_id', '=', row.workspace_id).where('message_id', '=', row.message_id).execute();
        }
      });
    },

    deleteSession: (workspaceId: string, id: string, at: string, audit?: AuditRow) => writes.deleteSession(workspaceId, id, at, audit),
  };
}

export type ChatStore = ReturnType<typeof createChatStore>;
