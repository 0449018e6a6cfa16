/**
 * The three Discord REST calls a reply needs — post, edit, typing — through discord.js's own REST
 * client (`client.rest`, @discordjs/rest), which queues per route bucket and honours 429s and
 * `Retry-After`. Every post and edit carries `allowed_mentions: { parse: [], replied_user: false }`,
 * so an answer can never ping anyone, whatever text the model wrote.
 */
import { type REST, Routes } from 'discord.js';
import { FEEDBACK_ACTION, type OutboundButton } from '../bridge.js';
import { toDiscordParts } from './format.js';

/** Mentions Discord may turn into notifications: none. */
export const NO_MENTIONS = { parse: [] as string[], replied_user: false };

/** Buttons under a message (Discord's message components: one action row). */
export type Components = Array<Record<string, unknown>>;

export interface DiscordTransport {
  /** Posts `content` (≤ 2,000 characters) in `channelId`, as a reply to `replyTo` when given; answers the message id. */
  post(channelId: string, content: string, replyTo: string | null, components?: Components): Promise<string>;
  edit(channelId: string, messageId: string, content: string, components?: Components): Promise<void>;
  typing(channelId: string): Promise<void>;
  /** An interaction's deferred response: edits it to `content` (its "thinking…" message until then); answers its message id. */
  editOriginal(applicationId: string, token: string, content: string, components?: Components): Promise<string>;
  /** Another message answering an interaction; answers its id. */
  followUp(applicationId: string, token: string, content: string, components?: Components): Promise<string>;
  /** Starts a public thread on a message (the thread has the message's id). */
  startThread(channelId: string, messageId: string, name: string): Promise<string>;
  /** Posts `content` with buttons (one row), then starts a thread on it when `thread` names one; answers the message id and the thread's (the message's own id). */
  card(channelId: string, content: string, buttons: OutboundButton[], thread: string | null): Promise<{ messageId: string; threadId: string | null }>;
}

/** Discord button styles: primary (blurple), secondary (grey), danger (red). */
const STYLES = { primary: 1, secondary: 2, danger: 4 } as const;
/** A button's custom id carries the button's id and value: `<id>:<value>` (100 characters at most). */
export const customIdOf = (b: OutboundButton) => `${b.id}:${b.value}`.slice(0, 100);

export { FEEDBACK_ACTION } from '../bridge.js';

/** 👍 / 👎 under an answer: a click arrives as a component interaction. */
export function feedbackComponents(): Components {
  const button = (label: string, emoji: string, value: string) => ({ type: 2, style: 2, label, emoji: { name: emoji }, custom_id: `${FEEDBACK_ACTION}:${value}` });
  return [{ type: 1, components: [button('Good answer', '👍', 'positive'), button('Bad answer', '👎', 'negative')] }];
}

export function restTransport(rest: () => REST): DiscordTransport {
  return {
    async post(channelId, content, replyTo, components) {
      const body: Record<string, unknown> = { content, allowed_mentions: NO_MENTIONS, ...(components ? { components } : {}) };
      // A reply to a message deleted meanwhile still posts (as a plain message).
      if (replyTo !== null) body.message_reference = { message_id: replyTo, fail_if_not_exists: false };
      const message = (await rest().post(Routes.channelMessages(channelId), { body })) as { id: string };
      return message.id;
    },
    async edit(channelId, messageId, content, components) {
      await rest().patch(Routes.channelMessage(channelId, messageId), { body: { content, allowed_mentions: NO_MENTIONS, ...(components ? { components } : {}) } });
    },
    async editOriginal(applicationId, token, content, components) {
      const body = { content, allowed_mentions: NO_MENTIONS, ...(components ? { components } : {}) };
      const message = (await rest().patch(Routes.webhookMessage(applicationId, token, '@original'), { body, auth: false })) as { id: string };
      return message.id;
    },
    async followUp(applicationId, token, content, components) {
      const body = { content, allowed_mentions: NO_MENTIONS, ...(components ? { components } : {}) };
      const message = (await rest().post(Routes.webhook(applicationId, token), { body, auth: false })) as { id: string };
      return message.id;
    },
    async startThread(channelId, messageId, name) {
      const thread = (await rest().post(Routes.threads(channelId, messageId), { body: { name: name.slice(0, 100) || 'Question', auto_archive_duration: 1440 } })) as { id: string };
      return thread.id;
    },
    async typing(channelId) {
      await rest().post(Routes.channelTyping(channelId));
    },
    async card(channelId, content, buttons, thread) {
      const components: Components = [{ type: 1, components: buttons.slice(0, 5).map((b) => ({ type: 2, style: STYLES[b.style ?? 'secondary'], label: b.label.slice(0, 80), custom_id: customIdOf(b) })) }];
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
