/**
 * A member's work on a handoff: accept it (any member, of a queued or offered one; two at once: one
 * wins, every move is made over the revision it read), reply as its owner, and end it (hand back
 * to the persona, or resolve).
 */
import { auditRow } from '../../core/audit/audit.js';
import type { Actor } from '../../core/auth/actor.js';
import type { HandoffRow } from '../../db/schema.js';
import { ConflictError } from '../../errors.js';
import { emailKey } from '../teams/teams.service.js';
import { toHandoff, type HandoffBase } from './handoffs.base.js';
import { inert, type DeskPosts, who } from './handoffs.desk.js';
import type { Relay } from './handoffs.relay.js';
import type { Handoff, HandoffMessage as ApiMessage } from './handoffs.schemas.js';
import { OPEN, type Writes } from './handoffs.store.js';

/**
 * Who acts (API.md §14): the actor whose audit event the change writes, and the team member they act
 * as (`email`; undefined: the API, a service key ending a handoff without naming a member).
 * `onBehalfOf`: the member an admin or a service key named (recorded in the audit event).
 */
export interface Acting {
  actor: Actor;
  email: string | undefined;
  onBehalfOf?: string | undefined;
}

export function createWork(base: HandoffBase, relay: Relay, posts: DeskPosts) {
  const { store, personas, writeGate, now, find, memberOf, ids, clock } = base;
  /** The change's audit event: never the message text. */
  const audit = (acting: Acting, action: string, id: string) =>
    auditRow(ids, clock, acting.actor, { action, target: { type: 'handoff', id }, ...(acting.onBehalfOf !== undefined ? { onBehalfOf: acting.onBehalfOf } : {}) });
  const { commit, eventRows, noteOf } = relay;
  const { lineRows } = posts;

  /** Moves an open handoff, or 409 naming where it stands now. */
  async function moveOpen(
    row: HandoffRow,
    allowed: HandoffRow['status'][],
    patch: Partial<HandoffRow>,
    verb: string,
    writes: (moved: HandoffRow) => Promise<Omit<Writes, 'move'>>,
  ): Promise<HandoffRow> {
    const where = (r: HandoffRow) => (r.status === 'accepted' ? `accepted by ${r.member}` : r.status);
    if (!allowed.includes(row.status)) throw new ConflictError(`Handoff ${row.id} is ${where(row)}; it cannot be ${verb}.`);
    const moved = { ...row, ...patch, rev: row.rev + 1 };
    await writeGate?.('handoff.move', row.id);
    if (await commit({ move: { from: row, patch }, ...(await writes(moved)) })) return moved;
    const current = (await store.find(row.workspace_id, row.id))!;
    throw new ConflictError(`Handoff ${row.id} is ${where(current)} now; it cannot be ${verb}.`);
  }

  return {
    /** A member takes the conversation: any member of the team, of a queued or offered handoff. */
    async accept(workspaceId: string, id: string, acting: Acting & { email: string }): Promise<Handoff> {
      const row = await find(workspaceId, id);
      const { member } = await memberOf(row, acting.email);
      const at = now();
      const accepted = await moveOpen(row, ['queued', 'offered'], { status: 'accepted', member: member.email, offer_until: null, accepted_at: at, updated_at: at }, 'accepted', async (moved) => ({
        messages: (await noteOf(row, `${member.email} (a person) joined the conversation.`))?.writes,
        notifications: await eventRows(moved, 'handoff.accepted'),
        outbox: await lineRows(moved, `${who(member)} accepted. Reply in this thread: your replies reach the user. When you are done:`, [
          { id: 'handoff.return', label: 'Hand back', value: row.id },
          { id: 'handoff.resolve', label: 'Resolve', value: row.id },
        ]),
        audit: audit(acting, 'handoff.accept', row.id),
      }));
      return toHandoff(accepted);
    },

    /** The owner's reply, added to the conversation as theirs. */
    async reply(workspaceId: string, id: string, acting: Acting & { email: string }, text: string, fromDesk = false): Promise<ApiMessage> {
      const row = await find(workspaceId, id);
      const { member } = await memberOf(row, acting.email);
      if (row.status !== 'accepted' || row.member === null || emailKey(row.member) !== member.email_key) {
        throw new ConflictError(`Handoff ${id} is ${row.status}${row.member ? ` with ${row.member}` : ''}; only the member who accepted it replies.`);
      }
      if (row.session_id === null) throw new ConflictError(`Handoff ${id}'s conversation was deleted.`);
      const reply = (await noteOf(row, text, `human:${member.email}`))!;
      // Written elsewhere (the Inbox, the API): the desk thread shows it too.
      await commit({ messages: reply.writes, outbox: fromDesk ? [] : await lineRows(row, `${member.email}: ${inert(text)}`), audit: audit(acting, 'handoff.reply', row.id) });
      if (row.first_reply_at === null) await store.move(row, { first_reply_at: reply.message.createdAt });
      return reply.message;
    },

    /**
     * Ends a handoff: `returned` gives the conversation back to the persona (the person's messages
     * in its history), `resolved` closes it as done. Its owner (or, with no owner yet, any member)
     * may end it; `api` when no member is named.
     */
    async end(workspaceId: string, id: string, to: 'returned' | 'resolved', acting: Acting): Promise<Handoff> {
      const row = await find(workspaceId, id);
      let by = 'api';
      if (acting.email !== undefined) {
        const { member } = await memberOf(row, acting.email);
        if (row.status === 'accepted' && row.member !== null && emailKey(row.member) !== member.email_key) {
          throw new ConflictError(`Handoff ${id} belongs to ${row.member}; only they hand it back or resolve it.`);
        }
        by = member.email;
      }
      const at = now();
      const persona = await personas.get(workspaceId, row.persona_id).catch(() => null);
      const whom = row.status === 'accepted' && row.member ? `${row.member} (a person)` : 'The team';
      const name = persona?.name ?? 'the assistant';
      const ended = await moveOpen(row, OPEN, { status: to, offer_until: null, ended_at: at, ended_by: by, updated_at: at }, to === 'returned' ? 'handed back' : 'resolved', async (moved) => ({
        messages: (await noteOf(row, to === 'returned' ? `${whom} left the conversation; ${name} takes over again.` : `${whom} closed the conversation as resolved.`))?.writes,
        notifications: await eventRows(moved, 'handoff.ended'),
        outbox: await lineRows(moved, to === 'returned' ? `${by} handed the conversation back to ${name}.` : `${by} resolved the conversation.`),
        audit: audit(acting, to === 'returned' ? 'handoff.return' : 'handoff.resolve', row.id),
      }));
      return toHandoff(ended);
    },
  };
}

export type Work = ReturnType<typeof createWork>;
