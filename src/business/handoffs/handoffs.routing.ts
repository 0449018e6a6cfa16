/**
 * Routing: a conversation handed over is offered to a member who is available now (fewest open
 * handoffs first), or waits in the team's queue; an offer that lapses goes to the next member. The
 * sweep (every few seconds on every instance, and safe on all at once) re-offers lapsed offers and
 * offers queued handoffs whose team became available.
 */
import { auditRow } from '../../core/audit/audit.js';
import type { Actor } from '../../core/auth/actor.js';
import type { HandoffRow } from '../../db/schema.js';
import { ConflictError } from '../../errors.js';
import { isAvailableNow } from '../teams/availability.js';
import { emailKey } from '../teams/teams.service.js';
import { toHandoff, type HandoffBase } from './handoffs.base.js';
import type { DeskPosts } from './handoffs.desk.js';
import type { Relay } from './handoffs.relay.js';
import type { Handoff } from './handoffs.schemas.js';
import { SESSION_DELETED } from './handoffs.store.js';

/** Handoffs the sweep looks at per pass. */
const SWEEP_BATCH = 100;
/** Messages of the conversation an offer's event carries. */
const EVENT_MESSAGES = 20;

export function createRouting(base: HandoffBase, relay: Relay, posts: DeskPosts) {
  const { store, personas, clock, ids, now, teamOf, nextAvailable } = base;
  const { commit, eventRows, noteOf } = relay;

  /**
   * Offers the handoff to the next member, or queues it when nobody is available now. Answers the
   * row as it now stands (another instance's move wins: it is read again).
   */
  async function route(row: HandoffRow): Promise<HandoffRow> {
    const team = await teamOf(row.workspace_id, row.team_id);
    const at = now();
    let patch: Partial<HandoffRow>;
    if (isAvailableNow(team.schedule, team.members, clock.now())) {
      let passed = new Set(JSON.parse(row.passed) as string[]);
      const available = team.members.filter((m) => m.status === 'available');
      // Every available member has let it lapse: round again.
      if (available.every((m) => passed.has(m.email_key))) passed = new Set();
      const load = await store.openPerMember(row.team_id);
      const next = available
        .filter((m) => !passed.has(m.email_key))
        .sort((a, b) => (load.get(a.email_key) ?? 0) - (load.get(b.email_key) ?? 0) || (a.email_key < b.email_key ? -1 : 1))[0]!;
      const until = new Date(clock.now().getTime() + team.team.offer_seconds * 1000).toISOString();
      patch = { status: 'offered', member: next.email, offer_until: until, passed: JSON.stringify([...passed]), offers: row.offers + 1, updated_at: at };
    } else {
      if (row.status === 'queued') return row;
      patch = { status: 'queued', member: null, offer_until: null, updated_at: at };
    }
    const moved = { ...row, ...patch, rev: row.rev + 1 };
    // The team hears of each offer (with the conversation so far), and of a handoff that waits in its queue, with the move.
    const conversation = moved.session_id === null ? [] : await store.conversation(moved.session_id, EVENT_MESSAGES);
    const event = await eventRows(moved, moved.status === 'offered' ? 'handoff.offered' : 'handoff.queued', {
      messages: conversation.map((m) => ({ id: m.id, role: m.role, content: m.content, author: m.author, createdAt: m.created_at })),
    });
    if (await commit({ move: { from: row, patch }, notifications: event, outbox: await posts.cardRows(moved, team, conversation) })) return moved;
    return (await store.find(row.workspace_id, row.id)) ?? row;
  }

  /** What the user is told when the conversation goes to the team. */
  function handingOverNotice(row: HandoffRow, teamName: string, nextAt: string | null): string {
    if (row.status === 'offered') return `I'm passing this conversation to a person from ${teamName}. They will reply here.`;
    if (nextAt !== null) return `Nobody from ${teamName} is available right now. The team is next available at ${nextAt}; your conversation waits in their queue and a person will reply here.`;
    return `Nobody from ${teamName} is available right now; your conversation waits in their queue and a person will reply here.`;
  }

  return {
    /**
     * Hands the session's conversation to its persona's team (the open handoff when it has one).
     * `notify`: tell the user in the conversation (not when the caller tells them itself).
     */
    async open(
      workspaceId: string,
      session: { id: string; persona_id: string },
      trigger: HandoffRow['trigger'],
      reason: string,
      notify = true,
      noticeId?: string,
      /** Who handed it over through the API or MCP: their `handoff.open` event (a persona's handover is conversation, not audited). */
      by?: Actor,
    ): Promise<{ handoff: Handoff; created: boolean; notice: string | null }> {
      const persona = await personas.get(workspaceId, session.persona_id);
      if (persona.teamId === null) throw new ConflictError(`Persona ${persona.id} has no team to hand the conversation to; set its teamId.`);
      const team = await teamOf(workspaceId, persona.teamId);
      const at = now();
      const id = ids('hnd');
      const event = by && auditRow(ids, clock, by, { action: 'handoff.open', target: { type: 'handoff', id } });
      const { row, created } = await store.open({
        id,
        workspace_id: workspaceId,
        session_id: session.id,
        persona_id: persona.id,
        team_id: persona.teamId,
        status: 'queued',
        trigger,
        reason: reason.slice(0, 1000),
        member: null,
        offer_until: null,
        passed: '[]',
        offers: 0,
        accepted_at: null,
        first_reply_at: null,
        ended_at: null,
        ended_by: null,
        created_at: at,
        updated_at: at,
        rev: 0,
      }, event);
      if (!created) return { handoff: toHandoff(row, row.status === 'queued' ? nextAvailable(team) : null), created, notice: null };
      const routed = await route(row);
      const nextAt = routed.status === 'queued' ? nextAvailable(team) : null;
      const notice = handingOverNotice(routed, team.team.name, nextAt);
      // A notice with the answer's id is the answer: the channel posts it itself.
      const noted = notify ? await noteOf(routed, notice, 'system', noticeId, noticeId === undefined) : null;
      if (noted) await commit({ messages: noted.writes });
      return { handoff: toHandoff(routed, nextAt), created, notice };
    },

    /** Re-offers lapsed offers and offers queued handoffs whose team became available; answers how many moved. */
    async sweep(): Promise<number> {
      let moved = 0;
      for (const row of await store.due(now(), SWEEP_BATCH)) {
        if (row.session_id === null) {
          // Its conversation was deleted by a version that did not end it in the same transaction: nobody is left to answer.
          const at = now();
          if (await store.move(row, { status: 'resolved', offer_until: null, ended_at: at, ended_by: SESSION_DELETED, updated_at: at })) moved++;
          continue;
        }
        const passed = row.status === 'offered' && row.member ? [...new Set([...(JSON.parse(row.passed) as string[]), emailKey(row.member)])] : null;
        const from = passed ? { ...row, passed: JSON.stringify(passed) } : row;
        const after = await route(from).catch(() => row);
        if (after.rev !== row.rev) moved++;
      }
      return moved;
    },
  };
}
