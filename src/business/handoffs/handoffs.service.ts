/**
 * Human handoff (issue 29): a conversation the persona should not answer goes to a person of the
 * persona's team, in the same session, and back.
 *
 * Routing: the handoff is offered to a member who is available now (team status and schedule, the
 * member's status, as `availableNow` computes) with the fewest open handoffs; an offer not accepted
 * within the team's `offerSeconds` goes to the next member (those it passed are skipped until every
 * available member has had it). With nobody available it waits in the team's queue and the user is
 * told when the team is next available. Any member may accept a queued or offered handoff; two at
 * once: one wins (every move is made over the revision it read), the other gets a 409 naming the
 * winner. While a person owns the conversation the persona stays silent in it; handing back returns
 * it to the persona with the person's messages in its history. A member who goes off shift keeps
 * what they accepted until they hand it back or resolve it.
 *
 * The sweep (every few seconds on every instance, and safe on all at once) re-offers lapsed offers
 * and offers queued handoffs whose team became available.
 */
import type { Persona } from '../../core/personas/personas.schemas.js';
import { createHandoffBase, type HandoffServiceDeps } from './handoffs.base.js';
import { createDesk, createDeskPosts, inert } from './handoffs.desk.js';
import { createPeopleWork } from './handoffs.people.js';
import { createRelay } from './handoffs.relay.js';
import { createRouting } from './handoffs.routing.js';
import { createSettings } from './handoffs.settings.js';
import { createWork } from './handoffs.work.js';

export { toHandoff, type HandoffServiceDeps } from './handoffs.base.js';
export { type ChannelPort, type DeskButton, notifyContext } from './handoffs.relay.js';
export type { DeskAction, DeskMessage, DeskThread } from './handoffs.desk.js';

/**
 * The handoff service, put together from its parts (each a file of this folder): the shared reads
 * (base), the relay of what changes write, the desk in Slack or Discord, routing and the sweep, a
 * member's work (accept, reply, end), who acts on it (people) and the team's handoff settings.
 */
export function createHandoffService(deps: HandoffServiceDeps) {
  const base = createHandoffBase(deps);
  const { store, now } = base;
  const relay = createRelay(base);
  const posts = createDeskPosts(base, relay);
  const routing = createRouting(base, relay, posts);
  const work = createWork(base, relay, posts);
  const desk = createDesk(base, posts, work);
  const people = createPeopleWork(base, work);
  const settings = createSettings(base, relay);

  return {
    open: routing.open,

    /** The open handoff of a session: while there is one, the persona does not answer in it. */
    openFor: (sessionId: string) => store.openFor(sessionId),

    /** The session's latest handoff, open or ended: what a user's catch-up after a person handed back names. */
    latestFor: (sessionId: string) => store.latestFor(sessionId),

    /** A user's message in a conversation a person has: stored for them (and told to the team's webhook); the persona stays silent. */
    async userMessage(sessionId: string, id: string, text: string): Promise<void> {
      const at = now();
      const open = await store.openFor(sessionId);
      await relay.commit({
        messages: { rows: [{ id, session_id: sessionId, role: 'user', content: text, author: null, created_at: at }], sessionId, at },
        ...(open
          ? {
              notifications: await relay.eventRows(open, 'handoff.message', { message: { id, role: 'user', content: text, author: null, createdAt: at } }),
              outbox: await posts.lineRows(open, `User: ${inert(text)}`),
            }
          : {}),
      });
    },

    get: people.get,
    list: people.list,
    accept: people.accept,
    reply: people.reply,
    end: people.end,
    sweep: routing.sweep,
    setTeamHandoff: settings.setTeamHandoff,

    channelsWith: relay.channelsWith,
    deskThread: desk.deskThread,
    deskMessage: desk.deskMessage,
    deskAction: desk.deskAction,

    /** Sends what is due to users on channels and to teams' webhooks (also on a timer, and right after something is queued). */
    deliver: (): Promise<number> => relay.deliver(),

    /** Whether a user message hands the conversation over by the persona's rules: `/human`, or a keyword. */
    triggerOf(persona: Pick<Persona, 'teamId' | 'handoff'>, message: string): { trigger: 'user' | 'rule'; reason: string } | null {
      if (persona.teamId === null) return null;
      const text = message.trim();
      if (/^\/human\b/i.test(text)) return { trigger: 'user', reason: text.slice(6).trim() || 'The user asked for a person (/human).' };
      const lower = text.toLowerCase();
      const keyword = persona.handoff.keywords.find((k) => lower.includes(k.toLowerCase()));
      return keyword ? { trigger: 'rule', reason: `The message contains "${keyword}".` } : null;
    },
  };
}

export type HandoffService = ReturnType<typeof createHandoffService>;
