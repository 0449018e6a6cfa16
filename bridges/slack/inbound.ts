/**
 * Slack events → the bridge contract's InboundMessage / InboundReaction, with the filtering the
 * contract asks of a bridge (the bot's own and other bots' messages, edits, conversations not
 * allowed, `respondTo`).
 *
 * One user message, two events: a mention in a channel arrives as a `message` event and as an
 * `app_mention` event, with different `event_id`s and the same channel and `ts`. The bridge listens
 * to both (so a Slack app subscribed only to `app_mention` still works) and remembers, per
 * `<channel>:<ts>`, the event id it delivered: the other event of the pair is dropped, while a retry
 * of the delivered one (same `event_id`) goes through again — the service de-duplicates retries by
 * `externalId`.
 */
import type { ChannelSettings, InboundAction, InboundMessage, InboundReaction } from '../bridge.js';
import { slackToPlain } from './format.js';

export interface BotIdentity {
  /** The bot user's id (`U…`), as in `<@U…>` mentions. */
  userId: string;
  /** The bot's id (`B…`), on messages the bot posts. */
  botId: string | null;
}

/** The fields of a `message` / `app_mention` event the bridge reads. */
export interface SlackMessageEvent {
  type: string;
  subtype?: string;
  user?: string;
  bot_id?: string;
  text?: string;
  ts?: string;
  thread_ts?: string;
  channel?: string;
  channel_type?: string;
  /** The sender's team. */
  team?: string;
}

export interface SlackReactionEvent {
  type: string;
  user?: string;
  reaction?: string;
  item_user?: string;
  item?: { type?: string; channel?: string; ts?: string };
}

/** Message subtypes that are still a person writing: a file with a comment, a thread reply also sent to the channel. */
const USER_SUBTYPES = new Set(['file_share', 'thread_broadcast']);
/** How many `<channel>:<ts>` → event id pairs are remembered for the message/app_mention pairing. */
const REMEMBERED = 5000;

export class InboundMapper {
  private readonly delivered = new Map<string, string>();

  constructor(private readonly settings: () => ChannelSettings) {}

  /** The message to deliver, or null when the event is to be ignored. */
  message(event: SlackMessageEvent, eventId: string | undefined, bot: BotIdentity, teamId?: string): InboundMessage | null {
    const settings = this.settings();
    if (!settings.enabled) return null;
    if (event.subtype !== undefined && !USER_SUBTYPES.has(event.subtype)) return null;
    if (event.bot_id !== undefined || !event.user || event.user === bot.userId) return null;
    const { channel, ts } = event;
    if (!channel || !ts) return null;
    const allowed = settings.allowedConversations.length === 0 || settings.allowedConversations.includes(channel);

    const raw = event.text ?? '';
    const direct = event.channel_type === 'im' || (event.channel_type === undefined && channel.startsWith('D'));
    const mentioned = event.type === 'app_mention' || raw.includes(`<@${bot.userId}>`) || raw.includes(`<@${bot.userId}|`);
    const addressed = allowed && (settings.respondTo === 'all' || mentioned || direct);
    // A thread reply the settings would not answer may still be a member's, in a handoff's desk thread: the service decides.
    if (!addressed && event.thread_ts === undefined) return null;

    const text = slackToPlain(raw, bot.userId);
    if (text === '') return null;

    const key = `${channel}:${ts}`;
    const externalId = eventId ?? key;
    const earlier = this.delivered.get(key);
    if (earlier !== undefined && earlier !== externalId) return null;
    this.remember(key, externalId);

    const thread = event.thread_ts;
    const conversationId = thread ? `${channel}:${thread}` : settings.replyInThread ? `${channel}:${ts}` : channel;
    return {
      externalId,
      conversationId,
      conversationRef: channel,
      userId: event.user,
      text,
      direct,
      mentioned,
      // Who asked (and their team): a native stream outside a DM goes to them.
      replyTo: { channel, thread_ts: thread ?? (settings.replyInThread ? ts : null), user: event.user, team: event.team ?? teamId ?? null },
      ...(addressed ? {} : { addressed: false }),
    };
  }

  private remember(key: string, eventId: string): void {
    this.delivered.delete(key);
    this.delivered.set(key, eventId);
    if (this.delivered.size > REMEMBERED) {
      const oldest = this.delivered.keys().next().value;
      if (oldest !== undefined) this.delivered.delete(oldest);
    }
  }
}

/** The fields of a `block_actions` interaction the bridge reads (events-body.ts checks their types). */
export interface SlackBlockActions {
  type: string;
  user?: { id?: string };
  channel?: { id?: string };
  container?: { channel_id?: string; message_ts?: string; thread_ts?: string };
  message?: { ts?: string; thread_ts?: string };
  team?: { id?: string } | null;
  actions?: Array<{ action_id?: string; value?: string; action_ts?: string }>;
}

/** The button clicks of a `block_actions` interaction; the conversation is the clicked message's thread. */
export function toAction(body: SlackBlockActions): InboundAction[] {
  const userId = body.user?.id;
  const channel = body.channel?.id ?? body.container?.channel_id;
  const messageId = body.message?.ts ?? body.container?.message_ts;
  const ts = body.message?.thread_ts ?? body.container?.thread_ts ?? messageId;
  if (body.type !== 'block_actions' || !userId || !channel || !ts || !messageId) return [];
  const replyTo = { channel, thread_ts: ts, user: userId, team: body.team?.id ?? null };
  return (body.actions ?? []).flatMap((a) =>
    a.action_id && a.value !== undefined ? [{ actionId: a.action_id, value: a.value, userId, conversationId: `${channel}:${ts}`, messageId, clickId: a.action_ts, replyTo }] : [],
  );
}

const RATINGS: Record<string, 5 | 1> = { '+1': 5, thumbsup: 5, '-1': 1, thumbsdown: 1 };

/** 👍/👎 on a message (the bot's, when Slack says whose) → a rating; anything else → null. */
export function toReaction(event: SlackReactionEvent, bot: BotIdentity): InboundReaction | null {
  if (event.item?.type !== 'message' || !event.item.ts || !event.user || !event.reaction) return null;
  if (event.user === bot.userId) return null;
  if (event.item_user !== undefined && event.item_user !== bot.userId) return null;
  const rating = RATINGS[event.reaction.replace(/::skin-tone-\d$/, '')];
  if (rating === undefined) return null;
  return { messageExternalId: event.item.ts, userId: event.user, rating };
}
