/**
 * MCP over Streamable HTTP at `/mcp` (API.md §10). The bearer key and rate limit are the API's own
 * hooks; here: DNS-rebinding checks (Host, Origin), a 403 before a tool that needs a scope the key
 * lacks, and the two eras of the protocol, told apart by the SDK's own classification:
 *  - 2026-07-28 (issue 27): no session; each request is answered by a server of its own for the
 *    authenticated key (server-modern.ts, the SDK's v2), so any instance answers any request;
 *  - 2025-11-25 and before: one `McpServer` + transport per session bound to the key that opened it
 *    (never shared: CVE-2026-25536), and sessions that end on DELETE and when idle.
 *
 * A session is a row of `mcp_sessions` (migration 019), not a process's memory (API.md §13): a
 * request whose session this instance does not hold (it was opened on another instance, or before
 * this one restarted) takes it up here, with a server and transport of its own initialized from the
 * parameters the client first sent. Every request marks its session used in the same statement that
 * checks it is still open, so a session ended through one instance is over on all at once, and the
 * per-key cap and the idle expiry count every instance's sessions.
 */
import { randomUUID } from 'node:crypto';
import type { McpHttpHandler } from '@modelcontextprotocol/server';
import type { WebStandardStreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { AppContext } from '../context.js';
import type { Actor } from '../core/auth/actor.js';
import { lowestScopeFor, permits, type Requirement } from '../core/auth/roles.js';
import { AppError, ForbiddenError, NotFoundError, UnavailableError, ValidationError } from '../errors.js';
import { actorOf } from '../http/auth-hooks.js';
import { mcpErrorResponse, withErrors } from '../http/openapi.js';
import { createMcpEventStore, RETRY_MS } from './event-store.js';
import { createMcpSessionStore } from './session-store.js';

export interface McpHttpOptions {
  /** Sessions unused this long end (default 30 min). */
  idleMs?: number;
  /** Sessions this instance holds at most; an initialize or a take-over beyond → 503 (default 1,000). */
  maxSessions?: number;
  /** Open sessions per key, on all instances; a new one beyond ends that key's least recently used (default 20). */
  maxSessionsPerKey?: number;
  /** Where clients reach this server (SWITCHBOARD_PUBLIC_URL, else the listen address): the base of links tools hand out (invite_member). */
  publicBase?: () => string;
}

/** A session this instance holds: its server and transport. */
interface Held {
  id: string;
  /** The key that opened it, or `key/grant` for an OAuth client: a session is never shared between them. */
  owner: string;
  transport: WebStandardStreamableHTTPServerTransport;
  /** Its server: whether a client's answer is to a request of this one (`awaits`). */
  server: { server: object };
  lastSeen: number;
  /** Its row exists: false while a new session's initialize is under way, so a check of the rows then does not end it. */
  recorded: boolean;
}

/** What `initialize` carried: replayed to the server of an instance that takes the session up. */
interface InitializeParams {
  protocolVersion: string;
  capabilities: unknown;
  clientInfo: unknown;
}

const LOOPBACK_HOSTS = ['localhost', '127.0.0.1', '[::1]', '::1'];

/** The host name of a Host header or an origin's host (`example.com:3000` → `example.com`, `[::1]:80` → `[::1]`). */
function hostName(host: string): string {
  const lower = host.toLowerCase();
  if (lower.startsWith('[')) return lower.slice(0, lower.indexOf(']') + 1);
  return lower.split(':')[0] ?? '';
}

/**
 * DNS rebinding: a page on evil.example can make a browser send requests to 127.0.0.1 under its
 * own host name. So `/mcp` answers only requests addressed to a loopback name or one the operator
 * listed, and refuses browser origins that are neither those hosts nor allowed CORS origins.
 */
export function rebindingGuard(config: AppContext['config']) {
  // The public URL's host is the one remote clients use: allowed without listing it twice.
  const publicHost = config.publicUrl ? [hostName(new URL(config.publicUrl).host)] : [];
  const hosts = new Set([...LOOPBACK_HOSTS, ...publicHost, ...config.mcpAllowedHosts.map(hostName)]);
  const origins = new Set(config.corsOrigins);
  return (request: FastifyRequest) => {
    const host = request.headers.host ?? '';
    if (!hosts.has(hostName(host))) {
      throw new ForbiddenError(`/mcp does not answer to the host "${host.slice(0, 100)}"; add it to SWITCHBOARD_MCP_ALLOWED_HOSTS.`);
    }
    const origin = request.headers.origin;
    if (origin === undefined || origins.has('*') || origins.has(origin)) return;
    let originHost = '';
    try {
      originHost = new URL(origin).host;
    } catch {
      // "null" and malformed origins fall through to the refusal.
    }
    if (!hosts.has(hostName(originHost))) {
      throw new ForbiddenError(`Requests from the origin "${origin.slice(0, 100)}" are refused; list it in SWITCHBOARD_CORS_ORIGINS.`);
    }
  };
}

/** The JSON-RPC messages of a POST body (one, or a batch from an older client). */
type Message = { method?: unknown; params?: { name?: unknown; _meta?: Record<string, unknown> } };
function messagesOf(body: unknown): Message[] {
  const list = Array.isArray(body) ? body : [body];
  return list.filter((m): m is Message => typeof m === 'object' && m !== null);
}

/**
 * A tools/call the key may not make: 403 with the scope it needs (RFC 6750 `insufficient_scope`, as
 * MCP's scope challenge). A tool may require a role (`agent` to ask a persona or work a handoff,
 * `admin` for members); the challenge still names an OAuth scope, since that is what a client can
 * ask for: the lowest scope that satisfies the role (`agent` → `write`, roles.ts lowestScopeFor).
 * A person's token with that scope may still be refused when the person's own role is lower.
 */
async function checkToolScopes(
  actor: Actor,
  body: unknown,
  toolScope: (name: string) => Requirement | undefined,
  refusal: (name: string, needed: Requirement) => string,
  audit: AppContext['services']['audit'],
) {
  for (const message of messagesOf(body)) {
    if (message.method !== 'tools/call' || typeof message.params?.name !== 'string') continue;
    const needed = toolScope(message.params.name);
    if (needed && !permits(actor.role, needed)) {
      // The same event as a refusal inside the MCP server (server.ts callTool).
      await audit.denied(actor, { type: 'mcp_tool', id: message.params.name });
      throw new AppError('forbidden', refusal(message.params.name, needed), undefined, {
        'www-authenticate': `Bearer realm="switchboard", error="insufficient_scope", scope="${lowestScopeFor(needed)}"`,
      });
    }
  }
}

interface McpModules {
  server: typeof import('./server.js');
  /** The 2026-07-28 revision: the SDK's v2 server, one per request, and its era classification. */
  modern: typeof import('./server-modern.js');
  v2: typeof import('@modelcontextprotocol/server');
  sdk: typeof import('@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js');
  types: typeof import('@modelcontextprotocol/sdk/types.js');
  /** Node's request and response as the transport's fetch ones (and back): it loads Node's undici, so only with /mcp. */
  node: typeof import('@hono/node-server');
}
let mcpModules: Promise<McpModules> | undefined;

/**
 * The MCP server (every feature's tools and their JSON Schemas) and the SDK's transport: ~20 MB and
 * a core's ~0.3 s of imports, loaded at the first /mcp request rather than at every start (issue 23).
 */
function loadMcp(): Promise<McpModules> {
  mcpModules ??= Promise.all([
    import('./server.js'),
    import('@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js'),
    import('@modelcontextprotocol/sdk/types.js'),
    import('@hono/node-server'),
    import('./server-modern.js'),
    import('@modelcontextprotocol/server'),
  ]).then(([server, sdk, types, node, modern, v2]) => ({ server, sdk, types, node, modern, v2 }));
  return mcpModules;
}

const ownerOf = (actor: Actor) => (actor.grantId ? `${actor.id}/${actor.grantId}` : actor.id);

export function mcpRoutes(ctx: AppContext, options: McpHttpOptions = {}): FastifyPluginAsyncZod {
  const idleMs = options.idleMs ?? 30 * 60_000;
  const maxSessions = options.maxSessions ?? 1_000;
  const maxPerKey = options.maxSessionsPerKey ?? 20;
  const store = createMcpSessionStore(ctx.db.kysely);
  // Resumable streams: what a session sends is stored, so any instance can replay it (event-store.ts).
  const events = createMcpEventStore(ctx.db.kysely, ctx.logger, () => ctx.clock.now().getTime());
  const held = new Map<string, Held>();
  /** Take-overs under way: two requests of one session arriving together take it up once. */
  const adopting = new Map<string, Promise<Held>>();
  const guard = rebindingGuard(ctx.config);
  /** Milliseconds, strictly increasing here: sessions used in one millisecond still order by use (the per-key cap ends the least recent). */
  let last = 0;
  const now = () => (last = Math.max(ctx.clock.now().getTime(), last + 1));

  /** Lets go of a session here (its streams close); it goes on in the database unless ended there. */
  async function release(id: string) {
    const session = held.get(id);
    if (!session) return;
    held.delete(id);
    await session.transport.close().catch((err: unknown) => ctx.logger.warn({ err }, 'closing an MCP session failed'));
  }

  /** Sessions ended on any instance (DELETE, the per-key cap, idle expiry) are let go of here too. */
  let checking: Promise<void> | undefined;
  async function releaseEnded() {
    const ids = [...held].filter(([, s]) => s.recorded).map(([id]) => id);
    if (ids.length === 0) return;
    const open = await store.stillOpen(ids);
    await Promise.all(ids.filter((id) => !open.has(id)).map(release));
  }
  ctx.signals.onChange('mcp-sessions', () => {
    checking ??= releaseEnded()
      .catch((err: unknown) => ctx.logger.warn({ err }, 'checking MCP sessions failed'))
      .finally(() => (checking = undefined));
  });

  /** A server and transport for session `id` here; `opened` runs once the transport has accepted the client's initialize. */
  async function serve(actor: Actor, id: string, opened?: () => Promise<void>): Promise<Held> {
    if (held.size >= maxSessions) throw new UnavailableError(`Too many open MCP sessions (${maxSessions}); retry later.`);
    const { server, sdk } = await loadMcp();
    const transport = new sdk.WebStandardStreamableHTTPServerTransport({
      sessionIdGenerator: () => id,
      ...(opened ? { onsessioninitialized: opened } : {}),
      onsessionclosed: async () => {
        // DELETE: the session is over on every instance.
        if (await store.end(id)) await ctx.signals.changed('mcp-sessions');
        await events.endSession(id);
      },
      eventStore: events.forSession(id),
      retryInterval: RETRY_MS,
    });
    transport.onclose = () => {
      if (held.get(id)?.transport === transport) held.delete(id);
    };
    const mcp = server.createMcpServer(ctx, actor, undefined, options.publicBase);
    await mcp.connect(transport);
    const session: Held = { id, owner: ownerOf(actor), transport, server: mcp, lastSeen: now(), recorded: !opened };
    held.set(id, session);
    return session;
  }

  /** A new session: the row is written once the transport accepted the initialize, before the answer leaves. */
  async function open(actor: Actor, params: InitializeParams): Promise<Held> {
    const id = randomUUID();
    return serve(actor, id, async () => {
      const ended = await store.open(
        { id, owner: ownerOf(actor), protocol_version: params.protocolVersion, client: JSON.stringify(params), created_at: ctx.clock.now().toISOString(), last_seen_ms: now() },
        maxPerKey,
      );
      const session = held.get(id);
      if (session) session.recorded = true;
      // One key cannot take every session: a client that leaks sessions loses its own oldest, wherever they are held.
      if (ended.length > 0) await ctx.signals.changed('mcp-sessions');
    });
  }

  /** Takes up a session another instance (or this one before a restart) opened: initializes a server here as the client did. */
  async function adopt(actor: Actor, id: string, params: InitializeParams): Promise<Held> {
    const session = await serve(actor, id);
    const post = (body: unknown, headers: Record<string, string> = {}) =>
      session.transport.handleRequest(
        new Request('http://localhost/mcp', {
          method: 'POST',
          headers: { accept: 'application/json, text/event-stream', 'content-type': 'application/json', ...headers },
          body: JSON.stringify(body),
        }),
      );
    const init = await post({ jsonrpc: '2.0', id: 0, method: 'initialize', params });
    await init.text();
    const ready = await post({ jsonrpc: '2.0', method: 'notifications/initialized' }, { 'mcp-session-id': id });
    await ready.text();
    if (!init.ok || !ready.ok) {
      // Ended meanwhile (its server here was let go of as the take-up ran): the session is gone.
      ctx.logger.warn({ sessionId: id, initialize: init.status, initialized: ready.status }, 'an MCP session could not be taken up');
      await release(id);
      throw new NotFoundError('MCP session', id);
    }
    return session;
  }

  /**
   * A client's answers to requests its session's server sent (a confirmation) reach whichever
   * instance the balancer picks. An answer this instance's server is not waiting for is kept in the
   * database, and the instance whose server is takes it up when the change signal reaches it.
   */
  // The SDK 1.x keeps the requests its server awaits in `_responseHandlers` (by id) and offers no
  // public way to ask; should an upgrade move it, replies stop being taken up across instances (the
  // confirmation test through the proxy in test/e2e/instances.test.ts fails), while replies reaching
  // the instance that asked keep working as the SDK delivers them itself.
  const awaits = (session: Held, id: unknown) => (session.server.server as { _responseHandlers?: Map<unknown, unknown> })._responseHandlers?.has(id) === true;
  async function relayReplies(session: Held, body: unknown): Promise<void> {
    const replies = messagesOf(body).filter((m) => m.method === undefined && 'id' in m && ('result' in m || 'error' in m) && !awaits(session, m.id));
    if (replies.length === 0) return;
    for (const reply of replies) await store.addReply(session.id, JSON.stringify(reply), now());
    await ctx.signals.changed('mcp-replies');
  }
  // Where this instance starts reading: answers kept before it started are not its servers'.
  let repliesRead: Promise<number> = store.lastReply().catch(() => 0);
  ctx.signals.onChange('mcp-replies', () => {
    const read = repliesRead.then(async (after) => {
      let last = after;
      for (const row of await store.repliesAfter(after, [...held.keys()])) {
        last = row.seq;
        const session = held.get(row.session_id);
        const reply = JSON.parse(row.message) as { id?: unknown };
        if (session && awaits(session, reply.id)) session.transport.onmessage?.(reply as never);
      }
      return last;
    });
    repliesRead = read.catch((err: unknown) => {
      ctx.logger.warn({ err }, 'MCP replies could not be read');
      return store.lastReply();
    });
  });

  /** The session this request belongs to: held here, taken up from the database, or new for an initialize. */
  async function sessionFor(request: FastifyRequest, actor: Actor): Promise<Held> {
    const sessionId = request.headers['mcp-session-id'];
    if (typeof sessionId === 'string') {
      // Another key's session is answered like a missing one: a session id is not a credential.
      const row = sessionId.length <= 64 ? await store.use(sessionId, ownerOf(actor), now(), now() - idleMs) : undefined;
      if (!row) {
        await release(sessionId);
        throw new NotFoundError('MCP session', sessionId.slice(0, 64));
      }
      const local = held.get(sessionId);
      if (local) {
        local.lastSeen = now();
        return local;
      }
      let taking = adopting.get(sessionId);
      if (!taking) {
        taking = adopt(actor, sessionId, JSON.parse(row.client) as InitializeParams).finally(() => adopting.delete(sessionId));
        adopting.set(sessionId, taking);
      }
      return taking;
    }
    const { types } = await loadMcp();
    const init = request.method === 'POST' ? messagesOf(request.body).find((m) => types.isInitializeRequest(m)) : undefined;
    if (init) {
      const { protocolVersion, capabilities, clientInfo } = (init as { params: InitializeParams }).params;
      return open(actor, { protocolVersion, capabilities, clientInfo });
    }
    throw new ValidationError('Send an initialize request first, then the Mcp-Session-Id header it answers with.', [
      { path: 'mcp-session-id', message: 'is required after initialization' },
    ]);
  }

  /** The 2026-07-28 endpoint: no session, a server per request for the actor the hooks authenticated. */
  let modernHandler: McpHttpHandler | undefined;
  const modernFor = ({ v2, modern }: McpModules) =>
    (modernHandler ??= v2.createMcpHandler((rc) => modern.createModernMcpServer(ctx, (rc.authInfo?.extra as { actor: Actor }).actor, options.publicBase), { legacy: 'reject' }));

  /**
   * Whether a request is of the 2026-07-28 revision, by the SDK's own classification. Asking it costs
   * ~0.1 ms (a web Request built), so a request with neither of the revision's marks, a `_meta` claim
   * in a message or a protocol version header of no older revision, is of the older era without it.
   */
  async function isModern({ v2, types }: McpModules, request: FastifyRequest): Promise<boolean> {
    const version = request.headers['mcp-protocol-version'];
    const claims = request.method === 'POST' && messagesOf(request.body).some((m) => m.params?._meta?.[v2.PROTOCOL_VERSION_META_KEY] !== undefined);
    if (!claims && (version === undefined || types.SUPPORTED_PROTOCOL_VERSIONS.includes(String(version)))) return false;
    const headers = new Headers();
    for (const [name, value] of Object.entries(request.headers)) if (value !== undefined) headers.set(name, Array.isArray(value) ? value.join(', ') : value);
    const probe = new Request(new URL(request.url, 'http://localhost'), { method: request.method, headers });
    return !(await v2.isLegacyRequest(probe, request.method === 'POST' ? request.body : undefined));
  }

  /** Hands the response to `serve` (the SDK's), keeping the headers the hooks set (request id, rate limit, CORS). */
  async function respond(request: FastifyRequest, reply: FastifyReply, { node }: McpModules, serve: (webRequest: Request) => Promise<Response>, after?: () => Promise<void>) {
    for (const [name, value] of Object.entries(reply.getHeaders())) if (value !== undefined) reply.raw.setHeader(name, value);
    reply.hijack();
    const listener = node.getRequestListener(serve, { overrideGlobalObjects: false });
    try {
      await listener(request.raw, reply.raw);
    } catch (err) {
      request.log.error({ err }, 'MCP transport failed');
      if (!reply.raw.headersSent) {
        reply.raw.writeHead(500, { 'content-type': 'application/problem+json' });
        reply.raw.end(JSON.stringify({ type: 'https://switchboard.dev/errors/internal', title: 'Internal server error', status: 500, code: 'internal', detail: 'The MCP request failed.', requestId: request.id }));
      } else reply.raw.end();
    } finally {
      await after?.();
    }
  }

  async function handle(request: FastifyRequest, reply: FastifyReply) {
    const actor = actorOf(request);
    const modules = await loadMcp();
    const { server } = modules;
    if (request.method === 'POST') await checkToolScopes(actor, request.body, server.toolScope, server.toolRefusal, ctx.services.audit);
    if (await isModern(modules, request)) {
      const handler = modernFor(modules);
      const authInfo = { token: '', clientId: ownerOf(actor), scopes: [...actor.scopes], extra: { actor } };
      return respond(request, reply, modules, (webRequest) => handler.fetch(webRequest, { authInfo, parsedBody: request.body }));
    }
    const session = await sessionFor(request, actor);
    if (request.method === 'POST') await relayReplies(session, request.body);
    await respond(
      request,
      reply,
      modules,
      (webRequest) => session.transport.handleRequest(webRequest, { parsedBody: request.body }),
      // An initialize the transport refused (a batch of two, say) opened nothing: let its server go.
      async () => (session.transport.sessionId === undefined ? release(session.id) : undefined),
    );
  }

  // Idle sessions end: those held here are let go of, and the rows of every instance's are deleted (idempotent, any instance may).
  const sweep = setInterval(() => {
    const cutoff = now() - idleMs;
    for (const [id, session] of held) if (session.lastSeen < cutoff) void release(id);
    void store
      .endIdle(cutoff)
      .then((n) => (n > 0 ? ctx.signals.changed('mcp-sessions') : undefined))
      .then(() => events.purge())
      .then(() => store.purgeReplies(now() - 60_000))
      .catch((err: unknown) => ctx.logger.warn({ err }, 'ending idle MCP sessions failed'));
  }, Math.min(idleMs, 60_000));
  sweep.unref();

  const tags = ['mcp'];
  const description =
    'The MCP Streamable HTTP endpoint. Protocol 2026-07-28: each POST stands alone (its `_meta` names the revision and the client; `server/discover` first), no session. ' +
    'Protocol 2025-11-25 and before: POST JSON-RPC messages, GET the server-to-client event stream, DELETE to end the session; initialize first and send the `Mcp-Session-Id` it answers with on every later request. Needs a bearer API key or an OAuth access token issued for `<base>/mcp` (`read` to connect; a tool that changes data needs `write`, else 403). ' +
    'Without one: 401 with `WWW-Authenticate: Bearer resource_metadata="<base>/.well-known/oauth-protected-resource/mcp"`.';
  // The transport's own refusals are JSON-RPC error objects, as MCP clients expect (API.md §1); the
  // rest (key, scope, session, body) are the API's problem+json.
  const errors =
    ' Errors are problem+json, except where the MCP transport itself refuses: those are JSON-RPC error objects (`application/json`, `id: null`).';
  const bad = mcpErrorResponse(
    'problem+json: no `Mcp-Session-Id` after initialization, malformed JSON (`invalid_json`), a body nested deeper than 64 levels (`validation_failed`). ' +
      'JSON-RPC error: a body that is not a JSON-RPC message (-32700), an unsupported `MCP-Protocol-Version` (-32000).',
    ['problem', 'jsonRpc'],
  );
  const schema = (method: 'POST' | 'GET' | 'DELETE', summary: string) => ({
    tags,
    summary,
    description: description + errors,
    ...(method === 'POST' ? { body: z.unknown().describe('One JSON-RPC message.') } : {}),
    response: {
      ...withErrors({ 200: z.unknown().describe('JSON, or an event stream of JSON-RPC messages') }, [404, 503]),
      400: bad,
      ...(method === 'DELETE'
        ? {}
        : {
            406: mcpErrorResponse(
              method === 'POST' ? 'JSON-RPC error: `Accept` must name both application/json and text/event-stream.' : 'JSON-RPC error: `Accept` must name text/event-stream.',
              ['jsonRpc'],
            ),
          }),
      ...(method === 'GET' ? { 409: mcpErrorResponse('JSON-RPC error: the session already has its GET event stream open.', ['jsonRpc']) } : {}),
      ...(method === 'POST'
        ? { 415: mcpErrorResponse('problem+json: a content type other than JSON. JSON-RPC error: no `Content-Type` at all (the transport wants application/json).', ['problem', 'jsonRpc']) }
        : {}),
    },
  });

  return async (app) => {
    app.addHook('onRequest', async (request) => guard(request));
    // At shutdown the sessions held here close their streams but stay open: the client continues on another instance, or here after a restart.
    app.addHook('preClose', async () => {
      clearInterval(sweep);
      // The 2026-07-28 lane's open streams (subscriptions/listen) end too; its requests hold no session.
      await modernHandler?.close();
      await Promise.all([...held.keys()].map(release));
      await events.close();
    });
    const config = { scope: 'read' as const, oauth: true };
    app.post('/mcp', { config, bodyLimit: ctx.config.uploadLimitBytes, schema: schema('POST', 'Send MCP messages') }, handle);
    app.get('/mcp', { config, schema: schema('GET', 'Open the MCP server-to-client event stream') }, handle);
    app.delete('/mcp', { config, schema: schema('DELETE', 'End an MCP session') }, handle);
  };
}
