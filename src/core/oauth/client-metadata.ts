/**
 * Who an OAuth client is: a dynamically registered client (RFC 7591, stored) or a Client ID Metadata
 * Document (the client id is an https URL whose JSON names the client; fetched through the one
 * address guard with small size and time caps, cached in memory). Also the redirect URI rules:
 * exact match, except that a loopback `http` redirect may use any port (RFC 8252 §7.3).
 */
import { OAuthClientMetadataSchema } from '@modelcontextprotocol/sdk/shared/auth.js';
import type { Clock } from '../../lib/clock.js';
import { fetchUrl, UrlFetchError, type UrlFetchOptions } from '../knowledge/url-fetch.js';

export interface ClientInfo {
  clientId: string;
  /** Shown on the consent page; self-asserted by the client. */
  name: string;
  redirectUris: string[];
  /** `metadata` for a Client ID Metadata Document, `registered` for RFC 7591. */
  kind: 'metadata' | 'registered';
  /** The `scope` the client said it may ask for, if any. */
  scope: string | undefined;
}

/** Why a client's metadata is refused; the message is shown to people and sent as `error_description`. */
export class ClientMetadataError extends Error {}

export const CIMD_MAX_BYTES = 64 * 1024;
export const CIMD_TIMEOUT_MS = 5_000;
const CIMD_CACHE_MS = 5 * 60_000;
const CIMD_CACHE_MAX = 1_000;
const NAME_MAX = 200;
const REDIRECT_MAX = 20;
const URI_MAX = 2_000;

const LOOPBACK = new Set(['127.0.0.1', 'localhost', '[::1]']);
/** Schemes that must never receive a code: they run or read something instead of reaching an app. */
const FORBIDDEN_SCHEMES = new Set(['javascript:', 'data:', 'vbscript:', 'file:', 'about:', 'blob:', 'filesystem:', 'ftp:', 'ws:', 'wss:']);

export function isLoopbackHttp(url: URL): boolean {
  return url.protocol === 'http:' && LOOPBACK.has(url.hostname);
}

/**
 * Whether a URI may be registered as a redirect: `https`, `http` on a loopback host only, or a
 * private-use scheme of a native app (`vscode:`, `cursor:`…); never a fragment or credentials.
 */
export function redirectUriProblem(uri: string): string | null {
  if (uri.length > URI_MAX) return 'is too long';
  let url: URL;
  try {
    url = new URL(uri);
  } catch {
    return 'is not a URL';
  }
  if (url.hash !== '' || uri.includes('#')) return 'must not have a fragment';
  if (url.username !== '' || url.password !== '') return 'must not contain credentials';
  if (FORBIDDEN_SCHEMES.has(url.protocol)) return `must not use the ${url.protocol} scheme`;
  if (url.protocol === 'http:' && !isLoopbackHttp(url)) return 'must use https (plain http only on 127.0.0.1, localhost or [::1])';
  if (!/^[a-z][a-z0-9+.-]*:$/.test(url.protocol)) return 'has an invalid scheme';
  return null;
}

/** Exact string match, or a loopback http redirect differing only in its port (RFC 8252 §7.3). */
export function redirectUriMatches(registered: string, requested: string): boolean {
  if (registered === requested) return true;
  let a: URL;
  let b: URL;
  try {
    a = new URL(registered);
    b = new URL(requested);
  } catch {
    return false;
  }
  if (!isLoopbackHttp(a) || !isLoopbackHttp(b) || b.hash !== '' || requested.includes('#')) return false;
  if (b.username !== '' || b.password !== '') return false;
  return a.hostname === b.hostname && a.pathname === b.pathname && a.search === b.search;
}

/**
 * Validates client metadata (RFC 7591 fields, with the SDK's own schema) for a public client of
 * this server: authorization code + refresh tokens, `none` authentication, valid redirect URIs.
 * Returns the normalised metadata.
 */
export function validateClientMetadata(input: unknown, { registration }: { registration: boolean }) {
  const parsed = OAuthClientMetadataSchema.safeParse(input);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new ClientMetadataError(`Invalid client metadata${issue ? ` (${issue.path.join('.') || 'body'}: ${issue.message})` : ''}.`);
  }
  const metadata = parsed.data;
  if (metadata.redirect_uris.length === 0) throw new ClientMetadataError('redirect_uris must name at least one redirect URI.');
  if (metadata.redirect_uris.length > REDIRECT_MAX) throw new ClientMetadataError(`redirect_uris may hold at most ${REDIRECT_MAX} URIs.`);
  for (const uri of metadata.redirect_uris) {
    const problem = redirectUriProblem(uri);
    if (problem) throw new ClientMetadataError(`The redirect URI ${uri.slice(0, 200)} ${problem}.`);
  }
  const method = metadata.token_endpoint_auth_method;
  // Registration may ask for a secret; we answer with what we do support (RFC 7591 §3.2.1). A metadata
  // document cannot: a shared secret has no place in a public document.
  if (method !== undefined && method !== 'none' && !registration) {
    throw new ClientMetadataError('token_endpoint_auth_method must be "none": only public clients are supported.');
  }
  const grants = metadata.grant_types ?? ['authorization_code', 'refresh_token'];
  if (!grants.includes('authorization_code') || grants.some((g) => g !== 'authorization_code' && g !== 'refresh_token')) {
    throw new ClientMetadataError('grant_types may hold only "authorization_code" and "refresh_token".');
  }
  const responses = metadata.response_types ?? ['code'];
  if (responses.some((r) => r !== 'code')) throw new ClientMetadataError('response_types may hold only "code".');
  if (metadata.client_name !== undefined && metadata.client_name.length > NAME_MAX) {
    throw new ClientMetadataError(`client_name may be at most ${NAME_MAX} characters.`);
  }
  return { ...metadata, token_endpoint_auth_method: 'none', grant_types: grants, response_types: responses };
}

/** Whether a client id is a Client ID Metadata Document URL: https with a path, nothing else. */
export function isMetadataDocumentUrl(clientId: string): boolean {
  if (!clientId.startsWith('https://') || clientId.length > URI_MAX) return false;
  try {
    const url = new URL(clientId);
    return (
      url.protocol === 'https:' &&
      url.pathname !== '/' &&
      url.hash === '' &&
      !clientId.includes('#') &&
      url.username === '' &&
      url.password === '' &&
      // No dot segments: the URL must be the document's one spelling.
      url.href === clientId
    );
  } catch {
    return false;
  }
}

export interface MetadataDocumentOptions {
  /** The address guard and its test overrides; size and time caps are set here. */
  guard: UrlFetchOptions;
  clock: Clock;
}

/** Fetches and caches Client ID Metadata Documents. */
export function createMetadataDocuments({ guard, clock }: MetadataDocumentOptions) {
  const cache = new Map<string, { client: ClientInfo; until: number }>();
  const options: UrlFetchOptions = {
    ...guard,
    maxBytes: Math.min(guard.maxBytes, CIMD_MAX_BYTES),
    timeoutMs: Math.min(guard.timeoutMs ?? CIMD_TIMEOUT_MS, CIMD_TIMEOUT_MS),
    // The document lives at its id: a redirect would make some other URL speak for it.
    maxRedirects: 0,
    userAgent: 'Switchboard/0.1 (+oauth client metadata)',
  };

  return {
    /** The client a metadata URL describes; throws ClientMetadataError with a reason people can read. */
    async resolve(clientId: string): Promise<ClientInfo> {
      const now = clock.now().getTime();
      const hit = cache.get(clientId);
      if (hit && hit.until > now) return hit.client;
      let body: Buffer;
      try {
        body = (await fetchUrl(clientId, options)).body;
      } catch (error) {
        if (error instanceof UrlFetchError) throw new ClientMetadataError(`The client's metadata document could not be fetched: ${error.message}.`);
        throw error;
      }
      let json: unknown;
      try {
        json = JSON.parse(body.toString('utf8'));
      } catch {
        throw new ClientMetadataError('The client metadata document is not JSON.');
      }
      if (typeof json !== 'object' || json === null || Array.isArray(json)) throw new ClientMetadataError('The client metadata document is not a JSON object.');
      if ((json as { client_id?: unknown }).client_id !== clientId) {
        throw new ClientMetadataError('The client metadata document names another client_id than its own URL.');
      }
      if ('client_secret' in json) throw new ClientMetadataError('A client metadata document must not hold a client_secret.');
      const metadata = validateClientMetadata(json, { registration: false });
      const client: ClientInfo = {
        clientId,
        name: metadata.client_name?.trim() || new URL(clientId).host,
        redirectUris: metadata.redirect_uris,
        kind: 'metadata',
        scope: metadata.scope,
      };
      if (cache.size >= CIMD_CACHE_MAX) cache.clear();
      cache.set(clientId, { client, until: now + CIMD_CACHE_MS });
      return client;
    },
  };
}
