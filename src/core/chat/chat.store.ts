import type { Db } from '../../db/database.js';
import type { InteractionsTable, MessageRow, MessagesTable, SessionRow } from '../../db/schema.js';
import type { WriteGroup } from '../../db/write-group.js';
import { type PageRequest, paginate } from '../../lib/pagination.js';

export type NewMessage = Omit<MessagesTable, 'seq'>;
export type NewInteraction = Omit<InteractionsTable, 'seq' | 'rating'>;
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

const INTERACTION_COLUMNS =
  'workspace_id, session_id, message_id, persona_id, ab_test_id, variant, channel_id, user_id, model, started_at, latency_ms, ttft_ms, prompt_tokens, completion_tokens, tool_calls, error, metadata, new_session';

/** `writes`: the context's write group, which the exchange writes share with the other hot-path writes. */
export function createChatStore(db: Db, writes: WriteGroup) {
  const k = db.kysely;
  const { sqlite } = db;
  // The write path of every answer: prepared once, run in the write group's transaction of its
  // event-loop turn, each exchange acknowledged after that commit (write-group.ts).
  const insertSession = sqlite.prepare(
    `INSERT INTO sessions (id, workspace_id, persona_id, ab_test_id, variant, channel_id, user_id, title, message_count, created_at, last_message_at)
     VALUES (@id, @workspace_id, @persona_id, @ab_test_id, @variant, @channel_id, @user_id, @title, @message_count, @created_at, @last_message_at)`,
  );
  const touchSession = sqlite.prepare(
    `UPDATE sessions SET message_count = message_count + @added, last_message_at = @now, user_id = COALESCE(user_id, @user_id)
     WHERE id = @id AND workspace_id = @workspace_id`,
  );
  const insertMessage = sqlite.prepare(
    `INSERT INTO messages (id, session_id, role, content, tool_calls, tool_call_id, created_at)
     VALUES (@id, @session_id, @role, @content, @tool_calls, @tool_call_id, @created_at)`,
  );
  const insertInteraction = sqlite.prepare(
    `INSERT INTO interactions (${INTERACTION_COLUMNS}) VALUES (${INTERACTION_COLUMNS.split(', ').map((c) => `@${c}`).join(', ')})`,
  );
  const insertTool = sqlite.prepare(
    'INSERT INTO interaction_tools (workspace_id, started_at, persona_id, channel_id, tool_name, is_error) VALUES (?, ?, ?, ?, ?, ?)',
  );
  // Every follow-up in a session reads it and its latest turns before answering.
  const sessionById = sqlite.prepare('SELECT * FROM sessions WHERE id = ? AND workspace_id = ?');
  const latestTurns = sqlite.prepare(
    "SELECT role, content FROM messages WHERE session_id = ? AND role != 'tool' AND tool_calls IS NULL ORDER BY seq DESC LIMIT ?",
  );
  const forgetInteractions = sqlite.prepare('UPDATE interactions SET session_id = NULL, message_id = NULL, metadata = NULL WHERE session_id = ?');
  const forgetFeedback = sqlite.prepare('UPDATE feedback SET session_id = NULL, message_id = NULL, comment = NULL WHERE session_id = ?');
  const deleteSessionStmt = sqlite.prepare('DELETE FROM sessions WHERE id = ? AND workspace_id = ?');
  const sessionExists = sqlite.prepare('SELECT 1 FROM sessions WHERE id = ? AND workspace_id = ?');

  /** The rows of one exchange; false (nothing written) when its existing session is gone. Run inside a transaction. */
  const exchangeRows = (write: ExchangeWrite): boolean => {
    const { session, messages, interaction } = write;
    if (write.isNew) insertSession.run({ ...session, message_count: messages.length });
    else if (touchSession.run({ id: session.id, workspace_id: session.workspace_id, added: messages.length, now: session.last_message_at, user_id: session.user_id }).changes === 0) return false;
    for (const m of messages) insertMessage.run(m);
    insertInteraction.run(interaction);
    for (const t of write.tools ?? []) {
      insertTool.run(interaction.workspace_id, interaction.started_at, interaction.persona_id, interaction.channel_id, t.name, t.isError ? 1 : 0);
    }
    return true;
  };
  const interactionRow = (interaction: NewInteraction): boolean => {
    insertInteraction.run(interaction);
    return true;
  };

  const removeSession = sqlite.transaction((workspaceId: string, id: string): boolean => {
    if (!sessionExists.get(id, workspaceId)) return false;
    forgetInteractions.run(id);
    forgetFeedback.run(id);
    deleteSessionStmt.run(id, workspaceId);
    return true;
  });

  return {
    findSession: async (workspaceId: string, id: string): Promise<SessionRow | undefined> => sessionById.get(id, workspaceId) as SessionRow | undefined,

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
      return (latestTurns.all(sessionId, limit) as Pick<MessageRow, 'role' | 'content'>[]).reverse();
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

    /** Stores one exchange atomically; false (nothing written) when its existing session is gone. */
    saveExchange: (write: ExchangeWrite): Promise<boolean> => writes.run(() => exchangeRows(write)),

    /** A failed or cancelled answer: numbers only, nothing joins a session. */
    recordInteraction: async (interaction: NewInteraction): Promise<void> => void (await writes.run(() => interactionRow(interaction))),

    async addFeedback(row: { workspace_id: string; session_id: string; message_id: string | null; persona_id: string; ab_test_id: string | null; variant: 'A' | 'B' | null; channel_id: string | null; rating: number; comment: string | null; created_at: string }) {
      await k.transaction().execute(async (trx) => {
        await trx.insertInto('feedback').values(row).execute();
        if (row.message_id !== null) {
          await trx.updateTable('interactions').set({ rating: row.rating }).where('message_id', '=', row.message_id).execute();
        }
      });
    },

    /** Deletes the session and its messages; interactions and feedback keep their numbers only. */
    deleteSession: async (workspaceId: string, id: string): Promise<boolean> => removeSession(workspaceId, id),
  };
}

export type ChatStore = ReturnType<typeof createChatStore>;
