/**
 * The Discord bridge (DESIGN.md "Channels", API.md §9): a discord.js `Client` on the gateway.
 *
 * - REST base from `apiUrl` (`SWITCHBOARD_DISCORD_API_URL`, `…/api`); the gateway URL is discovered
 *   from it (`GET /gateway/bot`), as discord.js always does.
 * - Status: `connecting` at start and while the gateway reconnects, `connected` once ready or
 *   resumed, `error` when Discord refuses the token or the intents (start() then rejects).
 *   Reconnects are discord.js's own: a dropped connection resumes (or re-identifies) by itself.
 * - Inbound and reactions: `inbound.ts`. Replies: `reply-writer.ts`. `send()`: `send-queue.ts`.
 */
import { type ChatInputCommandInteraction, Client, DiscordAPIError, Events, GatewayIntentBits, Partials, REST, type RESTOptions, RateLimitError, Routes } from 'discord.js';
import { RateLimitedError, UnavailableError, UpstreamError, ValidationError } from '../../src/errors.js';
import type { BridgeFactory, BridgeOptions, ChannelBridge, DiscordCredentials, InboundReaction } from '../bridge.js';
import { HIGH_PRIORITY_MARK, toDiscordParts } from './format.js';
import { type RawReaction, toInboundMessage, toInboundRawReaction, toInboundReaction } from './inbound.js';
import { createReplyWriter, type DiscordReplyWriter, type ReplyTuning } from './reply-writer.js';
import { SendQueue } from './send-queue.js';
import { destroyClient } from './shutdown.js';
import { FEEDBACK_ACTION, postParts, restTransport } from './transport.js';
import { describeLoginFailure, describeUnrecoverableClose } from './status.js';

export interface DiscordTuning extends ReplyTuning {
  /** Give up start() when the gateway is not ready by then. */
  loginTimeoutMs: number;
  /** A 429 asking to wait longer than this fails the request instead of waiting. */
  maxRateLimitWaitMs: number;
  /** One REST request's timeout (discord.js retries a timed-out request twice). */
  restTimeoutMs: number;
  /** stop(): how long to let queued sends finish first. */
  stopGraceMs: number;
  /** `send()` calls waiting at most. */
  maxQueued: number;
}

export const DEFAULT_DISCORD_TUNING: DiscordTuning = {
  editIntervalMs: 1000,
  typingIntervalMs: 8000,
  typingMaxMs: 5 * 60_000,
  loginTimeoutMs: 45_000,
  maxRateLimitWaitMs: 30_000,
  restTimeoutMs: 15_000,
  stopGraceMs: 3000,
  maxQueued: 500,
};

export const createDiscordBridge: BridgeFactory<DiscordCredentials> = (options) => createDiscordBridgeWith(options, DEFAULT_DISCORD_TUNING);

const INTENTS = [
  GatewayIntentBits.Guilds,
  GatewayIntentBits.GuildMessages,
  GatewayIntentBits.MessageContent,
  GatewayIntentBits.DirectMessages,
  GatewayIntentBits.GuildMessageReactions,
  GatewayIntentBits.DirectMessageReactions,
];
// Channel: DMs arrive on uncached channels. Message + Reaction: reactions on uncached messages.
// User: a DM reaction by a user not cached since start-up.
const PARTIALS = [Partials.Channel, Partials.Message, Partials.Reaction, Partials.User];

/** The slash command the bot registers in each server (type 1: chat input; option type 3: string). */
export const ASK_COMMAND = {
  name: 'ask',
  description: 'Ask the assistant a question',
  type: 1,
  options: [{ type: 3, name: 'question', description: 'Your question', required: true, max_length: 4000 }],
};

/** `createDiscordBridge` with its timings spelled out (tests shorten them). */
export function createDiscordBridgeWith(options: BridgeOptions<DiscordCredentials>, tuning: DiscordTuning): ChannelBridge {
  const { events, logger } = options;
  let client: Client | null = null;
  let ready = false;
  let stopped = true;
  let starting: Promise<void> | null = null;
  let cancelStart: ((err: Error) => void) | null = null;
  let lastStatus: string | null = null;
  const writers = new Set<DiscordReplyWriter>();
  const queue = new SendQueue(tuning.maxQueued);
  const restOptions: Partial<RESTOptions> = {
    ...(options.apiUrl ? { api: options.apiUrl.replace(/\/+$/, '') } : {}),
    retries: 2,
    timeout: tuning.restTimeoutMs,
    rejectOnRateLimit: (limit) => Math.max(limit.retryAfter, limit.timeToReset) > tuning.maxRateLimitWaitMs,
  };
  /**
   * REST without the gateway, for `send` where the gateway session is not (or not yet) here: another
   * instance holds it (API.md §13), or it is reconnecting. Discord's REST needs only the bot token.
   */
  let restOnly: REST | null = null;
  /** stop() was called (and no start() since): this bridge sends nothing more. */
  let ended = false;
  const transport = restTransport(() => {
    if (client) return client.rest;
    const token = options.credentials.botToken?.trim() ?? '';
    if (token === '') throw new UnavailableError('The Discord bot token is empty.');
    if (!restOnly) {
      restOnly = new REST(restOptions).setToken(token);
      restOnly.on('rateLimited', (limit) => logger.warn({ route: limit.route, retryAfterMs: limit.retryAfter, global: limit.global, scope: limit.scope }, 'discord rate limit'));
    }
    return restOnly;
  });

  /** Registers `/ask` in these servers; a refusal (no applications.commands scope) is logged, mentions keep working. */
  async function registerCommands(c: Client<true>, guildIds: string[]): Promise<void> {
    for (const guildId of guildIds) {
      try {
        await c.rest.put(Routes.applicationGuildCommands(c.application.id, guildId), { body: [ASK_COMMAND] });
      } catch (err) {
        logger.warn({ err, guildId }, 'discord: /ask could not be registered in this server');
      }
    }
  }

  /**
   * `/ask question:…`: shown thinking at once (a deferred response), then answered like a mention by
   * editing that response; a thread opens on the answer, where the follow-ups keep the session.
   */
  async function ask(interaction: ChatInputCommandInteraction): Promise<void> {
    const question = interaction.options.getString('question', true).trim();
    await interaction.deferReply();
    const original = await interaction.fetchReply();
    if (question === '') return void (await interaction.editReply('Ask a question after /ask.'));
    const inGuild = interaction.inGuild();
    await events.onMessage({
      externalId: interaction.id,
      // The thread the answer opens has the answer's id: the follow-ups there are this conversation.
      conversationId: inGuild ? original.id : interaction.channelId,
      conversationRef: interaction.channelId,
      userId: interaction.user.id,
      text: question,
      direct: !inGuild,
      mentioned: true,
      replyTo: {
        channelId: interaction.channelId,
        messageId: null,
        interactionApp: interaction.applicationId,
        interactionToken: interaction.token,
        threadName: inGuild ? question.slice(0, 90) : null,
      },
    });
  }

  function status(state: 'connecting' | 'connected' | 'error', detail: string | null): void {
    const key = `${state}|${detail ?? ''}`;
    if (key === lastStatus) return;
    lastStatus = key;
    events.onStatus(state, detail);
  }

  function buildClient(): { client: Client; closeCodes: number[] } {
    const closeCodes: number[] = [];
    const c = new Client({
      intents: INTENTS,
      partials: PARTIALS,
      allowedMentions: { parse: [], repliedUser: false },
      rest: restOptions,
    });
    c.on(Events.ClientReady, () => {
      ready = true;
      status('connected', null);
    });
    c.on(Events.MessageCreate, (message) => {
      if (stopped || !c.isReady()) return;
      const inbound = toInboundMessage(message, c, options.settings());
      if (!inbound) return;
      events.onMessage(inbound).catch((err: unknown) => logger.error({ err, externalId: inbound.externalId }, 'discord message could not be stored'));
    });
    // The bot's slash command, registered in every server it is in (at once: guild commands need no propagation).
    c.on(Events.ClientReady, (ready) => void registerCommands(ready, [...ready.guilds.cache.keys()]));
    c.on(Events.GuildCreate, (guild) => {
      if (c.isReady()) void registerCommands(c, [guild.id]);
    });
    c.on(Events.InteractionCreate, (interaction) => {
      if (stopped || !options.settings().enabled) return;
      if (interaction.isChatInputCommand() && interaction.commandName === ASK_COMMAND.name) {
        void ask(interaction).catch((err: unknown) => logger.error({ err }, 'discord /ask could not be taken'));
        return;
      }
      if (!interaction.isButton()) return;
      const colon = interaction.customId.indexOf(':');
      if (colon <= 0) return;
      const actionId = interaction.customId.slice(0, colon);
      const value = interaction.customId.slice(colon + 1);
      // The conversation of the clicked message's thread: a thread started on a message has its id.
      const conversationId = interaction.channel?.isThread() ? interaction.channelId : interaction.message.id;
      const handle =
        actionId === FEEDBACK_ACTION
          ? () => (events.onFeedback && (value === 'positive' || value === 'negative') ? events.onFeedback({ messageExternalId: interaction.message.id, userId: interaction.user.id, rating: value === 'positive' ? 5 : 1 }) : undefined)
          : () => events.onAction?.({ actionId, value, userId: interaction.user.id, conversationId, messageId: interaction.message.id });
      // Acknowledged at once (the message stays as it is), then handed on.
      interaction
        .deferUpdate()
        .then(handle)
        .catch((err: unknown) => logger.error({ err, actionId }, 'discord button click could not be taken'));
    });
    const react = (inbound: InboundReaction | null) => {
      if (!inbound || stopped || !options.settings().enabled) return;
      events.onReaction(inbound).catch((err: unknown) => logger.error({ err, messageId: inbound.messageExternalId }, 'discord reaction could not be stored'));
    };
    c.on(Events.MessageReactionAdd, (reaction, user) => {
      if (c.isReady()) react(toInboundReaction(reaction, user, c.user.id));
    });
    // discord.js drops a reaction in a DM channel it has not cached: take it from the packet.
    c.on(Events.Raw, (packet: { t?: string; d?: RawReaction }) => {
      if (packet.t !== 'MESSAGE_REACTION_ADD' || !packet.d || packet.d.guild_id || !c.isReady() || c.channels.cache.has(packet.d.channel_id)) return;
      react(toInboundRawReaction(packet.d, c.user.id));
    });
    c.on(Events.ShardReconnecting, () => {
      if (ready && !stopped) status('connecting', 'The Discord gateway connection dropped; reconnecting.');
    });
    const back = () => {
      if (ready && !stopped) status('connected', null);
    };
    c.on(Events.ShardResume, back);
    c.on(Events.ShardReady, back);
    c.on(Events.ShardDisconnect, ({ code }) => {
      closeCodes.push(code);
      if (ready && !stopped) status('error', describeUnrecoverableClose(code));
    });
    c.on(Events.ShardError, (err) => logger.warn({ err }, 'discord gateway error'));
    c.on(Events.Error, (err) => logger.error({ err }, 'discord client error'));
    c.on(Events.Warn, (message) => logger.warn({ message }, 'discord client warning'));
    c.rest.on('rateLimited', (limit) => logger.warn({ route: limit.route, retryAfterMs: limit.retryAfter, global: limit.global, scope: limit.scope }, 'discord rate limit'));
    return { client: c, closeCodes };
  }

  async function doStart(): Promise<void> {
    if (client && ready) return;
    stopped = false;
    ready = false;
    status('connecting', null);
    const token = options.credentials.botToken?.trim() ?? '';
    if (token === '') {
      status('error', 'The Discord bot token is empty.');
      throw new ValidationError('The Discord bot token is empty.');
    }
    const built = buildClient();
    client = built.client;
    const c = built.client;
    let timer: NodeJS.Timeout | undefined;
    try {
      await Promise.race([
        Promise.all([c.login(token), new Promise<void>((resolve) => c.once(Events.ClientReady, () => resolve()))]),
        new Promise<never>((_, reject) => {
          cancelStart = reject;
          timer = setTimeout(() => reject(new Error(`the gateway was not ready within ${Math.round(tuning.loginTimeoutMs / 1000)} s`)), tuning.loginTimeoutMs);
        }),
      ]);
    } catch (err) {
      const detail = describeLoginFailure(err, built.closeCodes);
      if (client === c) client = null;
      ready = false;
      await destroyClient(c).catch(() => undefined);
      if (!stopped) status('error', detail);
      throw new UpstreamError(detail);
    } finally {
      clearTimeout(timer);
      cancelStart = null;
    }
  }

  return {
    start() {
      ended = false;
      starting ??= doStart().finally(() => {
        starting = null;
      });
      return starting;
    },

    async stop() {
      ended = true;
      if (stopped && !client && !restOnly) return;
      stopped = true;
      cancelStart?.(new Error('the channel was stopped'));
      await queue.idle(tuning.stopGraceMs);
      for (const writer of writers) writer.dispose();
      writers.clear();
      const c = client;
      client = null;
      ready = false;
      lastStatus = null;
      restOnly?.clearHashSweeper();
      restOnly?.clearHandlerSweeper();
      restOnly = null;
      if (c) await destroyClient(c);
    },

    async send({ to, text, threadId, priority, buttons, startThread }) {
      // Sent over REST: the gateway session need not be here, or up; a stopped bridge sends nothing.
      if (ended) throw new UnavailableError('The Discord channel is not running.');
      const marked = priority === 'high' ? `${HIGH_PRIORITY_MARK}${text}` : text;
      try {
        if (buttons && buttons.length > 0) {
          // Text first (split at the limit), the buttons on the last part.
          const parts = toDiscordParts(marked);
          const head = parts.length > 1 ? await queue.push(priority, () => postParts(transport, to, parts.slice(0, -1).join('\n'), threadId ?? null)) : [];
          const card = await queue.push(priority, () => transport.card(to, parts.at(-1) ?? '', buttons, startThread ?? null));
          return { externalId: head[0] ?? card.messageId, thread: card.threadId ?? to };
        }
        const ids = await queue.push(priority, () => postParts(transport, to, marked, threadId ?? null));
        return { externalId: ids[0] ?? '', thread: to };
      } catch (err) {
        throw asAppError(err, to);
      }
    },

    reply(target) {
      const { channelId, messageId, interactionApp, interactionToken, threadName } = target;
      if (typeof channelId !== 'string' || !/^\d{1,20}$/.test(channelId)) throw new ValidationError('Not a Discord reply target (channelId missing).');
      const writer: DiscordReplyWriter = createReplyWriter(
        {
          channelId,
          messageId: typeof messageId === 'string' ? messageId : null,
          interaction: typeof interactionApp === 'string' && typeof interactionToken === 'string' ? { applicationId: interactionApp, token: interactionToken } : undefined,
          threadName: typeof threadName === 'string' ? threadName : undefined,
          feedback: options.settings().feedbackButtons,
        },
        transport,
        tuning,
        logger,
        () => writers.delete(writer),
      );
      writers.add(writer);
      return writer;
    },
  };
}

/** A failed send as the service's errors: a channel Discord will not post in is the caller's mistake. */
function asAppError(err: unknown, to: string): Error {
  if (err instanceof RateLimitError) return new RateLimitedError(Math.ceil(err.retryAfter / 1000));
  if (err instanceof DiscordAPIError) {
    if (err.status === 404 || err.status === 403) {
      const message = `Discord cannot post in channel ${to}: ${err.message} (${err.status}).`;
      return new ValidationError(message, [{ path: 'to', message }]);
    }
    return new UpstreamError(`Discord refused the message: ${err.message} (${err.status}).`);
  }
  return err instanceof Error ? err : new UpstreamError(String(err));
}
