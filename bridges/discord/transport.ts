/**
 * The three Discord REST calls a reply needs — post, edit, typing — through discord.js's own REST
 * client (`client.rest`, @discordjs/rest), which queues per route bucket and honours 429s and
 * `Retry-After`. Every post and edit carries `allowed_mentions: { parse: [], replied_user: false }`,
 * so an answer can never ping anyone, whatever text the model wrote.
 */
import { type REST, Routes } from 'discord.js';
import type { OutboundButton } from '../bridge.js';
import { toDiscordParts } from './format.js';

/** Mentions Discord may turn into notifications: none. */
export const NO_MENTIONS = { parse: [] as string[], replied_user: false };

export interface DiscordTransport {
  /** Posts `content` (≤ 2,000 characters) in `channelId`, as a reply to `replyTo` when given; answers the message id. */
  post(channelId: string, content: string, replyTo: string | null): Promise<string>;
  edit(channelId: string, messageId: string, content: string): Promise<void>;
  typing(channelId: string): Promise<void>;
  /** Posts `content` with buttons (one row), then starts a thread on it when `thread` names one; answers the message id and the thread's (the message's own id). */
  card(channelId: string, content: string, buttons: OutboundButton[], thread: string | null): Promise<{ messageId: string; threadId: string | null }>;
}

/** Discord button styles: primary (blurple), secondary (grey), danger (red). */
const STYLES = { primary: 1, secondary: 2, danger: 4 } as const;
/** A button's custom id carries the button's id and value: `<id>:<value>` (100 characters at most). */
export const customIdOf = (b: OutboundButton) => `${b.id}:${b.value}`.slice(0, 100);

export function restTransport(rest: () => REST): DiscordTransport {
  return {
    async post(channelId, content, replyTo) {
      const body: Record<string, unknown> = { content, allowed_mentions: NO_MENTIONS };
      // A reply to a message deleted meanwhile still posts (as a plain message).
      if (replyTo !== null) body.message_reference = { message_id: replyTo, fail_if_not_exists: false };
      const message = (await rest().post(Routes.channelMessages(channelId), { body })) as { id: string };
      return message.id;
    },
    async edit(channelId, messageId, content) {
      await rest().patch(Routes.channelMessage(channelId, messageId), { body: { content, allowed_mentions: NO_MENTIONS } });
    },
    async typing(channelId) {
      await rest().post(Routes.channelTyping(channelId));
    },
    async card(channelId, content, buttons, thread) {
      const components = [{ type: 1, components: buttons.slice(0, 5).map((b) => ({ type: 2, style: STYLES[b.style ?? 'secondary'], label: b.label.slice(0, 80), custom_id: customIdOf(b) })) }];
      const message = (await rest().post(Routes.channelMessages(channelId), { body: { content, allowed_mentions: NO_MENTIONS, components } })) as { id: string };
      if (thread === null) return { messageId: message.id, threadId: null };
      // A thread started on a message has the message's id.
      const started = (await rest().post(Routes.threads(channelId, message.id), { body: { name: thread.slice(0, 100), auto_archive_duration: 1440 } })) as { id: string };
      return { messageId: message.id, threadId: started.id };
    },
  };
}

/**
 * Posts a whole text as consecutive messages (split at the limit); the first part replies to
 * `replyTo` when given. Answers every part's id.
 */
export async function postParts(transport: DiscordTransport, channelId: string, text: string, replyTo: string | null): Promise<string[]> {
  const ids: string[] = [];
  for (const [i, part] of toDiscordParts(text).entries()) ids.push(await transport.post(channelId, part, i === 0 ? replyTo : null));
  return ids;
}
