import type { SqlBackend } from '../../db/backend.js';
import { type AuditRow, insertAudit, withAudit } from '../../core/audit/audit.js';
import type { ChannelInboxRow, ChannelRow } from '../../db/schema.js';
import { type PageRequest, paginate } from '../../lib/pagination.js';

/**
 * What every inbound message writes. Each backend groups these writes with the answer path's, one
 * transaction per event-loop turn, each settling after its commit: a burst of Slack deliveries
 * stored each in its own commit cost ~70 µs a delivery on the acknowledging thread (issue 18).
 * src/db/sqlite/hot-writes.ts, src/db/postgres/hot-writes.ts.
 */
export interface ChannelWrites {
  /** Stores an inbound delivery; null when the same delivery was stored before (a retry). */
  receive(row: Omit<ChannelInboxRow, 'seq' | 'answered_at' | 'claimed_by'>): Promise<number | null>;
  /**
   * Takes a stored message to answer for instance `owner`; false when another run already took it.
   * `from` is the status and claimer it is taken from: pending, or answering by an instance that died.
   */
  claim(seq: number, from: { status: ChannelInboxRow['status']; claimedBy: string | null }, owner: string): Promise<boolean>;
  settle(seq: number, status: 'answered' | 'failed' | 'expired', at: string): Promise<void>;
  setSession(channelId: string, conversationId: string, sessionId: string): Promise<void>;
  posted(rows: PostedMessage[]): Promise<void>;
}

export interface PostedMessage {
  channel_id: string;
  external_id: string;
  session_id: string | null;
  message_id: string | null;
  created_at: string;
}

/**
 * Channels, their inbox, conversations and posted messages (API.md §9); every channel query filters
 * by workspace. What every inbound message reads is a prepared statement: building and compiling
 * those queries with Kysely cost more than running them (issue 18).
 */
export function createChannelStore(db: SqlBackend, writes: ChannelWrites) {
  const k = db.kysely;
  const sessionOfConversation = db.prepare<{ session_id: string }>('SELECT session_id FROM channel_conversations WHERE channel_id = ? AND conversation_id = ?');
  return {
    insert: (row: ChannelRow, audit?: AuditRow) =>
      withAudit(k, audit, async (trx) => {
        await trx.insertInto('channels').values(row).execute();
      }),
    find: (workspaceId: string, id: string) =>
      k.selectFrom('channels').selectAll().where('workspace_id', '=', workspaceId).where('id', '=', id).executeTakeFirst(),
    list: (workspaceId: string, page: PageRequest, type?: ChannelRow['type']) => {
      let q = k.selectFrom('channels').selectAll().where('workspace_id', '=', workspaceId);
      if (type !== undefined) q = q.where('type', '=', type);
      return paginate(q, page);
    },
    /** Every channel of every workspace (start-up). */
    all: () => k.selectFrom('channels').selectAll().orderBy('created_at').execute(),
    update: (workspaceId: string, id: string, patch: Partial<ChannelRow>, audit?: AuditRow) =>
      withAudit(k, audit, async (trx) => {
        await trx.updateTable('channels').set(patch).where('workspace_id', '=', workspaceId).where('id', '=', id).execute();
      }),
    /** An event of what changed nothing stored here (a message sent out through the platform). */
    audit: (row: AuditRow) => insertAudit(k, row),
    usingPersona: (workspaceId: string, personaId: string) =>
      k.selectFrom('channels').select(['id', 'name']).where('workspace_id', '=', workspaceId).where('persona_id', '=', personaId).executeTakeFirst(),
    /** Channels routed through an A/B test. */
    usingAbTest: (workspaceId: string, abTestId: string) =>
      k.selectFrom('channels').select(['id']).where('workspace_id', '=', workspaceId).where('ab_test_id', '=', abTestId).execute(),
    /** Connected channels of a type, for the `<type>.send_message` tools. */
    ofType: (workspaceId: string, type: ChannelRow['type']) =>
      k.selectFrom('channels').selectAll().where('workspace_id', '=', workspaceId).where('type', '=', type).orderBy('created_at').execute(),

    receive: writes.receive,
    claim: writes.claim,
    settle: writes.settle,
    /** Messages of a channel stored but not answered (a crash or restart came between). */
    unanswered: (channelId: string) =>
      k.selectFrom('channel_inbox').selectAll().where('channel_id', '=', channelId).where('status', 'in', ['pending', 'answering']).orderBy('seq').execute(),
    inboxEntry: (channelId: string, externalId: string) =>
      k.selectFrom('channel_inbox').selectAll().where('channel_id', '=', channelId).where('external_id', '=', externalId).executeTakeFirst(),

    sessionOf: async (channelId: string, conversationId: string) => (await sessionOfConversation.first(channelId, conversationId))?.session_id,
    setSession: writes.setSession,
    posted: (rows: PostedMessage[]): Promise<void> => (rows.length === 0 ? Promise.resolve() : writes.posted(rows)),
    /** The user's message an answer answered: the latest one before it in its session. */
    async questionOf(sessionId: string, answerId: string): Promise<string | undefined> {
      const answer = await k.selectFrom('messages').select(['seq', 'author']).where('session_id', '=', sessionId).where('id', '=', answerId).executeTakeFirst();
      // A notice (`system`) or a person's reply is no answer of the persona: nothing to ask again.
      if (!answer || answer.author !== null) return undefined;
      const question = await k
        .selectFrom('messages')
        .select('content')
        .where('session_id', '=', sessionId)
        .where('role', '=', 'user')
        .where('seq', '<', answer.seq)
        .orderBy('seq', 'desc')
        .limit(1)
        .executeTakeFirst();
      return question?.content;
    },
    postedMessage: (channelId: string, externalId: string) =>
      k.selectFrom('channel_messages').selectAll().where('channel_id', '=', channelId).where('external_id', '=', externalId).executeTakeFirst(),
  };
}

export type ChannelStore = ReturnType<typeof createChannelStore>;
