/**
 * Slack slash commands: `/human <reason>` hands the conversation to a person (docs/channels.md).
 * Slack's client sends any message starting with `/` as a slash command, so a user cannot type
 * `/human` as a message; it arrives as a signed form (Events API) or a `slash_commands` envelope
 * (Socket Mode), through Bolt's `app.command`.
 */
import type { Logger } from 'pino';
import type { BridgeEvents, ChannelSettings, InboundMessage } from '../bridge.js';
import { escapeEntities, slackToPlain } from './format.js';
import type { BotIdentity } from './inbound.js';
import type { SlackOutbound } from './outbound.js';

/** The slash command the bridge handles. */
export const HUMAN_COMMAND = '/human';

/** The fields of a slash command (a signed form, or a `slash_commands` envelope) the bridge reads. */
export interface SlackSlashCommand {
  command?: string;
  text?: string;
  user_id?: string;
  channel_id?: string;
  team_id?: string;
  trigger_id?: string;
}

/**
 * `/human <reason>` → what the channel gets, with the conversation still to be chosen: a slash
 * command has no thread (Slack allows none in threads), so it is a top-level message of the channel
 * or DM where it was typed. `root`: the text of the message that starts its thread (with
 * `replyInThread`); null: the conversation is the channel itself. Null when it is not to be taken.
 */
export function toCommand(
  command: SlackSlashCommand,
  settings: ChannelSettings,
  bot: BotIdentity,
): { refused: boolean; root: string | null; message: (threadTs: string | null) => InboundMessage } | null {
  const { user_id: user, channel_id: channel, trigger_id: trigger } = command;
  if (!settings.enabled || command.command !== HUMAN_COMMAND || !user || !channel || !trigger) return null;
  const allowed = settings.allowedConversations.length === 0 || settings.allowedConversations.includes(channel);
  const reason = slackToPlain(command.text ?? '', bot.userId);
  const text = reason === '' ? HUMAN_COMMAND : `${HUMAN_COMMAND} ${reason}`;
  return {
    refused: !allowed,
    // The reason as plain text: whatever markup it had (`<!channel>`) pings nobody when the bot posts it.
    root: settings.replyInThread ? `<@${user}> asked for a person${reason === '' ? '.' : `: ${escapeEntities(reason)}`}` : null,
    message: (threadTs) => ({
      // One invocation, one trigger id: stable if the delivery is ever repeated.
      externalId: `command:${trigger}`,
      conversationId: threadTs ? `${channel}:${threadTs}` : channel,
      conversationRef: channel,
      userId: user,
      text,
      direct: channel.startsWith('D'),
      mentioned: true,
      replyTo: { channel, thread_ts: threadTs, user, team: command.team_id ?? null },
    }),
  };
}

type Ephemeral = { response_type: 'ephemeral'; text: string };

export interface CommandDeps {
  ack(response?: Ephemeral): Promise<void>;
  respond(message: Ephemeral): Promise<unknown>;
  bot: BotIdentity;
  settings: ChannelSettings;
  outbound: SlackOutbound;
  events: BridgeEvents;
  logger: Logger;
}

/**
 * A slash command: acknowledged at once (Slack wants it within 3 s), then, with `replyInThread`,
 * the bot starts a thread in the channel or DM where it was typed, and the command is that thread's
 * first message; without, it is the channel's conversation. What cannot be taken is answered to
 * the user alone (ephemeral).
 */
export async function takeCommand(command: SlackSlashCommand, deps: CommandDeps): Promise<void> {
  const { ack, respond, bot, outbound, events, logger } = deps;
  const taken = toCommand(command, deps.settings, bot);
  if (!taken) return ack();
  if (taken.refused) return ack({ response_type: 'ephemeral', text: 'I do not answer in this conversation.' });
  await ack();
  let threadTs: string | null = null;
  if (taken.root !== null) {
    try {
      threadTs = await outbound.post(command.channel_id!, taken.root, null);
    } catch (err) {
      const code = (err as { data?: { error?: unknown } } | null)?.data?.error;
      logger.warn({ err, channel: command.channel_id }, 'slack: could not start the thread of a slash command');
      const why = typeof code === 'string' ? ` (${code})` : '';
      await respond({ response_type: 'ephemeral', text: `I could not start a thread here${why}. Add me to this conversation, or write <@${bot.userId}> /human in a thread.` }).catch((e: unknown) =>
        logger.debug({ err: e }, 'slack: the slash command could not be answered'),
      );
      return;
    }
  }
  const message = taken.message(threadTs);
  try {
    await events.onMessage(message);
  } catch (err) {
    logger.error({ err, externalId: message.externalId }, 'slack: the channels service did not take a slash command');
  }
}
