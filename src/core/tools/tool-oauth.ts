/**
 * Tool servers that sign in with OAuth 2.1 (issue 27; docs/tools.md#tool-servers-that-sign-in-with-oauth). An http tool server that
 * answers 401 with a Bearer challenge needs an admin's consent: Switchboard discovers the server's
 * protected resource metadata (RFC 9728) and its authorization server's metadata (RFC 8414),
 * identifies itself with the Client ID Metadata Document it serves (dynamic registration, RFC 7591,
 * as the fallback; a pre-registered client as an option), and sends the admin to the authorization
 * endpoint with PKCE (S256), `state` and the `resource` indicator (RFC 8707). The callback checks
 * `iss` (RFC 9207) and exchanges the code. Tokens are sealed under the server and the issuer, used
 * by the hub's transport (`bearerFor`), refreshed before they expire by one instance at a time (a
 * conditional UPDATE claims the refresh), and revocable (RFC 7009).
 *
 * The SDK's client-side OAuth functions do the protocol's steps; this module keeps the state.
 */
import crypto from 'node:crypto';
import type { AuditRow } from '../audit/audit.js';
import type { Logger } from 'pino';
import type { McpServerOAuthRow, McpServerRow } from '../../db/schema.js';
import { ConflictError, UpstreamError, ValidationError } from '../../errors.js';
import type { AddressGuardOptions } from '../../lib/address-guard.js';
import type { Cipher } from '../../lib/cipher.js';
import type { Clock } from '../../lib/clock.js';
import { guardedFetch } from '../../lib/guarded-fetch.js';
import { createRegistrations, REGISTER_TIMEOUT_MS } from './tool-oauth-registration.js';
import { awaitingConsent, type ToolOAuthStore } from './tool-oauth.store.js';

type AuthSdk = typeof import('@modelcontextprotocol/client');
let authSdk: Promise<AuthSdk> | undefined;
/** The client SDK's OAuth functions (the hub's own SDK), imported at the first sign-in rather than at every start. */
const loadAuthSdk = () => (authSdk ??= import('@modelcontextprotocol/client'));

/** The path of the Client ID Metadata Document and of the callback, under the public URL. */
export const CLIENT_DOCUMENT_PATH = '/oauth/client.json';
export const CALLBACK_PATH = '/oauth/callback';

/** How long an authorization request waits for the admin's consent. */
export const PENDING_TTL_MS = 10 * 60_000;
/** How long one instance's claim on a refresh lasts should it die while refreshing. */
const REFRESH_CLAIM_MS = 30_000;
/** How long an instance waits for another's refresh before giving up on this call. */
const REFRESH_WAIT_MS = 10_000;

export type ClientRegistration = 'metadata_document' | 'dynamic' | 'preregistered';

/** Thrown to a tool call or a connection when the server needs an admin's (new) consent. */
export class ConsentRequired extends UpstreamError {
  constructor(
    server: string,
    why: string,
    /** `sign-in`: nothing can be sent until an admin connects it; `scope`: only calls needing more scope fail. */
    readonly kind: 'sign-in' | 'scope' = 'sign-in',
  ) {
    super(`${server} needs an admin to connect it (Connect in the console's Tools page, or POST /api/mcp/servers/:id/oauth/authorize): ${why}`);
  }
}

/** The client Switchboard is to the authorization server (sealed under the server id). */
interface ClientInfo {
  clientId: string;
  clientSecret?: string | undefined;
  /** The authorization server this client belongs to; null for a pre-registered one not used yet. */
  issuer: string | null;
  /** What the token and revocation requests need, remembered from discovery. */
  tokenEndpoint?: string | undefined;
  revocationEndpoint?: string | undefined;
  authMethods?: string[] | undefined;
  resource?: string | undefined;
}

interface Tokens {
  accessToken: string;
  refreshToken?: string | undefined;
}

/** A pending authorization request (sealed under its state's hash). */
interface PendingRequest {
  verifier: string;
  redirectUri: string;
  resource: string | undefined;
  scope: string | undefined;
  issuer: string;
  issParameter: boolean;
  method: ClientRegistration;
  client: ClientInfo;
}

/** What the API shows of a server's OAuth sign-in. */
export interface ToolOAuthView {
  status: 'needs_consent' | 'connected' | 'error';
  error: string | null;
  issuer: string | null;
  clientRegistration: ClientRegistration | null;
  scope: string | null;
  /** Asked for by the server's last challenge, not granted yet (a scope step-up waits for consent). */
  requestedScope: string | null;
  expiresAt: string | null;
}

/** What the hub's transport uses: the token to send, and what to do when the server refuses it. */
export interface BearerSource {
  /** The access token to send, refreshed first when due; null when not signed in. */
  token(): Promise<string | null>;
  /**
   * The server answered `status` with this `WWW-Authenticate` to a request that carried `sent`:
   * resolves to a token to retry with once, or throws ConsentRequired.
   */
  challenged(status: 401 | 403, header: string | null, sent: string | null): Promise<string>;
}

export interface ToolOAuthDeps {
  store: ToolOAuthStore;
  cipher: Cipher;
  clock: Clock;
  logger: Logger;
}

const sha256 = (value: string) => crypto.createHash('sha256').update(value).digest('hex');
const unionScope = (...scopes: (string | null | undefined)[]) => {
  const all = new Set(scopes.flatMap((s) => (s ? s.split(/\s+/).filter(Boolean) : [])));
  return all.size > 0 ? [...all].join(' ') : null;
};

/** A `WWW-Authenticate: Bearer ...` parameter (quoted or not). */
function challengeParam(header: string | null, name: string): string | undefined {
  if (!header || !/^\s*bearer\b/i.test(header)) return undefined;
  const m = new RegExp(`(?:^|[\\s,])${name}=(?:"([^"]*)"|([^\\s,]+))`, 'i').exec(header);
  return m ? (m[1] ?? m[2]) : undefined;
}

export const isBearerChallenge = (header: string | null) => header !== null && /^\s*bearer\b/i.test(header);

/** Client ID Metadata Documents are https URLs; a loopback base is allowed for local setups and tests. */
function metadataDocumentUsable(base: string): boolean {
  const url = new URL(base);
  return url.protocol === 'https:' || ['localhost', '127.0.0.1', '[::1]'].includes(url.hostname);
}

/** RFC 8414 §3.3: the metadata's `issuer` is the URL it was found under (a trailing "/" aside). */
function sameIssuer(a: string, b: string): boolean {
  const strip = (s: string) => s.replace(/\/+$/, '');
  return strip(a) === strip(b);
}

/** RFC 9728 §3.3: the metadata's `resource` names the server asked: same origin, and a path the server's is under. */
function resourceMatches(resource: string, serverUrl: string): boolean {
  try {
    const r = new URL(resource);
    const s = new URL(serverUrl);
    const path = r.pathname.endsWith('/') ? r.pathname : `${r.pathname}/`;
    return r.origin === s.origin && (s.pathname === r.pathname || `${s.pathname}/`.startsWith(path));
  } catch {
    return false;
  }
}

/** The OAuth error code of an authorization server's error answer (the SDK's `OAuthError`), if it is one. */
function oauthCode(err: unknown): string | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  return err instanceof Error && typeof code === 'string' && /^[a-z_]+$/.test(code) ? code : undefined;
}

function oauthMessage(err: unknown): string {
  const code = oauthCode(err);
  const text = err instanceof Error ? err.message : String(err);
  return code ? `${code}${text ? `: ${text}` : ''}` : text;
}

/** An OAuth error answer (invalid_grant and its kin), as opposed to the authorization server being unreachable or failing. */
function refusedByServer(err: unknown): boolean {
  const code = oauthCode(err);
  return code !== undefined && code !== 'server_error' && code !== 'temporarily_unavailable';
}

export function createToolOAuth({ store, cipher, clock, logger }: ToolOAuthDeps) {
  const clientContext = (serverId: string) => `mcp-oauth-client:${serverId}`;
  const tokensContext = (serverId: string, issuer: string) => `mcp-oauth-tokens:${serverId}:${issuer}`;
  const openClient = (row: Pick<McpServerOAuthRow, 'server_id' | 'client'>): ClientInfo | null =>
    row.client ? (JSON.parse(cipher.decrypt(row.client, clientContext(row.server_id))) as ClientInfo) : null;
  const sealClient = (serverId: string, client: ClientInfo) => cipher.encrypt(JSON.stringify(client), clientContext(serverId));
  const openTokens = (row: McpServerOAuthRow): Tokens | null =>
    row.tokens && row.issuer ? (JSON.parse(cipher.decrypt(row.tokens, tokensContext(row.server_id, row.issuer))) as Tokens) : null;
  const nowMs = () => clock.now().getTime();
  const registrations = createRegistrations({
    store,
    clock,
    logger,
    seal: sealClient,
    open: (serverId, sealed) => openClient({ server_id: serverId, client: sealed }) as ClientInfo & { issuer: string },
    sameIssuer,
  });

  /** The columns a token response sets: sealed tokens, scope, expiry and when to refresh. */
  function tokenColumns(serverId: string, issuer: string, answer: { access_token: string; refresh_token?: string | undefined; expires_in?: number | undefined; scope?: string | undefined }, scope: string | null) {
    const now = nowMs();
    const lifetime = answer.expires_in !== undefined ? answer.expires_in * 1000 : null;
    const tokens: Tokens = { accessToken: answer.access_token, ...(answer.refresh_token ? { refreshToken: answer.refresh_token } : {}) };
    return {
      tokens: cipher.encrypt(JSON.stringify(tokens), tokensContext(serverId, issuer)),
      scope: answer.scope ?? scope,
      expires_ms: lifetime === null ? null : now + lifetime,
      refresh_at_ms: lifetime === null ? null : now + lifetime - Math.min(60_000, lifetime / 4),
      updated_at: new Date(now).toISOString(),
    };
  }

  /** The token endpoint's view of a stored client, for the SDK's token functions. */
  function tokenRequestOf(client: ClientInfo) {
    return {
      metadata: {
        issuer: client.issuer ?? '',
        authorization_endpoint: '',
        token_endpoint: client.tokenEndpoint ?? '',
        response_types_supported: ['code'],
        ...(client.authMethods ? { token_endpoint_auth_methods_supported: client.authMethods } : {}),
      },
      clientInformation: { client_id: client.clientId, ...(client.clientSecret ? { client_secret: client.clientSecret } : {}) },
      ...(client.resource ? { resource: new URL(client.resource) } : {}),
    };
  }

  /** In this process: the refresh under way per server, so concurrent calls wait for one. */
  const refreshing = new Map<string, Promise<McpServerOAuthRow | undefined>>();

  /**
   * Refreshes the tokens of `row` (its version) unless another instance does: returns the row with
   * the tokens to use. Throws ConsentRequired when the authorization server refuses the refresh
   * (the tokens are dropped and the server waits for consent), UpstreamError when it is unreachable.
   */
  function refresh(server: McpServerRow, row: McpServerOAuthRow, guard: AddressGuardOptions): Promise<McpServerOAuthRow | undefined> {
    const key = `${row.server_id}@${row.version}`;
    let run = refreshing.get(key);
    if (!run) {
      run = refreshOnce(server, row, guard).finally(() => refreshing.delete(key));
      refreshing.set(key, run);
    }
    return run;
  }

  async function refreshOnce(server: McpServerRow, row: McpServerOAuthRow, guard: AddressGuardOptions): Promise<McpServerOAuthRow | undefined> {
    const tokens = openTokens(row);
    const client = openClient(row);
    if (!tokens?.refreshToken || !client?.tokenEndpoint || !row.issuer) {
      // Only over these tokens: a consent completed meanwhile stays.
      await store.updateIfVersion(row.server_id, row.version, { status: 'needs_consent', error: 'The access token expired and there is no refresh token.', tokens: null, updated_at: clock.now().toISOString() });
      throw new ConsentRequired(server.name, 'the access token expired and there is no refresh token');
    }
    if (!(await store.claimRefresh(row.server_id, row.version, nowMs(), nowMs() + REFRESH_CLAIM_MS))) return waitForRefresh(server, row);
    let answer;
    try {
      const sdk = await loadAuthSdk();
      answer = await sdk.refreshAuthorization(row.issuer, { ...tokenRequestOf(client), refreshToken: tokens.refreshToken, fetchFn: guardedFetch(guard) });
    } catch (err) {
      if (!refusedByServer(err)) {
        await store.releaseRefresh(row.server_id, row.version);
        throw new UpstreamError(`${server.name}'s authorization server could not refresh the sign-in: ${oauthMessage(err)}`);
      }
      const why = `the authorization server refused to refresh the sign-in (${oauthMessage(err)})`;
      await store.updateIfVersion(row.server_id, row.version, {
        refreshing_until_ms: null,
        status: 'needs_consent',
        error: `Consent needed: ${why}.`,
        // The next consent asks for what was granted.
        challenge_scope: unionScope(row.challenge_scope, row.scope),
        tokens: null,
        expires_ms: null,
        refresh_at_ms: null,
        updated_at: clock.now().toISOString(),
      });
      logger.warn({ server: server.name, error: oauthMessage(err) }, 'tool server sign-in could not be refreshed');
      throw new ConsentRequired(server.name, why);
    }
    const columns = tokenColumns(row.server_id, row.issuer, answer, row.scope);
    const ended = row.status === 'error';
    // Over the tokens refreshed only: revoked or re-consented while refreshing, what is stored now wins.
    if (await store.updateIfVersion(row.server_id, row.version, { ...columns, refreshing_until_ms: null, status: ended ? 'connected' : row.status, error: ended ? null : row.error })) {
      logger.info({ server: server.name }, 'tool server sign-in refreshed');
    }
    return store.find(row.server_id);
  }

  /** Another instance claimed the refresh: waits until its tokens are stored (or its claim lapses). */
  async function waitForRefresh(server: McpServerRow, row: McpServerOAuthRow): Promise<McpServerOAuthRow | undefined> {
    const until = Date.now() + REFRESH_WAIT_MS;
    for (;;) {
      const now = await store.find(row.server_id);
      if (!now || now.version !== row.version) return now;
      if (now.refreshing_until_ms === null || now.refreshing_until_ms < nowMs()) return now;
      if (Date.now() >= until) throw new UpstreamError(`${server.name}'s sign-in is being refreshed by another instance; try again.`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  const accessTokenOf = (r: McpServerOAuthRow | undefined) => (r ? (openTokens(r)?.accessToken ?? null) : null);

  /**
   * Records a challenge to `refused` (the token the server turned down; null when none was sent):
   * the server waits for consent (for `scope` when it named one). Records nothing and answers false
   * when the sign-in changed since that token was read (a consent, a refresh): those tokens are to be tried.
   */
  async function challengedBy(server: McpServerRow, header: string | null, error: string, refused: string | null, keepTokens: boolean): Promise<boolean> {
    const existing = await store.find(server.id);
    const current = accessTokenOf(existing);
    if (current !== null && current !== refused) return false;
    const resourceMetadata = challengeParam(header, 'resource_metadata') ?? existing?.resource_metadata_url ?? null;
    const scope = challengeParam(header, 'scope');
    const now = clock.now().toISOString();
    if (existing) {
      return store.updateIfVersion(server.id, existing.version, {
        status: 'needs_consent',
        // Already waiting without tokens (signed out, a refused refresh): what was said then stays, nothing after a clean sign-out.
        error: existing.status === 'needs_consent' && !existing.tokens ? existing.error : error,
        resource_metadata_url: resourceMetadata,
        challenge_scope: unionScope(existing.scope, existing.challenge_scope, scope),
        ...(keepTokens ? {} : { tokens: null, expires_ms: null, refresh_at_ms: null }),
        updated_at: now,
      });
    }
    await store.upsert({ ...awaitingConsent(server, now), error, resource_metadata_url: resourceMetadata, challenge_scope: scope ?? null });
    return true;
  }

  return {
    /** The sign-in of these servers, for the API (servers without one are absent). */
    async views(workspaceId: string, serverIds: string[]): Promise<Map<string, ToolOAuthView>> {
      const rows = await store.findMany(workspaceId, serverIds);
      return new Map(
        rows.map((r) => [
          r.server_id,
          {
            status: r.status,
            error: r.error,
            issuer: r.issuer,
            clientRegistration: r.client_method,
            scope: r.tokens ? r.scope : null,
            requestedScope: r.status === 'needs_consent' ? r.challenge_scope : null,
            expiresAt: r.tokens && r.expires_ms !== null ? new Date(r.expires_ms).toISOString() : null,
          },
        ]),
      );
    },

    /** Keeps a pre-registered client (its id and secret sealed) for a server registered with one. */
    async preregister(server: McpServerRow, clientId: string, clientSecret: string | undefined): Promise<void> {
      await store.upsert({
        ...awaitingConsent(server, clock.now().toISOString()),
        client_method: 'preregistered',
        client: sealClient(server.id, { clientId, clientSecret, issuer: null }),
      });
    },

    /** What the hub's transport of this server uses (see BearerSource). */
    bearerFor(server: McpServerRow, guard: AddressGuardOptions): BearerSource {
      let row: McpServerOAuthRow | undefined;
      let loaded = false;
      const current = async () => {
        if (!loaded) {
          row = await store.find(server.id);
          loaded = true;
        }
        return row;
      };
      const tokenOf = accessTokenOf;
      return {
        async token() {
          const r = await current();
          if (!r?.tokens) return null;
          if (r.refresh_at_ms !== null && nowMs() >= r.refresh_at_ms) {
            try {
              row = await refresh(server, r, guard);
            } catch (err) {
              // Still valid: use it, and refresh on a later call.
              if (!(err instanceof ConsentRequired) && r.expires_ms !== null && nowMs() < r.expires_ms) return tokenOf(r);
              throw err;
            }
          }
          return tokenOf(row);
        },
        async challenged(status, header, sent) {
          /** The sign-in changed since `sent` was read: its token, to retry with once. */
          const changed = async () => {
            row = await store.find(server.id);
            loaded = true;
            const token = tokenOf(row);
            return token !== null && token !== sent ? token : null;
          };
          if (status === 403) {
            const scope = challengeParam(header, 'scope');
            const asked = `it asks for more scope${scope ? ` (${scope})` : ''}`;
            if (!(await challengedBy(server, header, `The server asks for more scope${scope ? ` (${scope})` : ''}: an admin connects it again to grant it.`, sent, true))) {
              const token = await changed();
              if (token) return token;
            }
            loaded = false;
            throw new ConsentRequired(server.name, asked, 'scope');
          }
          // What another instance stored meanwhile may be newer than what was sent.
          const fresh = await store.find(server.id);
          row = fresh;
          loaded = true;
          const stored = tokenOf(fresh);
          if (fresh && stored && stored !== sent) return stored;
          if (fresh?.tokens && sent !== null) {
            row = await refresh(server, fresh, guard);
            const next = tokenOf(row);
            if (next && next !== sent) return next;
          }
          if (!(await challengedBy(server, header, sent === null ? 'The server asks for OAuth sign-in.' : 'The server refused the sign-in.', sent, false))) {
            const token = await changed();
            if (token) return token;
          }
          loaded = false;
          throw new ConsentRequired(server.name, sent === null ? 'it asks for OAuth sign-in' : 'it refused the sign-in');
        },
      };
    },

    /**
     * Starts a sign-in: discovery, the client (metadata document, else dynamic registration, or the
     * pre-registered one), PKCE and `state`. Returns the URL to send the admin to.
     */
    /** `audit`: the sign-in's event, written with its pending request. */
    async begin(server: McpServerRow, base: string, guard: AddressGuardOptions, audit?: AuditRow): Promise<{ authorizationUrl: string; expiresAt: string }> {
      if (server.transport !== 'http' || !server.url) throw new ConflictError('Only http tool servers sign in with OAuth.');
      const sdk = await loadAuthSdk();
      const fetchFn = guardedFetch(guard);
      const row = await store.find(server.id);
      const fail = (why: string) => new UpstreamError(`${server.name}: ${why}`);
      let info;
      try {
        info = await sdk.discoverOAuthServerInfo(server.url, { ...(row?.resource_metadata_url ? { resourceMetadataUrl: new URL(row.resource_metadata_url) } : {}), fetchFn });
      } catch (err) {
        throw fail(`its authorization server could not be discovered (${oauthMessage(err)})`);
      }
      const metadata = info.authorizationServerMetadata;
      if (!metadata) throw fail(`${info.authorizationServerUrl} publishes no OAuth authorization server metadata`);
      if (!sameIssuer(metadata.issuer, info.authorizationServerUrl)) throw fail(`the authorization server metadata names the issuer ${metadata.issuer}, not ${info.authorizationServerUrl}`);
      if (!metadata.code_challenge_methods_supported?.includes('S256')) throw fail('its authorization server does not support PKCE with S256');
      if (info.resourceMetadata && !resourceMatches(info.resourceMetadata.resource, server.url)) {
        throw fail(`its protected resource metadata is for ${info.resourceMetadata.resource}, not ${server.url}`);
      }
      const issuer = metadata.issuer;
      // Fields of RFC 7009 and RFC 9207 that the SDK's metadata type leaves out.
      const more = metadata as { revocation_endpoint?: string; authorization_response_iss_parameter_supported?: boolean };
      const resource = info.resourceMetadata?.resource ?? server.url;
      const scope = unionScope(row?.challenge_scope) ?? info.resourceMetadata?.scopes_supported?.join(' ') ?? undefined;
      const redirectUri = `${base}${CALLBACK_PATH}`;
      const endpoints = {
        issuer,
        tokenEndpoint: metadata.token_endpoint,
        revocationEndpoint: more.revocation_endpoint,
        authMethods: metadata.token_endpoint_auth_methods_supported,
        resource,
      };

      const stored = row ? openClient(row) : null;
      let method: ClientRegistration;
      let client: ClientInfo;
      if (row?.client_method === 'preregistered' && stored) {
        method = 'preregistered';
        client = { ...stored, ...endpoints };
      } else if (metadata.client_id_metadata_document_supported === true && metadataDocumentUsable(base)) {
        method = 'metadata_document';
        client = { clientId: `${base}${CLIENT_DOCUMENT_PATH}`, ...endpoints };
      } else if (metadata.registration_endpoint) {
        // Once per authorization server: kept when made, and made by one of the consents started together.
        const registration = await registrations.at(server, issuer, async () => {
          const timed: typeof fetchFn = (url, init) => fetchFn(url, { ...init, signal: init?.signal ?? AbortSignal.timeout(REGISTER_TIMEOUT_MS) });
          try {
            const made = await sdk.registerClient(info.authorizationServerUrl, { metadata, clientMetadata: clientMetadataOf(base), ...(scope ? { scope } : {}), fetchFn: timed });
            return { clientId: made.client_id, clientSecret: made.client_secret };
          } catch (err) {
            throw fail(`dynamic client registration failed (${oauthMessage(err)})`);
          }
        });
        method = 'dynamic';
        client = { clientId: registration.clientId, clientSecret: registration.clientSecret, ...endpoints };
      } else {
        throw new ValidationError(
          `${server.name}'s authorization server accepts neither Client ID Metadata Documents nor dynamic registration: register Switchboard there (redirect URI ${redirectUri}) and register this server again with oauth.clientId.`,
        );
      }

      const state = crypto.randomBytes(32).toString('base64url');
      const { authorizationUrl, codeVerifier } = await sdk.startAuthorization(info.authorizationServerUrl, {
        metadata,
        clientInformation: { client_id: client.clientId },
        redirectUrl: redirectUri,
        ...(scope ? { scope } : {}),
        state,
        resource: new URL(resource),
      });
      const request: PendingRequest = {
        verifier: codeVerifier,
        redirectUri,
        resource,
        scope,
        issuer,
        issParameter: more.authorization_response_iss_parameter_supported === true,
        method,
        client,
      };
      const expires = nowMs() + PENDING_TTL_MS;
      const stateHash = sha256(state);
      await store.deleteExpiredPending(nowMs());
      await store.insertPending({
        state_hash: stateHash,
        workspace_id: server.workspace_id,
        server_id: server.id,
        request: cipher.encrypt(JSON.stringify(request), `mcp-oauth-pending:${stateHash}`),
        expires_ms: expires,
      }, audit);
      return { authorizationUrl: authorizationUrl.href, expiresAt: new Date(expires).toISOString() };
    },

    /**
     * The callback: takes the pending request of `state` (once), checks `iss`, exchanges the code and
     * stores the tokens. Returns the server signed in to; throws with a message for the admin.
     */
    async complete(
      query: { state?: string | undefined; code?: string | undefined; iss?: string | undefined; error?: string | undefined; error_description?: string | undefined },
      findServer: (workspaceId: string, serverId: string) => Promise<McpServerRow | undefined>,
      guardOf: (server: McpServerRow) => AddressGuardOptions,
    ): Promise<McpServerRow> {
      if (!query.state) throw new ValidationError('The callback has no state: start again from the console.');
      const stateHash = sha256(query.state);
      const pending = await store.takePending(stateHash);
      if (!pending || pending.expires_ms < nowMs()) throw new ValidationError('This sign-in has expired or was already used: start again from the console.');
      const server = await findServer(pending.workspace_id, pending.server_id);
      if (!server) throw new ValidationError('The tool server of this sign-in was removed.');
      const request = JSON.parse(cipher.decrypt(pending.request, `mcp-oauth-pending:${stateHash}`)) as PendingRequest;
      const refuse = async (why: string): Promise<never> => {
        await store.update(server.id, { status: 'error', error: why, updated_at: clock.now().toISOString() });
        throw new ValidationError(why);
      };
      if (query.error) await refuse(`The authorization server answered ${query.error}${query.error_description ? `: ${query.error_description}` : ''}.`);
      // RFC 9207: an answer from another authorization server (a mix-up attack) is refused.
      if (query.iss !== undefined ? !sameIssuer(query.iss, request.issuer) : request.issParameter) {
        await refuse(`The answer's issuer (${query.iss ?? 'none'}) is not ${request.issuer}: refused.`);
      }
      if (!query.code) await refuse('The callback has no authorization code.');
      const sdk = await loadAuthSdk();
      let answer;
      try {
        answer = await sdk.exchangeAuthorization(request.issuer, {
          ...tokenRequestOf(request.client),
          authorizationCode: query.code!,
          codeVerifier: request.verifier,
          redirectUri: request.redirectUri,
          fetchFn: guardedFetch(guardOf(server)),
        });
      } catch (err) {
        return refuse(`The authorization server refused the code: ${oauthMessage(err)}.`);
      }
      const client: ClientInfo = { ...request.client, issuer: request.issuer };
      await store.upsert({
        server_id: server.id,
        workspace_id: server.workspace_id,
        status: 'connected',
        error: null,
        resource_metadata_url: (await store.find(server.id))?.resource_metadata_url ?? null,
        challenge_scope: null,
        issuer: request.issuer,
        client_method: request.method,
        client: sealClient(server.id, client),
        ...tokenColumns(server.id, request.issuer, answer, request.scope ?? null),
      });
      logger.info({ server: server.name, issuer: request.issuer }, 'tool server signed in');
      return server;
    },

    /**
     * Signs out: the tokens are revoked at the authorization server when it has a revocation
     * endpoint (RFC 7009) and dropped here either way. Returns why revocation failed, or null.
     */
    async revoke(server: McpServerRow, guard: AddressGuardOptions, audit?: AuditRow): Promise<string | null> {
      const row = await store.find(server.id);
      // Never signed in, or signed out already: nothing to revoke or drop.
      if (!row?.tokens) throw new ConflictError(`${server.name} is not signed in with OAuth.`);
      const tokens = openTokens(row);
      const client = openClient(row);
      let failure: string | null = null;
      if (tokens && client?.revocationEndpoint) {
        const fetchFn = guardedFetch(guard);
        for (const [token, hint] of [
          [tokens.refreshToken, 'refresh_token'],
          [tokens.accessToken, 'access_token'],
        ] as const) {
          if (!token) continue;
          const body = new URLSearchParams({ token, token_type_hint: hint, client_id: client.clientId });
          const headers: Record<string, string> = { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' };
          if (client.clientSecret) {
            body.delete('client_id');
            headers.authorization = `Basic ${Buffer.from(`${encodeURIComponent(client.clientId)}:${encodeURIComponent(client.clientSecret)}`).toString('base64')}`;
          }
          try {
            const res = await fetchFn(client.revocationEndpoint, { method: 'POST', headers, body: body.toString(), signal: AbortSignal.timeout(10_000) });
            await res.body?.cancel();
            if (!res.ok) failure = `the revocation endpoint answered ${res.status}`;
          } catch (err) {
            failure = `the revocation endpoint could not be reached (${oauthMessage(err)})`;
          }
        }
      }
      await store.update(server.id, {
        status: 'needs_consent',
        // `error` says only that revocation failed: a clean sign-out is no error.
        error: failure ? `Signed out; ${failure}, so the tokens may stay valid there until they expire.` : null,
        challenge_scope: unionScope(row.challenge_scope, row.scope),
        tokens: null,
        scope: null,
        expires_ms: null,
        refresh_at_ms: null,
        updated_at: clock.now().toISOString(),
      }, audit);
      return failure;
    },
  };
}

/** The client metadata Switchboard registers with (RFC 7591) or serves as its Client ID Metadata Document. */
export function clientMetadataOf(base: string) {
  return {
    client_name: 'Switchboard',
    client_uri: base,
    redirect_uris: [`${base}${CALLBACK_PATH}`],
    grant_types: ['authorization_code', 'refresh_token'],
    response_types: ['code'],
    token_endpoint_auth_method: 'none',
  };
}

export function clientMetadataDocument(base: string) {
  return { client_id: `${base}${CLIENT_DOCUMENT_PATH}`, ...clientMetadataOf(base) };
}

export type ToolOAuth = ReturnType<typeof createToolOAuth>;
