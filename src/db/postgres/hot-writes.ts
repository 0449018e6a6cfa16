/**
 * The hot path's writes on PostgreSQL (the SQLite ones are in src/db/sqlite/hot-writes.ts): the
 * same rows, grouped per event-loop turn into one transaction (write-group.ts), the exchanges of a
 * group batched into one statement per table: each statement is a round trip to the server.
 */
import { sql } from 'kysely';
import type { ChannelWrites } from '../../business/channels/channels.store.js';
import { OPEN, SESSION_DELETED } from '../../business/handoffs/handoffs.store.js';
import type { ChatWrites, ExchangeWrite, NewInteraction } from '../../core/chat/chat.store.js';
import { insertAudit } from '../../core/audit/audit.js';
import type { ThreadWrites } from '../../core/openai-compat/openai.store.js';
import type { HotWrites } from '../backend.js';
import type { PostgresDb } from './connection.js';
import { type Batcher, createPgWriteGroup, type PgWriteGroup } from './write-group.js';

export function createPostgresHotWrites(db: PostgresDb, options: { onWrite?: () => void } = {}): HotWrites {
  const writes = createPgWriteGroup(db.kysely, options);
  return { chat: chatWrites(db, writes), channels: channelWrites(writes), threads: threadWrites(writes) };
}

/**
 * The exchanges of a group in one statement per table, with the effect of writing them one after
 * another: new sessions first (a follow-up in the same group may continue one), then one UPDATE for
 * every continued session (its messages added up, the last exchange's time, the first user id),
 * then the messages in order (so an exchange's question and answer are numbered together), the
 * interactions and their tool calls. An exchange whose session is gone writes nothing: false.
 */
const exchanges: Batcher<ExchangeWrite, boolean> = {
  async run(trx, writes) {
    const created = writes.filter((w) => w.isNew);
    if (created.length > 0) {
      await trx.insertInto('sessions').values(created.map((w) => ({ ...w.session, message_count: w.messages.length }))).execute();
    }
    const touches = new Map<string, { workspaceId: string; added: number; now: string; userId: string | null }>();
    for (const w of writes) {
      if (w.isNew) continue;
      const t = touches.get(w.session.id) ?? { workspaceId: w.session.workspace_id, added: 0, now: w.session.last_message_at, userId: null };
      t.added += w.messages.length;
      t.now = w.session.last_message_at;
      t.userId ??= w.session.user_id;
      touches.set(w.session.id, t);
    }
    const touched = new Set<string>();
    if (touches.size > 0) {
      const entries = [...touches];
      const rows = await sql<{ id: string }>`
        UPDATE sessions s SET message_count = s.message_count + v.added, last_message_at = v.now, user_id = COALESCE(s.user_id, v.user_id)
        FROM unnest(${entries.map(([id]) => id)}::text[], ${entries.map(([, t]) => t.workspaceId)}::text[], ${entries.map(([, t]) => t.added)}::bigint[],
          ${entries.map(([, t]) => t.now)}::text[], ${entries.map(([, t]) => t.userId)}::text[]) AS v(id, workspace_id, added, now, user_id)
        WHERE s.id = v.id AND s.workspace_id = v.workspace_id
        RETURNING s.id`.execute(trx);
      for (const r of rows.rows) touched.add(r.id);
    }
    const ok = writes.map((w) => w.isNew || touched.has(w.session.id));
    const kept = writes.filter((_, i) => ok[i]);
    const messages = kept.flatMap((w) => w.messages);
    if (messages.length > 0) await trx.insertInto('messages').values(messages).execute();
    if (kept.length > 0) await trx.insertInto('interactions').values(kept.map((w) => w.interaction)).execute();
    const tools = kept.flatMap(({ interaction, tools = [] }) =>
      tools.map((t) => ({
        workspace_id: interaction.workspace_id,
        started_at: interaction.started_at,
        persona_id: interaction.persona_id,
        channel_id: interaction.channel_id,
        tool_name: t.name,
        is_error: t.isError ? 1 : 0,
      })),
    );
    if (tools.length > 0) await trx.insertInto('interaction_tools').values(tools).execute();
    return ok;
  },
};

/** Failed or cancelled answers: their interactions in one statement. */
const interactions: Batcher<NewInteraction, void> = {
  async run(trx, rows) {
    await trx.insertInto('interactions').values(rows).execute();
    return rows.map(() => undefined);
  },
};

function chatWrites({ kysely }: PostgresDb, writes: PgWriteGroup): ChatWrites {
  return {
    saveExchange: (write) => writes.batch(exchanges, write),
    recordInteraction: (interaction) => writes.batch(interactions, interaction),
    deleteSession: (workspaceId, id, at, audit) =>
      kysely.transaction().execute(async (trx) => {
        // Locks the row: a concurrent exchange's touch waits, then finds it gone.
        const row = await trx.selectFrom('sessions').select('id').where('id', '=', id).where('workspace_id', '=', workspaceId).forUpdate().executeTakeFirst();
        if (!row) return false;
        await trx
          .updateTable('handoffs')
          .set((eb) => ({ status: 'resolved', offer_until: null, ended_at: at, ended_by: SESSION_DELETED, updated_at: at, rev: eb('rev', '+', 1) }))
          .where('workspace_id', '=', workspaceId)
          .where('session_id', '=', id)
          .where('status', 'in', OPEN)
          .execute();
        await trx.updateTable('interactions').set({ session_id: null, message_id: null, metadata: null }).where('workspace_id', '=', workspaceId).where('session_id', '=', id).execute();
        await trx.updateTable('feedback').set({ session_id: null, message_id: null, comment: null }).where('workspace_id', '=', workspaceId).where('session_id', '=', id).execute();
        await trx.deleteFrom('sessions').where('id', '=', id).where('workspace_id', '=', workspaceId).execute();
        if (audit) await insertAudit(trx, audit);
        return true;
      }),
  };
}

function channelWrites(writes: PgWriteGroup): ChannelWrites {
  return {
    receive: (row) =>
      writes.run(async (trx) => {
        const stored = await trx
          .insertInto('channel_inbox')
          .values({ ...row, answered_at: null })
          .onConflict((oc) => oc.columns(['channel_id', 'external_id']).doNothing())
          .returning('seq')
          .executeTakeFirst();
        return stored?.seq ?? null;
      }),
    claim: (seq, from, owner) =>
      writes.run(async (trx) => {
        const r = await trx
          .updateTable('channel_inbox')
          .set({ status: 'answering', claimed_by: owner })
          .where('seq', '=', seq)
          .where('status', '=', from.status)
          .where('claimed_by', from.claimedBy === null ? 'is' : '=', from.claimedBy)
          .executeTakeFirst();
        return Number(r.numUpdatedRows) > 0;
      }),
    settle: (seq, status, at) =>
      writes.run(async (trx) => void (await trx.updateTable('channel_inbox').set({ status, answered_at: at }).where('seq', '=', seq).execute())),
    setSession: (channelId, conversationId, sessionId) =>
      writes.run(
        async (trx) =>
          void (await trx
            .insertInto('channel_conversations')
            .values({ channel_id: channelId, conversation_id: conversationId, session_id: sessionId })
            .onConflict((oc) => oc.columns(['channel_id', 'conversation_id']).doUpdateSet({ session_id: sessionId }))
            .execute()),
      ),
    posted: (rows) =>
      writes.run(async (trx) => void (await trx.insertInto('channel_messages').values(rows).onConflict((oc) => oc.doNothing()).execute())),
  };
}

function threadWrites(writes: PgWriteGroup): ThreadWrites {
  return {
    save: (key, sessionId, now) =>
      writes.run(
        async (trx) =>
          void (await trx
            .insertInto('openai_threads')
            .values({ workspace_id: key.workspaceId, model: key.model, user_key: key.userKey, history_hash: key.historyHash, session_id: sessionId, created_at: now })
            .onConflict((oc) => oc.columns(['workspace_id', 'model', 'user_key', 'history_hash']).doUpdateSet({ session_id: sessionId, created_at: now }))
            .execute()),
      ),
  };
}
