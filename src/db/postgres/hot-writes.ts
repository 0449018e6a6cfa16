/**
 * The hot path's writes on PostgreSQL (the SQLite ones are in src/db/sqlite/hot-writes.ts): the
 * same rows, grouped per event-loop turn into one transaction (write-group.ts). Messages of an
 * exchange go in one multi-row INSERT: each statement is a round trip to the server.
 */
import type { ChannelWrites } from '../../business/channels/channels.store.js';
import type { ChatWrites, ExchangeWrite } from '../../core/chat/chat.store.js';
import type { ThreadWrites } from '../../core/openai-compat/openai.store.js';
import type { HotWrites } from '../backend.js';
import type { PostgresDb } from './connection.js';
import { createPgWriteGroup, type PgWrite, type PgWriteGroup } from './write-group.js';

export function createPostgresHotWrites(db: PostgresDb, options: { onWrite?: () => void } = {}): HotWrites {
  const writes = createPgWriteGroup(db.kysely, options);
  return { chat: chatWrites(db, writes), channels: channelWrites(writes), threads: threadWrites(writes) };
}

function exchangeRows(write: ExchangeWrite): PgWrite<boolean> {
  return async (trx) => {
    const { session, messages, interaction } = write;
    if (write.isNew) {
      await trx.insertInto('sessions').values({ ...session, message_count: messages.length }).execute();
    } else {
      const touched = await trx
        .updateTable('sessions')
        .set((eb) => ({
          message_count: eb('message_count', '+', messages.length),
          last_message_at: session.last_message_at,
          user_id: eb.fn.coalesce('user_id', eb.val(session.user_id)),
        }))
        .where('id', '=', session.id)
        .where('workspace_id', '=', session.workspace_id)
        .executeTakeFirst();
      if (Number(touched.numUpdatedRows) === 0) return false;
    }
    if (messages.length > 0) await trx.insertInto('messages').values(messages).execute();
    await trx.insertInto('interactions').values(interaction).execute();
    const tools = write.tools ?? [];
    if (tools.length > 0) {
      await trx
        .insertInto('interaction_tools')
        .values(
          tools.map((t) => ({
            workspace_id: interaction.workspace_id,
            started_at: interaction.started_at,
            persona_id: interaction.persona_id,
            channel_id: interaction.channel_id,
            tool_name: t.name,
            is_error: t.isError ? 1 : 0,
          })),
        )
        .execute();
    }
    return true;
  };
}

function chatWrites({ kysely }: PostgresDb, writes: PgWriteGroup): ChatWrites {
  return {
    saveExchange: (write) => writes.run(exchangeRows(write)),
    recordInteraction: (interaction) => writes.run(async (trx) => void (await trx.insertInto('interactions').values(interaction).execute())),
    deleteSession: (workspaceId, id) =>
      kysely.transaction().execute(async (trx) => {
        // Locks the row: a concurrent exchange's touch waits, then finds it gone.
        const row = await trx.selectFrom('sessions').select('id').where('id', '=', id).where('workspace_id', '=', workspaceId).forUpdate().executeTakeFirst();
        if (!row) return false;
        await trx.updateTable('interactions').set({ session_id: null, message_id: null, metadata: null }).where('workspace_id', '=', workspaceId).where('session_id', '=', id).execute();
        await trx.updateTable('feedback').set({ session_id: null, message_id: null, comment: null }).where('workspace_id', '=', workspaceId).where('session_id', '=', id).execute();
        await trx.deleteFrom('sessions').where('id', '=', id).where('workspace_id', '=', workspaceId).execute();
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
    claim: (seq, from) =>
      writes.run(async (trx) => {
        const r = await trx.updateTable('channel_inbox').set({ status: 'answering' }).where('seq', '=', seq).where('status', '=', from).executeTakeFirst();
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
