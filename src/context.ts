import os from 'node:os';
import path from 'node:path';
import type { Logger } from 'pino';
import type { Config } from './config.js';
import { createAuthService } from './core/auth/auth.service.js';
import { createAuthStore } from './core/auth/auth.store.js';
import { type AuditService, createAuditService } from './core/audit/audit.service.js';
import { createAuditStore } from './core/audit/audit.store.js';
import { createLoginSessions, type LoginSessions } from './core/people/login-sessions.js';
import { createPeopleStore } from './core/people/people.store.js';
import { createOidcClient } from './core/people/oidc.client.js';
import { createOidcService, type OidcService } from './core/people/oidc.service.js';
import { createOidcStore } from './core/people/oidc.store.js';
import { createMembersService, type MembersService } from './core/people/members.service.js';
import { createMembersStore } from './core/people/members.store.js';
import { createInvitationsService, type InvitationsService } from './core/people/invitations.service.js';
import type { ScryptParams } from './core/people/passwords.js';
import { createSignInService } from './core/people/sign-in.service.js';
import { createMySessions } from './core/people/sign-in.sessions.js';
import { createSetup } from './core/people/sign-in.setup.js';
import { createSignInStore } from './core/people/sign-in.store.js';
import { type AgentLimits, createAgent } from './core/chat/agent.js';
import { createChatService } from './core/chat/chat.service.js';
import { createChatStore } from './core/chat/chat.store.js';
import { createSessionService } from './core/chat/sessions.service.js';
import { createOpenAiService } from './core/openai-compat/openai.service.js';
import { createOpenAiThreadStore } from './core/openai-compat/openai.store.js';
import { createAnalyticsService } from './business/analytics/analytics.service.js';
import { createAnalyticsStore } from './business/analytics/analytics.store.js';
import type { ChannelExists } from './lib/channel-exists.js';
import { BRIDGE_FACTORIES } from '../bridges/index.js';
import { createInbox } from './business/channels/channels.inbox.js';
import { type BridgeFactories, createChannelService } from './business/channels/channels.service.js';
import { createChannelStore } from './business/channels/channels.store.js';
import { channelHubTools } from './business/channels/channels.tools.js';
import { createIdempotencyService } from './core/idempotency/idempotency.service.js';
import { type ChunkWriterOptions, createChunkWriter, DEFAULT_WRITER } from './core/knowledge/chunk-writer.js';
import { createIngestor, createJobQueue } from './core/knowledge/ingest.js';
import { createIngestPool, defaultPoolSize, ingestWorkerScript, sourcesInFlight } from './core/knowledge/ingest-pool.js';
import { createKnowledgeService } from './core/knowledge/knowledge.service.js';
import { createKnowledgeStore } from './core/knowledge/knowledge.store.js';
import { fusionFor } from './core/knowledge/fusion.js';
import { createSearchPool } from './core/knowledge/search-pool.js';
import { createMetadataDocuments } from './core/oauth/client-metadata.js';
import { createOAuthService } from './core/oauth/oauth.service.js';
import { createOAuthStore } from './core/oauth/oauth.store.js';
import type { SqliteSearchIndexOptions } from './core/knowledge/search-index.js';
import type { UrlFetchOptions } from './core/knowledge/url-fetch.js';
import { createVectorState } from './core/knowledge/vector-state.js';
import { createPersonaService } from './core/personas/personas.service.js';
import { createPersonaStore } from './core/personas/personas.store.js';
import { createAbTestService } from './business/ab-tests/ab-tests.service.js';
import { createAbTestStore } from './business/ab-tests/ab-tests.store.js';
import { createTeamService } from './business/teams/teams.service.js';
import { createTeamStore } from './business/teams/teams.store.js';
import { DEFAULT_HUB_LIMITS, type HubLimits } from './core/tools/mcp-clients.js';
import { createToolHub, type ToolHub } from './core/tools/tool-hub.js';
import { createToolsService } from './core/tools/tools.service.js';
import { createToolsStore } from './core/tools/tools.store.js';
import { createVault } from './core/tools/vault.js';
import { createToolOAuth } from './core/tools/tool-oauth.js';
import { createMcpTasks, type McpTasks } from './mcp/tasks.js';
import { createEvaluationService, type EvaluationService } from './business/evaluations/evaluations.service.js';
import { createEvaluationStore } from './business/evaluations/evaluations.store.js';
import { createHandoffService, type HandoffService } from './business/handoffs/handoffs.service.js';
import type { WriteGate } from './lib/write-gate.js';
import { createHandoffStore } from './business/handoffs/handoffs.store.js';
import { createMcpTaskStore } from './mcp/tasks.store.js';
import { createToolOAuthStore } from './core/tools/tool-oauth.store.js';
import type { ChangeSignals } from './db/change-signals.js';
import type { Db } from './db/database.js';
import { createLeaseStore, startHeartbeat } from './db/leases.js';
import type { ChangeCounters } from './http/response-cache.js';
import { type Backend, databaseFile, openBackend } from './db/open.js';
import type { PostgresDb } from './db/postgres/connection.js';
import { guardedFetch } from './lib/guarded-fetch.js';
import { type Cipher, createCipher, loadSecretKey } from './lib/cipher.js';
import { type Clock, systemClock } from './lib/clock.js';
import { type IdGenerator, randomIds } from './lib/ids.js';
import type { RateClaims } from './http/rate-limit.js';
import { createLogger } from './lib/logger.js';
import type { Embedder } from './llm/embedder.js';
import type { LlmClient } from './llm/llm-client.js';
import { createOfflineClient } from './llm/offline-client.js';
import { createHashedEmbedder } from './llm/hashed-embedder.js';

export const VERSION = '0.1.0';

export interface AppContext {
  config: Config;
  logger: Logger;
  /** The database: SQLite (the default) or PostgreSQL (SWITCHBOARD_DATABASE_URL). */
  db: Db | PostgresDb;
  /** The SQLite database, for what only SQLite has (online backup, raw statements in tests); throws on PostgreSQL. */
  sqlite(): Db;
  /** What tells the response cache the database is unchanged; null: no response cache (PostgreSQL). */
  changeCounters: ChangeCounters | null;
  /** Tells the caches of every instance on the database that rows they hold changed (change-signals.ts). */
  signals: ChangeSignals;
  /** The rate limit's budget shared by every instance on the database, or null (SQLite: one process, counted in memory). */
  rateClaims: RateClaims | null;
  clock: Clock;
  ids: IdGenerator;
  cipher: Cipher;
  services: {
    auth: ReturnType<typeof createAuthService>;
    personas: ReturnType<typeof createPersonaService>;
    teams: ReturnType<typeof createTeamService>;
    abTests: ReturnType<typeof createAbTestService>;
    idempotency: ReturnType<typeof createIdempotencyService>;
    knowledge: ReturnType<typeof createKnowledgeService>;
    chat: ReturnType<typeof createChatService>;
    sessions: ReturnType<typeof createSessionService>;
    analytics: ReturnType<typeof createAnalyticsService>;
    channels: ReturnType<typeof createChannelService>;
    tools: ReturnType<typeof createToolsService>;
    oauth: ReturnType<typeof createOAuthService>;
    openai: ReturnType<typeof createOpenAiService>;
    /** Tasks of MCP's tasks extension (src/mcp/tasks.ts). */
    mcpTasks: McpTasks;
    evaluations: EvaluationService;
    handoffs: HandoffService;
    /** Sign-in sessions: the cookie's actor (API.md §14). */
    loginSessions: LoginSessions;
    /** Sign-in with an OIDC provider, or null when SWITCHBOARD_OIDC_* is not set. */
    oidc: OidcService | null;
    /** Signing in with a password, the first owner's setup link, a person's own sessions (API.md §14). */
    signIn: SignInServices;
    /** Members of a workspace: roles, removal (API.md §14). */
    members: MembersService;
    invitations: InvitationsService;
    /** The audit log (API.md §14). */
    audit: AuditService;
  };
  embedder: Embedder;
  llm: LlmClient;
  tools: ToolHub;
  /** Flushes what is kept in memory and closes the database. Safe to call twice. */
  close(): Promise<void>;
}

export interface SignInServices {
  password: ReturnType<typeof createSignInService>;
  setup: ReturnType<typeof createSetup>;
  mine: ReturnType<typeof createMySessions>;
}

export interface ContextOverrides {
  clock?: Clock;
  ids?: IdGenerator;
  logger?: Logger;
  /** Database file; defaults to `<dataDir>/switchboard.db`. ':memory:' for throwaway tests. */
  databaseFile?: string;
  /** Replaces the configured embedder (tests, benchmarks). */
  embedder?: Embedder;
  /** URL ingestion settings: tests inject a resolver and an address policy so the guard runs against loopback servers. */
  fetch?: Partial<UrlFetchOptions>;
  /**
   * Knowledge ingestion: worker threads for the offline embedder (default min(2, cores − 1); 0 keeps
   * every stage on the main thread) and the writer's batching.
   */
  ingest?: { workers?: number; writer?: Partial<ChunkWriterOptions> };
  /** Search index tuning (benchmarks, retrieval evaluation). */
  index?: SqliteSearchIndexOptions;
  /** Replaces the configured model client. */
  llm?: LlmClient;
  /** MCP client limits (call time-out, concurrency, back-off, initial wait) for tests. */
  toolHub?: Partial<HubLimits>;
  /** Platform bridges (tests may wrap the real ones) and channel timings. */
  bridges?: Partial<BridgeFactories>;
  channels?: { initialWaitMs?: number; backoffInitialMs?: number; backoffMaxMs?: number; recoveryWindowMs?: number };
  /** Agent loop limits (tool time-out, rounds) for tests. */
  agent?: Partial<AgentLimits>;
  /** Tests of races hold writers here between their read and their write. */
  writeGate?: WriteGate;
  /** Password hashing cost (tests use a cheaper one than the default, OWASP's). */
  scrypt?: ScryptParams;
}

/**
 * The chat model SWITCHBOARD_MODEL / OPENAI_* select: `offline` without a key or base URL. The
 * `openai` package (~150 modules, ~0.1 s to import) is imported only for a remote model (issue 23).
 */
export async function configuredLlm(config: Config): Promise<LlmClient> {
  if (config.model.provider === 'offline') return createOfflineClient();
  const [{ createOpenAi }, { createOpenAiChat }] = await Promise.all([import('./llm/openai-client.js'), import('./llm/openai-chat.js')]);
  const client = createOpenAi({ apiKey: config.model.apiKey, baseUrl: config.model.baseUrl, timeoutMs: CHAT_TIMEOUT_MS });
  return createOpenAiChat({ client, defaultModel: config.model.name });
}

/** A chat completion fails with 504 when the endpoint is silent this long (before headers, or between chunks). */
const CHAT_TIMEOUT_MS = 60_000;

/** URL fetches take at most this long, redirects included. */
const URL_FETCH_TIMEOUT_MS = 15_000;
/** How often lapsed handoff offers and queued handoffs are looked at: an offer lapses at most this late. */
const HANDOFF_SWEEP_MS = 5_000;

/** The embedder SWITCHBOARD_EMBEDDINGS selects (the `openai` package only for a remote one, as for the model). */
export async function configuredEmbedder(config: Config): Promise<Embedder> {
  if (config.embeddings.provider === 'hashed') return createHashedEmbedder();
  const [{ createOpenAi }, { createOpenAiEmbedder }] = await Promise.all([import('./llm/openai-client.js'), import('./llm/openai-embedder.js')]);
  const client = createOpenAi({ apiKey: config.model.apiKey, baseUrl: config.model.baseUrl });
  return createOpenAiEmbedder({ client, model: config.embeddings.model });
}

export { databaseFile };

/** The one composition root: everything the transports need, built from config plus test overrides. */
export async function createContext(config: Config, overrides: ContextOverrides = {}): Promise<AppContext> {
  const logger = overrides.logger ?? createLogger(config.logLevel);
  const clock = overrides.clock ?? systemClock;
  const ids = overrides.ids ?? randomIds;
  const embedder = overrides.embedder ?? (await configuredEmbedder(config));
  const llm = overrides.llm ?? (await configuredLlm(config));
  const backend: Backend = await openBackend(config, logger, {
    ...(overrides.databaseFile !== undefined ? { databaseFile: overrides.databaseFile } : {}),
    index: { keywordBudget: config.search.keywordBudget, cacheBytes: config.search.vectorCacheBytes, ...overrides.index },
  });
  const { db } = backend;
  const secret = loadSecretKey(config.secret, config.dataDir);
  const cipher = createCipher(secret);
  // This instance among those on the database: its host and data directory (each instance has its
  // own), the same across its restarts, so a restart takes back at once what a crash left leased.
  const instanceOwner = `${os.hostname()}:${path.resolve(config.dataDir)}`;
  // Instances sharing a PostgreSQL database say they are alive (src/db/leases.ts): what a dead one claimed is taken over.
  const leaseStore = config.database !== undefined ? createLeaseStore(db.kysely) : null;
  const heartbeat = leaseStore ? await startHeartbeat(leaseStore, instanceOwner, config.leaseSeconds * 1000, logger, () => clock.now().getTime()) : null;

  const auth = createAuthService({ store: createAuthStore(db.kysely), clock, ids, signals: backend.signals });
  const audit = createAuditService({ store: createAuditStore(db.kysely), clock, ids, logger, retentionDays: config.auditRetentionDays });
  const peopleStore = createPeopleStore(db.kysely);
  const loginSessions = createLoginSessions({ secret, store: peopleStore, clock, ids, idleMs: config.signIn.idleMs, maxMs: config.signIn.maxMs });
  const signInStore = createSignInStore(db.kysely);
  const signIn: SignInServices = {
    password: createSignInService({ people: peopleStore, store: signInStore, loginSessions, clock, ids, scrypt: overrides.scrypt }),
    setup: createSetup({ people: peopleStore, store: signInStore, loginSessions, clock, ids, scrypt: overrides.scrypt }),
    mine: createMySessions({ people: peopleStore, store: signInStore, loginSessions, auth, clock, ids }),
  };
  const membersStore = createMembersStore(db.kysely, db.kind === 'postgres');
  const oidc = config.oidc
    ? createOidcService({
        config: config.oidc,
        client: createOidcClient(config.oidc),
        store: createOidcStore(db.kysely),
        members: membersStore,
        people: peopleStore,
        loginSessions,
        cipher,
        clock,
        ids,
        signals: backend.signals,
        logger,
      })
    : null;
  const members = createMembersService({ store: membersStore, people: peopleStore, clock, ids, forgetKeys: auth.forgetKeys, writeGate: overrides.writeGate });
  const invitations = createInvitationsService({ store: membersStore, people: peopleStore, loginSessions, clock, ids, scrypt: overrides.scrypt, writeGate: overrides.writeGate });
  const teamStore = createTeamStore(db.kysely);
  const teams = createTeamService({ store: teamStore, clock, ids });
  const personas = createPersonaService({
    store: createPersonaStore(db),
    clock,
    ids,
    teamExists: async (workspaceId, teamId) => (await teamStore.find(workspaceId, teamId)) !== undefined,
    ...(config.database !== undefined ? { signals: backend.signals } : {}),
    writeGate: overrides.writeGate,
  });
  const abTests = createAbTestService({ store: createAbTestStore(db.kysely), personas, clock, ids });
  personas.guardDeletion((workspaceId, personaId) => abTests.personaInUse(workspaceId, personaId));
  const idempotency = createIdempotencyService({
    db: db.kysely,
    cipher,
    clock,
    ...(leaseStore ? { instances: { owner: instanceOwner, alive: leaseStore.alive } } : {}),
  });

  let vectors;
  try {
    vectors = await createVectorState(db, backend.knowledge, embedder);
  } catch (err) {
    await backend.close();
    throw err;
  }
  const fetchOptions: UrlFetchOptions = {
    allowPrivate: config.allowPrivateUrls,
    maxBytes: config.uploadLimitBytes,
    timeoutMs: URL_FETCH_TIMEOUT_MS,
    ...overrides.fetch,
  };
  const knowledgeStore = createKnowledgeStore(db, backend.knowledge);
  // Ingestion and search threads run the built-in offline embedder themselves; a replaced embedder
  // (a test's) or a remote model keeps that work on the main thread.
  const threadedEmbedder = overrides.embedder === undefined && config.embeddings.provider === 'hashed';
  const workers = threadedEmbedder ? (overrides.ingest?.workers ?? defaultPoolSize()) : 0;
  // Without a compiled worker script, everything stays here.
  const script = workers > 0 ? ingestWorkerScript() : null;
  if (workers > 0 && script === null) logger.warn('no compiled ingestion worker (dist/); knowledge is processed on the main thread');
  const pool = script ? createIngestPool({ size: workers, dimension: embedder.dimension()!, logger, script }) : null;
  const writer = createChunkWriter(knowledgeStore, logger, () => (pool?.pending ?? 0) > 0, { ...DEFAULT_WRITER, ...overrides.ingest?.writer }, backend.onWrite);
  const ingestor = createIngestor({ store: knowledgeStore, vectors, embedder, clock, ids, logger, fetchOptions, writer, pool });
  // With workers, more sources than threads are in flight (sourcesInFlight says why).
  const queue = createJobQueue((id, signal) => ingestor.process(id, signal), logger, { concurrency: pool ? sourcesInFlight(pool.size) : 1 });
  // Searches (and so chat retrieval) on their own thread beside the main one, given a SQLite file
  // (an in-memory one is not shared; on PostgreSQL the server does the heavy part).
  const searchFile = backend.searchFile;
  const searchPool =
    threadedEmbedder && searchFile !== null
      ? createSearchPool(
          config.search.threads,
          {
            filename: searchFile,
            durability: config.durability,
            dimension: embedder.dimension()!,
            index: { keywordBudget: config.search.keywordBudget, cacheBytes: config.search.vectorCacheBytes, ...overrides.index },
            fusion: fusionFor('hashed'),
          },
          logger,
        )
      : null;
  const knowledge = createKnowledgeService({
    searchPool,
    writer,
    store: knowledgeStore,
    vectors,
    embedder,
    ingestor,
    queue,
    personas,
    clock,
    ids,
    logger,
    fetchOptions,
    leases: { owner: instanceOwner, ms: config.leaseSeconds * 1000, shared: config.database !== undefined },
  });

  const toolsStore = createToolsStore(db.kysely);
  const vault = createVault(cipher);
  const toolOAuth = createToolOAuth({ store: createToolOAuthStore(db.kysely), cipher, clock, logger });
  // The tool hub's http servers pass the same address guard as URL ingestion (and its test overrides).
  const hub = createToolHub({
    knowledge,
    store: toolsStore,
    vault,
    logger,
    guard: fetchOptions,
    limits: { ...DEFAULT_HUB_LIMITS, ...overrides.toolHub },
    allowStdio: config.mcpStdio,
    oauth: toolOAuth,
  });
  const tools: ToolHub = hub;
  const toolsService = createToolsService({ store: toolsStore, hub, vault, clock, ids, guard: fetchOptions, allowStdio: config.mcpStdio, signals: backend.signals, oauth: toolOAuth });
  backend.signals.onChange('tool-servers', () => void hub.refresh().catch((err: unknown) => logger.warn({ err }, 'tool servers could not be read again')));
  const agent = createAgent({ llm, knowledge, tools, logger, limits: overrides.agent });
  const { hot } = backend;
  const chatStore = createChatStore(db, hot.chat);
  const handoffStore = createHandoffStore(db.kysely);
  const handoffs = createHandoffService({
    store: handoffStore,
    teams: teamStore,
    personas,
    clock,
    ids,
    owner: instanceOwner,
    logger,
    webhooks: { cipher, fetch: guardedFetch(fetchOptions), guard: fetchOptions },
    writeGate: overrides.writeGate,
  });
  const chat = createChatService({ store: chatStore, personas, abTests, handoffs, agent, clock, ids });
  const openai = createOpenAiService({ chat, personas, abTests, threads: createOpenAiThreadStore(db, hot.threads), clock });
  const channelStore = createChannelStore(db, hot.channels);
  // The one answer to "is this a channel of the workspace?" (404 filters of sessions and analytics).
  const channelExists: ChannelExists = async (workspaceId, channelId) => (await channelStore.find(workspaceId, channelId)) !== undefined;
  const sessions = createSessionService({ store: chatStore, clock, ids, personas, channelExists, handoffs });
  const evaluations = createEvaluationService({
    store: createEvaluationStore(db.kysely),
    personas,
    sessions,
    agent,
    llm,
    clock,
    ids,
    logger,
    leases: { owner: instanceOwner, ms: config.leaseSeconds * 1000, shared: config.database !== undefined },
  });
  personas.guardDeletion((workspaceId, personaId) => evaluations.personaInUse(workspaceId, personaId));
  const analytics = createAnalyticsService({ store: createAnalyticsStore(db, backend.analytics), personas, channelExists, clock, handoffsIn: handoffStore.openedIn, audit: audit.record });
  const inbox = createInbox({ store: channelStore, chat, sessions, clock, logger, recoveryWindowMs: overrides.channels?.recoveryWindowMs, owner: instanceOwner });
  const channels = createChannelService({
    store: channelStore,
    inbox,
    cipher,
    personas,
    abTests,
    clock,
    ids,
    logger,
    factories: { ...BRIDGE_FACTORIES, ...overrides.bridges },
    apiUrls: { slack: config.slackApiUrl, discord: config.discordApiUrl },
    guard: fetchOptions,
    limits: overrides.channels,
    signals: backend.signals,
    desk: handoffs,
    knowledgeTitles: (workspaceId, personaId, limit) => knowledgeStore.titlesFor(workspaceId, personaId, limit),
    ...(leaseStore ? { leases: { owner: instanceOwner, ms: config.leaseSeconds * 1000, store: leaseStore } } : {}),
  });
  personas.guardDeletion((workspaceId, personaId) => channels.personaInUse(workspaceId, personaId));
  abTests.onPromote((workspaceId, testId, winner) => channels.moveToWinner(workspaceId, testId, winner.personaId));
  handoffs.channelsWith(channels);
  for (const tool of channelHubTools(channels)) hub.addBuiltin(tool);
  // Client ID Metadata Documents pass the same address guard (and test overrides) as every other URL.
  const oauth = createOAuthService({
    store: createOAuthStore(db.kysely),
    auth,
    clock,
    ids,
    metadataDocuments: createMetadataDocuments({ guard: fetchOptions, clock }),
  });

  const mcpTasks = createMcpTasks({ store: createMcpTaskStore(db.kysely), clock, ids, logger, instance: instanceOwner, signals: backend.signals });
  // What this instance was running when it stopped will never finish.
  await mcpTasks.failOrphans();

  // lastUsedAt may lag by up to a minute (API.md §2); expired idempotency records go hourly.
  const timers = [
    setInterval(() => void auth.flushUsage().catch((err) => logger.error({ err }, 'lastUsedAt flush failed')), 60_000),
    setInterval(() => void idempotency.purgeExpired().catch((err) => logger.error({ err }, 'purge failed')), 3_600_000),
    setInterval(() => void oauth.purgeExpired().catch((err) => logger.error({ err }, 'OAuth purge failed')), 3_600_000),
    // Audit events older than SWITCHBOARD_AUDIT_RETENTION_DAYS go hourly, in batches.
    setInterval(() => void audit.purgeExpired().catch((err) => logger.error({ err }, 'audit purge failed')), 3_600_000),
    // A/B guardrails are checked every minute (and at every results read); a broken one stops its test.
    setInterval(() => void abTests.enforceGuardrails().catch((err) => logger.error({ err }, 'A/B guardrail check failed')), 60_000),
    // Lapsed handoff offers go to the next member, and queued handoffs to a team that became available.
    setInterval(() => void handoffs.sweep().catch((err) => logger.error({ err }, 'handoff sweep failed')), HANDOFF_SWEEP_MS),
    // A person's messages to users on channels: retried, and taken over from an instance that died.
    setInterval(() => void handoffs.deliver().catch((err) => logger.error({ err }, 'handoff deliveries failed')), HANDOFF_SWEEP_MS),
  ];
  for (const t of timers) t.unref();

  let closing: Promise<void> | undefined;
  return {
    config,
    logger,
    db,
    changeCounters: backend.changeCounters,
    rateClaims: backend.rateClaims,
    signals: backend.signals,
    sqlite() {
      if (db.kind !== 'sqlite') throw new Error('This instance stores its data in PostgreSQL, not SQLite.');
      return db;
    },
    clock,
    ids,
    cipher,
    services: { auth, personas, teams, abTests, idempotency, knowledge, chat, sessions, analytics, channels, tools: toolsService, oauth, openai, mcpTasks, evaluations, handoffs, loginSessions, signIn, members, invitations, audit, oidc },
    embedder,
    llm,
    tools,
    close() {
      closing ??= (async () => {
        for (const t of timers) clearInterval(t);
        try {
          // Every bridge and MCP client closes, and every stdio child is ended (then killed), before the database goes.
          // Channel answers under way get up to 5 s (within SIGTERM's last resort, 10 s after the drain bound).
          await channels.stopAll(Math.min(5_000, config.drainSeconds * 1000));
          await hub.close();
          await mcpTasks.close();
          // Evaluation runs under way stop starting cases and are handed over (resumed at the next start, or by another instance).
          await evaluations.close();
          // An interrupted job stays `processing` and is resumed at the next start.
          await queue.close();
          // ...unless other instances share the database: they take this one's over at once.
          await knowledge.handOver();
          await writer.close();
          await pool?.close();
          await searchPool?.close();
          await auth.flushUsage();
          await heartbeat?.stop();
        } finally {
          await backend.close();
        }
      })();
      return closing;
    },
  };
}
