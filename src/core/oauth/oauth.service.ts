/**
 * The OAuth 2.1 authorization server behind `/mcp` (issue 15): clients (registered or metadata
 * documents), consent requests waiting for a person, grants, single-use authorization codes bound
 * to a PKCE challenge, short-lived access tokens and rotating refresh tokens with reuse detection.
 * Every code and token is random base62 stored as a SHA-256 hash; none is ever logged.
 */
import crypto from 'node:crypto';
import {
  InvalidClientError,
  InvalidGrantError,
  InvalidRequestError,
  InvalidScopeError,
  InvalidTargetError,
  UnauthorizedClientError,
  UnsupportedGrantTypeError,
} from '@modelcontextprotocol/sdk/server/auth/errors.js';
import type { OAuthGrantRow } from '../../db/schema.js';
import { NotFoundError } from '../../errors.js';
import type { Clock } from '../../lib/clock.js';
import { type IdGenerator, randomBase62 } from '../../lib/ids.js';
import { mapPage, type Page, type PageRequest } from '../../lib/pagination.js';
import { auditRow } from '../audit/audit.js';
import type { Actor, ActorOrigin } from '../auth/actor.js';
import type { AuthService } from '../auth/auth.service.js';
import { lowerRole, roleOfScopes } from '../auth/roles.js';
import { hasScope, type Scope } from '../auth/keys.js';
import { type ClientInfo, ClientMetadataError, createMetadataDocuments, isMetadataDocumentUrl, validateClientMetadata } from './client-metadata.js';
import type { OAuthStore } from './oauth.store.js';

export const OAUTH_SCOPES = ['read', 'write'] as const;
export type OAuthScope = (typeof OAUTH_SCOPES)[number];

export const CODE_TTL_S = 60;
export const ACCESS_TTL_S = 3_600;
export const REFRESH_TTL_S = 30 * 24 * 3_600;
/** How long a consent page stays answerable. */
export const PENDING_TTL_MS = 10 * 60_000;
const PENDING_MAX = 10_000;
const PENDING_ATTEMPTS = 5;
const REGISTRATION_MAX_CHARS = 16 * 1024;
/** `lastUsedAt` of a grant is written at most this often per grant. */
const TOUCH_EVERY_MS = 60_000;

export const ACCESS_TOKEN = /^sbo_[0-9A-Za-z]{43}$/;
const REFRESH_TOKEN = /^sbr_[0-9A-Za-z]{43}$/;
const CODE = /^sbc_[0-9A-Za-z]{43}$/;
/** RFC 7636 §4.1: 43–128 unreserved characters. */
const VERIFIER = /^[A-Za-z0-9._~-]{43,128}$/;
const CHALLENGE = /^[A-Za-z0-9_-]{43}$/;

const sha256 = (value: string) => crypto.createHash('sha256').update(value).digest('hex');
const constantEqual = (a: string, b: string) => {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && crypto.timingSafeEqual(x, y);
};

/** PKCE S256: BASE64URL(SHA256(verifier)) equals the challenge. */
export function pkceMatches(verifier: string, challenge: string): boolean {
  if (!VERIFIER.test(verifier)) return false;
  return constantEqual(crypto.createHash('sha256').update(verifier).digest('base64url'), challenge);
}

export function isCodeChallenge(value: string): boolean {
  return CHALLENGE.test(value);
}

/** A `scope` parameter as a set of this server's scopes; null when it names any other. Empty/absent → null too. */
export function parseScope(value: string | undefined): OAuthScope[] | null {
  if (value === undefined) return null;
  const parts = value.split(' ').filter(Boolean);
  if (parts.length === 0 || parts.some((p) => !(OAUTH_SCOPES as readonly string[]).includes(p))) return null;
  return OAUTH_SCOPES.filter((s) => parts.includes(s));
}

export const scopeText = (scopes: readonly OAuthScope[]) => OAUTH_SCOPES.filter((s) => scopes.includes(s)).join(' ');

/** An authorization request that passed every check and waits for the person's answer. */
export interface PendingAuthorization {
  id: string;
  csrf: string;
  client: ClientInfo;
  redirectUri: string;
  state: string | undefined;
  codeChallenge: string;
  resource: string;
  scopes: OAuthScope[];
  expiresAtMs: number;
  attempts: number;
}

export interface TokenResponse {
  access_token: string;
  token_type: 'Bearer';
  expires_in: number;
  refresh_token: string;
  scope: string;
}

export interface Grant {
  id: string;
  clientId: string;
  clientName: string;
  scopes: OAuthScope[];
  createdAt: string;
  lastUsedAt: string | null;
}

export interface OAuthServiceDeps {
  store: OAuthStore;
  auth: AuthService;
  clock: Clock;
  ids: IdGenerator;
  metadataDocuments: ReturnType<typeof createMetadataDocuments>;
}

export function createOAuthService({ store, auth, clock, ids, metadataDocuments }: OAuthServiceDeps) {
  const touched = new Map<string, number>();
  const nowIso = () => clock.now().toISOString();
  const later = (seconds: number) => new Date(clock.now().getTime() + seconds * 1000).toISOString();

  function toGrant(row: OAuthGrantRow): Grant {
    return {
      id: row.id,
      clientId: row.client_id,
      clientName: row.client_name,
      scopes: parseScope(row.scope) ?? [],
      createdAt: row.created_at,
      lastUsedAt: row.last_used_at,
    };
  }

  /** The grant's actor, when the grant and its key are still good; scope capped by the key's. */
  async function grantActor(grantId: string, scope: string): Promise<{ actor: Actor; grant: OAuthGrantRow } | null> {
    const grant = await store.findGrant(grantId);
    if (!grant || grant.revoked_at !== null) return null;
    const key = await auth.keyValidSince(grant.key_id, grant.created_at);
    if (!key || key.workspaceId !== grant.workspace_id) return null;
    const scopes: Scope[] = (parseScope(scope) ?? []).filter((s) => hasScope(key.scopes, s));
    if (scopes.length === 0) return null;
    // The grant's scopes cap the key's role as the key's scopes cap its owner's.
    return { actor: { ...key, kind: 'oauth', role: lowerRole(key.role, roleOfScopes(scopes)), scopes, grantId: grant.id }, grant };
  }

  async function issueTokens(grantId: string, familyId: string, resource: string, scopes: OAuthScope[]): Promise<TokenResponse> {
    const access = `sbo_${randomBase62(43)}`;
    const refresh = `sbr_${randomBase62(43)}`;
    const created = nowIso();
    const scope = scopeText(scopes);
    await store.insertTokens([
      { hash: sha256(access), kind: 'access', grant_id: grantId, family_id: familyId, resource, scope, created_at: created, expires_at: later(ACCESS_TTL_S), revoked_at: null, used_at: null },
      { hash: sha256(refresh), kind: 'refresh', grant_id: grantId, family_id: familyId, resource, scope, created_at: created, expires_at: later(REFRESH_TTL_S), revoked_at: null, used_at: null },
    ]);
    return { access_token: access, token_type: 'Bearer', expires_in: ACCESS_TTL_S, refresh_token: refresh, scope };
  }

  return {
    /** RFC 7591: registers a public client; answers its client information (no secret). */
    async registerClient(body: unknown) {
      let metadata;
      try {
        metadata = validateClientMetadata(body, { registration: true });
      } catch (error) {
        if (error instanceof ClientMetadataError) return { error: error.message } as const;
        throw error;
      }
      const issuedAt = Math.floor(clock.now().getTime() / 1000);
      const info = { ...metadata, client_id: `sbk_${randomBase62(32)}`, client_id_issued_at: issuedAt };
      // Registration is open to anyone: what it stores stays small.
      if (JSON.stringify(info).length > REGISTRATION_MAX_CHARS) return { error: `Client metadata may be at most ${REGISTRATION_MAX_CHARS} characters.` } as const;
      await store.insertClient({ client_id: info.client_id, metadata: JSON.stringify(info), created_at: nowIso() });
      return { client: info } as const;
    },

    /** A registered client or a metadata document's; throws ClientMetadataError when there is none. */
    async findClient(clientId: string): Promise<ClientInfo> {
      if (isMetadataDocumentUrl(clientId)) return metadataDocuments.resolve(clientId);
      const row = clientId.length <= 100 ? await store.findClient(clientId) : undefined;
      if (!row) throw new ClientMetadataError('This client is not registered here.');
      const metadata = JSON.parse(row.metadata) as { client_name?: string; redirect_uris: string[]; scope?: string };
      return {
        clientId,
        name: metadata.client_name?.trim() || 'Unnamed client',
        redirectUris: metadata.redirect_uris,
        kind: 'registered',
        scope: metadata.scope,
      };
    },

    /**
     * Keeps a checked authorization request until the person answers (or it expires), in the
     * database: the consent page one instance served may be answered through another (API.md §13).
     */
    async startPending(request: Omit<PendingAuthorization, 'id' | 'csrf' | 'expiresAtMs' | 'attempts'>): Promise<PendingAuthorization> {
      const now = clock.now().getTime();
      const entry: PendingAuthorization = { ...request, id: randomBase62(32), csrf: randomBase62(43), expiresAtMs: now + PENDING_TTL_MS, attempts: 0 };
      const { client, redirectUri, state, codeChallenge, resource, scopes } = entry;
      await store.insertPending(
        {
          id: entry.id,
          csrf_hash: sha256(entry.csrf),
          request: JSON.stringify({ client, redirectUri, state, codeChallenge, resource, scopes }),
          expires_ms: entry.expiresAtMs,
          attempts: 0,
        },
        now,
        PENDING_MAX,
      );
      return entry;
    },

    /** The pending request with this id and CSRF token (both given, both equal), or null. */
    async findPending(id: string, csrf: string): Promise<PendingAuthorization | null> {
      const row = await store.findPending(id);
      if (!row || row.expires_ms <= clock.now().getTime() || !constantEqual(row.csrf_hash, sha256(csrf))) return null;
      const request = JSON.parse(row.request) as Omit<PendingAuthorization, 'id' | 'csrf' | 'expiresAtMs' | 'attempts'>;
      return { ...request, id: row.id, csrf, expiresAtMs: row.expires_ms, attempts: row.attempts };
    },

    /** The person said no: the request is gone. */
    async deny(entry: PendingAuthorization): Promise<void> {
      await store.deletePending(entry.id);
    },

    /**
     * The person said yes with an API key: creates the grant (scope = chosen ∩ asked ∩ the key's)
     * and a code. `null` when the key is not an active key's current secret (the page asks again,
     * a few times at most, counted across instances). A request answered twice at once (two
     * instances) gives one code: the other answer finds it gone.
     */
    async approve(
      entry: PendingAuthorization,
      apiKey: string,
      chosen: OAuthScope[],
      /** The consent form's request (who allowed it, from where), for the `oauth_grant.create` event. */
      origin?: ActorOrigin,
    ): Promise<{ code: string } | { retry: boolean; keyScopes?: Scope[] } | { answered: true }> {
      const key = await auth.authenticateCurrent(apiKey.trim());
      if (!key) {
        const attempts = (await store.failPending(entry.id)) ?? PENDING_ATTEMPTS;
        entry.attempts = attempts;
        if (attempts >= PENDING_ATTEMPTS) await store.deletePending(entry.id);
        return { retry: attempts < PENDING_ATTEMPTS };
      }
      const scopes = chosen.filter((s) => entry.scopes.includes(s) && hasScope(key.scopes, s));
      if (!scopes.includes('read')) return { retry: true, keyScopes: key.scopes };
      if (!(await store.deletePending(entry.id))) return { answered: true };
      const grantId = ids('grt');
      const scope = scopeText(scopes);
      // The grant is a change a person made (their key lets an application act for them): one
      // event, with the key as the actor, in the grant's transaction (API.md §14).
      await store.insertGrant(
        {
          id: grantId,
          workspace_id: key.workspaceId,
          key_id: key.id,
          client_id: entry.client.clientId,
          client_name: entry.client.name,
          scope,
          resource: entry.resource,
          created_at: nowIso(),
          last_used_at: null,
          revoked_at: null,
        },
        auditRow(ids, clock, origin ? { ...key, origin } : key, { action: 'oauth_grant.create', target: { type: 'oauth_grant', id: grantId } }),
      );
      const code = `sbc_${randomBase62(43)}`;
      await store.insertCode({
        hash: sha256(code),
        grant_id: grantId,
        client_id: entry.client.clientId,
        redirect_uri: entry.redirectUri,
        code_challenge: entry.codeChallenge,
        resource: entry.resource,
        scope,
        expires_at: later(CODE_TTL_S),
        used_at: null,
      });
      return { code };
    },

    /** grant_type=authorization_code. Throws the SDK's OAuth errors. */
    async exchangeCode(params: { client_id?: string; code?: string; redirect_uri?: string; code_verifier?: string; resource?: string }): Promise<TokenResponse> {
      const { client_id: clientId, code, redirect_uri: redirectUri, code_verifier: verifier, resource } = params;
      if (!clientId) throw new InvalidClientError('client_id is required.');
      if (!code || !redirectUri || !verifier) throw new InvalidRequestError('code, redirect_uri and code_verifier are required.');
      const hash = CODE.test(code) ? sha256(code) : null;
      const row = hash ? await store.findCode(hash) : undefined;
      if (!hash || !row) throw new InvalidGrantError('The authorization code is unknown.');
      if (row.client_id !== clientId) throw new InvalidGrantError('The authorization code was issued to another client.');
      // One exchange per code, whatever its outcome: a second one is a replay and ends what the code issued.
      if (!(await store.useCode(hash, nowIso()))) {
        await store.revokeGrant(row.grant_id, nowIso());
        throw new InvalidGrantError('The authorization code was already used; the tokens it issued are revoked.');
      }
      if (row.expires_at <= nowIso()) throw new InvalidGrantError('The authorization code has expired.');
      if (row.redirect_uri !== redirectUri) throw new InvalidGrantError('redirect_uri differs from the authorization request.');
      if (!pkceMatches(verifier, row.code_challenge)) throw new InvalidGrantError('The code_verifier does not match the code_challenge.');
      if (resource !== undefined && resource !== row.resource) throw new InvalidTargetError('resource differs from the authorization request.');
      const valid = await grantActor(row.grant_id, row.scope);
      if (!valid) throw new InvalidGrantError('The grant is no longer valid (revoked, or its API key was revoked or rotated).');
      void touch(row.grant_id);
      return issueTokens(row.grant_id, crypto.randomUUID(), row.resource, parseScope(row.scope) ?? []);
    },

    /** grant_type=refresh_token: rotates; a used refresh token again revokes its whole family. */
    async refresh(params: { client_id?: string; refresh_token?: string; resource?: string; scope?: string }): Promise<TokenResponse> {
      const { client_id: clientId, refresh_token: token, resource, scope } = params;
      if (!clientId) throw new InvalidClientError('client_id is required.');
      if (!token) throw new InvalidRequestError('refresh_token is required.');
      const hash = REFRESH_TOKEN.test(token) ? sha256(token) : null;
      const row = hash ? await store.findToken(hash) : undefined;
      if (!hash || !row || row.kind !== 'refresh') throw new InvalidGrantError('The refresh token is unknown.');
      const grant = await store.findGrant(row.grant_id);
      if (!grant || grant.client_id !== clientId) throw new InvalidGrantError('The refresh token was issued to another client.');
      if (row.revoked_at !== null) throw new InvalidGrantError('The refresh token was revoked.');
      if (row.used_at !== null || !(await store.useToken(hash, nowIso()))) {
        await store.revokeFamily(row.family_id, nowIso());
        throw new InvalidGrantError('The refresh token was already used; every token of its family is revoked.');
      }
      if (row.expires_at <= nowIso()) throw new InvalidGrantError('The refresh token has expired.');
      if (resource !== undefined && resource !== row.resource) throw new InvalidTargetError('resource differs from the one the token was issued for.');
      let scopes = parseScope(row.scope) ?? [];
      if (scope !== undefined) {
        const asked = parseScope(scope);
        if (!asked || asked.some((s) => !scopes.includes(s))) throw new InvalidScopeError('scope may only narrow the granted scope.');
        scopes = asked;
      }
      const valid = await grantActor(row.grant_id, scopeText(scopes));
      if (!valid) throw new InvalidGrantError('The grant is no longer valid (revoked, or its API key was revoked or rotated).');
      void touch(row.grant_id);
      return issueTokens(row.grant_id, row.family_id, row.resource, scopes);
    },

    /** RFC 7009: revokes an access token, or a refresh token with its family. Unknown tokens are ignored. */
    async revoke(params: { token?: string; client_id?: string }): Promise<void> {
      const { token, client_id: clientId } = params;
      if (!token) throw new InvalidRequestError('token is required.');
      if (!ACCESS_TOKEN.test(token) && !REFRESH_TOKEN.test(token)) return;
      const row = await store.findToken(sha256(token));
      if (!row) return;
      if (clientId !== undefined) {
        const grant = await store.findGrant(row.grant_id);
        if (grant?.client_id !== clientId) throw new UnauthorizedClientError('The token was issued to another client.');
      }
      if (row.kind === 'refresh') await store.revokeFamily(row.family_id, nowIso());
      else await store.revokeToken(row.hash, nowIso());
    },

    /** The actor of an access token for `resource`, or null (unknown, revoked, expired, other resource, grant or key ended). */
    async verifyAccessToken(token: string, resource: string): Promise<Actor | null> {
      if (!ACCESS_TOKEN.test(token)) return null;
      const row = await store.findToken(sha256(token));
      if (!row || row.kind !== 'access' || row.revoked_at !== null || row.expires_at <= nowIso()) return null;
      if (row.resource !== resource) return null;
      const valid = await grantActor(row.grant_id, row.scope);
      if (!valid) return null;
      void touch(row.grant_id);
      return valid.actor;
    },

    async listGrants(caller: Actor, page: PageRequest): Promise<Page<Grant>> {
      return mapPage(await store.listGrants(caller.workspaceId, nowIso(), page), toGrant);
    },

    /** Disconnects a client: the grant and its tokens stop at once. */
    async deleteGrant(caller: Actor, id: string): Promise<void> {
      const grant = await store.findWorkspaceGrant(caller.workspaceId, id);
      if (!grant) throw new NotFoundError('OAuth grant', id);
      await store.revokeGrant(id, nowIso(), auditRow(ids, clock, caller, { action: 'oauth_grant.revoke', target: { type: 'oauth_grant', id } }));
    },

    /** Deletes codes and tokens expired for a day (hourly). */
    async purgeExpired(): Promise<void> {
      await store.purgeExpired(new Date(clock.now().getTime() - 24 * 3_600_000).toISOString());
    },
  };

  async function touch(grantId: string) {
    const now = clock.now().getTime();
    const last = touched.get(grantId);
    if (last !== undefined && now - last < TOUCH_EVERY_MS) return;
    if (touched.size >= PENDING_MAX) touched.clear();
    touched.set(grantId, now);
    await store.touchGrant(grantId, new Date(now).toISOString()).catch(() => undefined);
  }
}

export type OAuthService = ReturnType<typeof createOAuthService>;
