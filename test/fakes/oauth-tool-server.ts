// An MCP tool server that accepts nothing but OAuth, with its own authorization server, on 127.0.0.1
// (issue 27, docs/tools.md#tool-servers-that-sign-in-with-oauth). It speaks the real protocols: RFC 9728 protected resource
// metadata and 401/403 Bearer challenges, RFC 8414 metadata, an authorization endpoint with a
// consent page (a real form a browser submits), PKCE S256, the `resource` indicator, `iss` on the
// answer (RFC 9207), Client ID Metadata Documents (fetched from the client's URL), dynamic
// registration (RFC 7591), refresh tokens that rotate (reuse revokes the family) and revocation
// (RFC 7009). Tests switch its features and read what it saw.
import crypto from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { CallToolRequestSchema, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js';

export interface OAuthToolServerOptions {
  /** Advertise and accept Client ID Metadata Documents. Default true. */
  metadataDocuments?: boolean;
  /** Offer dynamic client registration. Default true. */
  registration?: boolean;
  /** A client registered out of band (`clientSecret`: a confidential one, HTTP Basic). */
  preregistered?: { clientId: string; clientSecret?: string; redirectUri: string };
  /** Access token lifetime, seconds. Default 3600. */
  accessTtlSeconds?: number;
}

interface Grant {
  clientId: string;
  scope: string;
  family: string;
}

const RESOURCE_PATH = '/mcp';
const BASE_SCOPE = 'tools:read';
const ADMIN_SCOPE = 'tools:admin';

const random = () => crypto.randomBytes(24).toString('base64url');
const s256 = (verifier: string) => crypto.createHash('sha256').update(verifier).digest('base64url');
const escapeHtml = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

function json(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) {
  res.writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store', ...headers }).end(JSON.stringify(body));
}

export async function startOAuthToolServer(options: OAuthToolServerOptions = {}) {
  const features = { metadataDocuments: options.metadataDocuments ?? true, registration: options.registration ?? true, accessTtlSeconds: options.accessTtlSeconds ?? 3600 };
  /** What tests switch: refuse refreshes, answer with another issuer, hold registrations until a promise settles. */
  const behaviour = { refuseRefresh: false, issOverride: undefined as string | undefined, registrationGate: undefined as Promise<void> | undefined };
  /** What tests read. */
  const seen = {
    refreshes: 0,
    unauthorized: 0,
    insufficientScope: 0,
    revoked: [] as string[],
    metadataDocumentFetches: 0,
    /** Requests for the authorization server's metadata (one per discovery). */
    authorizationServerMetadata: 0,
    /** Registration requests, counted when they arrive (a held one included). */
    registrations: 0,
    authorizeRequests: [] as URLSearchParams[],
    tokenRequests: [] as URLSearchParams[],
    issuedAccessTokens: [] as string[],
  };
  const clients = new Map<string, { redirectUris: string[]; secret?: string }>();
  if (options.preregistered) {
    const { clientId, clientSecret, redirectUri } = options.preregistered;
    clients.set(clientId, { redirectUris: [redirectUri], ...(clientSecret ? { secret: clientSecret } : {}) });
  }
  const pending = new Map<string, { clientId: string; redirectUri: string; state: string; challenge: string; scope: string; resource: string }>();
  const codes = new Map<string, { clientId: string; redirectUri: string; challenge: string; scope: string; resource: string }>();
  const accessTokens = new Map<string, Grant & { expiresAt: number; revoked: boolean }>();
  const refreshTokens = new Map<string, Grant & { used: boolean; revoked: boolean }>();
  const sessions = new Map<string, StreamableHTTPServerTransport>();

  let origin = '';
  const resource = () => `${origin}${RESOURCE_PATH}`;
  const prmUrl = () => `${origin}/.well-known/oauth-protected-resource${RESOURCE_PATH}`;

  function issue(grant: Grant) {
    const access = random();
    const refresh = random();
    accessTokens.set(access, { ...grant, expiresAt: Date.now() + features.accessTtlSeconds * 1000, revoked: false });
    refreshTokens.set(refresh, { ...grant, used: false, revoked: false });
    seen.issuedAccessTokens.push(access);
    return { access_token: access, token_type: 'Bearer', expires_in: features.accessTtlSeconds, refresh_token: refresh, scope: grant.scope };
  }

  function revokeFamily(family: string) {
    for (const t of accessTokens.values()) if (t.family === family) t.revoked = true;
    for (const t of refreshTokens.values()) if (t.family === family) t.revoked = true;
  }

  /** The client of a request: a metadata document URL (fetched), or a registered id. */
  async function clientOf(clientId: string): Promise<{ redirectUris: string[]; secret?: string } | undefined> {
    if (/^https?:\/\//.test(clientId)) {
      if (!features.metadataDocuments) return undefined;
      seen.metadataDocumentFetches++;
      const res = await fetch(clientId);
      if (!res.ok) return undefined;
      const doc = (await res.json()) as { client_id?: string; redirect_uris?: string[] };
      if (doc.client_id !== clientId) return undefined;
      return { redirectUris: doc.redirect_uris ?? [] };
    }
    return clients.get(clientId);
  }

  /** Client authentication at the token and revocation endpoints: Basic, a posted secret, or none for a public client. */
  async function authenticate(req: IncomingMessage, form: URLSearchParams): Promise<string | undefined> {
    const basic = /^Basic (.+)$/i.exec(req.headers.authorization ?? '');
    let id = form.get('client_id') ?? undefined;
    let secret = form.get('client_secret') ?? undefined;
    if (basic) {
      const [u, p] = Buffer.from(basic[1]!, 'base64').toString('utf8').split(':');
      id = decodeURIComponent(u ?? '');
      secret = decodeURIComponent(p ?? '');
    }
    if (!id) return undefined;
    const client = await clientOf(id);
    if (!client) return undefined;
    if (client.secret !== undefined && client.secret !== secret) return undefined;
    return id;
  }

  function toolServer(grant: Grant) {
    const server = new Server({ name: 'oauth-tools', version: '1.0.0' }, { capabilities: { tools: {} } });
    server.setRequestHandler(ListToolsRequestSchema, async () => ({
      tools: [
        { name: 'whoami', description: 'Who the token belongs to, and its scope', inputSchema: { type: 'object', properties: {} } },
        { name: 'admin_report', description: 'Needs the tools:admin scope', inputSchema: { type: 'object', properties: {} } },
      ],
    }));
    server.setRequestHandler(CallToolRequestSchema, async (request) => ({
      content: [{ type: 'text', text: JSON.stringify({ tool: request.params.name, client: grant.clientId, scope: grant.scope }) }],
    }));
    return server;
  }

  async function mcp(req: IncomingMessage, res: ServerResponse) {
    const token = /^Bearer (.+)$/i.exec(req.headers.authorization ?? '')?.[1];
    const grant = token ? accessTokens.get(token) : undefined;
    if (!grant || grant.revoked || grant.expiresAt < Date.now()) {
      seen.unauthorized++;
      await readBody(req);
      return json(res, 401, { error: 'invalid_token' }, { 'www-authenticate': `Bearer resource_metadata="${prmUrl()}", scope="${BASE_SCOPE}"` });
    }
    const text = req.method === 'POST' ? await readBody(req) : '';
    const body = text ? (JSON.parse(text) as { method?: string; params?: { name?: string } }) : undefined;
    if (body?.method === 'tools/call' && body.params?.name === 'admin_report' && !grant.scope.split(' ').includes(ADMIN_SCOPE)) {
      seen.insufficientScope++;
      return json(res, 403, { error: 'insufficient_scope' }, { 'www-authenticate': `Bearer error="insufficient_scope", scope="${BASE_SCOPE} ${ADMIN_SCOPE}", resource_metadata="${prmUrl()}"` });
    }
    const sessionId = req.headers['mcp-session-id'];
    let transport = typeof sessionId === 'string' ? sessions.get(sessionId) : undefined;
    if (!transport) {
      if (sessionId !== undefined) return json(res, 404, { jsonrpc: '2.0', error: { code: -32001, message: 'Session not found' }, id: null });
      const created = new StreamableHTTPServerTransport({ sessionIdGenerator: () => crypto.randomUUID(), onsessioninitialized: (id) => void sessions.set(id, created) });
      created.onclose = () => void (created.sessionId && sessions.delete(created.sessionId));
      await toolServer(grant).connect(created);
      transport = created;
    }
    await transport.handleRequest(req, res, body);
  }

  function consentPage(id: string, clientId: string, scope: string) {
    return `<!doctype html><html><head><title>Authorize</title></head><body>
<h1>Allow ${escapeHtml(clientId)} to use the tools?</h1><p>Scope: <code>${escapeHtml(scope)}</code></p>
<form method="post" action="/authorize/decide"><input type="hidden" name="request" value="${id}">
<button name="decision" value="allow">Allow</button> <button name="decision" value="deny">Deny</button></form></body></html>`;
  }

  const http = createServer(async (req, res) => {
    try {
      const url = new URL(req.url ?? '/', origin);
      if (url.pathname === `/.well-known/oauth-protected-resource${RESOURCE_PATH}`) {
        return json(res, 200, { resource: resource(), authorization_servers: [origin], scopes_supported: [BASE_SCOPE, ADMIN_SCOPE], bearer_methods_supported: ['header'] });
      }
      if (url.pathname === '/.well-known/oauth-authorization-server') {
        seen.authorizationServerMetadata++;
        return json(res, 200, {
          issuer: origin,
          authorization_endpoint: `${origin}/authorize`,
          token_endpoint: `${origin}/token`,
          ...(features.registration ? { registration_endpoint: `${origin}/register` } : {}),
          revocation_endpoint: `${origin}/revoke`,
          response_types_supported: ['code'],
          grant_types_supported: ['authorization_code', 'refresh_token'],
          code_challenge_methods_supported: ['S256'],
          token_endpoint_auth_methods_supported: ['none', 'client_secret_basic', 'client_secret_post'],
          scopes_supported: [BASE_SCOPE, ADMIN_SCOPE],
          client_id_metadata_document_supported: features.metadataDocuments,
          authorization_response_iss_parameter_supported: true,
        });
      }
      if (url.pathname === RESOURCE_PATH) return await mcp(req, res);
      if (url.pathname === '/authorize' && req.method === 'GET') {
        const q = url.searchParams;
        seen.authorizeRequests.push(q);
        const clientId = q.get('client_id') ?? '';
        const client = await clientOf(clientId);
        const redirectUri = q.get('redirect_uri') ?? '';
        if (!client || !client.redirectUris.includes(redirectUri)) return json(res, 400, { error: 'invalid_client' });
        if (q.get('response_type') !== 'code' || q.get('code_challenge_method') !== 'S256' || !q.get('code_challenge')) return json(res, 400, { error: 'invalid_request' });
        if (q.get('resource') !== resource()) return json(res, 400, { error: 'invalid_target' });
        const id = random();
        pending.set(id, { clientId, redirectUri, state: q.get('state') ?? '', challenge: q.get('code_challenge')!, scope: q.get('scope') ?? BASE_SCOPE, resource: q.get('resource')! });
        return void res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(consentPage(id, clientId, q.get('scope') ?? BASE_SCOPE));
      }
      if (url.pathname === '/authorize/decide' && req.method === 'POST') {
        const form = new URLSearchParams(await readBody(req));
        const request = pending.get(form.get('request') ?? '');
        if (!request) return json(res, 400, { error: 'invalid_request' });
        pending.delete(form.get('request')!);
        const back = new URL(request.redirectUri);
        back.searchParams.set('state', request.state);
        back.searchParams.set('iss', behaviour.issOverride ?? origin);
        if (form.get('decision') !== 'allow') back.searchParams.set('error', 'access_denied');
        else {
          const code = random();
          codes.set(code, { clientId: request.clientId, redirectUri: request.redirectUri, challenge: request.challenge, scope: request.scope, resource: request.resource });
          back.searchParams.set('code', code);
        }
        return void res.writeHead(302, { location: back.href }).end();
      }
      if (url.pathname === '/token' && req.method === 'POST') {
        const form = new URLSearchParams(await readBody(req));
        seen.tokenRequests.push(form);
        const clientId = await authenticate(req, form);
        if (!clientId) return json(res, 401, { error: 'invalid_client' });
        if (form.get('grant_type') === 'authorization_code') {
          const code = codes.get(form.get('code') ?? '');
          codes.delete(form.get('code') ?? '');
          if (!code || code.clientId !== clientId || code.redirectUri !== form.get('redirect_uri') || s256(form.get('code_verifier') ?? '') !== code.challenge) {
            return json(res, 400, { error: 'invalid_grant' });
          }
          if (form.get('resource') !== code.resource) return json(res, 400, { error: 'invalid_target' });
          return json(res, 200, issue({ clientId, scope: code.scope, family: random() }));
        }
        if (form.get('grant_type') === 'refresh_token') {
          const old = refreshTokens.get(form.get('refresh_token') ?? '');
          if (!old || old.clientId !== clientId || old.revoked || behaviour.refuseRefresh) return json(res, 400, { error: 'invalid_grant', error_description: 'The refresh token is not valid.' });
          if (old.used) {
            // Reuse of a rotated refresh token: the whole family is revoked (OAuth 2.1 §4.3.1).
            revokeFamily(old.family);
            return json(res, 400, { error: 'invalid_grant', error_description: 'The refresh token was already used.' });
          }
          old.used = true;
          seen.refreshes++;
          return json(res, 200, issue({ clientId, scope: old.scope, family: old.family }));
        }
        return json(res, 400, { error: 'unsupported_grant_type' });
      }
      if (url.pathname === '/register' && req.method === 'POST' && features.registration) {
        const body = JSON.parse(await readBody(req)) as { redirect_uris?: string[]; token_endpoint_auth_method?: string };
        seen.registrations++;
        await behaviour.registrationGate;
        const clientId = `dyn-${random()}`;
        clients.set(clientId, { redirectUris: body.redirect_uris ?? [] });
        return json(res, 201, { ...body, client_id: clientId, client_id_issued_at: Math.floor(Date.now() / 1000) });
      }
      if (url.pathname === '/revoke' && req.method === 'POST') {
        const form = new URLSearchParams(await readBody(req));
        if (!(await authenticate(req, form))) return json(res, 401, { error: 'invalid_client' });
        const token = form.get('token') ?? '';
        const found = accessTokens.get(token) ?? refreshTokens.get(token);
        if (found) {
          revokeFamily(found.family);
          seen.revoked.push(form.get('token_type_hint') ?? 'unknown');
        }
        return void res.writeHead(200).end();
      }
      json(res, 404, { error: 'not_found' });
    } catch (err) {
      if (!res.headersSent) json(res, 500, { error: 'server_error', error_description: String(err) });
    }
  });
  await new Promise<void>((resolve, reject) => {
    http.once('error', reject);
    http.listen(0, '127.0.0.1', resolve);
  });
  origin = `http://127.0.0.1:${(http.address() as AddressInfo).port}`;

  return {
    origin,
    url: `${origin}${RESOURCE_PATH}`,
    seen,
    behaviour,
    /** The access tokens issued so far stop working (as if they expired early). */
    expireAccessTokens() {
      for (const t of accessTokens.values()) t.expiresAt = 0;
    },
    /** Submits the consent page of an authorization URL, as the admin's browser would; returns where the browser is sent back to. */
    async consent(authorizationUrl: string, decision: 'allow' | 'deny' = 'allow'): Promise<string> {
      const page = await fetch(authorizationUrl);
      const html = await page.text();
      const id = /name="request" value="([^"]+)"/.exec(html)?.[1];
      if (!id) throw new Error(`no consent form (${page.status}): ${html}`);
      const answer = await fetch(`${origin}/authorize/decide`, { method: 'POST', body: new URLSearchParams({ request: id, decision }), redirect: 'manual' });
      return answer.headers.get('location') ?? '';
    },
    async close() {
      for (const t of sessions.values()) await t.close().catch(() => {});
      http.closeAllConnections();
      await new Promise<void>((resolve) => http.close(() => resolve()));
    },
  };
}

export type OAuthToolServer = Awaited<ReturnType<typeof startOAuthToolServer>>;
