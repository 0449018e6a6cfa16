/**
 * OAuth test client: the MCP SDK's own `auth()` drives discovery, registration (DCR or a Client ID
 * Metadata Document), PKCE and the token exchange through this in-memory `OAuthClientProvider`; the
 * consent step is a person's, done here with plain HTTP (GET the page, POST the form) unless a test
 * drives a real browser instead.
 */
import { auth, type OAuthClientProvider } from '@modelcontextprotocol/sdk/client/auth.js';
import type { OAuthClientInformationMixed, OAuthClientMetadata, OAuthTokens } from '@modelcontextprotocol/sdk/shared/auth.js';
import { expect } from 'vitest';

/** Every network wait in the OAuth tests is bounded by this. */
export const OAUTH_WAIT_MS = 5_000;

export const LOOPBACK_REDIRECT = 'http://127.0.0.1:7/callback';

export class TestOAuthProvider implements OAuthClientProvider {
  client: OAuthClientInformationMixed | undefined;
  saved: OAuthTokens | undefined;
  verifier: string | undefined;
  authorizationUrl: URL | undefined;
  clientMetadataUrl?: string;

  constructor(
    private readonly options: {
      redirectUrl?: string;
      clientName?: string;
      clientMetadataUrl?: string;
      state?: string;
      /** Runs when the SDK sends the person to the authorization page. */
      onRedirect?: (url: URL) => Promise<void>;
    } = {},
  ) {
    if (options.clientMetadataUrl) this.clientMetadataUrl = options.clientMetadataUrl;
  }

  get redirectUrl(): string {
    return this.options.redirectUrl ?? LOOPBACK_REDIRECT;
  }

  get clientMetadata(): OAuthClientMetadata {
    return {
      client_name: this.options.clientName ?? 'Test Assistant',
      redirect_uris: [this.redirectUrl],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
    };
  }

  state(): string {
    return this.options.state ?? 'state-123';
  }
  clientInformation() {
    return this.client;
  }
  saveClientInformation(info: OAuthClientInformationMixed) {
    this.client = info;
  }
  tokens() {
    return this.saved;
  }
  saveTokens(tokens: OAuthTokens) {
    this.saved = tokens;
  }
  async redirectToAuthorization(url: URL) {
    this.authorizationUrl = url;
    await this.options.onRedirect?.(url);
  }
  saveCodeVerifier(verifier: string) {
    this.verifier = verifier;
  }
  codeVerifier(): string {
    if (!this.verifier) throw new Error('no code verifier saved');
    return this.verifier;
  }
}

export interface ConsentForm {
  page: string;
  requestId: string;
  csrf: string;
  /** `name=value` of the CSRF cookie the page set. */
  cookie: string;
  headers: Headers;
}

/** GETs the authorization page and reads its form (hidden fields, CSRF cookie). */
export async function openConsent(authorizationUrl: URL | string): Promise<ConsentForm> {
  const res = await fetch(authorizationUrl, { redirect: 'manual', signal: AbortSignal.timeout(OAUTH_WAIT_MS) });
  const page = await res.text();
  expect(res.status, page.slice(0, 500)).toBe(200);
  const requestId = /name="request_id" value="([^"]+)"/.exec(page)?.[1];
  const csrf = /name="csrf_token" value="([^"]+)"/.exec(page)?.[1];
  const cookie = res.headers.getSetCookie().map((c) => c.split(';')[0]!).find((c) => c.includes('sb_oauth_'));
  if (!requestId || !csrf || !cookie) throw new Error(`no consent form in: ${page.slice(0, 300)}`);
  return { page, requestId, csrf, cookie, headers: res.headers };
}

/** POSTs the consent form; answers the raw response (a 303 to the client, or a page). */
export async function submitConsent(
  authorizationUrl: URL | string,
  form: ConsentForm,
  fields: { api_key?: string; scope?: string; decision?: string; csrf_token?: string | null; request_id?: string },
  options: { cookie?: string | null } = {},
): Promise<Response> {
  const body = new URLSearchParams();
  body.set('request_id', fields.request_id ?? form.requestId);
  const csrf = fields.csrf_token === undefined ? form.csrf : fields.csrf_token;
  if (csrf !== null) body.set('csrf_token', csrf);
  if (fields.api_key !== undefined) body.set('api_key', fields.api_key);
  body.set('scope', fields.scope ?? 'read write');
  body.set('decision', fields.decision ?? 'allow');
  const cookie = options.cookie === undefined ? form.cookie : options.cookie;
  return fetch(new URL('authorize/consent', authorizationUrl), {
    method: 'POST',
    redirect: 'manual',
    headers: { 'content-type': 'application/x-www-form-urlencoded', ...(cookie ? { cookie } : {}) },
    body,
    signal: AbortSignal.timeout(OAUTH_WAIT_MS),
  });
}

/** A person allowing the request with `apiKey`: answers the URL the browser is sent back to. */
export async function consentOverHttp(authorizationUrl: URL | string, apiKey: string, scope = 'read write'): Promise<URL> {
  const form = await openConsent(authorizationUrl);
  const res = await submitConsent(authorizationUrl, form, { api_key: apiKey, scope });
  const location = res.headers.get('location');
  expect(res.status, location ?? (await res.text()).slice(0, 500)).toBe(303);
  return new URL(location!);
}

/** The code of a redirect back to the client, after checking its `state` and RFC 9207 `iss`. */
export function codeOf(redirect: URL, issuer: string, state = 'state-123'): string {
  expect(redirect.searchParams.get('error'), redirect.href).toBeNull();
  expect(redirect.searchParams.get('state')).toBe(state);
  expect(redirect.searchParams.get('iss')).toBe(issuer);
  const code = redirect.searchParams.get('code');
  expect(code).toMatch(/^sbc_[0-9A-Za-z]{43}$/);
  return code!;
}

/**
 * The whole authorization with the SDK's `auth()`: discovery, registration, the consent (over HTTP
 * with `apiKey` and `scope`), the code exchange. Answers the provider holding the tokens.
 */
export async function authorize(origin: string, apiKey: string, options: { scope?: string; provider?: TestOAuthProvider } = {}): Promise<TestOAuthProvider> {
  const provider = options.provider ?? new TestOAuthProvider();
  const serverUrl = `${origin}/mcp`;
  expect(await auth(provider, { serverUrl })).toBe('REDIRECT');
  const redirect = await consentOverHttp(provider.authorizationUrl!, apiKey, options.scope);
  expect(await auth(provider, { serverUrl, authorizationCode: codeOf(redirect, origin) })).toBe('AUTHORIZED');
  expect(provider.saved?.access_token).toMatch(/^sbo_/);
  return provider;
}

/** POSTs a form to an OAuth endpoint. */
export function postForm(url: string, fields: Record<string, string>): Promise<Response> {
  return fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams(fields),
    signal: AbortSignal.timeout(OAUTH_WAIT_MS),
  });
}

/** Initializes an MCP session at /mcp with a bearer token; answers the status (and the challenge on 401). */
export async function mcpStatus(origin: string, token: string, host?: string): Promise<{ status: number; challenge: string | null }> {
  const res = await fetch(`${origin}/mcp`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${token}`,
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      ...(host ? { host } : {}),
    },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
    }),
    signal: AbortSignal.timeout(OAUTH_WAIT_MS),
  });
  await res.body?.cancel();
  return { status: res.status, challenge: res.headers.get('www-authenticate') };
}

/** The `error` of an OAuth error response (RFC 6749 §5.2). */
export async function errorOf(res: Response): Promise<string> {
  return ((await res.json()) as { error: string }).error;
}
