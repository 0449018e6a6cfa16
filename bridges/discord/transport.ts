/**
 * The three Discord REST calls a reply needs — post, edit, typing — through discord.js's own REST
 * client (`client.rest`, @discordjs/rest), which queues per route bucket and honours 429s and
 * `Retry-After`. Every post and edit carries `allowed_mentions: { parse: [], replied_user: false }`,
 * so an answer can never ping anyone, whatever text the model wrote.
 */
import { type REST, Routes } from 'discord.js';
import { toDiscordParts } from './format.js';

/** Mentions Discord may turn into notifications: none. */
export const NO_MENTIONS = { parse: [] as string[], replied_user: false };

export interface DiscordTransport {
  /** Posts `content` (≤ 2,000 characters) in `channelId`, as a reply to `replyTo` when given; answers the message id. */
  post(channelId: string, content: string, replyTo: string | null): Promise<string>;
  edit(channelId: string, messageId: string, content: string): Promise<void>;
  typing(channelId: string): Promise<void>;
}

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
