/**
 * The hot path's writes on SQLite: the answer path's exchanges, the channel inbox and the
 * OpenAI-compatible threads, each a better-sqlite3 prepared statement run in the backend's one
 * write group (one transaction per event-loop turn, write-group.ts). Prepared once: building and
 * compiling these with Kysely cost more than running them (issue 18). The PostgreSQL counterparts
 * are in src/db/postgres/hot-writes.ts.
 */
import type { ChannelWrites } from '../../business/channels/channels.store.js';
import { SESSION_DELETED } from '../../business/handoffs/handoffs.store.js';
import type { ChatWrites, ExchangeWrite, NewInteraction } from '../../core/chat/chat.store.js';
import type { ThreadWrites } from '../../core/openai-compat/openai.store.js';
import type { HotWrites } from '../backend.js';
import type { AuditRow } from '../../core/audit/audit.js';
import type { Db } from '../database.js';
import type { WriteGroup } from '../write-group.js';

const AUDIT_COLUMNS =
  'id, workspace_id, at, actor_type, actor_id, actor_name, on_behalf_of, action, target_type, target_id, outcome, request_id, ip, user_agent, changes';

const INTERACTION_COLUMNS =
  'workspace_id, session_id, message_id, persona_id, ab_test_id, variant, channel_id, user_id, model, started_at, latency_ms, ttft_ms, prompt_tokens, completion_tokens, tool_calls, error, metadata, new_session, persona_version, sources';

/** `writes`: the backend's one write group (so tests may put writes of their own in the same group). */
export function createSqliteHotWrites(db: Db, writes: WriteGroup): HotWrites {
  return { chat: chatWrites(db, writes), channels: channelWrites(db, writes), threads: threadWrites(db, writes) };
}

type Group = WriteGroup;

function chatWrites({ sqlite }: Db, writes: Group): ChatWrites {
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
  const forgetInteractions = sqlite.prepare('UPDATE interactions SET session_id = NULL, message_id = NULL, metadata = NULL WHERE workspace_id = ? AND session_id = ?');
  const forgetFeedback = sqlite.prepare('UPDATE feedback SET session_id = NULL, message_id = NULL, comment = NULL WHERE workspace_id = ? AND session_id = ?');
  const endHandoff = sqlite.prepare(
    `UPDATE handoffs SET status = 'resolved', offer_until = NULL, ended_at = @at, ended_by = '${SESSION_DELETED}', updated_at = @at, rev = rev + 1
     WHERE workspace_id = @workspace_id AND session_id = @id AND status IN ('queued', 'offered', 'accepted')`,
  );
  const deleteSessionStmt = sqlite.prepare('DELETE FROM sessions WHERE id = ? AND workspace_id = ?');
  const sessionExists = sqlite.prepare('SELECT 1 FROM sessions WHERE id = ? AND workspace_id = ?');
  const insertAuditStmt = sqlite.prepare(`INSERT INTO audit_events (${AUDIT_COLUMNS}) VALUES (${AUDIT_COLUMNS.split(', ').map((c) => `@${c}`).join(', ')})`);

  /** The rows of one exchange; false (nothing written) when its existing session is gone. Run inside a transaction. */
  const exchangeRows = (write: ExchangeWrite): boolean => {
    const { session, messages, interaction } = write;
    if (write.isNew) insertSession.run({ ...session, message_count: messages.length });
    else if (touchSession.run({ id: session.id, workspace_id: session.workspace_id, added: messages.length, now: session.last_message_at, user_id: session.user_id }).changes === 0) return false;
    for (const m of messages) insertMessage.run(m);
    insertInteraction.run({ ...interaction, sources: interaction.sources ?? null });
    for (const t of write.tools ?? []) {
      insertTool.run(interaction.workspace_id, interaction.started_at, interaction.persona_id, interaction.channel_id, t.name, t.isError ? 1 : 0);
    }
    return true;
  };
  const interactionRow = (interaction: NewInteraction): void => void insertInteraction.run({ ...interaction, sources: interaction.sources ?? null });

  const removeSession = sqlite.transaction((workspaceId: string, id: string, at: string, audit: AuditRow | undefined): boolean => {
    if (!sessionExists.get(id, workspaceId)) return false;
    endHandoff.run({ workspace_id: workspaceId, id, at });
    forgetInteractions.run(workspaceId, id);
    forgetFeedback.run(workspaceId, id);
    deleteSessionStmt.run(id, workspaceId);
    if (audit) insertAuditStmt.run(audit);
    return true;
  });

  return {
    saveExchange: (write) => writes.run(() => exchangeRows(write)),
    recordInteraction: (interaction) => writes.run(() => interactionRow(interaction)),
    deleteSession: async (workspaceId, id, at, audit) => removeSession(workspaceId, id, at, audit),
  };
}

function channelWrites({ sqlite }: Db, writes: Group): ChannelWrites {
  const insertInbox = sqlite.prepare(`INSERT INTO channel_inbox (channel_id, external_id, conversation_id, payload, status, received_at, answered_at)
    VALUES (@channel_id, @external_id, @conversation_id, @payload, @status, @received_at, NULL)
    ON CONFLICT (channel_id, external_id) DO NOTHING`);
  const claimInbox = sqlite.prepare("UPDATE channel_inbox SET status = 'answering', claimed_by = ? WHERE seq = ? AND status = ? AND claimed_by IS ?");
  const settleInbox = sqlite.prepare('UPDATE channel_inbox SET status = ?, answered_at = ? WHERE seq = ?');
  const upsertSession = sqlite.prepare(`INSERT INTO channel_conversations (channel_id, conversation_id, session_id) VALUES (?, ?, ?)
    ON CONFLICT (channel_id, conversation_id) DO UPDATE SET session_id = excluded.session_id`);
  const insertPosted = sqlite.prepare(`INSERT INTO channel_messages (channel_id, external_id, session_id, message_id, created_at)
    VALUES (@channel_id, @external_id, @session_id, @message_id, @created_at) ON CONFLICT DO NOTHING`);
  return {
    receive: (row) =>
      writes.run(() => {
        const r = insertInbox.run(row);
        return r.changes > 0 ? Number(r.lastInsertRowid) : null;
      }),
    claim: (seq, from, owner) => writes.run(() => claimInbox.run(owner, seq, from.status, from.claimedBy).changes > 0),
    settle: (seq, status, at) => writes.run(() => void settleInbox.run(status, at, seq)),
    setSession: (channelId, conversationId, sessionId) => writes.run(() => void upsertSession.run(channelId, conversationId, sessionId)),
    posted: (rows) => writes.run(() => rows.forEach((row) => insertPosted.run(row))),
  };
}

function threadWrites({ sqlite }: Db, writes: Group): ThreadWrites {
  const upsert = sqlite.prepare(
    `INSERT INTO openai_threads (workspace_id, model, user_key, history_hash, session_id, created_at) VALUES (?, ?, ?, ?, ?, ?)
     ON CONFLICT (workspace_id, model, user_key, history_hash) DO UPDATE SET session_id = excluded.session_id, created_at = excluded.created_at`,
  );
  return {
    save: (key, sessionId, now) => writes.run(() => void upsert.run(key.workspaceId, key.model, key.userKey, key.historyHash, sessionId, now)),
  };
}
