/**
 * The Slack bridge: a Bolt App fed either by the Events API (`handleHttp`, credentials with a
 * `signingSecret`) or by Socket Mode (credentials with an `appToken`). See inbound.ts for what is
 * delivered, outbound.ts for replies and sends.
 *
 * Socket Mode reconnects itself: Bolt's client is told not to (its delay grows without a cap), and
 * the bridge restarts it after a drop — at once the first time, then after 0.5 s, 1 s, 2 s… up to
 * 30 s — reporting `connecting` with the reason, then `connected`.
 */
import { App, LogLevel, SocketModeReceiver, webApi, type Logger as BoltLogger } from '@slack/bolt';
import type { Logger } from 'pino';
import { UnavailableError } from '../../src/errors.js';
import type { BridgeFactory, BridgeOptions, ChannelBridge, OutboundMessage, RawHttpRequest, RawHttpResponse, ReplyTarget, ReplyWriter, SendResult, SlackCredentials } from '../bridge.js';
import { HUMAN_COMMAND, takeCommand } from './command.js';
import { InboundMapper, toAction, toReaction, type BotIdentity, type SlackBlockActions, type SlackMessageEvent, type SlackReactionEvent } from './inbound.js';
import { FEEDBACK_ACTION, SlackOutbound } from './outbound.js';
import { EventsApiReceiver } from './receiver.js';

/** An assistant thread's title: its first question, cut to this. */
const TITLE_CHARS = 60;
const REMEMBERED_THREADS = 1000;

/** The fields of an `assistant_thread_started` event the bridge reads. */
interface SlackAssistantThreadEvent {
  type: string;
  assistant_thread?: { user_id?: string; channel_id?: string; thread_ts?: string; context?: { channel_id?: string; team_id?: string } };
}

/** Bounded retries for every Web API call (429 waits Retry-After first, then this back-off). */
const RETRY_CONFIG = { retries: 4, factor: 2, minTimeout: 250, maxTimeout: 8000, randomize: true };
const REQUEST_TIMEOUT_MS = 15_000;
const RECONNECT_FIRST_MS = 500;
const RECONNECT_MAX_MS = 30_000;
/** A connection that lasted this long resets the back-off. */
const STABLE_MS = 10_000;

export const createSlackBridge: BridgeFactory<SlackCredentials> = (options) => new SlackBridge(options);

class SlackBridge implements ChannelBridge {
  readonly handleHttp?: (request: RawHttpRequest) => Promise<RawHttpResponse>;
  private readonly app: App;
  private readonly web: webApi.WebClient;
  private readonly outbound: SlackOutbound;
  private readonly inbound: InboundMapper;
  private readonly socket: SocketModeReceiver | null = null;
  private readonly logger: Logger;
  private bot: BotIdentity | null = null;
  /** Assistant threads opened here whose first question has not titled them yet (oldest dropped first). */
  private readonly untitled = new Set<string>();
  private stopped = false;
  /** A connection attempt (the first or a reconnect) is under way: its own outcome decides what follows. */
  private reconnecting = false;
  private attempts = 0;
  private connectedAt = 0;
  private reconnectTimer: NodeJS.Timeout | null = null;

  constructor(private readonly options: BridgeOptions<SlackCredentials>) {
    const { botToken, signingSecret, appToken } = options.credentials;
    this.logger = options.logger.child({ channelId: options.channelId, bridge: 'slack' });
    const boltLogger = toBoltLogger(this.logger);
    const clientOptions = (): webApi.WebClientOptions => ({
      logger: boltLogger,
      retryConfig: { ...RETRY_CONFIG },
      timeout: REQUEST_TIMEOUT_MS,
      ...(options.apiUrl ? { slackApiUrl: options.apiUrl.endsWith('/') ? options.apiUrl : `${options.apiUrl}/` } : {}),
    });
    this.web = new webApi.WebClient(botToken, clientOptions());
    this.outbound = new SlackOutbound(this.web, this.logger, options.settings);
    this.inbound = new InboundMapper(options.settings);
    // The bot's ids come from our own auth.test in start(); Bolt reads them through `authorize`.
    const authorize = async () => ({ botToken, botId: this.bot?.botId ?? undefined, botUserId: this.bot?.userId });
    const common = { authorize, logger: boltLogger, clientOptions: clientOptions(), convoStore: false as const };
    if (appToken) {
      this.socket = new SocketModeReceiver({
        appToken,
        logger: boltLogger,
        autoReconnectEnabled: false,
        installerOptions: { clientOptions: clientOptions() },
      });
      this.app = new App({ ...common, socketMode: true, receiver: this.socket });
      this.watchSocket(this.socket);
    } else if (signingSecret) {
      const receiver = new EventsApiReceiver(signingSecret, this.logger);
      this.app = new App({ ...common, receiver });
      this.handleHttp = async (request) => {
        if (this.stopped) throw new UnavailableError('This Slack channel is stopped.');
        return receiver.handle(request);
      };
    } else {
      throw new Error('Slack credentials need a signingSecret (Events API) or an appToken (Socket Mode).');
    }
    this.app.event('message', async ({ event, body }) => this.onMessage(event as SlackMessageEvent, body.event_id, body.team_id));
    this.app.event('app_mention', async ({ event, body }) => this.onMessage(event as SlackMessageEvent, body.event_id, body.team_id));
    this.app.event('reaction_added', async ({ event }) => this.onReaction(event as SlackReactionEvent));
    // Slack's assistant side panel: a new thread gets suggested prompts, and its first question becomes its title.
    this.app.event('assistant_thread_started', async ({ event }) => this.onAssistantThread(event as unknown as SlackAssistantThreadEvent));
    // Buttons the bridge posted: acknowledged at once (Slack wants it within 3 s), then handed on.
    this.app.action(/.*/, async ({ ack, body }) => {
      await ack();
      await this.onActions(body as unknown as SlackBlockActions);
    });
    // `/human <reason>`: Slack's client sends any message starting with `/` as a slash command, so a user cannot type it as a message.
    this.app.command(HUMAN_COMMAND, async ({ command, ack, respond }) => {
      if (this.bot) await takeCommand(command, { ack, respond, bot: this.bot, settings: this.options.settings(), outbound: this.outbound, events: this.options.events, logger: this.logger });
      else await ack();
    });
    this.app.error(async (err) => this.logger.error({ err }, 'slack: a listener failed'));
  }

  async start(): Promise<void> {
    this.stopped = false;
    if (this.socket) this.options.events.onStatus('connecting', null);
    try {
      const auth = await this.web.auth.test();
      if (!auth.user_id) throw new Error('Slack answered auth.test without a user_id.');
      this.bot = { userId: auth.user_id, botId: auth.bot_id ?? null };
    } catch (err) {
      const detail = describe(err, 'bot token');
      this.options.events.onStatus('error', detail);
      throw new Error(detail, { cause: err });
    }
    if (this.socket) {
      this.reconnecting = true;
      try {
        await this.app.start();
      } catch (err) {
        const detail = describe(err, 'app token');
        this.options.events.onStatus('error', detail);
        throw new Error(detail, { cause: err });
      } finally {
        this.reconnecting = false;
      }
    } else {
      await this.app.start();
      this.options.events.onStatus('connected', null);
    }
  }

  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    if (this.reconnectTimer) clearTimeout(this.reconnectTimer);
    this.reconnectTimer = null;
    if (this.socket) await this.socket.client.disconnect().catch(() => undefined);
    else await this.app.stop();
  }

  send(message: OutboundMessage): Promise<SendResult> {
    return this.outbound.send(message);
  }

  reply(target: ReplyTarget): ReplyWriter {
    return this.outbound.reply(target);
  }

  private async onMessage(event: SlackMessageEvent, eventId: string | undefined, teamId: string | undefined): Promise<void> {
    if (!this.bot) return;
    const message = this.inbound.message(event, eventId, this.bot, teamId);
    if (!message) return;
    // The first question of an assistant thread opened here titles it.
    const threadKey = event.thread_ts && event.channel ? `${event.channel}:${event.thread_ts}` : null;
    if (threadKey !== null && this.untitled.delete(threadKey) && message.addressed !== false) {
      const title = message.text.length > TITLE_CHARS ? `${message.text.slice(0, TITLE_CHARS - 1)}…` : message.text;
      this.web.assistant.threads
        .setTitle({ channel_id: event.channel!, thread_ts: event.thread_ts!, title })
        .catch((err: unknown) => this.logger.debug({ err }, 'slack: the assistant thread title could not be set'));
    }
    try {
      await this.options.events.onMessage(message);
    } catch (err) {
      this.logger.error({ err, externalId: message.externalId }, 'slack: the channels service did not take a message');
    }
  }

  private async onAssistantThread(event: SlackAssistantThreadEvent): Promise<void> {
    const thread = event.assistant_thread;
    const channel = thread?.channel_id;
    const threadTs = thread?.thread_ts;
    if (!this.bot || typeof channel !== 'string' || typeof threadTs !== 'string' || !this.options.settings().enabled) return;
    this.untitled.add(`${channel}:${threadTs}`);
    if (this.untitled.size > REMEMBERED_THREADS) this.untitled.delete(this.untitled.values().next().value!);
    try {
      const configured = this.options.settings().suggestedPrompts;
      const prompts = configured.length > 0 ? configured : ((await this.options.events.suggestPrompts?.()) ?? []);
      if (prompts.length === 0) return;
      await this.web.assistant.threads.setSuggestedPrompts({ channel_id: channel, thread_ts: threadTs, prompts: prompts.slice(0, 4) });
    } catch (err) {
      this.logger.warn({ err, channel }, 'slack: the suggested prompts could not be set');
    }
  }

  private async onReaction(event: SlackReactionEvent): Promise<void> {
    if (!this.bot) return;
    const reaction = toReaction(event, this.bot);
    if (!reaction) return;
    try {
      await this.options.events.onReaction(reaction);
    } catch (err) {
      this.logger.error({ err }, 'slack: the channels service did not take a reaction');
    }
  }

  private async onActions(body: SlackBlockActions): Promise<void> {
    if (!this.bot || !this.options.settings().enabled) return;
    const { onAction, onFeedback } = this.options.events;
    for (const action of toAction(body)) {
      try {
        // A click on an answer's feedback buttons rates it; other buttons go on as they are.
        if (action.actionId === FEEDBACK_ACTION) {
          if (onFeedback && (action.value === 'positive' || action.value === 'negative')) {
            await onFeedback({ messageExternalId: action.messageId, userId: action.userId, rating: action.value === 'positive' ? 5 : 1 });
          }
        } else if (onAction) await onAction(action);
      } catch (err) {
        this.logger.error({ err, actionId: action.actionId }, 'slack: the channels service did not take a button click');
      }
    }
  }

  /** Status reports and the capped reconnect loop for Socket Mode. */
  private watchSocket(receiver: SocketModeReceiver): void {
    const client = receiver.client;
    client.on('connected', () => {
      this.connectedAt = Date.now();
      this.options.events.onStatus('connected', null);
    });
    client.on('disconnected', () => {
      if (this.stopped || this.reconnecting || !this.bot) return;
      if (this.connectedAt > 0 && Date.now() - this.connectedAt >= STABLE_MS) this.attempts = 0;
      this.scheduleReconnect('The Socket Mode connection was closed; reconnecting.');
    });
  }

  private scheduleReconnect(detail: string): void {
    if (this.stopped || this.reconnectTimer) return;
    const delay = this.attempts === 0 ? 0 : Math.min(RECONNECT_FIRST_MS * 2 ** (this.attempts - 1), RECONNECT_MAX_MS);
    this.attempts += 1;
    this.options.events.onStatus('connecting', delay === 0 ? detail : `${detail} Next attempt in ${Math.round(delay / 100) / 10} s.`);
    this.reconnectTimer = setTimeout(() => {
      this.reconnectTimer = null;
      if (this.stopped || !this.socket) return;
      this.reconnecting = true;
      this.socket.client.start().then(
        () => {
          this.reconnecting = false;
        },
        (err: unknown) => {
          this.reconnecting = false;
          this.logger.warn({ err }, 'slack: Socket Mode reconnect failed');
          this.scheduleReconnect(`Socket Mode reconnect failed: ${describe(err, 'app token')}`);
        },
      );
    }, delay);
  }
}

/** A readable reason for a failed call, e.g. "Slack rejected the bot token (invalid_auth)". */
function describe(err: unknown, what: 'bot token' | 'app token'): string {
  const data = (err as { data?: { error?: unknown } } | null)?.data;
  if (typeof data?.error === 'string') {
    const refused = ['invalid_auth', 'not_authed', 'account_inactive', 'token_revoked', 'token_expired', 'not_allowed_token_type'];
    return refused.includes(data.error) ? `Slack rejected the ${what} (${data.error})` : `Slack answered ${data.error}`;
  }
  return `Could not reach Slack: ${err instanceof Error ? err.message : String(err)}`;
}

/** Bolt's and the SDK's logger interface over pino (their `info` chatter goes to debug). */
function toBoltLogger(logger: Logger): BoltLogger {
  const join = (msg: unknown[]): string => msg.map((m) => (typeof m === 'string' ? m : m instanceof Error ? m.message : JSON.stringify(m))).join(' ');
  return {
    debug: (...msg) => logger.trace(join(msg)),
    info: (...msg) => logger.debug(join(msg)),
    warn: (...msg) => logger.warn(join(msg)),
    error: (...msg) => logger.error(join(msg)),
    setLevel: () => undefined,
    getLevel: () => (logger.isLevelEnabled('trace') ? LogLevel.DEBUG : LogLevel.INFO),
    setName: () => undefined,
  };
}
