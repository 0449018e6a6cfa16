import type { Db } from '../../db/database.js';
import type { WriteGroup } from '../../db/write-group.js';
import type { ChannelInboxRow, ChannelRow } from '../../db/schema.js';
import { type PageRequest, paginate } from '../../lib/pagination.js';

/**
 * Channels, their inbox, conversations and posted messages (API.md §9); every channel query filters
 * by workspace. What every inbound message runs is a prepared statement: building and compiling
 * those queries with Kysely cost more than running them (issue 18). Its writes go through the
 * context's write group (one commit per event-loop turn, each settling after it): a burst of Slack
 * deliveries stored each in its own commit cost ~70 µs a delivery on the acknowledging thread.
 */
export function createChannelStore({ kysely: db, sqlite }: Db, writes: WriteGroup) {
  const insertInbox = sqlite.prepare(`INSERT INTO channel_inbox (channel_id, external_id, conversation_id, payload, status, received_at, answered_at)
    VALUES (@channel_id, @external_id, @conversation_id, @payload, @status, @received_at, NULL)
    ON CONFLICT (channel_id, external_id) DO NOTHING`);
  const claimInbox = sqlite.prepare("UPDATE channel_inbox SET status = 'answering' WHERE seq = ? AND status = ?");
  const settleInbox = sqlite.prepare('UPDATE channel_inbox SET status = ?, answered_at = ? WHERE seq = ?');
  const sessionOfConversation = sqlite.prepare('SELECT session_id FROM channel_conversations WHERE channel_id = ? AND conversation_id = ?').pluck();
  const upsertSession = sqlite.prepare(`INSERT INTO channel_conversations (channel_id, conversation_id, session_id) VALUES (?, ?, ?)
    ON CONFLICT (channel_id, conversation_id) DO UPDATE SET session_id = excluded.session_id`);
  const insertPosted = sqlite.prepare(`INSERT INTO channel_messages (channel_id, external_id, session_id, message_id, created_at)
    VALUES (@channel_id, @external_id, @session_id, @message_id, @created_at) ON CONFLICT DO NOTHING`);
  return {
    insert: (row: ChannelRow) => db.insertInto('channels').values(row).execute(),
    find: (workspaceId: string, id: string) =>
      db.selectFrom('channels').selectAll().where('workspace_id', '=', workspaceId).where('id', '=', id).executeTakeFirst(),
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
    receive: (row: Omit<ChannelInboxRow, 'seq' | 'answered_at'>): Promise<number | null> =>
      writes.run(() => {
        const r = insertInbox.run(row);
        return r.changes > 0 ? Number(r.lastInsertRowid) : null;
      }),
    /** Takes a stored message to answer; false when another run already took it. */
    claim: (seq: number, from: ChannelInboxRow['status']): Promise<boolean> => writes.run(() => claimInbox.run(seq, from).changes > 0),
    settle: (seq: number, status: 'answered' | 'failed' | 'expired', at: string): Promise<void> =>
      writes.run(() => void settleInbox.run(status, at, seq)),
    /** Messages of a channel stored but not answered (a crash or restart came between). */
    unanswered: (channelId: string) =>
      db.selectFrom('channel_inbox').selectAll().where('channel_id', '=', channelId).where('status', 'in', ['pending', 'answering']).orderBy('seq').execute(),
    inboxEntry: (channelId: string, externalId: string) =>
      db.selectFrom('channel_inbox').selectAll().where('channel_id', '=', channelId).where('external_id', '=', externalId).executeTakeFirst(),

    sessionOf: async (channelId: string, conversationId: string) => sessionOfConversation.get(channelId, conversationId) as string | undefined,
    setSession: (channelId: string, conversationId: string, sessionId: string): Promise<void> =>
      writes.run(() => void upsertSession.run(channelId, conversationId, sessionId)),

    posted: (rows: Array<{ channel_id: string; external_id: string; session_id: string | null; message_id: string | null; created_at: string }>): Promise<void> =>
      rows.length === 0 ? Promise.resolve() : writes.run(() => rows.forEach((row) => insertPosted.run(row))),
    postedMessage: (channelId: string, externalId: string) =>
      db.selectFrom('channel_messages').selectAll().where('channel_id', '=', channelId).where('external_id', '=', externalId).executeTakeFirst(),
  };
}

export type ChannelStore = ReturnType<typeof createChannelStore>;
