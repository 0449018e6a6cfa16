/**
 * Channels (API.md §9): connections to Slack, Discord and signed webhooks, each routed to a persona
 * or a running A/B test. Credentials are sealed under the service secret and only opened to build
 * the channel's bridge. Enabled channels run a bridge from start-up to shutdown; a bridge that will
 * not start is retried with capped back-off; settings apply live (a bridge restarts only when it is
 * switched off and on).
 */
import crypto from 'node:crypto';
import type { Logger } from 'pino';
import type { BridgeFactory, ChannelBridge, DiscordCredentials, RawHttpRequest, RawHttpResponse, SlackCredentials } from '../../../bridges/bridge.js';
import { createWebhookBridge, SIGNATURE_HEADER, verifySignature, type WebhookCredentials } from '../../../bridges/webhook/webhook-bridge.js';
import type { ChannelRow } from '../../db/schema.js';
import { ConflictError, NotFoundError, UnauthorizedError, UpstreamError, ValidationError, validationErrorOf, zodFieldErrors } from '../../errors.js';
import { type AddressGuardOptions, assertPublicUrl } from '../../lib/address-guard.js';
import type { Cipher } from '../../lib/cipher.js';
import type { Clock } from '../../lib/clock.js';
import type { IdGenerator } from '../../lib/ids.js';
import { parseJsonBody } from '../../lib/json-depth.js';
import { mapPage, type Page, type PageRequest } from '../../lib/pagination.js';
import type { AbTestService } from '../ab-tests/ab-tests.service.js';
import type { PersonaService } from '../../core/personas/personas.service.js';
import type { Inbox, RoutedChannel } from './channels.inbox.js';
import { type Channel, type ChannelSettings, type CreateChannelInput, DEFAULT_SETTINGS, type SendInput, type SendResult, type UpdateSettingsInput, webhookInboundSchema } from './channels.schemas.js';
import type { ChannelStore } from './channels.store.js';

export interface BridgeFactories {
  slack: BridgeFactory<SlackCredentials>;
  discord: BridgeFactory<DiscordCredentials>;
}

export interface ChannelServiceDeps {
  store: ChannelStore;
  inbox: Inbox;
  cipher: Cipher;
  personas: PersonaService;
  abTests: AbTestService;
  clock: Clock;
  ids: IdGenerator;
  logger: Logger;
  factories: BridgeFactories;
  apiUrls: { slack: string | undefined; discord: string | undefined };
  /** Webhook deliveries pass the address guard. */
  guard: AddressGuardOptions;
  /** How long a create or an enable waits for the first status (default 5 s); back-off bounds. */
  limits?: { initialWaitMs?: number; backoffInitialMs?: number; backoffMaxMs?: number };
}

type Status = Channel['status'];

interface Live {
  row: ChannelRow;
  settings: ChannelSettings;
  bridge: ChannelBridge | null;
  status: Status;
  detail: string | null;
  failures: number;
  retry: NodeJS.Timeout | undefined;
  starting: Promise<void> | undefined;
}

const routed = (row: ChannelRow): RoutedChannel => ({ id: row.id, workspaceId: row.workspace_id, personaId: row.persona_id, abTestId: row.ab_test_id });

export function createChannelService(deps: ChannelServiceDeps) {
  const { store, inbox, cipher, clock, ids, logger } = deps;
  const initialWaitMs = deps.limits?.initialWaitMs ?? 5_000;
  const backoffInitialMs = deps.limits?.backoffInitialMs ?? 1_000;
  const backoffMaxMs = deps.limits?.backoffMaxMs ?? 60_000;
  const live = new Map<string, Live>();
  let closed = false;

  const seal = (id: string, credentials: unknown) => cipher.encrypt(JSON.stringify(credentials), `channel:${id}`);
  const open = <C>(row: ChannelRow) => JSON.parse(cipher.decrypt(row.secrets, `channel:${row.id}`)) as C;
  // A webhook channel's secret as last opened, checked against every signed delivery: opening it
  // (AES-GCM and JSON) per message cost ~30 µs (issue 18). Its bridge holds it in memory anyway; kept
  // with the sealed value it came from, so other credentials are opened anew.
  const webhookSecrets = new Map<string, { sealed: string; secret: string }>();
  function webhookSecret(row: ChannelRow): string {
    const known = webhookSecrets.get(row.id);
    if (known?.sealed === row.secrets) return known.secret;
    const { secret } = open<WebhookCredentials>(row);
    webhookSecrets.set(row.id, { sealed: row.secrets, secret });
    return secret;
  }

  function toChannel(row: ChannelRow): Channel {
    const state = live.get(row.id);
    const settings = JSON.parse(row.settings) as ChannelSettings;
    return {
      id: row.id,
      type: row.type,
      name: row.name,
      personaId: row.persona_id,
      abTestId: row.ab_test_id,
      status: settings.enabled ? (state?.status ?? 'connecting') : 'disabled',
      statusDetail: settings.enabled ? (state?.detail ?? null) : null,
      settings,
      createdAt: row.created_at,
      updatedAt: row.updated_at,
    };
  }

  async function find(workspaceId: string, id: string): Promise<ChannelRow> {
    const row = await store.find(workspaceId, id);
    if (!row) throw new NotFoundError('Channel', id);
    return row;
  }

  /** A persona or A/B test named in a body must be of the workspace (404). */
  async function checkTarget(workspaceId: string, target: { personaId?: string | undefined; abTestId?: string | undefined }) {
    if (target.personaId !== undefined) await deps.personas.get(workspaceId, target.personaId);
    if (target.abTestId !== undefined) await deps.abTests.get(workspaceId, target.abTestId);
  }

  function buildBridge(state: Live): ChannelBridge {
    const { row } = state;
    const events = {
      onMessage: (message: Parameters<Inbox['receive']>[1]) => inbox.receive(routed(state.row), message, (m) => bridgeOf(state).reply(m.replyTo)),
      onReaction: async (reaction: Parameters<Inbox['react']>[1]) => void (await inbox.react(routed(state.row), reaction)),
      onStatus: (status: 'connecting' | 'connected' | 'error', detail: string | null) => {
        state.status = status;
        state.detail = detail;
      },
    };
    const common = { channelId: row.id, settings: () => state.settings, events, logger: logger.child({ channelId: row.id, channel: row.type }) };
    if (row.type === 'slack') return deps.factories.slack({ ...common, credentials: open<SlackCredentials>(row), apiUrl: deps.apiUrls.slack });
    if (row.type === 'discord') return deps.factories.discord({ ...common, credentials: open<DiscordCredentials>(row), apiUrl: deps.apiUrls.discord });
    return createWebhookBridge({ channelId: row.id, credentials: open<WebhookCredentials>(row), guard: deps.guard });
  }

  function bridgeOf(state: Live): ChannelBridge {
    if (!state.bridge) throw new ConflictError(`Channel ${state.row.id} is disabled.`);
    return state.bridge;
  }

  /** Starts (or restarts after a failure) an enabled channel's bridge; retries with back-off. */
  function start(state: Live): Promise<void> {
    clearTimeout(state.retry);
    state.bridge ??= buildBridge(state);
    const bridge = state.bridge;
    state.status = 'connecting';
    state.starting = bridge
      .start()
      .then(async () => {
        state.failures = 0;
        if (state.status === 'connecting') state.status = 'connected';
        // A webhook's caller waited for its answer in the request: there is no one to answer later.
        if (state.row.type === 'webhook') return;
        const recovered = await inbox.recover(routed(state.row), (m) => bridge.reply(m.replyTo));
        if (recovered > 0) logger.info({ channelId: state.row.id, recovered }, 'answered messages left unanswered by a restart');
      })
      .catch((err: unknown) => {
        state.status = 'error';
        state.detail ??= err instanceof Error ? err.message : String(err);
        if (closed || live.get(state.row.id) !== state || !state.settings.enabled) return;
        const delay = Math.min(backoffMaxMs, backoffInitialMs * 2 ** state.failures++);
        logger.warn({ channelId: state.row.id, detail: state.detail, retryInMs: delay }, 'channel could not start');
        state.retry = setTimeout(() => void start(state), delay);
        state.retry.unref();
      })
      .finally(() => {
        state.starting = undefined;
      });
    return state.starting;
  }

  async function stop(state: Live): Promise<void> {
    clearTimeout(state.retry);
    const bridge = state.bridge;
    state.bridge = null;
    await bridge?.stop().catch((err: unknown) => logger.warn({ err, channelId: state.row.id }, 'channel did not stop cleanly'));
  }

  /** Puts a row live (start-up, create): enabled channels start; waits at most `waitMs` for the first status. */
  async function activate(row: ChannelRow, waitMs: number): Promise<void> {
    const state: Live = { row, settings: JSON.parse(row.settings) as ChannelSettings, bridge: null, status: 'connecting', detail: null, failures: 0, retry: undefined, starting: undefined };
    live.set(row.id, state);
    if (!state.settings.enabled) return;
    await settle(start(state), waitMs);
  }

  const settle = (p: Promise<void>, ms: number) => {
    let timer: NodeJS.Timeout | undefined;
    return Promise.race([p, new Promise<void>((r) => (timer = setTimeout(r, ms)))]).finally(() => clearTimeout(timer));
  };

  /**
   * The channel an inbound route names, from memory: inbound routes know only the id from the URL
   * (the signature then proves the caller), and every channel is live from start-up or creation
   * until shutdown (channels are never deleted). A SQLite read per delivery cost ~20 µs on a busy
   * server (issue 18). Another type, or no such channel: 404.
   */
  function inboundState(id: string, type: ChannelRow['type']): Live {
    const state = live.get(id);
    if (state?.row.type !== type) throw new NotFoundError('Channel', id);
    return state;
  }

  /** The live state of a channel of the workspace (404 otherwise). */
  async function stateOf(workspaceId: string, id: string): Promise<Live> {
    const row = await find(workspaceId, id);
    const state = live.get(row.id);
    if (!state) throw new ConflictError(`Channel ${id} is not running.`);
    return state;
  }

  return {
    async create(workspaceId: string, input: CreateChannelInput): Promise<Channel> {
      await checkTarget(workspaceId, input);
      const credentials = input.credentials as Record<string, unknown>;
      if (input.type === 'webhook' && typeof credentials.outboundUrl === 'string') await assertPublicUrl(credentials.outboundUrl, deps.guard, 'credentials.outboundUrl');
      const id = ids('chn');
      const now = clock.now().toISOString();
      const row: ChannelRow = {
        id,
        workspace_id: workspaceId,
        type: input.type,
        name: input.name,
        persona_id: input.personaId ?? null,
        ab_test_id: input.abTestId ?? null,
        settings: JSON.stringify({ ...DEFAULT_SETTINGS, ...input.settings }),
        secrets: seal(id, credentials),
        created_at: now,
        updated_at: now,
      };
      await store.insert(row);
      await activate(row, initialWaitMs);
      return toChannel(row);
    },

    async list(workspaceId: string, page: PageRequest, type?: ChannelRow['type']): Promise<Page<Channel>> {
      return mapPage(await store.list(workspaceId, page, type), toChannel);
    },

    get: async (workspaceId: string, id: string): Promise<Channel> => toChannel(await find(workspaceId, id)),

    /** Settings, persona or A/B test changed live; switching `enabled` stops or starts the bridge. */
    async updateSettings(workspaceId: string, id: string, input: UpdateSettingsInput): Promise<Channel> {
      const row = await find(workspaceId, id);
      const { personaId, abTestId, ...patch } = input;
      await checkTarget(workspaceId, { personaId, abTestId });
      const settings: ChannelSettings = { ...(JSON.parse(row.settings) as ChannelSettings), ...patch };
      const updated: ChannelRow = {
        ...row,
        settings: JSON.stringify(settings),
        ...(personaId !== undefined ? { persona_id: personaId, ab_test_id: null } : {}),
        ...(abTestId !== undefined ? { ab_test_id: abTestId, persona_id: null } : {}),
        updated_at: clock.now().toISOString(),
      };
      await store.update(workspaceId, id, { settings: updated.settings, persona_id: updated.persona_id, ab_test_id: updated.ab_test_id, updated_at: updated.updated_at });
      const state = live.get(id);
      if (state) {
        const wasEnabled = state.settings.enabled;
        state.row = updated;
        state.settings = settings;
        if (wasEnabled && !settings.enabled) await stop(state);
        if (!wasEnabled && settings.enabled) await settle(start(state), initialWaitMs);
      }
      return toChannel(updated);
    },

    async send(workspaceId: string, id: string, input: SendInput): Promise<SendResult> {
      const state = await stateOf(workspaceId, id);
      if (!state.settings.enabled) throw new ConflictError(`Channel ${id} is disabled.`);
      let sent;
      try {
        sent = await bridgeOf(state).send({ to: input.to, text: input.message, threadId: input.threadId, priority: input.priority });
      } catch (err) {
        if (err instanceof ConflictError) throw err;
        throw new UpstreamError(`The ${state.row.type} channel could not send: ${err instanceof Error ? err.message : String(err)}`);
      }
      const sendId = ids('msg');
      await store.posted([{ channel_id: id, external_id: sent.externalId, session_id: null, message_id: null, created_at: clock.now().toISOString() }]);
      return { id: sendId, channelId: id, externalId: sent.externalId, status: 'sent' };
    },

    /** `POST /business/channels/:id/inbound`: signed, answered synchronously (API.md §9). */
    async webhookInbound(id: string, request: RawHttpRequest): Promise<{ sessionId: string; messageId: string; reply: string }> {
      const state = inboundState(id, 'webhook');
      const header = request.headers[SIGNATURE_HEADER];
      if (!verifySignature(webhookSecret(state.row), request.rawBody, Array.isArray(header) ? header[0] : header)) {
        throw new UnauthorizedError('The X-Switchboard-Signature header is missing or does not match the body.');
      }
      if (!state.settings.enabled) throw new ConflictError(`Channel ${id} is disabled.`);
      const parsed = webhookInboundSchema.safeParse(parseJsonBody(request.rawBody.toString('utf8')));
      if (!parsed.success) throw validationErrorOf('body', zodFieldErrors(parsed.error.issues, undefined, 'body'));
      const { conversationId, userId, message } = parsed.data;
      const delivery = request.headers['x-switchboard-delivery'];
      const externalId = typeof delivery === 'string' && delivery.length <= 200 ? delivery : crypto.randomUUID();
      const answer = await inbox.answerNow(routed(state.row), { externalId, conversationId, conversationRef: conversationId, userId: userId ?? conversationId, text: message, direct: true, mentioned: true, replyTo: {} });
      return { sessionId: answer.sessionId, messageId: answer.messageId, reply: answer.response };
    },

    /** `POST /business/channels/:id/slack/events`: handed to the channel's Bolt receiver. */
    async slackEvents(id: string, request: RawHttpRequest): Promise<RawHttpResponse> {
      const state = inboundState(id, 'slack');
      if (!state.settings.enabled) throw new ConflictError(`Channel ${id} is disabled.`);
      const bridge = bridgeOf(state);
      if (!bridge.handleHttp) throw new NotFoundError('Events API endpoint of channel', id);
      return bridge.handleHttp(request);
    },

    /** Whether the workspace has an enabled channel of this type (its `<type>.send_message` tool exists then). */
    async hasType(workspaceId: string, type: ChannelRow['type']): Promise<boolean> {
      return (await store.ofType(workspaceId, type)).some((row) => (JSON.parse(row.settings) as ChannelSettings).enabled);
    },

    /**
     * `<type>.send_message { channel, message, priority }` (API.md §7): `channel` is the platform
     * conversation, sent through the workspace's one enabled channel of that type; with several,
     * it is `<channel name or id>/<conversation>`.
     */
    async sendByType(workspaceId: string, type: ChannelRow['type'], input: { channel: string; message: string; priority: SendInput['priority'] }): Promise<SendResult> {
      const enabled = (await store.ofType(workspaceId, type)).filter((row) => (JSON.parse(row.settings) as ChannelSettings).enabled);
      const slash = input.channel.indexOf('/');
      const prefix = slash > 0 ? input.channel.slice(0, slash) : undefined;
      const byName = enabled.filter((row) => row.name === prefix);
      const named = enabled.find((row) => row.id === prefix) ?? (byName.length === 1 ? byName[0] : undefined);
      const row = named ?? (enabled.length === 1 ? enabled[0] : undefined);
      if (!row) {
        const names = enabled.map((r) => r.name).join(', ');
        throw ValidationError.field('parameters.channel', `several ${type} channels are connected (${names}): write "<channel name>/<conversation>"`);
      }
      const to = named ? input.channel.slice(slash + 1) : input.channel;
      if (to === '') throw ValidationError.field('parameters.channel', 'names no conversation');
      return this.send(workspaceId, row.id, { to, message: input.message, priority: input.priority });
    },

    /** Why a persona may not be deleted (a channel routes to it), or null. */
    async personaInUse(workspaceId: string, personaId: string): Promise<string | null> {
      const channel = await store.usingPersona(workspaceId, personaId);
      return channel ? `Persona ${personaId} answers in channel ${channel.id} (${channel.name}); route the channel elsewhere first.` : null;
    },

    exists: async (workspaceId: string, id: string): Promise<boolean> => (await store.find(workspaceId, id)) !== undefined,

    /** Start-up: every channel goes live; enabled ones connect (without holding start-up back). */
    async startAll(): Promise<void> {
      for (const row of await store.all()) await activate(row, 0);
    },

    /** Shutdown: every bridge stops. */
    async stopAll(): Promise<void> {
      closed = true;
      const states = [...live.values()];
      live.clear();
      await Promise.all(states.map(stop));
    },
  };
}

export type ChannelService = ReturnType<typeof createChannelService>;
