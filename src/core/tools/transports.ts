/** The SDK transport for a server (stdio child or Streamable HTTP through the guard), and its tool list. */
import { type Client, type FetchLike, StreamableHTTPClientTransport, type Tool, type Transport } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import type { AddressGuardOptions } from '../../lib/address-guard.js';
import { guardedFetch } from '../../lib/guarded-fetch.js';
import type { ServerSpec } from './mcp-clients.js';
import { type BearerSource, isBearerChallenge } from './tool-oauth.js';
import { resolveHeaders } from './vault.js';

/** A server's tool list longer than this many pages fails the connection. */
export const MAX_TOOL_PAGES = 20;

/** `onStderr` receives a stdio child's stderr (kept, scrubbed, for its status error). */
export function createTransport(spec: ServerSpec, guard: AddressGuardOptions, onStderr: (text: string) => void): Transport {
  if (spec.transport === 'stdio') {
    const transport = new StdioClientTransport({
      command: spec.command ?? '',
      args: spec.args,
      env: spec.secrets.credentials, // added to the SDK's safe default environment (PATH, HOME...)
      stderr: 'pipe',
    });
    transport.stderr?.on('data', (chunk: Buffer) => onStderr(chunk.toString('utf8')));
    return transport;
  }
  const fetch = guardedFetch(guard);
  return new StreamableHTTPClientTransport(new URL(spec.url ?? ''), {
    fetch: spec.bearer ? withBearer(fetch, spec.bearer) : fetch,
    requestInit: { headers: resolveHeaders(spec.secrets) },
    // Left to our fetch, which never follows: a 3xx fails the connection (a redirect could lead past the guard's vetting).
    redirectPolicy: 'follow',
    reconnectionOptions: { initialReconnectionDelay: 1_000, maxReconnectionDelay: 10_000, reconnectionDelayGrowFactor: 2, maxRetries: 2 },
  });
}

/** Every page of its tools (at most MAX_TOOL_PAGES; the client is made with that limit), never from the client's cache. */
export async function listAllTools(client: Client, timeoutMs: number): Promise<Tool[]> {
  return (await client.listTools(undefined, { timeout: timeoutMs, cacheMode: 'bypass' })).tools;
}

/**
 * A server that signs in with OAuth: each request carries the current access token; a 401 Bearer
 * challenge is answered once with a refreshed token (or ends in ConsentRequired), a 403
 * `insufficient_scope` records the scope the server wants and fails the call (tool-oauth.ts).
 */
function withBearer(fetch: FetchLike, bearer: BearerSource): FetchLike {
  const send = (input: string | URL, init: RequestInit, token: string | null) => {
    const headers = new Headers(init.headers);
    if (token) headers.set('authorization', `Bearer ${token}`);
    return fetch(input, { ...init, headers });
  };
  return async (input, init = {}) => {
    const token = await bearer.token();
    const response = await send(input, init, token);
    const header = response.headers.get('www-authenticate');
    const challenged = (response.status === 401 && isBearerChallenge(header)) || (response.status === 403 && /insufficient_scope/.test(header ?? ''));
    if (!challenged) return response;
    await response.body?.cancel();
    const next = await bearer.challenged(response.status as 401 | 403, header, token);
    return send(input, init, next);
  };
}
