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
import type { ChannelSettings, InboundMessage, InboundReaction } from '../bridge.js';
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
  message(event: SlackMessageEvent, eventId: string | undefined, bot: BotIdentity): InboundMessage | null {
    const settings = this.settings();
    if (!settings.enabled) return null;
    if (event.subtype !== undefined && !USER_SUBTYPES.has(event.subtype)) return null;
    if (event.bot_id !== undefined || !event.user || event.user === bot.userId) return null;
    const { channel, ts } = event;
    if (!channel || !ts) return null;
    if (settings.allowedConversations.length > 0 && !settings.allowedConversations.includes(channel)) return null;

    const raw = event.text ?? '';
    const direct = event.channel_type === 'im' || (event.channel_type === undefined && channel.startsWith('D'));
    const mentioned = event.type === 'app_mention' || raw.includes(`<@${bot.userId}>`) || raw.includes(`<@${bot.userId}|`);
    if (settings.respondTo === 'mentions' && !mentioned && !direct) return null;

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
      replyTo: { channel, thread_ts: thread ?? (settings.replyInThread ? ts : null) },
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
