/**
 * A fake OpenAI-compatible HTTP server on 127.0.0.1 for tests that drive the real `openai` package.
 *
 * Requests go through a route table (`POST /v1/embeddings`, and `POST /v1/chat/completions` from
 * `openai-chat.ts`) after two shared steps: a queue of scripted failures (`fail(...)`), then the
 * bearer key check. Every request is recorded, including whether the client hung up before the
 * answer.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { type ChatReply, chatCompletionsRoute } from './openai-chat.js';

export type { ChatReply } from './openai-chat.js';

/** One request as the fake saw it. */
export interface RecordedRequest {
  method: string;
  /** Path without the query string, e.g. `/v1/embeddings`. */
  path: string;
  headers: http.IncomingHttpHeaders;
  /** Parsed JSON, or the raw text when the body was not JSON (undefined when empty). */
  body: unknown;
  /** True once the client closed the connection before the fake finished answering. */
  closedByClient: boolean;
}

/** What the next request gets instead of its normal answer; queued with `fail(...)`. */
export type Scripted =
  /** An error status with OpenAI's error JSON; `headers` e.g. `{ 'retry-after': '0' }`. */
  | { kind: 'status'; status: number; message?: string; headers?: Record<string, string> }
  /** 200 with `content-type: application/json` and a body that is not JSON. */
  | { kind: 'malformed' }
  /** Any JSON answer, e.g. a structurally wrong embeddings list. */
  | { kind: 'json'; body: unknown; status?: number }
  /** Wait `ms` and then answer normally; without `ms`, never answer (until the client gives up). */
  | { kind: 'hang'; ms?: number }
  /** Send 200 headers and the start of a body, then nothing more. */
  | { kind: 'stall-body' }
  /** Destroy the socket without an answer. */
  | { kind: 'close' };

/** Settings a test may change between requests with `set(...)`. */
export interface FakeOpenAiSettings {
  /** The bearer key the fake accepts; null accepts any request (an Ollama-like local endpoint). */
  apiKey: string | null;
  /** Embedding length when the request does not ask for `dimensions`. */
  dimension: number;
  /** Answer embeddings `data` in reverse order, as a server is free to. */
  shuffle: boolean;
}

export interface RouteContext {
  req: http.IncomingMessage;
  res: http.ServerResponse;
  body: unknown;
  settings: Readonly<FakeOpenAiSettings>;
  /** Resolves after `ms`; routes wait with this so `close()` can clear the timers. */
  delay(ms: number): Promise<void>;
}

/** A route handler; `key` is `"METHOD /v1/path"`. */
export type RouteHandler = (ctx: RouteContext) => void | Promise<void>;

export interface FakeOpenAi {
  /** Base URL ending in `/v1`, for `baseURL`. */
  url: string;
  requests: RecordedRequest[];
  /** Queue behaviours for the next requests, one per request, in order. */
  fail(...behaviours: Scripted[]): void;
  /**
   * Queue answers for the next chat completion requests, one per request, in order; with none
   * queued a request gets `Echo: <last user message>`. `fail(...)` behaviours come first.
   */
  reply(...replies: ChatReply[]): void;
  set(settings: Partial<FakeOpenAiSettings>): void;
  /** Add or replace a route (`"POST /v1/chat/completions"`). */
  route(key: string, handler: RouteHandler): void;
  /** Clear recorded requests, queued failures and replies, and restore the initial settings. */
  reset(): void;
  close(): Promise<void>;
}

export interface FakeOpenAiOptions extends Partial<FakeOpenAiSettings> {
  routes?: Record<string, RouteHandler>;
}

export const FAKE_OPENAI_KEY = 'sk-fake-0123456789abcdef';

/** OpenAI's error body shape. */
export function sendError(res: http.ServerResponse, status: number, message: string, type: string, code: string | null, headers: Record<string, string> = {}): void {
  sendJson(res, status, { error: { message, type, param: null, code } }, headers);
}

export function sendJson(res: http.ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), ...headers });
  res.end(text);
}

/**
 * The fake's embedding of a text: deterministic floats in [-1, 1) from a seeded PRNG over the
 * text's FNV-1a hash. Not normalised, so a client that forgets to normalise is caught.
 */
export function fakeEmbedding(text: string, dimension: number): number[] {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  let state = h >>> 0;
  const out: number[] = [];
  for (let i = 0; i < dimension; i++) {
    // mulberry32
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    const u = ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    // Float32-exact values, so the float and base64 encodings carry the same numbers.
    out.push(Math.fround(u * 2 - 1));
  }
  return out;
}

const embeddings: RouteHandler = ({ res, body, settings }) => {
  const b = (body ?? {}) as Record<string, unknown>;
  if (typeof b.model !== 'string' || b.model === '') {
    return sendError(res, 400, "you must provide a model parameter", 'invalid_request_error', null);
  }
  const input = typeof b.input === 'string' ? [b.input] : b.input;
  if (!Array.isArray(input) || input.length === 0 || input.length > 2048 || !input.every((t) => typeof t === 'string')) {
    return sendError(res, 400, "'$.input' is invalid. Please check the API reference.", 'invalid_request_error', null);
  }
  // The real API rejects empty strings anywhere in the list.
  if (input.some((t) => t === '')) {
    return sendError(res, 400, "'$.input' is invalid. Please check the API reference.", 'invalid_request_error', null);
  }
  const format = b.encoding_format ?? 'base64';
  if (format !== 'float' && format !== 'base64') {
    return sendError(res, 400, `Invalid encoding_format: ${String(format)}`, 'invalid_request_error', null);
  }
  let dimension = settings.dimension;
  if (b.dimensions !== undefined) {
    if (typeof b.dimensions !== 'number' || !Number.isInteger(b.dimensions) || b.dimensions < 1) {
      return sendError(res, 400, 'Invalid dimensions', 'invalid_request_error', null);
    }
    dimension = b.dimensions;
  }
  const data = input.map((text: string, index) => {
    const v = fakeEmbedding(text, dimension);
    const embedding = format === 'float' ? v : Buffer.from(new Float32Array(v).buffer).toString('base64');
    return { object: 'embedding', index, embedding };
  });
  if (settings.shuffle) data.reverse();
  const tokens = input.reduce((n: number, t: string) => n + Math.ceil(t.length / 4), 0);
  sendJson(res, 200, { object: 'list', data, model: b.model, usage: { prompt_tokens: tokens, total_tokens: tokens } });
};

/** Starts the fake on 127.0.0.1 with an ephemeral port. */
export async function startFakeOpenAi(options: FakeOpenAiOptions = {}): Promise<FakeOpenAi> {
  const initial: FakeOpenAiSettings = {
    apiKey: options.apiKey === undefined ? FAKE_OPENAI_KEY : options.apiKey,
    dimension: options.dimension ?? 8,
    shuffle: options.shuffle ?? false,
  };
  let settings = { ...initial };
  const replies: ChatReply[] = [];
  const routes = new Map<string, RouteHandler>([
    ['POST /v1/embeddings', embeddings],
    ['POST /v1/chat/completions', chatCompletionsRoute(replies)],
    ...Object.entries(options.routes ?? {}),
  ]);
  const queue: Scripted[] = [];
  const requests: RecordedRequest[] = [];
  const timers = new Set<NodeJS.Timeout>();

  const delay = (ms: number) =>
    new Promise<void>((resolve) => {
      const t = setTimeout(() => {
        timers.delete(t);
        resolve();
      }, ms);
      timers.add(t);
    });

  async function handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const raw = Buffer.concat(chunks).toString('utf8');
    let body: unknown;
    if (raw !== '') {
      try {
        body = JSON.parse(raw);
      } catch {
        body = raw;
      }
    }
    const path = (req.url ?? '/').split('?')[0]!;
    const record: RecordedRequest = { method: req.method ?? 'GET', path, headers: req.headers, body, closedByClient: false };
    requests.push(record);
    res.on('close', () => {
      if (!res.writableFinished) record.closedByClient = true;
    });

    const scripted = queue.shift();
    if (scripted) {
      switch (scripted.kind) {
        case 'status':
          return sendError(res, scripted.status, scripted.message ?? `Scripted failure ${scripted.status}`, scripted.status >= 500 ? 'server_error' : 'invalid_request_error', null, scripted.headers);
        case 'malformed':
          res.writeHead(200, { 'content-type': 'application/json' });
          res.end('{"object":"list","data":[{"object":"embedding",');
          return;
        case 'json':
          return sendJson(res, scripted.status ?? 200, scripted.body);
        case 'hang':
          if (scripted.ms === undefined) return; // the answer never comes; close() ends the socket
          await delay(scripted.ms);
          if (res.destroyed) return;
          break;
        case 'stall-body':
          res.writeHead(200, { 'content-type': 'application/json' });
          res.write('{"object":"list",');
          return;
        case 'close':
          req.socket.destroy();
          return;
      }
    }

    if (settings.apiKey !== null && req.headers.authorization !== `Bearer ${settings.apiKey}`) {
      const given = (req.headers.authorization ?? '').replace(/^Bearer /, '');
      // Echoes the key it was given, as a worst case, so tests prove clients do not pass it on.
      return sendError(res, 401, `Incorrect API key provided: ${given}. You can find your API key at https://platform.openai.com/account/api-keys.`, 'invalid_request_error', 'invalid_api_key');
    }
    const handler = routes.get(`${req.method} ${path}`);
    if (!handler) {
      return sendError(res, 404, `Unknown request URL: ${req.method} ${path}.`, 'invalid_request_error', 'unknown_url');
    }
    await handler({ req, res, body, settings, delay });
  }

  const server = http.createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      if (!res.headersSent) sendError(res, 500, `Fake server failure: ${String(err)}`, 'server_error', null);
      else res.destroy();
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;

  return {
    url: `http://127.0.0.1:${port}/v1`,
    requests,
    fail: (...behaviours) => void queue.push(...behaviours),
    reply: (...added) => void replies.push(...added),
    set: (changes) => {
      settings = { ...settings, ...changes };
    },
    route: (key, handler) => void routes.set(key, handler),
    reset: () => {
      requests.length = 0;
      queue.length = 0;
      replies.length = 0;
      settings = { ...initial };
    },
    close: async () => {
      for (const t of timers) clearTimeout(t);
      timers.clear();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
