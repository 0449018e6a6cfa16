/**
 * The one module that imports the `openai` package (DESIGN.md, house style). It builds clients for
 * any OpenAI-compatible endpoint and maps the package's errors to AppErrors.
 */
import http from 'node:http';
import https from 'node:https';
import OpenAI, { APIConnectionError, APIConnectionTimeoutError, APIError, APIUserAbortError } from 'openai';
import { AppError, UpstreamError, UpstreamTimeoutError } from '../errors.js';
import { headersOf, toFetchResponse } from '../lib/fetch-response.js';

export type { OpenAI };

export const OPENAI_DEFAULT_BASE_URL = 'https://api.openai.com/v1';
/** Per attempt. Local CPU models answer a large batch slowly; the package's own default is 10 min. */
export const DEFAULT_TIMEOUT_MS = 120_000;
/** The package's default: 429, 408, 409, 5xx and connection failures, with exponential back-off. */
export const DEFAULT_MAX_RETRIES = 2;
/** Sent as the bearer when only a base URL is configured (Ollama, llama.cpp...): the package insists on a key. */
export const PLACEHOLDER_API_KEY = 'not-needed';

export interface OpenAiOptions {
  apiKey?: string | undefined;
  /** Any OpenAI-compatible base URL (ending in /v1 for most servers); default OpenAI's. */
  baseUrl?: string | undefined;
  /** Per attempt, in ms (the package retries time-outs too). */
  timeoutMs?: number | undefined;
  maxRetries?: number | undefined;
}

/**
 * A client for an OpenAI-compatible endpoint. Everything is passed explicitly so the package never
 * falls back to its own environment variables (config.ts is the only reader of the environment).
 */
export function createOpenAi(options: OpenAiOptions): OpenAI {
  if (!options.apiKey && !options.baseUrl) {
    throw new Error('createOpenAi needs an apiKey or a baseUrl.');
  }
  const timeout = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  return new OpenAI({
    apiKey: options.apiKey || PLACEHOLDER_API_KEY,
    baseURL: options.baseUrl ?? OPENAI_DEFAULT_BASE_URL,
    organization: null,
    project: null,
    adminAPIKey: null,
    webhookSecret: null,
    timeout,
    maxRetries: options.maxRetries ?? DEFAULT_MAX_RETRIES,
    fetch: keepAliveFetch(timeout),
    // Set explicitly so OPENAI_LOG is not consulted; the package logs warnings to the console.
    logLevel: 'warn',
  });
}

/** Idle connections kept per client for the next request; busy ones are not capped (5,000 open streams each hold one). */
const MAX_FREE_SOCKETS = 256;

type FetchInit = RequestInit & { signal?: AbortSignal | null };

/**
 * `fetch` for the `openai` package over `node:http`, with one keep-alive agent per client (so per
 * model endpoint): idle connections are reused and busy ones are not capped, so concurrency sets
 * the pool's size. The response body fails with APIConnectionTimeoutError when no bytes arrive for
 * `ms` (socket inactivity once the headers are in): the package's `timeout` stops at the response
 * headers, so a server that sends headers and then stalls would otherwise hang the call forever.
 *
 * Measured against Node's global fetch wrapped in an idle-timeout stream (issue 18): ~250 µs less
 * CPU per streamed completion through the package (~1,085 → ~840 µs), the `fetch` layer (Request
 * and Headers objects, undici's web-stream body) being most of the package's cost. Bodies that are
 * not a string or bytes (none of the calls made today) go to the global fetch, idle timer and all.
 */
function keepAliveFetch(ms: number): (input: string | URL | Request, init?: FetchInit) => Promise<Response> {
  const agents = {
    'http:': new http.Agent({ keepAlive: true, maxFreeSockets: MAX_FREE_SOCKETS }),
    'https:': new https.Agent({ keepAlive: true, maxFreeSockets: MAX_FREE_SOCKETS }),
  };
  const fallback = fetchWithIdleTimeout(ms);
  return (input, init = {}) => {
    const url = new URL(typeof input === 'string' || input instanceof URL ? input : input.url);
    const body = init.body;
    const plainBody = body === undefined || body === null || typeof body === 'string' || body instanceof Uint8Array;
    if (!(input instanceof URL || typeof input === 'string') || !plainBody || (url.protocol !== 'http:' && url.protocol !== 'https:')) {
      return fallback(input, init);
    }
    const agent = url.protocol === 'https:' ? agents['https:'] : agents['http:'];
    return send(url, init.method ?? 'GET', headerRecord(init.headers), body, init.signal ?? undefined, agent, ms);
  };
}

/**
 * One request over `agent`. Kept apart from the `fetch` above so that no closure that lives as long
 * as the response (its listeners) holds the request body or `init`: a streamed chat completion is
 * open for as long as the answer, and its body (the whole prompt) is ~3 KB per open stream (issue 18).
 */
function send(
  url: URL,
  method: string,
  headers: Record<string, string>,
  body: string | Uint8Array | null | undefined,
  signal: AbortSignal | undefined,
  agent: http.Agent,
  ms: number,
): Promise<Response> {
  let resolve!: (response: Response) => void;
  let reject!: (err: unknown) => void;
  const answered = new Promise<Response>((yes, no) => {
    resolve = yes;
    reject = no;
  });
  const request = (url.protocol === 'https:' ? https : http).request(url, { method, headers, agent, signal }, (res) => resolve(adopt(res, method, signal, ms)));
  request.on('error', reject);
  request.end(body ?? undefined);
  return answered;
}

/** The response as `fetch` answers it, with the idle time-out and the caller's abort on its body. */
function adopt(res: http.IncomingMessage, method: string, signal: AbortSignal | undefined, ms: number): Response {
  // From here on, a silence of `ms` ends the body with a time-out (the socket goes back to the agent's own setting after).
  res.setTimeout(ms, () => res.destroy(new APIConnectionTimeoutError({ message: `No data for ${ms} ms.` })));
  // An abort once the body flows ends it as fetch's would: with an AbortError (the package then stops quietly).
  if (signal) {
    const abort = () => res.destroy(new DOMException('This operation was aborted', 'AbortError'));
    signal.addEventListener('abort', abort, { once: true });
    res.once('close', () => signal.removeEventListener('abort', abort));
  }
  const status = res.statusCode ?? 502;
  if (status >= 200 && status < 300 && /^text\/event-stream\b/i.test(res.headers['content-type'] ?? '')) return eventStreamResponse(res, status);
  return toFetchResponse(res, method);
}

/**
 * A 2xx event stream (a streamed completion) whose `body` is the `node:http` response itself. The
 * package reads a body through its async iterator when it has one (its `ReadableStreamToAsyncIterable`),
 * which a node stream has, so the web ReadableStream `Readable.toWeb` would put in between (its
 * controller, reader, read requests and adapter listeners) is skipped: ~3 KB less heap per open chat
 * stream (issue 18: 40.3 → 37.3 KB with 1,000 open) and one copy less per chunk. Only the package reads
 * this `fetch`'s responses; `text()` and `json()` read the same stream for a caller that wants it whole.
 */
function eventStreamResponse(res: http.IncomingMessage, status: number): Response {
  const response = new Response(null, { status, statusText: res.statusMessage ?? '', headers: headersOf(res) });
  return Object.defineProperties(response, { body: { value: res, enumerable: true }, text: { value: nodeBodyText }, json: { value: nodeBodyJson } });
}

async function nodeBodyText(this: Response): Promise<string> {
  const parts: Buffer[] = [];
  for await (const part of this.body as unknown as AsyncIterable<Buffer>) parts.push(part);
  return Buffer.concat(parts).toString('utf8');
}

async function nodeBodyJson(this: Response): Promise<unknown> {
  return JSON.parse(await nodeBodyText.call(this)) as unknown;
}

/** A fetch `HeadersInit` as node:http takes it. */
function headerRecord(init: RequestInit['headers']): Record<string, string> {
  if (init === undefined) return {};
  if (init instanceof Headers || Array.isArray(init)) return Object.fromEntries(init as Iterable<[string, string]>);
  return init as Record<string, string>;
}

/**
 * `fetch` whose response body fails with APIConnectionTimeoutError when no bytes arrive for `ms`.
 * The package's `timeout` stops at the response headers: a server that sends headers and then
 * stalls would otherwise hang the call forever (and a stalled stream, for streamed chat).
 */
function fetchWithIdleTimeout(ms: number): (input: string | URL | Request, init?: RequestInit) => Promise<Response> {
  return async (input, init) => {
    const response = await fetch(input, init);
    if (!response.body) return response;
    const reader = response.body.getReader();
    const body = new ReadableStream<Uint8Array>({
      async pull(controller) {
        let timer: NodeJS.Timeout | undefined;
        const idle = new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(new APIConnectionTimeoutError({ message: `No data for ${ms} ms.` })), ms);
        });
        try {
          const { done, value } = await Promise.race([reader.read(), idle]);
          if (done) controller.close();
          else controller.enqueue(value);
        } catch (err) {
          // Closes the connection, so the server sees the client give up.
          reader.cancel(err).catch(() => {});
          controller.error(err);
        } finally {
          clearTimeout(timer);
        }
      },
      cancel: (reason) => reader.cancel(reason),
    });
    return new Response(body, { status: response.status, statusText: response.statusText, headers: response.headers });
  };
}

/** The parts of a client `toUpstreamError` uses to phrase (and scrub) its message. */
export type OpenAiClientInfo = Pick<OpenAI, 'baseURL' | 'apiKey' | 'timeout'>;

/** True for an abort the caller asked for (its signal), as opposed to a time-out. */
export function isAbortError(err: unknown): boolean {
  return err instanceof APIUserAbortError || (err instanceof Error && err.name === 'AbortError');
}

/**
 * Maps an error from an `openai` call to an AppError for `what` ("Embedding", "Chat completion"):
 * a time-out to UpstreamTimeoutError (504), anything else to UpstreamError (502) with a short
 * message that never carries the API key or the upstream body. A caller's abort comes back
 * unchanged (not an AppError), so `throw toUpstreamError(err, ...)` lets the caller see its abort.
 */
export function toUpstreamError(err: unknown, what: string, client?: OpenAiClientInfo): Error {
  if (err instanceof AppError) return err;
  if (isAbortError(err)) return err as Error;
  const host = client ? hostOf(client.baseURL) : 'the model endpoint';
  if (err instanceof APIConnectionTimeoutError) {
    const after = client ? ` after ${client.timeout} ms` : '';
    return new UpstreamTimeoutError(`${what} timed out: ${host} did not answer${after}.`);
  }
  if (err instanceof APIConnectionError) {
    return new UpstreamError(`${what} failed: could not reach ${host}.`);
  }
  if (err instanceof APIError && typeof err.status === 'number') {
    return new UpstreamError(`${what} failed: ${host} answered ${err.status}${explain(err, client)}.`);
  }
  if (err instanceof SyntaxError) {
    return new UpstreamError(`${what} failed: ${host} answered with malformed JSON.`);
  }
  return new UpstreamError(`${what} failed: unexpected answer from ${host}.`);
}

/** `host[:port]` of a base URL, for messages that must not show paths or credentials. */
export function hostOf(baseUrl: string): string {
  try {
    return new URL(baseUrl).host;
  } catch {
    return 'the model endpoint';
  }
}

const MAX_UPSTREAM_MESSAGE = 200;

/** A short reason. 401/403 say nothing of the body: OpenAI's 401 echoes (part of) the key. */
function explain(err: APIError, client?: OpenAiClientInfo): string {
  switch (err.status) {
    case 401:
      return ' (the API key was rejected; check OPENAI_API_KEY)';
    case 403:
      return ' (permission denied for this key or model)';
    case 429:
      return ' (rate limited or out of quota; retries exhausted)';
  }
  if (err.status! >= 500) return ' (server error; retries exhausted)';
  const body = err.error as { message?: unknown } | undefined;
  const message = typeof body?.message === 'string' ? scrub(body.message, client?.apiKey) : '';
  return message ? `: ${message}` : '';
}

function scrub(message: string, apiKey: string | null | undefined): string {
  let m = message;
  if (apiKey && apiKey !== PLACEHOLDER_API_KEY) m = m.split(apiKey).join('[redacted]');
  m = m
    .replace(/\b(sk|sb)[-_][\w-]{8,}/g, '[redacted]')
    .replace(/Bearer\s+\S+/gi, 'Bearer [redacted]')
    .replace(/\s+/g, ' ')
    .trim();
  return m.length > MAX_UPSTREAM_MESSAGE ? `${m.slice(0, MAX_UPSTREAM_MESSAGE - 1)}…` : m;
}
