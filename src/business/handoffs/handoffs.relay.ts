/**
 * Relay: what a change of a handoff writes (all or nothing) and how what it queued leaves — to
 * users on channels, to desk threads and to the team's webhook — with retries, one pass at a time
 * per instance.
 */
import type { HandoffRow } from '../../db/schema.js';
import type { OutboundButton } from '../../../bridges/bridge.js';
import { SIGNATURE_HEADER, signature } from '../../../bridges/webhook/webhook-bridge.js';
import { emailKey } from '../teams/teams.service.js';
import { toHandoff, type HandoffBase } from './handoffs.base.js';
import type { HandoffMessage as ApiMessage } from './handoffs.schemas.js';
import type { Queue, QueueRow, Writes } from './handoffs.store.js';

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

/** A team's webhook secret is sealed for that team only. */
export const notifyContext = (teamId: string) => `team-notify:${teamId}`;
const WEBHOOK_TIMEOUT_MS = 10_000;

/** Deliveries claimed per pass, how long a claim holds, and the retries of one that fails. */
const DELIVERY_BATCH = 20;
const CLAIM_MS = 60_000;
const MAX_ATTEMPTS = 6;
const retryDelayMs = (attempt: number) => Math.min(5 * 60_000, 2_000 * 2 ** attempt);

export function createRelay(base: HandoffBase) {
  const { store, clock, ids, logger, webhooks, now } = base;
  const owner = base.owner ?? 'local';
  let channels: ChannelPort | null = null;
  let delivering: Promise<number> | null = null;
  let again = false;

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

  return {
    noteOf,
    commit,
    deliver,
    eventRows,
    /** How messages reach users and desks on channels (the channels service is built after this one). */
    channelsWith(port: ChannelPort): void {
      channels = port;
    },
    /** The channels service, once it is built. */
    channels: (): ChannelPort | null => channels,
  };
}

export type Relay = ReturnType<typeof createRelay>;
