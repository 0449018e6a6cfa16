/**
 * Discord gateway events as the bridge contract's `InboundMessage` / `InboundReaction`
 * (bridge.ts), with the channel's settings applied.
 *
 * Conversations: one session per Discord channel or thread. A thread is its own channel, so
 * `conversationId` is the message's channel id (the thread's id inside a thread, the DM channel's in
 * a DM) and `conversationRef` is the channel a thread hangs off (matched against
 * `allowedConversations`).
 */
import { type Client, type Message, MessageType, type MessageReaction, type PartialMessageReaction, type PartialUser, type User } from 'discord.js';
import type { ChannelSettings, InboundMessage, InboundReaction } from '../bridge.js';
import { mentionsUser, ratingOf, toPlainText } from './format.js';

/** Whether the bot is addressed: a user mention, a mention of its managed role, or a reply to one of its messages. */
export function isBotMentioned(message: Message, botId: string): boolean {
  if (message.mentions.has(botId, { ignoreEveryone: true, ignoreRoles: true })) return true;
  if (mentionsUser(message.content, botId)) return true;
  if (message.mentions.repliedUser?.id === botId) return true;
  return message.mentions.roles.some((role) => role.tags?.botId === botId);
}

/**
 * The message as an `InboundMessage`, or null when the bridge must not deliver it: the bot's own or
 * another bot's (webhooks included), a system message, a disabled channel, a guild message outside
 * `allowedConversations` or without a mention under `respondTo: "mentions"`, or one with no text
 * left (a bare mention, an attachment alone). Direct messages are always delivered.
 */
export function toInboundMessage(message: Message, client: Client<true>, settings: ChannelSettings): InboundMessage | null {
  const botId = client.user.id;
  if (!settings.enabled) return null;
  if (message.author.bot || message.author.id === botId || message.webhookId !== null) return null;
  if (message.system || (message.type !== MessageType.Default && message.type !== MessageType.Reply)) return null;

  const direct = !message.inGuild();
  const channel = message.channel;
  const parentId = !direct && channel.isThread() ? channel.parentId : null;
  const conversationRef = parentId ?? message.channelId;
  const mentioned = isBotMentioned(message, botId);
  let addressed = true;
  if (!direct) {
    const allowed = settings.allowedConversations;
    // A thread the bot started (on a /ask answer) is a conversation with it: no mention needed there.
    const botThread = channel.isThread() && channel.ownerId === botId;
    addressed = (allowed.length === 0 || allowed.includes(message.channelId) || (parentId !== null && allowed.includes(parentId))) && (settings.respondTo === 'all' || mentioned || botThread);
    // A thread message the settings would not answer may still be a member's, in a handoff's desk thread: the service decides.
    if (!addressed && parentId === null) return null;
  }

  const text = toPlainText(message.content, {
    botId,
    user: (id) => {
      const member = message.mentions.members?.get(id);
      const user = message.mentions.users.get(id) ?? client.users.cache.get(id);
      return member?.displayName ?? user?.globalName ?? user?.username;
    },
    role: (id) => {
      const role = message.guild?.roles.cache.get(id);
      return role?.tags?.botId === botId ? null : role?.name;
    },
    channel: (id) => {
      const target = client.channels.cache.get(id);
      return target && 'name' in target && typeof target.name === 'string' ? target.name : undefined;
    },
  });
  if (text === '') return null;

  return {
    externalId: message.id,
    conversationId: message.channelId,
    conversationRef,
    userId: message.author.id,
    text,
    direct,
    mentioned,
    replyTo: { channelId: message.channelId, messageId: settings.replyInThread ? message.id : null },
    ...(addressed ? {} : { addressed: false }),
  };
}

/**
 * A 👍 / 👎 (any skin tone) as feedback, on any message — the service keeps only those on the
 * bot's answers. Reactions by bots (and the bot itself) and other emoji → null. Works on partial
 * reactions (uncached messages): the gateway payload carries everything needed, nothing is fetched.
 */
export function toInboundReaction(reaction: MessageReaction | PartialMessageReaction, user: User | PartialUser, botId: string): InboundReaction | null {
  if (user.id === botId || user.bot === true) return null;
  const rating = ratingOf(reaction.emoji.name);
  if (rating === null) return null;
  return { messageExternalId: reaction.message.id, userId: user.id, rating };
}

/** The raw MESSAGE_REACTION_ADD fields the fallback below reads. */
export interface RawReaction {
  user_id: string;
  message_id: string;
  channel_id: string;
  guild_id?: string;
  emoji: { name: string | null };
  member?: { user?: { bot?: boolean } };
}

/**
 * A reaction in a DM channel discord.js has not cached (none of its messages seen since start-up):
 * the gateway payload has no channel type, so discord.js drops it. Read straight from the packet.
 */
export function toInboundRawReaction(d: RawReaction, botId: string): InboundReaction | null {
  if (d.user_id === botId || d.member?.user?.bot === true) return null;
  const rating = ratingOf(d.emoji?.name);
  if (rating === null) return null;
  return { messageExternalId: d.message_id, userId: d.user_id, rating };
}
