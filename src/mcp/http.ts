/**
 * MCP over Streamable HTTP at `/mcp` (API.md §10). The bearer key and rate limit are the API's own
 * hooks; here: DNS-rebinding checks (Host, Origin), one `McpServer` + transport per session bound
 * to the key that opened it (never shared: CVE-2026-25536), a 403 before a tool that needs a scope
 * the key lacks, and sessions that end on DELETE, when idle, and at shutdown.
 */
import { randomUUID } from 'node:crypto';
import type { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { AppContext } from '../context.js';
import type { Principal } from '../core/auth/auth.service.js';
import { hasScope, type Scope } from '../core/auth/keys.js';
import { AppError, ForbiddenError, NotFoundError, UnavailableError, ValidationError } from '../errors.js';
import { principalOf } from '../http/auth-hooks.js';
import { mcpErrorResponse, withErrors } from '../http/openapi.js';

export interface McpHttpOptions {
  /** Sessions unused this long are closed (default 30 min). */
  idleMs?: number;
  /** Open sessions at most; an initialize beyond → 503 (default 1,000). */
  maxSessions?: number;
  /** Open sessions per key; a new one beyond closes that key's least recently used (default 20). */
  maxSessionsPerKey?: number;
}

interface Session {
  /** The key that opened it, or `key/grant` for an OAuth client: a session is never shared between them. */
  keyId: string;
  transport: StreamableHTTPServerTransport;
  lastSeen: number;
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
function messagesOf(body: unknown): Array<{ method?: unknown; params?: { name?: unknown } }> {
  const list = Array.isArray(body) ? body : [body];
  return list.filter((m): m is { method?: unknown; params?: { name?: unknown } } => typeof m === 'object' && m !== null);
}

/** A tools/call the key may not make: 403 with the scope it needs (RFC 6750 `insufficient_scope`, as MCP's scope challenge). */
function checkToolScopes(principal: Principal, body: unknown, toolScope: (name: string) => Scope | undefined) {
  for (const message of messagesOf(body)) {
    if (message.method !== 'tools/call' || typeof message.params?.name !== 'string') continue;
    const needed = toolScope(message.params.name);
    if (needed && !hasScope(principal.scopes, needed)) {
      throw new AppError('forbidden', `${message.params.name} needs the "${needed}" scope.`, undefined, {
        'www-authenticate': `Bearer realm="switchboard", error="insufficient_scope", scope="${needed}"`,
      });
    }
  }
}

interface McpModules {
  server: typeof import('./server.js');
  sdk: typeof import('@modelcontextprotocol/sdk/server/streamableHttp.js');
  types: typeof import('@modelcontextprotocol/sdk/types.js');
}
let mcpModules: Promise<McpModules> | undefined;

/**
 * The MCP server (every feature's tools and their JSON Schemas) and the SDK's transport: ~20 MB and
 * a core's ~0.3 s of imports, loaded at the first /mcp request rather than at every start (issue 23).
 */
function loadMcp(): Promise<McpModules> {
  mcpModules ??= Promise.all([import('./server.js'), import('@modelcontextprotocol/sdk/server/streamableHttp.js'), import('@modelcontextprotocol/sdk/types.js')]).then(
    ([server, sdk, types]) => ({ server, sdk, types }),
  );
  return mcpModules;
}

const ownerOf = (principal: Principal) => (principal.grantId ? `${principal.keyId}/${principal.grantId}` : principal.keyId);

export function mcpRoutes(ctx: AppContext, options: McpHttpOptions = {}): FastifyPluginAsyncZod {
  const idleMs = options.idleMs ?? 30 * 60_000;
  const maxSessions = options.maxSessions ?? 1_000;
  const maxPerKey = options.maxSessionsPerKey ?? 20;
  const sessions = new Map<string, Session>();
  const guard = rebindingGuard(ctx.config);

  async function closeSession(id: string) {
    const session = sessions.get(id);
    if (!session) return;
    sessions.delete(id);
    await session.transport.close().catch((err: unknown) => ctx.logger.warn({ err }, 'closing an MCP session failed'));
  }

  async function openSession(principal: Principal): Promise<StreamableHTTPServerTransport> {
    // One key cannot take every session: a client that leaks sessions loses its own oldest.
    const owner = ownerOf(principal);
    const own = [...sessions].filter(([, s]) => s.keyId === owner).sort(([, a], [, b]) => a.lastSeen - b.lastSeen);
    if (own.length >= maxPerKey) await closeSession(own[0]![0]);
    if (sessions.size >= maxSessions) throw new UnavailableError(`Too many open MCP sessions (${maxSessions}); retry later.`);
    const { server, sdk } = await loadMcp();
    const transport = new sdk.StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (id) => void sessions.set(id, { keyId: owner, transport, lastSeen: Date.now() }),
      onsessionclosed: (id) => void sessions.delete(id),
    });
    transport.onclose = () => {
      if (transport.sessionId) sessions.delete(transport.sessionId);
    };
    await server.createMcpServer(ctx, principal).connect(transport);
    return transport;
  }

  /** The transport this request belongs to: its session's, or a new one for an initialize. */
  async function transportFor(request: FastifyRequest, principal: Principal): Promise<StreamableHTTPServerTransport> {
    const sessionId = request.headers['mcp-session-id'];
    if (typeof sessionId === 'string') {
      const session = sessions.get(sessionId);
      // Another key's session is answered like a missing one: a session id is not a credential.
      if (!session || session.keyId !== ownerOf(principal)) throw new NotFoundError('MCP session', sessionId.slice(0, 64));
      session.lastSeen = Date.now();
      return session.transport;
    }
    const { types } = await loadMcp();
    if (request.method === 'POST' && messagesOf(request.body).some((m) => types.isInitializeRequest(m))) return openSession(principal);
    throw new ValidationError('Send an initialize request first, then the Mcp-Session-Id header it answers with.', [
      { path: 'mcp-session-id', message: 'is required after initialization' },
    ]);
  }

  async function handle(request: FastifyRequest, reply: FastifyReply) {
    const principal = principalOf(request);
    const { server } = await loadMcp();
    if (request.method === 'POST') checkToolScopes(principal, request.body, server.toolScope);
    const transport = await transportFor(request, principal);
    // The response leaves through the SDK: keep the headers the hooks set (request id, rate limit, CORS).
    for (const [name, value] of Object.entries(reply.getHeaders())) if (value !== undefined) reply.raw.setHeader(name, value);
    reply.hijack();
    try {
      await transport.handleRequest(request.raw, reply.raw, request.body);
    } catch (err) {
      request.log.error({ err }, 'MCP transport failed');
      if (!reply.raw.headersSent) {
        reply.raw.writeHead(500, { 'content-type': 'application/problem+json' });
        reply.raw.end(JSON.stringify({ type: 'https://switchboard.dev/errors/internal', title: 'Internal server error', status: 500, code: 'internal', detail: 'The MCP request failed.', requestId: request.id }));
      } else reply.raw.end();
    }
  }

  const sweep = setInterval(() => {
    const cutoff = Date.now() - idleMs;
    for (const [id, session] of sessions) if (session.lastSeen < cutoff) void closeSession(id);
  }, Math.min(idleMs, 60_000));
  sweep.unref();

  const tags = ['mcp'];
  const description =
    'The MCP Streamable HTTP endpoint (protocol up to 2025-11-25): POST JSON-RPC messages, GET the server-to-client event stream, DELETE to end the session. ' +
    'Initialize first; send the `Mcp-Session-Id` it answers with on every later request. Needs a bearer API key or an OAuth access token issued for `<base>/mcp` (`read` to connect; a tool that changes data needs `write`, else 403). ' +
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
    app.addHook('preClose', async () => {
      clearInterval(sweep);
      await Promise.all([...sessions.keys()].map(closeSession));
    });
    const config = { scope: 'read' as const, oauth: true };
    app.post('/mcp', { config, bodyLimit: ctx.config.uploadLimitBytes, schema: schema('POST', 'Send MCP messages') }, handle);
    app.get('/mcp', { config, schema: schema('GET', 'Open the MCP server-to-client event stream') }, handle);
    app.delete('/mcp', { config, schema: schema('DELETE', 'End an MCP session') }, handle);
  };
}
