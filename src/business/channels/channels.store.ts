import type { Kysely } from 'kysely';
import type { ChannelInboxRow, ChannelRow, Database } from '../../db/schema.js';
import { type PageRequest, paginate } from '../../lib/pagination.js';

/** Channels, their inbox, conversations and posted messages (API.md §9); every channel query filters by workspace. */
export function createChannelStore(db: Kysely<Database>) {
  return {
    insert: (row: ChannelRow) => db.insertInto('channels').values(row).execute(),
    find: (workspaceId: string, id: string) =>
      db.selectFrom('channels').selectAll().where('workspace_id', '=', workspaceId).where('id', '=', id).executeTakeFirst(),
    /** Inbound routes know only the channel id from the URL; the signature then proves the caller. */
    findById: (id: string) => db.selectFrom('channels').selectAll().where('id', '=', id).executeTakeFirst(),
    list: (workspaceId: string, page: PageRequest, type?: ChannelRow['type']) => {
      let q = db.selectFrom('channels').selectAll().where('workspace_id', '=', workspaceId);
      if (type !== undefined) q = q.where('type', '=', type);
      return paginate(q, page);
    },
    /** Every channel of every workspace (start-up). */
    all: () => db.selectFrom('channels').selectAll().orderBy('created_at').execute(),
    update: (workspaceId: string, id: string, patch: Partial<ChannelRow>) =>
      db.updateTable('channels').set(patch).where('workspace_id', '=', workspaceId).where('id', '=', id).execute(),
    usingPersona: (workspaceId: string, personaId: string) =>
      db.selectFrom('channels').select(['id', 'name']).where('workspace_id', '=', workspaceId).where('persona_id', '=', personaId).executeTakeFirst(),
    /** Connected channels of a type, for the `<type>.send_message` tools. */
    ofType: (workspaceId: string, type: ChannelRow['type']) =>
      db.selectFrom('channels').selectAll().where('workspace_id', '=', workspaceId).where('type', '=', type).orderBy('created_at').execute(),

    /** Stores an inbound delivery; null when the same delivery was stored before (a retry). */
    async receive(row: Omit<ChannelInboxRow, 'seq' | 'answered_at'>): Promise<number | null> {
      const r = await db
        .insertInto('channel_inbox')
        .values({ ...row, answered_at: null })
        .onConflict((oc) => oc.columns(['channel_id', 'external_id']).doNothing())
        .executeTakeFirst();
      return Number(r.numInsertedOrUpdatedRows ?? 0n) > 0 ? Number(r.insertId) : null;
    },
    /** Takes a stored message to answer; false when another run already took it. */
    async claim(seq: number, from: ChannelInboxRow['status']): Promise<boolean> {
      const r = await db.updateTable('channel_inbox').set({ status: 'answering' }).where('seq', '=', seq).where('status', '=', from).executeTakeFirst();
      return Number(r.numUpdatedRows) > 0;
    },
    settle: (seq: number, status: 'answered' | 'failed' | 'expired', at: string) =>
      db.updateTable('channel_inbox').set({ status, answered_at: at }).where('seq', '=', seq).execute(),
    /** Messages of a channel stored but not answered (a crash or restart came between). */
    unanswered: (channelId: string) =>
      db.selectFrom('channel_inbox').selectAll().where('channel_id', '=', channelId).where('status', 'in', ['pending', 'answering']).orderBy('seq').execute(),
    inboxEntry: (channelId: string, externalId: string) =>
      db.selectFrom('channel_inbox').selectAll().where('channel_id', '=', channelId).where('external_id', '=', externalId).executeTakeFirst(),

    sessionOf: async (channelId: string, conversationId: string) =>
      (await db.selectFrom('channel_conversations').select('session_id').where('channel_id', '=', channelId).where('conversation_id', '=', conversationId).executeTakeFirst())?.session_id,
    setSession: (channelId: string, conversationId: string, sessionId: string) =>
      db
        .insertInto('channel_conversations')
        .values({ channel_id: channelId, conversation_id: conversationId, session_id: sessionId })
        .onConflict((oc) => oc.columns(['channel_id', 'conversation_id']).doUpdateSet({ session_id: sessionId }))
        .execute(),

    posted: (rows: Array<{ channel_id: string; external_id: string; session_id: string | null; message_id: string | null; created_at: string }>) =>
      rows.length === 0 ? Promise.resolve() : db.insertInto('channel_messages').values(rows).onConflict((oc) => oc.doNothing()).execute().then(() => undefined),
    postedMessage: (channelId: string, externalId: string) =>
      db.selectFrom('channel_messages').selectAll().where('channel_id', '=', channelId).where('external_id', '=', externalId).executeTakeFirst(),
  };
}

export type ChannelStore = ReturnType<typeof createChannelStore>;
