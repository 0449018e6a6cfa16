/**
 * Inbound routing (API.md §9): every message is stored before it is answered (a retried delivery
 * is stored once and answered once), then goes to the channel's persona or running A/B test through
 * the same exchange as `POST /query`, and the reply is written in place, progressively. Messages a
 * crash or restart left unanswered are answered once when the channel starts again, if they are
 * recent; older ones expire. A 👍/👎 on a reply becomes feedback on that answer.
 */
import type { Logger } from 'pino';
import type { InboundAction, InboundMessage, InboundReaction, ReplyWriter } from '../../../bridges/bridge.js';
import { ConflictError, NotFoundError } from '../../errors.js';
import type { Clock } from '../../lib/clock.js';
import type { Answer } from '../../core/chat/chat.schemas.js';
import type { ChatService } from '../../core/chat/chat.service.js';
import type { SessionService } from '../../core/chat/sessions.service.js';
import { CallGate } from '../../lib/call-gate.js';
import type { ChannelStore } from './channels.store.js';

/** What the inbox needs to know of a channel at the time of a message. */
export interface RoutedChannel {
  id: string;
  workspaceId: string;
  personaId: string | null;
  abTestId: string | null;
}

export interface InboxDeps {
  store: ChannelStore;
  chat: ChatService;
  sessions: SessionService;
  clock: Clock;
  logger: Logger;
  /** Unanswered messages older than this at start-up are not answered any more (default 5 min). */
  recoveryWindowMs?: number;
  /** Messages answered at once; more wait their turn, stored (default 8: a real model answers in seconds, so they mostly wait on it). */
  maxConcurrentAnswers?: number;
  /** This instance, as it claims the messages it answers (its lease owner; one process: any name). */
  owner?: string;
}

/**
 * Of the instances that claimed unanswered messages (null: none did, or a version before claims were
 * named), those whose messages may be taken over now: they died, or are this instance's previous run.
 */
export type Takeable = (claimers: Array<string | null>) => Promise<Set<string | null>>;

/** What a tool call shows as the thread's status while the answer is worked out. */
export function toolStatus(tool: string): string {
  if (tool === 'knowledge.search') return 'is searching the knowledge…';
  if (tool.startsWith('knowledge.')) return 'is reading the knowledge…';
  return `is using ${tool}…`;
}

const APOLOGY = 'Sorry — I could not answer that just now. Please try again in a moment.';

export function createInbox(deps: InboxDeps) {
  const { store, chat, sessions, clock, logger } = deps;
  const recoveryWindowMs = deps.recoveryWindowMs ?? 5 * 60_000;
  const now = () => clock.now().toISOString();
  // A burst of messages must not starve the acknowledgements still arriving (Slack wants one within
  // 3 s): answers run a few at a time, each starting after pending I/O (measured in bench/channels.ts).
  const answering = new CallGate('channel answers', deps.maxConcurrentAnswers ?? 8, Number.POSITIVE_INFINITY);
  const owner = deps.owner ?? 'local';
  /** Answers running in the background: a draining instance waits for them before it hands its channels over. */
  const inFlight = new Set<Promise<unknown>>();
  const track = (work: Promise<unknown>) => {
    inFlight.add(work);
    void work.finally(() => inFlight.delete(work));
  };

  /** One exchange in the conversation's session (a new one when it is gone or belongs to another persona). */
  async function respond(
    channel: RoutedChannel,
    conversationId: string,
    text: string,
    userId: string | undefined,
    onText: (soFar: string) => void,
    onTool: (name: string) => void = () => {},
  ): Promise<Answer> {
    const target = channel.personaId !== null ? { personaId: channel.personaId } : { abTestId: channel.abTestId! };
    const known = await store.sessionOf(channel.id, conversationId);
    const request = { ...target, message: text, userId, channelId: channel.id, enableMCPTools: true };
    let exchange;
    try {
      exchange = await chat.open(channel.workspaceId, { ...request, sessionId: known });
    } catch (err) {
      // The session was deleted, or the channel now routes elsewhere: the conversation starts over.
      const stale = known !== undefined && ((err instanceof NotFoundError && err.message.startsWith('Session')) || err instanceof ConflictError);
      if (!stale) throw err;
      exchange = await chat.open(channel.workspaceId, request);
    }
    let soFar = '';
    const answer = await exchange.run((event) => {
      if (event.type === 'tool_call') onTool(event.toolCall.name);
      if (event.type !== 'text') return;
      soFar += event.content;
      onText(soFar);
    }, AbortSignal.timeout(5 * 60_000));
    if (answer.sessionId !== known) await store.setSession(channel.id, conversationId, answer.sessionId);
    return answer;
  }

  /** Answers a stored message through `writer`; settles its inbox row either way. */
  async function answerStored(channel: RoutedChannel, seq: number, message: InboundMessage, writer: ReplyWriter): Promise<Answer | null> {
    try {
      const answer = await respond(
        channel,
        message.conversationId,
        message.text,
        message.userId,
        (soFar) => writer.progress(soFar),
        (tool) => writer.status?.(toolStatus(tool)),
      );
      // A person has the conversation: the persona says nothing, and nothing is posted.
      if (answer.handoff && answer.response === '') {
        await writer.discard?.();
        await store.settle(seq, 'answered', now());
        return answer;
      }
      // A handoff's notice (or an answer that handed over) is not rated or regenerated: regenerating would ask the person.
      const parts = await writer.finish(answer.response, answer.handoff ? { answerButtons: false } : undefined);
      const at = now();
      await store.posted(parts.map((externalId) => ({ channel_id: channel.id, external_id: externalId, session_id: answer.sessionId, message_id: answer.messageId, created_at: at })));
      await store.settle(seq, 'answered', at);
      return answer;
    } catch (err) {
      logger.warn({ channelId: channel.id, err: err instanceof Error ? err.message : String(err) }, 'channel message not answered');
      await writer.fail(APOLOGY).catch(() => {});
      await store.settle(seq, 'failed', now());
      return null;
    }
  }

  return {
    respond,

    /**
     * Stores an inbound message, then answers it in the background (the platform has its
     * acknowledgement as soon as this resolves). A delivery stored before is ignored.
     */
    async receive(channel: RoutedChannel, message: InboundMessage, reply: (m: InboundMessage) => ReplyWriter): Promise<void> {
      const seq = await store.receive({
        channel_id: channel.id,
        external_id: message.externalId,
        conversation_id: message.conversationId,
        payload: JSON.stringify(message),
        status: 'pending',
        received_at: now(),
      });
      if (seq === null) return;
      track(
        (async () => {
          await answering.acquire();
          try {
            await new Promise((resolve) => setImmediate(resolve));
            if (await store.claim(seq, { status: 'pending', claimedBy: null }, owner)) await answerStored(channel, seq, message, reply(message));
          } finally {
            answering.release();
          }
        })().catch((err: unknown) => logger.error({ err, channelId: channel.id }, 'channel routing failed')),
      );
    },

    /**
     * A webhook message, answered in the request (API.md §9): stored first like any inbound
     * message; a delivery id seen before (`X-Switchboard-Delivery`) is refused with 409.
     */
    async answerNow(channel: RoutedChannel, message: InboundMessage): Promise<Answer> {
      const seq = await store.receive({
        channel_id: channel.id,
        external_id: message.externalId,
        conversation_id: message.conversationId,
        payload: JSON.stringify(message),
        status: 'answering',
        received_at: now(),
      });
      if (seq === null) throw new ConflictError(`Delivery ${message.externalId} was received before; it is answered once.`);
      try {
        const answer = await respond(channel, message.conversationId, message.text, message.userId, () => {});
        await store.settle(seq, 'answered', now());
        return answer;
      } catch (err) {
        await store.settle(seq, 'failed', now());
        throw err;
      }
    },

    /**
     * Answers what a crash or restart left unanswered, once, if recent; expires the rest. Messages
     * another instance is answering are left to it unless `takeable` says it died; with
     * `pendingForMs`, so are those still pending for less than that.
     */
    async recover(
      channel: RoutedChannel,
      reply: (m: InboundMessage) => ReplyWriter,
      takeable: Takeable = async (c) => new Set(c),
      options: { pendingForMs?: number } = {},
    ): Promise<number> {
      let answered = 0;
      const nowMs = clock.now().getTime();
      const cutoff = nowMs - recoveryWindowMs;
      // A message still pending is normally waiting its turn on the instance that stored it: taken only once it waited this long.
      const pendingSince = options.pendingForMs === undefined ? Number.POSITIVE_INFINITY : nowMs - options.pendingForMs;
      const rows = (await store.unanswered(channel.id)).filter((r) => r.status !== 'pending' || Date.parse(r.received_at) <= pendingSince);
      const claimers = [...new Set(rows.filter((r) => r.status === 'answering').map((r) => r.claimed_by))];
      const orphaned = claimers.length > 0 ? await takeable(claimers) : new Set<string | null>();
      for (const row of rows) {
        if (row.status === 'answering' && !orphaned.has(row.claimed_by)) continue;
        const from = { status: row.status, claimedBy: row.claimed_by };
        if (Date.parse(row.received_at) < cutoff) {
          // Expired only if still as read: another instance may have taken it meanwhile.
          if (await store.claim(row.seq, from, owner)) await store.settle(row.seq, 'expired', now());
          continue;
        }
        if (!(await store.claim(row.seq, from, owner))) continue;
        const message = JSON.parse(row.payload) as InboundMessage;
        const work = answerStored(channel, row.seq, message, reply(message));
        track(work);
        if (await work) answered++;
      }
      return answered;
    },

    /** Resolves once the answers running in the background have finished, or after `ms`. */
    async idle(ms: number): Promise<void> {
      let timer: NodeJS.Timeout | undefined;
      const waited = new Promise<void>((resolve) => (timer = setTimeout(resolve, ms)));
      while (inFlight.size > 0) {
        const done = await Promise.race([Promise.allSettled([...inFlight]).then(() => false), waited.then(() => true)]);
        if (done) break;
      }
      clearTimeout(timer);
    },

    /**
     * Regenerate under an answer: its question is asked again in the same conversation (stored and
     * answered like a message; a retried click is asked once). Answers whether it was an answer.
     */
    async regenerate(channel: RoutedChannel, action: InboundAction, reply: (m: InboundMessage) => ReplyWriter): Promise<boolean> {
      const posted = await store.postedMessage(channel.id, action.messageId);
      if (!posted?.session_id || !posted.message_id || !action.replyTo) return false;
      const question = await store.questionOf(posted.session_id, posted.message_id);
      if (question === undefined) return false;
      await this.receive(
        channel,
        {
          externalId: `regenerate:${action.messageId}:${action.userId}:${action.clickId ?? ''}`,
          conversationId: action.conversationId,
          conversationRef: String(action.replyTo.channel ?? action.conversationId),
          userId: action.userId,
          text: question,
          direct: false,
          mentioned: true,
          replyTo: action.replyTo,
        },
        reply,
      );
      return true;
    },

    /** 👍/👎 on one of the bot's replies → a 5 or 1 rating of that answer. */
    async react(channel: RoutedChannel, reaction: InboundReaction): Promise<boolean> {
      const posted = await store.postedMessage(channel.id, reaction.messageExternalId);
      if (!posted?.session_id || !posted.message_id) return false;
      try {
        await sessions.feedback(channel.workspaceId, posted.session_id, { rating: reaction.rating, messageId: posted.message_id, comment: undefined });
        return true;
      } catch (err) {
        if (err instanceof NotFoundError) return false; // the session was deleted since
        throw err;
      }
    },
  };
}

export type Inbox = ReturnType<typeof createInbox>;
