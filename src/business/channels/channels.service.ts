/**
 * Channels (API.md §9): connections to Slack, Discord and signed webhooks, each routed to a persona
 * or a running A/B test. Credentials are sealed under the service secret and only opened to build
 * the channel's bridge. Enabled channels run a bridge from start-up to shutdown; a bridge that will
 * not start is retried with capped back-off; settings apply live (a bridge restarts only when it is
 * switched off and on).
 *
 * Many instances on one database (API.md §13): a channel created or changed on one is live on every
 * other within a poll of the change signals. Deliveries over HTTP (Slack Events API, webhooks) are
 * taken by whichever instance they reach, stored once and answered once. A connection the platform
 * allows once per bot (a Slack Socket Mode connection, a Discord gateway session) runs on the one
 * instance holding the channel's lease (src/db/leases.ts): it renews the lease every third of its
 * term; when it dies another takes the channel over once the lease lapses, and answers what the dead
 * one had stored but not answered; when it drains it finishes its answers and lets go at once.
 */
import crypto from 'node:crypto';
import { type Actor, systemActor } from '../../core/auth/actor.js';
import { auditRow } from '../../core/audit/audit.js';
import type { Logger } from 'pino';
import { type BridgeFactory, type ChannelBridge, type DiscordCredentials, type InboundAction, type InboundFeedback, type InboundMessage, type OutboundButton, type RawHttpRequest, type RawHttpResponse, REGENERATE_ACTION, type SlackCredentials } from '../../../bridges/bridge.js';
import { createWebhookBridge, SIGNATURE_HEADER, verifySignature, type WebhookCredentials } from '../../../bridges/webhook/webhook-bridge.js';
import type { ChangeSignals } from '../../db/change-signals.js';
import type { DeskThread } from '../handoffs/handoffs.service.js';
import type { LeaseStore } from '../../db/leases.js';
import type { ChannelRow } from '../../db/schema.js';
import { ConflictError, NotFoundError, UnauthorizedError, UpstreamError, ValidationError, validationErrorOf, zodFieldErrors } from '../../errors.js';
import { type AddressGuardOptions, assertPublicUrl } from '../../lib/address-guard.js';
import type { Cipher } from '../../lib/cipher.js';
import type { Clock } from '../../lib/clock.js';
import type { IdGenerator } from '../../lib/ids.js';
import { parseJsonBody } from '../../lib/json-depth.js';
import { refuseNul, withoutNul } from '../../lib/nul.js';
import { mapPage, type Page, type PageRequest } from '../../lib/pagination.js';
import type { AbTestService } from '../ab-tests/ab-tests.service.js';
import type { PersonaService } from '../../core/personas/personas.service.js';
import type { Inbox, RoutedChannel, Takeable } from './channels.inbox.js';
import { type Channel, type ChannelSettings, type CreateChannelInput, DEFAULT_SETTINGS, settingsOf, type SendInput, type SendResult, type UpdateSettingsInput, webhookInboundSchema } from './channels.schemas.js';
import type { ChannelStore } from './channels.store.js';

export interface BridgeFactories {
  slack: BridgeFactory<SlackCredentials>;
  discord: BridgeFactory<DiscordCredentials>;
}

/** Handoff desks (business/handoffs): members' replies in a desk thread and their button clicks go there, not to the persona. */
export interface DeskPort {
  deskThread(channelId: string, conversationId: string): Promise<DeskThread | undefined>;
  deskMessage(workspaceId: string, thread: DeskThread, message: { userId: string; text: string }): Promise<void>;
  deskAction(workspaceId: string, channelId: string, action: InboundAction): Promise<void>;
  /** The session's open handoff, if any: while there is one, every message in its conversation is for the person. */
  openFor(sessionId: string): Promise<unknown>;
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
  /** Tells the other instances a channel changed (and this one when they change one). */
  signals: ChangeSignals;
  /** Instances sharing the database (PostgreSQL): this one's lease owner, the lease term, the leases. Absent: one process. */
  leases?: { owner: string; ms: number; store: LeaseStore };
  /** Handoff desks; absent in tests of channels alone. */
  desk?: DeskPort;
  /** Titles of the knowledge a persona answers from (its own, then shared), at most `limit`: suggested prompts. */
  knowledgeTitles?: (workspaceId: string, personaId: string, limit: number) => Promise<string[]>;
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
  /** A connection the platform allows once per bot (Socket Mode, Discord gateway): run only under the channel's lease. */
  connection: boolean;
  /** This instance holds the channel's lease (always true for the others, and with one process). */
  held: boolean;
  /** Whether this process started the channel before: a first start also answers what its previous run left. */
  startedBefore: boolean;
  /** Answering what a dead instance left, in the background of the lease ticks. */
  recovering: boolean;
}

const leaseName = (channelId: string) => `channel:${channelId}`;

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
    const settings = settingsOf(row.settings);
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
      onMessage: async (sent: InboundMessage) => {
        // What a person typed on the platform cannot be refused back to them: its NULs are dropped,
        // since PostgreSQL text cannot hold one (lib/nul.ts).
        const message = withoutNul(sent);
        if (await toDesk(state, message)) return;
        if (message.addressed === false && !(await withPerson(state, message))) return;
        await inbox.receive(routed(state.row), message, (m) => bridgeOf(state).reply(m.replyTo));
      },
      onAction: async (action: InboundAction) => {
        if (action.actionId === REGENERATE_ACTION) {
          await inbox.regenerate(routed(state.row), action, (m) => bridgeOf(state).reply(m.replyTo));
          return;
        }
        if (deps.desk) await deps.desk.deskAction(state.row.workspace_id, state.row.id, action);
      },
      suggestPrompts: () => promptsFor(state.row),
      // A feedback button: one rating per person and answer (a second click, or Slack's retry, changes nothing).
      onFeedback: async (feedback: InboundFeedback) => {
        const seq = await store.receive({
          channel_id: state.row.id,
          external_id: `feedback:${feedback.messageExternalId}:${feedback.userId}`,
          conversation_id: 'feedback',
          payload: JSON.stringify(feedback),
          status: 'answered',
          received_at: clock.now().toISOString(),
        });
        if (seq !== null) await inbox.react(routed(state.row), feedback);
      },
      onReaction: async (reaction: Parameters<Inbox['react']>[1]) => void (await inbox.react(routed(state.row), reaction)),
      onStatus: (status: 'connecting' | 'connected' | 'error', detail: string | null) => {
        state.status = status;
        state.detail = detail;
        noteStatus(state);
      },
    };
    const common = { channelId: row.id, settings: () => state.settings, events, logger: logger.child({ channelId: row.id, channel: row.type }) };
    if (row.type === 'slack') return deps.factories.slack({ ...common, credentials: open<SlackCredentials>(row), apiUrl: deps.apiUrls.slack });
    if (row.type === 'discord') return deps.factories.discord({ ...common, credentials: open<DiscordCredentials>(row), apiUrl: deps.apiUrls.discord });
    return createWebhookBridge({ channelId: row.id, credentials: open<WebhookCredentials>(row), guard: deps.guard });
  }

  /**
   * What a new assistant thread suggests when the channel names no prompts: questions about the
   * titles of the knowledge its persona answers from (an A/B test's persona A), or a general one.
   */
  async function promptsFor(row: ChannelRow): Promise<Array<{ title: string; message: string }>> {
    let personaId = row.persona_id;
    if (personaId === null && row.ab_test_id !== null) personaId = (await deps.abTests.get(row.workspace_id, row.ab_test_id).catch(() => null))?.personaA.split('@')[0] ?? null;
    const titles = personaId !== null && deps.knowledgeTitles ? await deps.knowledgeTitles(row.workspace_id, personaId, 3) : [];
    if (titles.length === 0) return [{ title: 'What can you do?', message: 'What can you help me with?' }];
    return titles.map((name) => ({ title: `About ${name}`.slice(0, 75), message: `What should I know about ${name}?`.slice(0, 500) }));
  }

  /**
   * A message in a handoff's desk thread is a member's, for the handoff: recorded once (a retried
   * delivery is not relayed twice) and handed over. Answers whether it was one.
   */
  async function toDesk(state: Live, message: InboundMessage): Promise<boolean> {
    const thread = deps.desk ? await deps.desk.deskThread(state.row.id, message.conversationId) : undefined;
    if (!deps.desk || !thread) return false;
    const seq = await store.receive({
      channel_id: state.row.id,
      external_id: message.externalId,
      conversation_id: message.conversationId,
      payload: JSON.stringify(message),
      status: 'answered',
      received_at: clock.now().toISOString(),
    });
    if (seq !== null) await deps.desk.deskMessage(state.row.workspace_id, thread, { userId: message.userId, text: message.text });
    return true;
  }

  /**
   * Whether a message the settings would not answer (a thread reply without a mention) is in a
   * conversation a person has: users stop mentioning the bot once a person joined, and every
   * message there is for the person (stored and shown at the desk), in an allowed conversation.
   */
  async function withPerson(state: Live, message: InboundMessage): Promise<boolean> {
    const { allowedConversations } = state.settings;
    if (!deps.desk || (allowedConversations.length > 0 && !allowedConversations.includes(message.conversationRef))) return false;
    const sessionId = await store.sessionOf(state.row.id, message.conversationId);
    return sessionId !== undefined && (await deps.desk.openFor(sessionId)) !== undefined;
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
        if (state.status === 'connecting') {
          state.status = 'connected';
          noteStatus(state);
        }
        // A webhook's caller waited for its answer in the request: there is no one to answer later.
        if (state.row.type === 'webhook') return;
        const first = !state.startedBefore;
        state.startedBefore = true;
        const recovered = await inbox.recover(routed(state.row), (m) => bridge.reply(m.replyTo), takeable(first));
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

  /**
   * Of the instances that claimed unanswered messages, those that died (their instance lease lapsed
   * or is gone), and on a first start this instance's previous run. One process: every claimer.
   */
  function takeable(includeSelf: boolean): Takeable {
    const shared = deps.leases;
    if (!shared) return async (claimers) => new Set(claimers);
    return async (claimers) => {
      const alive = await shared.store.alive(
        claimers.filter((c): c is string => c !== null),
        clock.now().getTime(),
      );
      return new Set(claimers.filter((c) => c === null || (c === shared.owner ? includeSelf : !alive.has(c))));
    };
  }

  /** Whether a channel's bridge holds a connection only one instance may have. */
  function isConnection(row: ChannelRow): boolean {
    if (row.type === 'discord') return true;
    if (row.type !== 'slack') return false;
    try {
      return Boolean(open<SlackCredentials>(row).appToken);
    } catch {
      return false;
    }
  }

  /** Starts an enabled channel here: at once, or for a connection only under its lease (else the holder's status is shown). */
  async function startHere(state: Live): Promise<void> {
    const shared = deps.leases;
    if (!shared || !state.connection) return start(state);
    const now = clock.now().getTime();
    state.held = await shared.store.acquire(leaseName(state.row.id), shared.owner, now, now + shared.ms, noteOf(state));
    if (state.held) return start(state);
    await showHolderStatus([state]);
  }

  const noteOf = (state: Live) => JSON.stringify({ status: state.status, detail: state.detail });

  /**
   * The other instances show the holder's status: noted with the lease at once, whether the bridge
   * reported it or its start completing implied it (else they showed `connecting` until the next renewal).
   */
  function noteStatus(state: Live): void {
    const shared = deps.leases;
    if (!shared || !state.connection || !state.held || closed) return;
    const now = clock.now().getTime();
    void shared.store.acquire(leaseName(state.row.id), shared.owner, now, now + shared.ms, noteOf(state)).catch(() => undefined);
  }

  /** On an instance that does not hold a connection: the status its holder last noted. */
  async function showHolderStatus(states: Live[]): Promise<void> {
    const leases = deps.leases;
    if (!leases || states.length === 0) return;
    const byName = new Map((await leases.store.read(states.map((s) => leaseName(s.row.id)))).map((l) => [l.name, l]));
    for (const state of states) {
      const lease = byName.get(leaseName(state.row.id));
      const note = lease && lease.until_ms >= clock.now().getTime() && lease.note ? (JSON.parse(lease.note) as { status: Status; detail: string | null }) : null;
      state.status = note?.status ?? 'connecting';
      state.detail = note?.detail ?? null;
    }
  }

  /** Puts a row live (start-up, create, another instance's create): enabled channels start; waits at most `waitMs` for the first status. */
  async function activate(row: ChannelRow, waitMs: number): Promise<void> {
    const state: Live = {
      row,
      settings: settingsOf(row.settings),
      bridge: null,
      status: 'connecting',
      detail: null,
      failures: 0,
      retry: undefined,
      starting: undefined,
      connection: isConnection(row),
      held: true,
      startedBefore: false,
      recovering: false,
    };
    state.held = !(deps.leases && state.connection);
    live.set(row.id, state);
    if (!state.settings.enabled) return;
    await settle(startHere(state), waitMs);
  }

  /** A row changed (here, or on another instance): its live state follows; switching `enabled` stops or starts the bridge. */
  async function apply(state: Live, row: ChannelRow): Promise<void> {
    const wasEnabled = state.settings.enabled;
    state.row = row;
    state.settings = settingsOf(row.settings);
    if (wasEnabled && !state.settings.enabled) {
      await stop(state);
      if (state.connection && state.held && deps.leases) await deps.leases.store.release(deps.leases.owner, [leaseName(row.id)]);
      state.held = !(deps.leases && state.connection);
    }
    if (!wasEnabled && state.settings.enabled) await settle(startHere(state), initialWaitMs);
  }

  /** Another instance created or changed channels: every row is read again and the live states follow. */
  let syncing: Promise<void> | undefined;
  let syncAgain = false;
  function sync(): void {
    if (syncing) {
      syncAgain = true;
      return;
    }
    syncing = (async () => {
      do {
        syncAgain = false;
        for (const row of await store.all()) {
          if (closed) return;
          const state = live.get(row.id);
          if (!state) await activate(row, 0);
          else if (state.row.updated_at !== row.updated_at) await apply(state, row);
        }
      } while (syncAgain && !closed);
    })()
      .catch((err: unknown) => logger.warn({ err }, 'channels could not be read again'))
      .finally(() => (syncing = undefined));
  }
  deps.signals.onChange('channels', sync);

  /**
   * Every third of the lease term, with instances sharing the database: this instance renews the
   * connections it holds (one lost, its bridge stops) and takes over those whose lease lapsed; and
   * it answers what dead instances (their instance lease lapsed, src/db/leases.ts) left unanswered.
   */
  async function tick(): Promise<void> {
    const shared = deps.leases;
    if (!shared || closed) return;
    const now = clock.now().getTime();
    const others: Live[] = [];
    for (const state of live.values()) {
      if (closed) return;
      if (!state.settings.enabled) continue;
      if (state.connection) {
        const held = await shared.store.acquire(leaseName(state.row.id), shared.owner, now, now + shared.ms, noteOf(state));
        if (state.held && !held) {
          logger.warn({ channelId: state.row.id }, 'channel lease lost to another instance: its connection stops here');
          state.held = false;
          await stop(state);
        } else if (!state.held && held) {
          logger.info({ channelId: state.row.id }, 'channel taken over: its connection runs here now');
          state.held = true;
          void start(state);
          continue;
        }
        if (!held) {
          others.push(state);
          continue;
        }
      }
      if (state.row.type === 'webhook' || !state.bridge || state.starting || state.recovering) continue;
      // Off the tick: answers take seconds, and the leases above must be renewed on time.
      const bridge = state.bridge;
      state.recovering = true;
      void inbox
        .recover(routed(state.row), (m) => bridge.reply(m.replyTo), takeable(false), { pendingForMs: shared.ms })
        .catch((err: unknown) => logger.warn({ err, channelId: state.row.id }, 'channel messages left by another instance could not be answered'))
        .finally(() => (state.recovering = false));
    }
    await showHolderStatus(others);
  }
  let ticking: Promise<void> | undefined;
  const ticker = deps.leases
    ? setInterval(() => {
        ticking ??= tick()
          .catch((err: unknown) => logger.warn({ err }, 'channel leases could not be renewed'))
          .finally(() => (ticking = undefined));
      }, Math.max(100, Math.floor(deps.leases.ms / 3)))
    : undefined;
  ticker?.unref();

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
    async create(actor: Actor, input: CreateChannelInput): Promise<Channel> {
      const workspaceId = actor.workspaceId;
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
      // The event names the channel, never its credentials.
      await store.insert(row, auditRow(ids, clock, actor, { action: 'channel.create', target: { type: 'channel', id } }));
      await activate(row, initialWaitMs);
      await deps.signals.changed('channels');
      return toChannel(row);
    },

    async list(workspaceId: string, page: PageRequest, type?: ChannelRow['type']): Promise<Page<Channel>> {
      return mapPage(await store.list(workspaceId, page, type), toChannel);
    },

    get: async (workspaceId: string, id: string): Promise<Channel> => toChannel(await find(workspaceId, id)),

    /** Settings, persona or A/B test changed live; switching `enabled` stops or starts the bridge. */
    /** `audited: false`: the caller's own event covers it (an A/B promotion moving its channels). */
    async updateSettings(actor: Actor, id: string, input: UpdateSettingsInput, { audited = true } = {}): Promise<Channel> {
      const workspaceId = actor.workspaceId;
      const row = await find(workspaceId, id);
      const { personaId, abTestId, ...patch } = input;
      await checkTarget(workspaceId, { personaId, abTestId });
      const settings: ChannelSettings = { ...(settingsOf(row.settings)), ...patch };
      const updated: ChannelRow = {
        ...row,
        settings: JSON.stringify(settings),
        ...(personaId !== undefined ? { persona_id: personaId, ab_test_id: null } : {}),
        ...(abTestId !== undefined ? { ab_test_id: abTestId, persona_id: null } : {}),
        updated_at: clock.now().toISOString(),
      };
      const event = audited ? auditRow(ids, clock, actor, { action: 'channel.update', target: { type: 'channel', id }, changes: Object.keys(input) }) : undefined;
      await store.update(workspaceId, id, { settings: updated.settings, persona_id: updated.persona_id, ab_test_id: updated.ab_test_id, updated_at: updated.updated_at }, event);
      const state = live.get(id);
      if (state) await apply(state, updated);
      await deps.signals.changed('channels');
      return toChannel(updated);
    },

    /**
     * Posts a message through the channel. `actor`: who sent it through the API or MCP, recorded as
     * `channel.send` (never the text) once the platform took it; absent for the system's own posts.
     */
    async send(
      workspaceId: string,
      id: string,
      input: SendInput,
      buttons?: OutboundButton[],
      startThread?: string,
      actor?: Actor,
    ): Promise<SendResult & { thread?: string | undefined }> {
      const state = await stateOf(workspaceId, id);
      if (!state.settings.enabled) throw new ConflictError(`Channel ${id} is disabled.`);
      // The connection runs on another instance: the platform's REST API needs only the credentials (a bridge built, not started).
      if (!state.held) state.bridge ??= buildBridge(state);
      let sent;
      try {
        sent = await bridgeOf(state).send({ to: input.to, text: input.message, threadId: input.threadId, priority: input.priority, buttons, startThread });
      } catch (err) {
        if (err instanceof ConflictError) throw err;
        throw new UpstreamError(`The ${state.row.type} channel could not send: ${err instanceof Error ? err.message : String(err)}`);
      }
      const sendId = ids('msg');
      await store.posted([{ channel_id: id, external_id: sent.externalId, session_id: null, message_id: null, created_at: clock.now().toISOString() }]);
      if (actor) await store.audit(auditRow(ids, clock, actor, { action: 'channel.send', target: { type: 'channel', id } }));
      return { id: sendId, channelId: id, externalId: sent.externalId, status: 'sent', ...(buttons ? { thread: sent.thread } : {}) };
    },

    /** `POST /business/channels/:id/inbound`: signed, answered synchronously (API.md §9). */
    async webhookInbound(id: string, request: RawHttpRequest): Promise<{ sessionId: string; messageId: string; reply: string }> {
      const state = inboundState(id, 'webhook');
      const header = request.headers[SIGNATURE_HEADER];
      if (!verifySignature(webhookSecret(state.row), request.rawBody, Array.isArray(header) ? header[0] : header)) {
        throw new UnauthorizedError('The X-Switchboard-Signature header is missing or does not match the body.');
      }
      if (!state.settings.enabled) throw new ConflictError(`Channel ${id} is disabled.`);
      const body = parseJsonBody(request.rawBody.toString('utf8'));
      // The integrator's client can be told, as on every JSON route: a NUL is a 400 naming its field (lib/nul.ts).
      refuseNul(body, 'body');
      const parsed = webhookInboundSchema.safeParse(body);
      if (!parsed.success) throw validationErrorOf('body', zodFieldErrors(parsed.error.issues, undefined, 'body'));
      const { conversationId, userId, message } = parsed.data;
      const delivery = request.headers['x-switchboard-delivery'];
      const externalId = typeof delivery === 'string' && delivery.length <= 200 ? delivery : crypto.randomUUID();
      const answer = await inbox.answerNow(routed(state.row), { externalId, conversationId, conversationRef: conversationId, userId: userId ?? conversationId, text: message, direct: true, mentioned: true, replyTo: {} });
      return { sessionId: answer.sessionId, messageId: answer.messageId, reply: answer.response, ...(answer.handoff ? { handoff: answer.handoff } : {}) };
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
      return (await store.ofType(workspaceId, type)).some((row) => (settingsOf(row.settings)).enabled);
    },

    /**
     * `<type>.send_message { channel, message, priority }` (API.md §7): `channel` is the platform
     * conversation, sent through the workspace's one enabled channel of that type; with several,
     * it is `<channel name or id>/<conversation>`.
     */
    async sendByType(workspaceId: string, type: ChannelRow['type'], input: { channel: string; message: string; priority: SendInput['priority'] }): Promise<SendResult> {
      const enabled = (await store.ofType(workspaceId, type)).filter((row) => (settingsOf(row.settings)).enabled);
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

    /**
     * Posts a text into one of the channel's conversations, as its answers go: a Slack thread
     * (`<channel>:<thread ts>`), a Discord channel or thread, a webhook conversation. What a person
     * of a handoff sends the user.
     */
    async relay(workspaceId: string, id: string, conversationId: string, text: string, buttons?: OutboundButton[]): Promise<void> {
      const row = await find(workspaceId, id);
      const colon = conversationId.lastIndexOf(':');
      const target =
        row.type === 'slack' && colon > 0 ? { to: conversationId.slice(0, colon), threadId: conversationId.slice(colon + 1) } : { to: conversationId, threadId: undefined };
      await this.send(workspaceId, id, { ...target, message: text, priority: 'normal' }, buttons);
    },

    /**
     * Posts a handoff's card to a desk: a platform conversation, or a user's direct messages (a user
     * id). Answers the conversation a reply in its thread carries.
     */
    async post(workspaceId: string, id: string, to: string, text: string, buttons: OutboundButton[], threadName: string): Promise<{ thread: string }> {
      const sent = await this.send(workspaceId, id, { to, message: text, priority: 'normal' }, buttons, threadName);
      if (!sent.thread) throw new UpstreamError(`The channel did not say where the thread of its post is.`);
      return { thread: sent.thread };
    },

    /** A channel's type (404 when it is not the workspace's). */
    typeOf: async (workspaceId: string, id: string): Promise<ChannelRow['type']> => (await find(workspaceId, id)).type,

    /** A promoted A/B test's channels answer with its winner's persona from now on. */
    async moveToWinner(workspaceId: string, abTestId: string, personaId: string): Promise<void> {
      for (const { id } of await store.usingAbTest(workspaceId, abTestId)) await this.updateSettings(systemActor(workspaceId), id, { personaId }, { audited: false });
    },

    exists: async (workspaceId: string, id: string): Promise<boolean> => (await store.find(workspaceId, id)) !== undefined,

    /** Start-up: every channel goes live; enabled ones connect (without holding start-up back). */
    async startAll(): Promise<void> {
      for (const row of await store.all()) await activate(row, 0);
    },

    /**
     * Shutdown: every bridge stops, the answers under way finish (within `answerWaitMs`), then the
     * leases go, so another instance takes the connections over at once.
     */
    async stopAll(answerWaitMs = 5_000): Promise<void> {
      closed = true;
      clearInterval(ticker);
      // With other instances to take over, what is being answered is finished first (one process: a restart answers it).
      if (deps.leases) await inbox.idle(answerWaitMs);
      const states = [...live.values()];
      live.clear();
      await Promise.all(states.map(stop));
      await ticking;
      await syncing;
      if (!deps.leases) return;
      const held = [...states].filter((s) => s.connection && s.held).map((s) => leaseName(s.row.id));
      await deps.leases.store.release(deps.leases.owner, held).catch((err: unknown) => logger.warn({ err }, 'channel leases could not be released'));
    },
  };
}

export type ChannelService = ReturnType<typeof createChannelService>;
