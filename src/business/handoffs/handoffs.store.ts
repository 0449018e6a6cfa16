import { type Insertable, type Kysely, type Selectable, sql } from 'kysely';
import type { Database, HandoffRow, HandoffStatus } from '../../db/schema.js';
import { type PageRequest, paginate } from '../../lib/pagination.js';
import { type AuditRow, insertAudit } from '../../core/audit/audit.js';

export const OPEN: HandoffStatus[] = ['queued', 'offered', 'accepted'];
/** `endedBy` of a handoff whose conversation was deleted (ended in the deletion's transaction). */
export const SESSION_DELETED = 'session deleted';

/** The two delivery queues: messages to channel users, events to teams' webhooks. Same columns for claims. */
export type Queue = 'handoff_outbox' | 'handoff_notifications';
export interface QueueRow {
  handoff_outbox: Selectable<Database['handoff_outbox']>;
  handoff_notifications: Selectable<Database['handoff_notifications']>;
}

/** A message a person or the platform adds to a handed-off conversation. */
export interface HandoffMessage {
  id: string;
  session_id: string;
  role: 'user' | 'assistant';
  content: string;
  author: string | null;
  created_at: string;
}

/** What one change of a handoff writes (`commit`). */
export interface Writes {
  move?: { from: HandoffRow; patch: Partial<HandoffRow> };
  messages?: { rows: HandoffMessage[]; sessionId: string; at: string; relay?: { workspace_id: string; handoff_id: string; channel_id: string; conversation_id: string } | undefined };
  notifications?: Insertable<Database['handoff_notifications']>[];
  outbox?: Insertable<Database['handoff_outbox']>[];
  /** The change's audit event (API.md §14), written in its transaction. */
  audit?: AuditRow;
}

/** Handoffs (issue 29); every query of a caller's filters by workspace. Moves are conditional on the row as read. */
export function createHandoffStore(db: Kysely<Database>) {
  return {
    /**
     * Inserts the handoff unless its session already has an open one; answers the open one either
     * way. `audit`: the event of the person who handed it over, written only with a new handoff, in
     * its insert's transaction.
     */
    async open(row: HandoffRow, audit?: AuditRow): Promise<{ row: HandoffRow; created: boolean }> {
      const insert = async (k: Kysely<Database>) => {
        const inserted = await k
          .insertInto('handoffs')
          .values(row)
          // The partial index's own predicate, as literals: SQLite matches the conflict target by its text.
          .onConflict((oc) => oc.column('session_id').where(sql<boolean>`status IN ('queued', 'offered', 'accepted')`).doNothing())
          .executeTakeFirst();
        const created = Number(inserted.numInsertedOrUpdatedRows ?? 0) > 0;
        if (created && audit) await insertAudit(k, audit);
        return created;
      };
      const created = audit ? await db.transaction().execute(insert) : await insert(db);
      if (created) return { row, created: true };
      const open = await db.selectFrom('handoffs').selectAll().where('session_id', '=', row.session_id).where('status', 'in', OPEN).executeTakeFirstOrThrow();
      return { row: open, created: false };
    },
    find: (workspaceId: string, id: string) => db.selectFrom('handoffs').selectAll().where('workspace_id', '=', workspaceId).where('id', '=', id).executeTakeFirst(),
    /** The open handoff of a session, if any: while there is one, the persona stays silent in it. */
    openFor: (sessionId: string) => db.selectFrom('handoffs').selectAll().where('session_id', '=', sessionId).where('status', 'in', OPEN).executeTakeFirst(),
    /** The session's latest handoff, open or ended. */
    latestFor: (sessionId: string) =>
      db.selectFrom('handoffs').selectAll().where('session_id', '=', sessionId).orderBy('created_at', 'desc').orderBy('id', 'desc').limit(1).executeTakeFirst(),
    /** `teamIds`: only these teams' (an agent sees their own teams' handoffs only). */
    list: (
      workspaceId: string,
      page: PageRequest,
      filter: { status?: HandoffStatus[] | undefined; teamId?: string | undefined; member?: string | undefined; teamIds?: string[] | undefined },
    ) => {
      let q = db.selectFrom('handoffs').selectAll().where('workspace_id', '=', workspaceId);
      if (filter.teamIds !== undefined) {
        if (filter.teamIds.length === 0) q = q.where(sql<boolean>`1 = 0`);
        else q = q.where('team_id', 'in', filter.teamIds);
      }
      if (filter.status !== undefined && filter.status.length > 0) q = q.where('status', 'in', filter.status);
      if (filter.teamId !== undefined) q = q.where('team_id', '=', filter.teamId);
      if (filter.member !== undefined) q = q.where(sql<boolean>`lower(member) = ${filter.member.toLowerCase()}`);
      return paginate(q, page);
    },
    /**
     * Moves a handoff from the revision it was read at to `patch` (the next revision); false when
     * anything moved it meanwhile (another member accepted, another instance re-offered).
     */
    async move(from: HandoffRow, patch: Partial<HandoffRow>): Promise<boolean> {
      const r = await db
        .updateTable('handoffs')
        .set({ ...patch, rev: from.rev + 1 })
        .where('id', '=', from.id)
        .where('rev', '=', from.rev)
        .executeTakeFirst();
      return Number(r.numUpdatedRows) > 0;
    },
    /** Open handoffs per member (e-mail, lower case) of a team: routing prefers the member with the fewest. */
    async openPerMember(teamId: string): Promise<Map<string, number>> {
      const rows = await db
        .selectFrom('handoffs')
        .select([sql<string>`lower(member)`.as('member'), sql<number>`count(*)`.as('n')])
        .where('team_id', '=', teamId)
        .where('status', 'in', ['offered', 'accepted'])
        .where('member', 'is not', null)
        .groupBy(sql`lower(member)`)
        .execute();
      return new Map(rows.map((r) => [r.member, Number(r.n)]));
    },
    /** Offers that lapsed by `now`, queued handoffs, and open ones whose conversation was deleted, across workspaces (the sweep), oldest first. */
    due: (now: string, limit: number) =>
      db
        .selectFrom('handoffs')
        .selectAll()
        .where((eb) =>
          eb.or([
            eb('status', '=', 'queued'),
            eb.and([eb('status', '=', 'offered'), eb('offer_until', '<=', now)]),
            eb.and([eb('status', 'in', OPEN), eb('session_id', 'is', null)]),
          ]),
        )
        .orderBy('created_at')
        .limit(limit)
        .execute(),
    /** The handoffs opened in [lo, hi), oldest first (analytics and its export). */
    openedIn: (workspaceId: string, lo: string, hi: string) =>
      db
        .selectFrom('handoffs')
        .select(['id', 'session_id', 'persona_id', 'team_id', 'status', 'trigger', 'member', 'created_at', 'accepted_at', 'first_reply_at', 'ended_at', 'ended_by'])
        .where('workspace_id', '=', workspaceId)
        .where('created_at', '>=', lo)
        .where('created_at', '<', hi)
        .orderBy('created_at')
        .orderBy('id')
        .execute(),
    /**
     * One change of a handoff, all or nothing: its move (made over the revision it was read at;
     * nothing is written when another move came first: false), the messages it adds to the
     * conversation (counted into its session; each queued for the user when `relay` names their
     * channel conversation), and the team's events and desk posts it queues. Nothing is sent that
     * was not stored, and nothing stored is left unsent.
     */
    commit: (w: Writes): Promise<boolean> =>
      db.transaction().execute(async (trx) => {
        if (w.move) {
          const r = await trx
            .updateTable('handoffs')
            .set({ ...w.move.patch, rev: w.move.from.rev + 1 })
            .where('id', '=', w.move.from.id)
            .where('rev', '=', w.move.from.rev)
            .executeTakeFirst();
          if (Number(r.numUpdatedRows) === 0) return false;
        }
        const m = w.messages;
        if (m && m.rows.length > 0) {
          // The session's row first, as the answer path does: its lock orders the session's writers, so
          // their messages are numbered in the order they commit (an event stream's positions never shift).
          await trx
            .updateTable('sessions')
            .set({ message_count: sql`message_count + ${m.rows.length}`, last_message_at: m.at })
            .where('id', '=', m.sessionId)
            .execute();
          await trx.insertInto('messages').values(m.rows.map((row) => ({ ...row, tool_calls: null, tool_call_id: null }))).execute();
          if (m.relay) {
            const relay = m.relay;
            await trx
              .insertInto('handoff_outbox')
              .values(m.rows.map((row) => ({ ...relay, message_id: row.id, text: row.content, status: 'pending' as const, attempts: 0, next_at: m.at, created_at: m.at })))
              .execute();
          }
        }
        if (w.notifications && w.notifications.length > 0) await trx.insertInto('handoff_notifications').values(w.notifications).execute();
        if (w.outbox && w.outbox.length > 0) await trx.insertInto('handoff_outbox').values(w.outbox).execute();
        if (w.audit) await insertAudit(trx, w.audit);
        return true;
      }),
    /** The channel conversation of a session, if it came from a channel. */
    channelConversation: (sessionId: string) =>
      db.selectFrom('channel_conversations').select(['channel_id', 'conversation_id']).where('session_id', '=', sessionId).executeTakeFirst(),
    /**
     * Claims up to `limit` deliveries of a queue that are due and unclaimed (or whose claim lapsed),
     * oldest first. Either queue by name: typed as the outbox, whose claim columns both share.
     */
    claimDue: <Q extends Queue>(queue: Q, owner: string, now: string, until: string, limit: number): Promise<QueueRow[Q][]> =>
      db.transaction().execute(async (trx) => {
        const table = queue as 'handoff_outbox';
        const due = await trx
          .selectFrom(table)
          .selectAll()
          .where('status', '=', 'pending')
          .where('next_at', '<=', now)
          .where((eb) => eb.or([eb('claimed_until', 'is', null), eb('claimed_until', '<', now)]))
          .orderBy('seq')
          .limit(limit)
          .execute();
        const claimed = [];
        for (const row of due) {
          const r = await trx
            .updateTable(table)
            .set({ claimed_by: owner, claimed_until: until })
            .where('seq', '=', row.seq)
            .where('status', '=', 'pending')
            .where((eb) => (row.claimed_until === null ? eb('claimed_until', 'is', null) : eb('claimed_until', '=', row.claimed_until)))
            .executeTakeFirst();
          if (Number(r.numUpdatedRows) > 0) claimed.push(row);
        }
        return claimed as unknown as QueueRow[Q][];
      }),
    /** Settles a delivery this owner claimed: sent, or back to pending (later), or failed for good. */
    settleDelivery: (queue: Queue, seq: number, owner: string, patch: { status: 'pending' | 'sent' | 'failed'; attempts?: number; next_at?: string; error?: string | null; sent_at?: string | null }) =>
      db
        .updateTable(queue as 'handoff_outbox')
        .set({ ...patch, claimed_by: null, claimed_until: null })
        .where('seq', '=', seq)
        .where('claimed_by', '=', owner)
        .execute(),
    /** The team's webhook: its URL and sealed secret (null when it has none). */
    teamWebhook: (teamId: string) => db.selectFrom('teams').select(['notify_url', 'notify_secret']).where('id', '=', teamId).executeTakeFirst(),
    /** Where the team works handoffs in chat: its desk channel and conversation (nulls when it has none). */
    teamDesk: (teamId: string) => db.selectFrom('teams').select(['desk_channel_id', 'desk_conversation']).where('id', '=', teamId).executeTakeFirst(),
    /**
     * A team's handoff settings (offer time, webhook, desk) and its members' chat user ids, with the
     * audit event, in one transaction: one change, one event.
     */
    setTeamHandoff: (
      workspaceId: string,
      teamId: string,
      patch: Partial<Pick<Selectable<Database['teams']>, 'offer_seconds' | 'notify_url' | 'notify_secret' | 'desk_channel_id' | 'desk_conversation' | 'updated_at'>>,
      chatUsers: Array<{ emailKey: string; chatUserId: string | null }>,
      audit: AuditRow,
    ) =>
      db.transaction().execute(async (trx) => {
        if (Object.keys(patch).length > 0) await trx.updateTable('teams').set(patch).where('workspace_id', '=', workspaceId).where('id', '=', teamId).execute();
        for (const { emailKey, chatUserId } of chatUsers) {
          await trx
            .updateTable('team_members')
            .set({ chat_user_id: chatUserId })
            .where('workspace_id', '=', workspaceId)
            .where('team_id', '=', teamId)
            .where('email_key', '=', emailKey)
            .execute();
        }
        await insertAudit(trx, audit);
      }),
    /** Whether a card of this handoff was queued for its team's channel already. */
    hasTeamCard: async (handoffId: string) =>
      (await db.selectFrom('handoff_outbox').select('seq').where('handoff_id', '=', handoffId).where('kind', '=', 'desk-card').where('member_key', 'is', null).executeTakeFirst()) !== undefined,
    /** Whether any card of this handoff was queued (its desk thread exists, or is on the way). */
    hasCard: async (handoffId: string) =>
      (await db.selectFrom('handoff_outbox').select('seq').where('handoff_id', '=', handoffId).where('kind', '=', 'desk-card').executeTakeFirst()) !== undefined,
    /** Records where a card was posted: that conversation is the handoff's desk thread (a repeat of one posted is ignored). */
    addDeskThread: (row: Insertable<Database['handoff_desk_threads']>) =>
      db
        .insertInto('handoff_desk_threads')
        .values(row)
        .onConflict((oc) => oc.columns(['channel_id', 'conversation_id']).doNothing())
        .execute()
        .then(() => undefined),
    /** The handoff whose desk thread this conversation of the channel is, if any. */
    deskThread: (channelId: string, conversationId: string) =>
      db.selectFrom('handoff_desk_threads').selectAll().where('channel_id', '=', channelId).where('conversation_id', '=', conversationId).executeTakeFirst(),
    /** Where a handoff is worked in chat now: its team channel's thread, or the thread of the card sent to `memberKey` (latest first). */
    threadOfRecord: (handoffId: string, memberKey: string | null) =>
      db
        .selectFrom('handoff_desk_threads')
        .selectAll()
        .where('handoff_id', '=', handoffId)
        .where((eb) => (memberKey === null ? eb('member_key', 'is', null) : eb.or([eb('member_key', 'is', null), eb('member_key', '=', memberKey)])))
        .orderBy('seq', 'desc')
        .limit(1)
        .executeTakeFirst(),
    /** The conversation so far, oldest first (tool rounds left out), at most `limit` of the latest. */
    async conversation(sessionId: string, limit: number) {
      const rows = await db
        .selectFrom('messages')
        .select(['id', 'role', 'content', 'author', 'created_at'])
        .where('session_id', '=', sessionId)
        .where('role', '!=', 'tool')
        .where('tool_calls', 'is', null)
        .orderBy('seq', 'desc')
        .limit(limit)
        .execute();
      return rows.reverse();
    },
  };
}

export type HandoffStore = ReturnType<typeof createHandoffStore>;
