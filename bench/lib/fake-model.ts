/**
 * Child-process entry (`fork(dist/bench/lib/fake-model.js)`): a minimal OpenAI-compatible model on
 * 127.0.0.1, port 0, for the chat benchmark. Only `POST /v1/chat/completions`, streamed exactly as
 * OpenAI streams (a role chunk with empty content, one chunk per token, a chunk with
 * `finish_reason: "stop"`, with `stream_options.include_usage` a last chunk with `choices: []` and
 * the usage, then `data: [DONE]`), or not streamed (one `chat.completion`).
 *
 * Modes (FakeModelMode, changed at run time with `{ type: 'set' }`):
 *  - `instant` (default): zero latency; the whole answer is built as one string and written with
 *    the headers in one `end()`. No timers, no per-request state.
 *  - `hold`: the role chunk and the first token go out at once; then one shared timer writes a
 *    token to every held stream each `tickMs`, until `{ type: 'finish' }` (or `maxHoldMs` after it
 *    opened), which sends the rest of the stream and `[DONE]`.
 *
 * Reports `{ type: 'ready', port }` over IPC; answers `cpu`, `memory`, `stats`, `requests` (the
 * raw bodies of the latest distinct requests, so a benchmark can send the model exactly what the
 * platform sends it) and `stop`.
 */
import http from 'node:http';
import type { FakeChildMessage, FakeModelSettings, FakeParentMessage } from './server-protocol.js';

const settings: FakeModelSettings = { mode: 'instant', tickMs: 2_000, maxHoldMs: 120_000 };
/** Distinct request bodies kept for `{ type: 'requests' }`. */
const KEEP_REQUESTS = 64;

const REPLY =
  'Thanks for the question. According to the knowledge base [1], you can change this under Settings, then ' +
  'Workspace; the change applies to every member within a minute. If the option is greyed out, ask an ' +
  'administrator of your workspace to grant you access. Is there anything else I can help with?';
/** Word-sized tokens, leading space included (as OpenAI's), each already a JSON string. */
const TOKENS = (REPLY.match(/\s*\S+/g) ?? []).map((t) => JSON.stringify(t));

let completions = 0;
let finished = 0;
const recent: string[] = [];

interface Held {
  res: http.ServerResponse;
  head: string;
  tail: string;
  includeUsage: boolean;
  promptTokens: number;
  tokens: number;
  openedAt: number;
}
const held = new Set<Held>();
let ticker: NodeJS.Timeout | undefined;

function send(message: FakeChildMessage) {
  process.send?.(message);
}

/** `data: {"id":…,"choices":` — the start of every chunk of one completion. */
function chunkHead(id: string, created: number, modelJson: string): string {
  return `data: {"id":"${id}","object":"chat.completion.chunk","created":${created},"model":${modelJson},"system_fingerprint":"fp_bench","choices":`;
}

const choice = (delta: string, finish: string) => `[{"index":0,"delta":${delta},"logprobs":null,"finish_reason":${finish}}]`;
const ROLE_DELTA = '{"role":"assistant","content":"","refusal":null}';

function usageJson(prompt: number, completion: number): string {
  return (
    `{"prompt_tokens":${prompt},"completion_tokens":${completion},"total_tokens":${prompt + completion},` +
    '"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},' +
    '"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}'
  );
}

function tokenChunk(head: string, tail: string, i: number): string {
  return `${head}${choice(`{"content":${TOKENS[i % TOKENS.length]}}`, 'null')}${tail}`;
}

/** The finish chunk, the usage chunk when asked for, and `[DONE]`. */
function ending(head: string, tail: string, includeUsage: boolean, prompt: number, completion: number): string {
  let out = `${head}${choice('{}', '"stop"')}${tail}`;
  if (includeUsage) out += `${head}[],"usage":${usageJson(prompt, completion)}}\n\n`;
  return `${out}data: [DONE]\n\n`;
}

function sendJson(res: http.ServerResponse, status: number, body: unknown) {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

function badRequest(res: http.ServerResponse, message: string) {
  sendJson(res, 400, { error: { message, type: 'invalid_request_error', param: null, code: null } });
}

const SSE_HEADERS = { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' };

function remember(raw: string) {
  if (recent.includes(raw)) return;
  recent.push(raw);
  if (recent.length > KEEP_REQUESTS) recent.shift();
}

function complete(res: http.ServerResponse, raw: string) {
  let body: { model?: unknown; messages?: unknown; stream?: unknown; stream_options?: { include_usage?: unknown } | null };
  try {
    body = JSON.parse(raw) as typeof body;
  } catch {
    return badRequest(res, 'We could not parse the JSON body of your request.');
  }
  if (typeof body.model !== 'string' || body.model === '') return badRequest(res, 'you must provide a model parameter');
  if (!Array.isArray(body.messages) || body.messages.length === 0) return badRequest(res, "Invalid 'messages'.");
  remember(raw);
  const id = `chatcmpl-bench${++completions}`;
  const created = Math.floor(Date.now() / 1000);
  const promptTokens = Math.max(1, Math.ceil(raw.length / 4));

  if (body.stream !== true) {
    return sendJson(res, 200, {
      id,
      object: 'chat.completion',
      created,
      model: body.model,
      system_fingerprint: 'fp_bench',
      choices: [{ index: 0, message: { role: 'assistant', content: REPLY, refusal: null }, logprobs: null, finish_reason: 'stop' }],
      usage: JSON.parse(usageJson(promptTokens, TOKENS.length)) as unknown,
      service_tier: 'default',
    });
  }

  const includeUsage = body.stream_options?.include_usage === true;
  const head = chunkHead(id, created, JSON.stringify(body.model));
  // With include_usage every chunk carries `usage: null` and the last one, without choices, the counts.
  const tail = includeUsage ? ',"usage":null}\n\n' : '}\n\n';
  const opening = `${head}${choice(ROLE_DELTA, 'null')}${tail}${tokenChunk(head, tail, 0)}`;

  if (settings.mode === 'instant') {
    let out = opening;
    for (let i = 1; i < TOKENS.length; i++) out += tokenChunk(head, tail, i);
    res.writeHead(200, SSE_HEADERS);
    res.end(out + ending(head, tail, includeUsage, promptTokens, TOKENS.length));
    return;
  }

  res.writeHead(200, SSE_HEADERS);
  res.write(opening);
  const stream: Held = { res, head, tail, includeUsage, promptTokens, tokens: 1, openedAt: Date.now() };
  held.add(stream);
  res.on('close', () => held.delete(stream));
  ticker ??= setInterval(tick, settings.tickMs);
}

function finishStream(stream: Held) {
  held.delete(stream);
  if (stream.res.destroyed || stream.res.writableEnded) return;
  stream.res.end(ending(stream.head, stream.tail, stream.includeUsage, stream.promptTokens, stream.tokens));
  finished++;
}

function tick() {
  const now = Date.now();
  for (const stream of held) {
    if (now - stream.openedAt >= settings.maxHoldMs) finishStream(stream);
    else if (!stream.res.destroyed) stream.res.write(tokenChunk(stream.head, stream.tail, stream.tokens++));
  }
  if (held.size === 0) stopTicker();
}

function stopTicker() {
  if (ticker) clearInterval(ticker);
  ticker = undefined;
}

function finishAll(): number {
  const streams = [...held];
  for (const stream of streams) finishStream(stream);
  stopTicker();
  return streams.length;
}

const server = http.createServer((req, res) => {
  if (req.method !== 'POST' || req.url?.split('?')[0] !== '/v1/chat/completions') {
    req.resume();
    return sendJson(res, 404, { error: { message: `Unknown request URL: ${req.method} ${req.url}`, type: 'invalid_request_error', param: null, code: 'unknown_url' } });
  }
  req.setEncoding('utf8');
  let raw = '';
  req.on('data', (piece: string) => {
    raw += piece;
  });
  req.on('end', () => complete(res, raw));
});
// Held streams stay open as long as the benchmark wants; idle keep-alive connections as long as the platform keeps them.
server.requestTimeout = 0;
server.keepAliveTimeout = 65_000;
server.headersTimeout = 66_000;

function update(next: Partial<FakeModelSettings>) {
  if (next.mode !== undefined && next.mode !== 'instant' && next.mode !== 'hold') throw new Error(`unknown mode ${String(next.mode)}`);
  for (const key of ['tickMs', 'maxHoldMs'] as const) {
    const n = next[key];
    if (n !== undefined && !(Number.isFinite(n) && n > 0)) throw new Error(`${key} must be a positive number`);
  }
  const tickChanged = next.tickMs !== undefined && next.tickMs !== settings.tickMs;
  Object.assign(settings, next);
  if (tickChanged && ticker) {
    stopTicker();
    ticker = setInterval(tick, settings.tickMs);
  }
}

let stopping = false;
function stop() {
  if (stopping) return;
  stopping = true;
  stopTicker();
  for (const stream of held) stream.res.destroy();
  server.closeAllConnections();
  server.close(() => process.exit(0));
  setTimeout(() => process.exit(0), 2_000).unref();
}

function main() {
  if (!process.send) throw new Error('fake-model.js runs as a forked child of the bench');
  process.on('message', (raw) => {
    const message = raw as FakeParentMessage;
    try {
      switch (message.type) {
        case 'set':
          update(message.settings);
          send({ type: 'set', settings: { ...settings } });
          break;
        case 'finish':
          send({ type: 'finished', count: finishAll() });
          break;
        case 'stats':
          send({ type: 'stats', stats: { completions, held: held.size, finished } });
          break;
        case 'requests':
          send({ type: 'requests', bodies: [...recent] });
          break;
        case 'cpu':
          send({ type: 'cpu', usage: process.cpuUsage() });
          break;
        case 'memory': {
          const gc = (globalThis as { gc?: () => void }).gc;
          gc?.();
          send({ type: 'memory', usage: process.memoryUsage(), gc: gc !== undefined });
          break;
        }
        case 'stop':
          stop();
          break;
      }
    } catch (err) {
      send({ type: 'failed', message: err instanceof Error ? err.message : String(err) });
    }
  });
  process.on('disconnect', stop);
  for (const signal of ['SIGINT', 'SIGTERM'] as const) process.on(signal, stop);

  server.listen({ host: '127.0.0.1', port: 0, backlog: 2048 }, () => {
    const address = server.address();
    if (address === null || typeof address === 'string') throw new Error('no TCP address');
    send({ type: 'ready', port: address.port, key: null, personaId: null });
  });
}

try {
  main();
} catch (err) {
  send({ type: 'failed', message: err instanceof Error ? (err.stack ?? err.message) : String(err) });
  process.exit(1);
}
