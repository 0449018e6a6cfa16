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
import type { Logger } from 'pino';
import type { Selectable } from 'kysely';
import type { Database, HandoffRow } from '../../db/schema.js';
import { ConflictError, NotFoundError, ValidationError } from '../../errors.js';
import type { Clock } from '../../lib/clock.js';
import type { IdGenerator } from '../../lib/ids.js';
import { mapPage, type Page, type PageRequest } from '../../lib/pagination.js';
import type { Persona } from '../../core/personas/personas.schemas.js';
import type { PersonaService } from '../../core/personas/personas.service.js';
import { isAvailableNow, nextOpening, type Schedule } from '../teams/availability.js';
import { emailKey } from '../teams/teams.service.js';
import type { TeamStore } from '../teams/teams.store.js';
import type { Handoff, HandoffMessage as ApiMessage } from './handoffs.schemas.js';
import { type HandoffStore, OPEN, type Queue, SESSION_DELETED, type QueueRow, type Writes } from './handoffs.store.js';
import type { Cipher } from '../../lib/cipher.js';
import type { WriteGate } from '../../lib/write-gate.js';
import { type AddressGuardOptions, assertPublicUrl } from '../../lib/address-guard.js';
import type { FetchLike } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { OutboundButton } from '../../../bridges/bridge.js';
import { SIGNATURE_HEADER, signature } from '../../../bridges/webhook/webhook-bridge.js';

/** Handoffs the sweep looks at per pass. */
const SWEEP_BATCH = 100;
/** Messages of the conversation shown with a handoff (the console's Inbox, MCP). */
const CONVERSATION_MESSAGES = 50;

export function toHandoff(row: HandoffRow, nextAvailableAt: string | null = null): Handoff {
  return {
    id: row.id,
    sessionId: row.session_id,
    personaId: row.persona_id,
    teamId: row.team_id,
    status: row.status,
    trigger: row.trigger,
    reason: row.reason,
    member: row.member,
    offerUntil: row.status === 'offered' ? row.offer_until : null,
    offers: row.offers,
    nextAvailableAt,
    createdAt: row.created_at,
    acceptedAt: row.accepted_at,
    firstReplyAt: row.first_reply_at,
    endedAt: row.ended_at,
    endedBy: row.ended_by,
  };
}

type Outbox = NonNullable<Writes['outbox']>[number];

/** A button under a desk post; a click comes back as a `DeskAction` with its id and value. */
export type DeskButton = OutboundButton & { id: 'handoff.accept' | 'handoff.return' | 'handoff.resolve' };

/** What the handoffs need of the channels service (built after this one). Each throws when it could not. */
export interface ChannelPort {
  /** Posts a text (with buttons) into a conversation of the channel: a user's, or a desk thread. */
  relay(workspaceId: string, channelId: string, conversationId: string, text: string, buttons?: DeskButton[]): Promise<void>;
  /** Posts a desk card to a platform conversation or a member's direct messages; answers the conversation id replies in its thread will carry. */
  post(workspaceId: string, channelId: string, to: string, text: string, buttons: DeskButton[], threadName: string): Promise<{ thread: string }>;
  /** The channel's type: 404 when it is not the workspace's. */
  typeOf(workspaceId: string, channelId: string): Promise<'slack' | 'discord' | 'webhook'>;
}

/** Where a handoff's card was posted: its thread is the handoff's at the desk. */
export type DeskThread = Pick<Selectable<Database['handoff_desk_threads']>, 'workspace_id' | 'handoff_id'>;

/** A message in a desk thread, or a click on a desk button, as a channel received it. */
export interface DeskMessage {
  userId: string;
  text: string;
}
export interface DeskAction {
  conversationId: string;
  userId: string;
  actionId: string;
  value: string;
}

/** What a user or a member wrote, shown at a desk: no `<@…>` / `<!here>` markup, so it pings nobody there. */
const inert = (text: string) => text.replace(/<([@!#])/g, '‹$1');

const DESK_ACTIONS = new Set(['handoff.accept', 'handoff.return', 'handoff.resolve']);
/** Messages of the conversation a desk card shows, and how much of each. */
const CARD_MESSAGES = 10;
const CARD_MESSAGE_CHARS = 300;

export interface HandoffServiceDeps {
  store: HandoffStore;
  teams: TeamStore;
  personas: PersonaService;
  clock: Clock;
  ids: IdGenerator;
  /** This instance, as it claims deliveries. */
  owner?: string;
  logger?: Logger;
  /** Teams' webhooks: secrets are sealed with `cipher`; URLs and posts pass the address guard. */
  webhooks?: { cipher: Cipher; fetch: FetchLike; guard: AddressGuardOptions };
  /** Where a move waits between reading the handoff and writing over it (tests of races). */
  writeGate?: WriteGate | undefined;
}

/** A team's webhook secret is sealed for that team only. */
export const notifyContext = (teamId: string) => `team-notify:${teamId}`;
const WEBHOOK_TIMEOUT_MS = 10_000;
/** Messages of the conversation an offer's event carries. */
const EVENT_MESSAGES = 20;

/** Deliveries claimed per pass, how long a claim holds, and the retries of one that fails. */
const DELIVERY_BATCH = 20;
const CLAIM_MS = 60_000;
const MAX_ATTEMPTS = 6;
const retryDelayMs = (attempt: number) => Math.min(5 * 60_000, 2_000 * 2 ** attempt);

export function createHandoffService({ store, teams, personas, clock, ids, owner = 'local', logger, webhooks, writeGate }: HandoffServiceDeps) {
  let channels: ChannelPort | null = null;
  let delivering: Promise<number> | null = null;
  let again = false;
  const now = () => clock.now().toISOString();

  async function find(workspaceId: string, id: string): Promise<HandoffRow> {
    const row = await store.find(workspaceId, id);
    if (!row) throw new NotFoundError('Handoff', id);
    return row;
  }

  async function teamOf(workspaceId: string, teamId: string) {
    const team = await teams.find(workspaceId, teamId);
    if (!team) throw new NotFoundError('Team', teamId);
    const schedule: Schedule = { status: team.team.status, timezone: team.team.timezone, weekly: JSON.parse(team.team.weekly) as Schedule['weekly'] };
    return { ...team, schedule };
  }

  /** When the team can next take the conversation: now, a window's start, or null (nobody is available). */
  function nextAvailable(team: Awaited<ReturnType<typeof teamOf>>): string | null {
    if (team.schedule.status !== 'available' || !team.members.some((m) => m.status === 'available')) return null;
    return nextOpening(team.schedule, clock.now())?.toISOString() ?? null;
  }

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
    if (await commit({ move: { from: row, patch }, notifications: event, outbox: await cardRows(moved, team, conversation) })) return moved;
    return (await store.find(row.workspace_id, row.id)) ?? row;
  }

  /** What the user is told when the conversation goes to the team. */
  function handingOverNotice(row: HandoffRow, teamName: string, nextAt: string | null): string {
    if (row.status === 'offered') return `I'm passing this conversation to a person from ${teamName}. They will reply here.`;
    if (nextAt !== null) return `Nobody from ${teamName} is available right now. The team is next available at ${nextAt}; your conversation waits in their queue and a person will reply here.`;
    return `Nobody from ${teamName} is available right now; your conversation waits in their queue and a person will reply here.`;
  }

  /**
   * A notice or a person's reply as a message of the conversation; for a channel's conversation it
   * is also queued for the user there (`toChannel: false` when the caller posts it itself: the
   * notice that answers a user's `/human`). Null once the conversation was deleted.
   */
  async function noteOf(
    row: Pick<HandoffRow, 'id' | 'workspace_id' | 'session_id'>,
    content: string,
    author = 'system',
    id = ids('msg'),
    toChannel = true,
  ): Promise<{ writes: NonNullable<Writes['messages']>; message: ApiMessage } | null> {
    const sessionId = row.session_id;
    if (sessionId === null) return null;
    const at = now();
    const conversation = toChannel ? await store.channelConversation(sessionId) : undefined;
    return {
      writes: { rows: [{ id, session_id: sessionId, role: 'assistant', content, author, created_at: at }], sessionId, at, relay: conversation ? { workspace_id: row.workspace_id, handoff_id: row.id, ...conversation } : undefined },
      message: { id, role: 'assistant', content, author, createdAt: at },
    };
  }

  /** Writes one change (`store.commit`: all or nothing) and sends what it queued soon. */
  async function commit(w: Writes): Promise<boolean> {
    const done = await store.commit(w);
    if (done && ((w.notifications?.length ?? 0) > 0 || (w.outbox?.length ?? 0) > 0 || w.messages?.relay)) kick();
    return done;
  }

  /** Delivers soon (after this turn): a person's reply should not wait for the next timer. */
  function kick(): void {
    setImmediate(() => void deliver().catch((err: unknown) => logger?.warn({ err: (err as Error).message }, 'handoff deliveries failed; retrying')));
  }

  /**
   * Sends what is due to channel users; one pass at a time per instance, and another pass when more
   * was queued meanwhile (the caller's promise covers it). Answers how many were sent.
   */
  function deliver(): Promise<number> {
    if (delivering) {
      again = true;
      return delivering;
    }
    delivering = (async () => {
      let sent = 0;
      try {
        for (;;) {
          again = false;
          if (channels) {
            const port = channels;
            sent += await drain('handoff_outbox', (d) => sendOutbox(port, d));
          }
          sent += await drain('handoff_notifications', toTeam);
          if (!again) return sent;
        }
      } finally {
        delivering = null;
      }
    })();
    return delivering;
  }

  /** Sends every due delivery of one queue, batch by batch; a failure is retried later, then given up. */
  async function drain<Q extends Queue>(queue: Q, send: (d: QueueRow[Q]) => Promise<void>): Promise<number> {
    let sent = 0;
    for (;;) {
      const at = clock.now();
      const batch = await store.claimDue(queue, owner, at.toISOString(), new Date(at.getTime() + CLAIM_MS).toISOString(), DELIVERY_BATCH);
      for (const d of batch) {
        try {
          await send(d);
          await store.settleDelivery(queue, d.seq, owner, { status: 'sent', sent_at: now(), error: null });
          sent++;
        } catch (err) {
          const attempts = d.attempts + 1;
          const error = err instanceof Error ? err.message.slice(0, 500) : String(err);
          logger?.warn({ queue, handoffId: d.handoff_id, attempts, err: error }, 'handoff delivery failed; retrying later');
          await store.settleDelivery(
            queue,
            d.seq,
            owner,
            attempts >= MAX_ATTEMPTS ? { status: 'failed', attempts, error } : { status: 'pending', attempts, error, next_at: new Date(clock.now().getTime() + retryDelayMs(attempts)).toISOString() },
          );
        }
      }
      if (batch.length < DELIVERY_BATCH) return sent;
    }
  }

  /** Posts one event to its team's webhook, signed with the team's secret; the delivery id lets the receiver drop a repeat. */
  async function toTeam(d: QueueRow['handoff_notifications']): Promise<void> {
    const hook = await store.teamWebhook(d.team_id);
    if (!hook?.notify_url || !hook.notify_secret || !webhooks) throw new Error('the team has no webhook any more');
    const secret = webhooks.cipher.decrypt(hook.notify_secret, notifyContext(d.team_id));
    const res = await webhooks.fetch(hook.notify_url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', [SIGNATURE_HEADER]: signature(secret, d.body), 'x-switchboard-delivery': `hnd-event-${d.seq}` },
      body: d.body,
      signal: AbortSignal.timeout(WEBHOOK_TIMEOUT_MS),
    });
    await res.body?.cancel().catch(() => {});
    if (!res.ok) throw new Error(`the team's webhook answered ${res.status}`);
  }

  /** The event for the team's webhook, when it has one. */
  async function eventRows(row: HandoffRow, event: string, extra: Record<string, unknown> = {}): Promise<NonNullable<Writes['notifications']>> {
    if (!webhooks) return [];
    const hook = await store.teamWebhook(row.team_id);
    if (!hook?.notify_url) return [];
    const at = now();
    const body = JSON.stringify({ event, handoff: toHandoff(row), ...extra, sentFor: at });
    return [{ workspace_id: row.workspace_id, team_id: row.team_id, handoff_id: row.id, event, body, status: 'pending', attempts: 0, next_at: at, created_at: at }];
  }

  /** One outbox delivery: to the user, a desk card (its thread recorded), or a line in the handoff's desk thread. */
  async function sendOutbox(port: ChannelPort, d: QueueRow['handoff_outbox']): Promise<void> {
    const buttons = d.buttons === null ? undefined : (JSON.parse(d.buttons) as DeskButton[]);
    if (d.kind === 'user') return port.relay(d.workspace_id, d.channel_id, d.conversation_id, d.text);
    if (d.kind === 'desk-card') {
      const { thread } = await port.post(d.workspace_id, d.channel_id, d.conversation_id, d.text, buttons ?? [], `Handoff ${d.handoff_id}`);
      await store.addDeskThread({ workspace_id: d.workspace_id, handoff_id: d.handoff_id, channel_id: d.channel_id, conversation_id: thread, member_key: d.member_key, created_at: now() });
      return;
    }
    const row = await store.find(d.workspace_id, d.handoff_id);
    const thread = row ? await store.threadOfRecord(row.id, row.member === null ? null : emailKey(row.member)) : undefined;
    if (!thread) throw new Error('the handoff has no desk thread (yet)');
    await port.relay(d.workspace_id, thread.channel_id, thread.conversation_id, d.text, buttons);
  }

  /** A member as the desk shows them: a mention when their user id there is known. */
  const who = (member: { email: string; chat_user_id: string | null }) => (member.chat_user_id ? `<@${member.chat_user_id}> (${member.email})` : member.email);

  /**
   * Tells the team's desk of an offer or a wait: the card (the conversation so far and Accept) the
   * first time in a team channel, a line after; with `dm`, a card to each offered member who has a
   * user id there.
   */
  async function cardRows(row: HandoffRow, team: Awaited<ReturnType<typeof teamOf>>, conversation: Awaited<ReturnType<HandoffStore['conversation']>>): Promise<Outbox[]> {
    const desk = await store.teamDesk(row.team_id);
    if (!desk?.desk_channel_id || !desk.desk_conversation) return [];
    const offered = row.status === 'offered' ? team.members.find((m) => m.email_key === emailKey(row.member ?? '')) : undefined;
    const state = offered ? `Offered to ${who(offered)}; any member may accept.` : 'Nobody is available now: it waits in the queue; any member may accept.';
    const dm = desk.desk_conversation === 'dm';
    if (dm && !offered?.chat_user_id) return [];
    const at = now();
    const base = { workspace_id: row.workspace_id, handoff_id: row.id, channel_id: desk.desk_channel_id, message_id: ids('msg'), status: 'pending' as const, attempts: 0, next_at: at, created_at: at };
    if (dm || !(await store.hasTeamCard(row.id))) {
      const persona = await personas.get(row.workspace_id, row.persona_id).catch(() => null);
      const lines = conversation.slice(-CARD_MESSAGES).map((m) => {
        const from = m.role === 'user' ? 'User' : m.author?.startsWith('human:') ? m.author.slice(6) : m.author === 'system' ? 'Notice' : (persona?.name ?? 'Assistant');
        const text = m.content.length > CARD_MESSAGE_CHARS ? `${m.content.slice(0, CARD_MESSAGE_CHARS)}…` : m.content;
        return `> ${from}: ${inert(text.replace(/\s+/g, ' '))}`;
      });
      const text = [`Handoff ${row.id} from ${persona?.name ?? row.persona_id} (${row.trigger}): ${inert(row.reason)}`, ...lines, state, 'Accept, then reply in this thread: your replies reach the user.'].join('\n');
      const accept: DeskButton = { id: 'handoff.accept', label: 'Accept', value: row.id, style: 'primary' };
      return [{ ...base, kind: 'desk-card', conversation_id: dm ? offered!.chat_user_id! : desk.desk_conversation, text, buttons: JSON.stringify([accept]), member_key: dm ? offered!.email_key : null }];
    }
    return [{ ...base, kind: 'desk', conversation_id: '', text: state, buttons: null, member_key: null }];
  }

  /** A line in the handoff's desk thread, when it has one (or its card is on the way). */
  async function lineRows(row: HandoffRow, text: string, buttons?: DeskButton[]): Promise<Outbox[]> {
    const desk = await store.teamDesk(row.team_id);
    if (!desk?.desk_channel_id || !(await store.hasCard(row.id))) return [];
    const at = now();
    return [
      {
        workspace_id: row.workspace_id,
        handoff_id: row.id,
        channel_id: desk.desk_channel_id,
        conversation_id: '',
        message_id: ids('msg'),
        text,
        kind: 'desk',
        buttons: buttons ? JSON.stringify(buttons) : null,
        member_key: null,
        status: 'pending',
        attempts: 0,
        next_at: at,
        created_at: at,
      },
    ];
  }

  /** A line in the handoff's desk thread, written on its own (an answer to a member there). */
  async function deskLine(row: HandoffRow, text: string): Promise<void> {
    await commit({ outbox: await lineRows(row, text) });
  }

  /** The member of the team with this e-mail (case ignored), or a 400 naming `member`. */
  async function memberOf(row: HandoffRow, email: string) {
    const team = await teamOf(row.workspace_id, row.team_id);
    const member = team.members.find((m) => m.email_key === emailKey(email));
    if (!member) throw ValidationError.field('member', `is not a member of team ${row.team_id}`);
    return { member, team };
  }

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
    ): Promise<{ handoff: Handoff; created: boolean; notice: string | null }> {
      const persona = await personas.get(workspaceId, session.persona_id);
      if (persona.teamId === null) throw new ConflictError(`Persona ${persona.id} has no team to hand the conversation to; set its teamId.`);
      const team = await teamOf(workspaceId, persona.teamId);
      const at = now();
      const { row, created } = await store.open({
        id: ids('hnd'),
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
      });
      if (!created) return { handoff: toHandoff(row, row.status === 'queued' ? nextAvailable(team) : null), created, notice: null };
      const routed = await route(row);
      const nextAt = routed.status === 'queued' ? nextAvailable(team) : null;
      const notice = handingOverNotice(routed, team.team.name, nextAt);
      // A notice with the answer's id is the answer: the channel posts it itself.
      const noted = notify ? await noteOf(routed, notice, 'system', noticeId, noticeId === undefined) : null;
      if (noted) await commit({ messages: noted.writes });
      return { handoff: toHandoff(routed, nextAt), created, notice };
    },

    /** The open handoff of a session: while there is one, the persona does not answer in it. */
    openFor: (sessionId: string) => store.openFor(sessionId),

    /** The session's latest handoff, open or ended: what a user's catch-up after a person handed back names. */
    latestFor: (sessionId: string) => store.latestFor(sessionId),

    /** A user's message in a conversation a person has: stored for them (and told to the team's webhook); the persona stays silent. */
    async userMessage(sessionId: string, id: string, text: string): Promise<void> {
      const at = now();
      const open = await store.openFor(sessionId);
      await commit({
        messages: { rows: [{ id, session_id: sessionId, role: 'user', content: text, author: null, created_at: at }], sessionId, at },
        ...(open
          ? {
              notifications: await eventRows(open, 'handoff.message', { message: { id, role: 'user', content: text, author: null, createdAt: at } }),
              outbox: await lineRows(open, `User: ${inert(text)}`),
            }
          : {}),
      });
    },

    async get(workspaceId: string, id: string) {
      const row = await find(workspaceId, id);
      const nextAt = row.status === 'queued' ? nextAvailable(await teamOf(workspaceId, row.team_id)) : null;
      const messages = row.session_id === null ? [] : await store.conversation(row.session_id, CONVERSATION_MESSAGES);
      return {
        ...toHandoff(row, nextAt),
        messages: messages.map((m) => ({ id: m.id, role: m.role as 'user' | 'assistant', content: m.content, author: m.author, createdAt: m.created_at })),
      };
    },

    async list(workspaceId: string, page: PageRequest, filter: Parameters<HandoffStore['list']>[2]): Promise<Page<Handoff>> {
      const rows = await store.list(workspaceId, page, filter);
      // Queued ones say when their team is next available: each team read once.
      const nextOf = new Map<string, string | null>();
      for (const row of rows.data) {
        if (row.status === 'queued' && !nextOf.has(row.team_id)) nextOf.set(row.team_id, nextAvailable(await teamOf(workspaceId, row.team_id)));
      }
      return mapPage(rows, (row) => toHandoff(row, row.status === 'queued' ? (nextOf.get(row.team_id) ?? null) : null));
    },

    /** A member takes the conversation: any member of the team, of a queued or offered handoff. */
    async accept(workspaceId: string, id: string, email: string): Promise<Handoff> {
      const row = await find(workspaceId, id);
      const { member } = await memberOf(row, email);
      const at = now();
      const accepted = await moveOpen(row, ['queued', 'offered'], { status: 'accepted', member: member.email, offer_until: null, accepted_at: at, updated_at: at }, 'accepted', async (moved) => ({
        messages: (await noteOf(row, `${member.email} (a person) joined the conversation.`))?.writes,
        notifications: await eventRows(moved, 'handoff.accepted'),
        outbox: await lineRows(moved, `${who(member)} accepted. Reply in this thread: your replies reach the user. When you are done:`, [
          { id: 'handoff.return', label: 'Hand back', value: row.id },
          { id: 'handoff.resolve', label: 'Resolve', value: row.id },
        ]),
      }));
      return toHandoff(accepted);
    },

    /** The owner's reply, added to the conversation as theirs. */
    async reply(workspaceId: string, id: string, email: string, text: string, fromDesk = false): Promise<ApiMessage> {
      const row = await find(workspaceId, id);
      const { member } = await memberOf(row, email);
      if (row.status !== 'accepted' || row.member === null || emailKey(row.member) !== member.email_key) {
        throw new ConflictError(`Handoff ${id} is ${row.status}${row.member ? ` with ${row.member}` : ''}; only the member who accepted it replies.`);
      }
      if (row.session_id === null) throw new ConflictError(`Handoff ${id}'s conversation was deleted.`);
      const reply = (await noteOf(row, text, `human:${member.email}`))!;
      // Written elsewhere (the Inbox, the API): the desk thread shows it too.
      await commit({ messages: reply.writes, outbox: fromDesk ? [] : await lineRows(row, `${member.email}: ${inert(text)}`) });
      if (row.first_reply_at === null) await store.move(row, { first_reply_at: reply.message.createdAt });
      return reply.message;
    },

    /**
     * Ends a handoff: `returned` gives the conversation back to the persona (the person's messages
     * in its history), `resolved` closes it as done. Its owner (or, with no owner yet, any member)
     * may end it; `api` when no member is named.
     */
    async end(workspaceId: string, id: string, to: 'returned' | 'resolved', email: string | undefined): Promise<Handoff> {
      const row = await find(workspaceId, id);
      let by = 'api';
      if (email !== undefined) {
        const { member } = await memberOf(row, email);
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
      }));
      return toHandoff(ended);
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

    /**
     * Where the team is told of handoffs: a URL that passes the address guard and a secret (sealed;
     * never shown again), or null to stop. Events are signed like a webhook channel's messages.
     */
    async setTeamWebhook(workspaceId: string, teamId: string, notify: { url: string; secret: string } | null): Promise<void> {
      await teamOf(workspaceId, teamId);
      if (notify === null) return void (await store.setTeamWebhook(workspaceId, teamId, null, null));
      if (!webhooks) throw new ConflictError('Team webhooks are not available in this process.');
      await assertPublicUrl(notify.url, webhooks.guard, 'notify.url');
      await store.setTeamWebhook(workspaceId, teamId, notify.url, webhooks.cipher.encrypt(notify.secret, notifyContext(teamId)));
    },

    /** How messages reach users and desks on channels (the channels service is built after this one). */
    channelsWith(port: ChannelPort): void {
      channels = port;
    },

    /**
     * Where the team works handoffs in chat: one of the workspace's Slack or Discord channels and a
     * conversation in it (`dm`: the offered member's direct messages), or null to stop.
     */
    async setTeamDesk(workspaceId: string, teamId: string, desk: { channelId: string; conversation: string } | null): Promise<void> {
      await teamOf(workspaceId, teamId);
      if (desk === null) return void (await store.setTeamDesk(workspaceId, teamId, null, null));
      if (!channels) throw new ConflictError('Desks are not available in this process.');
      const type = await channels.typeOf(workspaceId, desk.channelId);
      if (type === 'webhook') throw ValidationError.field('desk.channelId', 'must be a Slack or Discord channel (a webhook channel has no members to click Accept)');
      if (type === 'discord' && desk.conversation === 'dm') throw ValidationError.field('desk.conversation', 'must be a Discord channel id: a Discord desk works in threads of a server channel (dm is for Slack)');
      await store.setTeamDesk(workspaceId, teamId, desk.channelId, desk.conversation);
    },

    /** Members' user ids on the desk platform; an e-mail that is no member → 400 naming `chatUsers.<i>.email`. */
    async setChatUsers(workspaceId: string, teamId: string, users: Array<{ email: string; chatUserId: string | null }>): Promise<void> {
      const team = await teamOf(workspaceId, teamId);
      const known = new Set(team.members.map((m) => m.email_key));
      const missing = users.findIndex((u) => !known.has(emailKey(u.email)));
      if (missing >= 0) throw ValidationError.field(`chatUsers.${missing}.email`, `is not a member of team ${teamId}`);
      await store.setChatUserIds(workspaceId, teamId, users.map((u) => ({ emailKey: emailKey(u.email), chatUserId: u.chatUserId })));
    },

    /** The handoff's desk thread a channel conversation is, if any (its messages are members', not the persona's). */
    deskThread: (channelId: string, conversationId: string): Promise<DeskThread | undefined> => store.deskThread(channelId, conversationId),

    /**
     * A message in a desk thread: the reply of the member who accepted reaches the user; anyone else
     * is told how it stands (a member who has not accepted), or ignored (not a member).
     */
    async deskMessage(workspaceId: string, thread: DeskThread, message: DeskMessage): Promise<void> {
      if (thread.workspace_id !== workspaceId) return;
      const row = await store.find(workspaceId, thread.handoff_id);
      if (!row) return;
      const team = await teamOf(workspaceId, row.team_id);
      const member = team.members.find((m) => m.chat_user_id === message.userId);
      if (!member) return;
      if (row.status === 'accepted' && row.member !== null && emailKey(row.member) === member.email_key) {
        await this.reply(workspaceId, row.id, member.email, message.text, true);
      } else if (row.status === 'accepted') {
        await deskLine(row, `${who(member)}: this conversation is with ${row.member}; your message did not reach the user.`);
      } else if (row.status === 'queued' || row.status === 'offered') {
        await deskLine(row, `${who(member)}: accept first; your message did not reach the user.`);
      }
    },

    /** A click on a desk button: accept, hand back or resolve as the member whose user id clicked; a refusal is told in the thread. */
    async deskAction(workspaceId: string, channelId: string, action: DeskAction): Promise<void> {
      if (!DESK_ACTIONS.has(action.actionId)) return;
      // Only the buttons of this handoff's own desk thread act on it.
      const thread = await store.deskThread(channelId, action.conversationId);
      if (thread?.handoff_id !== action.value || thread.workspace_id !== workspaceId) return;
      const row = await store.find(workspaceId, action.value);
      if (!row) return;
      const team = await teamOf(workspaceId, row.team_id);
      const member = team.members.find((m) => m.chat_user_id === action.userId);
      if (!member) {
        await deskLine(row, `<@${action.userId}> is not a member of ${team.team.name} here: a lead adds their user id (chatUsers in the team's handoff settings).`);
        return;
      }
      try {
        if (action.actionId === 'handoff.accept') await this.accept(workspaceId, row.id, member.email);
        else await this.end(workspaceId, row.id, action.actionId === 'handoff.return' ? 'returned' : 'resolved', member.email);
      } catch (err) {
        if (!(err instanceof ConflictError)) throw err;
        await deskLine(row, `${who(member)}: ${err.message}`);
      }
    },

    /** Sends what is due to users on channels and to teams' webhooks (also on a timer, and right after something is queued). */
    deliver: (): Promise<number> => deliver(),

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
