/**
 * The fake's `POST /v1/chat/completions`: OpenAI's wire protocol, streamed (SSE chunks ending with
 * `data: [DONE]`) and non-streamed (one `chat.completion` object), so the real `openai` package
 * can be pointed at it.
 *
 * Answers come from a queue of scripted replies (`fake.reply(...)`); with none queued, the fake
 * echoes the last user message. Requests that fail validation or that a `fail(...)` behaviour
 * answers do not consume a reply, so a retried request still gets the one the test queued.
 *
 * This module and `openai-server.ts` import each other; that is safe because neither touches
 * the other's exports until a request arrives.
 */
import { type RouteHandler, sendError, sendJson } from './openai-server.js';

/** One scripted answer to a chat completion request; queued with `fake.reply(...)`. */
export interface ChatReply {
  /** Assistant text; streamed as word-sized deltas that concatenate back to exactly this. */
  text?: string;
  /** Tool calls in order (indices 0, 1, ...); streamed with `arguments` split over several chunks. */
  toolCalls?: { id?: string; name: string; arguments: string }[];
  /** Token counts to report; otherwise estimated as characters / 4. */
  usage?: { prompt: number; completion: number };
  /** Wait after the response headers before the first chunk (before the whole answer when not streamed). */
  firstTokenDelayMs?: number;
  /** Wait between streamed chunks. */
  chunkDelayMs?: number;
  /**
   * Send this many SSE chunks (the first role chunk counts) and then destroy the socket, as a
   * connection dropped mid-stream. A non-streamed request gets its socket destroyed unanswered.
   */
  dropAfterChunks?: number;
  /** Override `finish_reason` (default `tool_calls` when there are tool calls, else `stop`). */
  finishReason?: string;
}

interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  prompt_tokens_details: { cached_tokens: number; audio_tokens: number };
  completion_tokens_details: { reasoning_tokens: number; audio_tokens: number; accepted_prediction_tokens: number; rejected_prediction_tokens: number };
}

type Delta = {
  role?: 'assistant';
  content?: string | null;
  refusal?: null;
  tool_calls?: { index: number; id?: string; type?: 'function'; function: { name?: string; arguments?: string } }[];
};

/** A message's text: the string, or the `text` parts of a content-part array joined together. */
function contentText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content
    .filter((p): p is { type: 'text'; text: string } => typeof p === 'object' && p !== null && p.type === 'text' && typeof p.text === 'string')
    .map((p) => p.text)
    .join('');
}

/** `"Hello big world"` → `["Hello", " big", " world"]`; leading spaces ride with the word, as in OpenAI's tokens. */
function wordDeltas(text: string): string[] {
  return text.match(/\s*\S+|\s+/g) ?? [];
}

/** Splits a tool call's arguments into about three pieces (fewer only when shorter than three characters). */
function argumentPieces(args: string): string[] {
  // Code points, so a piece never ends in half a surrogate pair.
  const chars = Array.from(args);
  const size = Math.max(1, Math.ceil(chars.length / 3));
  const pieces: string[] = [];
  for (let i = 0; i < chars.length; i += size) pieces.push(chars.slice(i, i + size).join(''));
  return pieces;
}

const tokens = (chars: number) => Math.max(1, Math.ceil(chars / 4));

function usageOf(reply: ChatReply, messages: Record<string, unknown>[]): Usage {
  const prompt = reply.usage?.prompt ?? tokens(messages.reduce((n, m) => n + contentText(m.content).length, 0));
  const completion = reply.usage?.completion ?? tokens((reply.text ?? '').length);
  return {
    prompt_tokens: prompt,
    completion_tokens: completion,
    total_tokens: prompt + completion,
    prompt_tokens_details: { cached_tokens: 0, audio_tokens: 0 },
    completion_tokens_details: { reasoning_tokens: 0, audio_tokens: 0, accepted_prediction_tokens: 0, rejected_prediction_tokens: 0 },
  };
}

/** The deltas a streamed reply is made of, in order, before the final `finish_reason` chunk. */
function streamDeltas(reply: ChatReply): Delta[] {
  const text = reply.text ?? '';
  const calls = reply.toolCalls ?? [];
  const deltas: Delta[] = [];
  // OpenAI opens a text answer with a role chunk of empty content, and a tool-call-only answer
  // with the role on the first tool call chunk and `content: null`.
  const roleOnFirstCall = text === '' && calls.length > 0;
  if (!roleOnFirstCall) deltas.push({ role: 'assistant', content: '', refusal: null });
  for (const piece of wordDeltas(text)) deltas.push({ content: piece });
  calls.forEach((call, index) => {
    const head: Delta = { tool_calls: [{ index, id: call.id ?? `call_fake${index}`, type: 'function', function: { name: call.name, arguments: '' } }] };
    deltas.push(index === 0 && roleOnFirstCall ? { role: 'assistant', content: null, refusal: null, ...head } : head);
    for (const piece of argumentPieces(call.arguments)) deltas.push({ tool_calls: [{ index, function: { arguments: piece } }] });
  });
  return deltas;
}

let completions = 0;

/**
 * The route handler over a reply queue the caller owns (the server's `reply(...)` pushes to it
 * and `reset()` empties it); each answered request takes the first reply.
 */
export function chatCompletionsRoute(replies: ChatReply[]): RouteHandler {
  return async ({ req, res, body, delay }) => {
    const b = (typeof body === 'object' && body !== null ? body : {}) as Record<string, unknown>;
    if (typeof b.model !== 'string' || b.model === '') {
      return sendError(res, 400, 'you must provide a model parameter', 'invalid_request_error', null);
    }
    if (!Array.isArray(b.messages)) {
      return sendError(res, 400, "Missing required parameter: 'messages'.", 'invalid_request_error', 'missing_required_parameter');
    }
    if (b.messages.length === 0) {
      return sendError(res, 400, "Invalid 'messages': empty array. Expected an array with minimum length 1, but got an empty array instead.", 'invalid_request_error', 'empty_array');
    }
    const messages = b.messages as unknown[];
    const bad = messages.findIndex((m) => typeof m !== 'object' || m === null || typeof (m as { role?: unknown }).role !== 'string');
    if (bad !== -1) {
      return sendError(res, 400, `Invalid value for 'messages[${bad}].role'.`, 'invalid_request_error', 'invalid_value');
    }
    const stream = b.stream === true;
    if (b.stream_options != null && !stream) {
      return sendError(res, 400, "The 'stream_options' parameter is only allowed when 'stream' is enabled.", 'invalid_request_error', null);
    }

    const typed = messages as Record<string, unknown>[];
    const lastUser = typed.findLast((m) => m.role === 'user');
    const reply = replies.shift() ?? { text: `Echo: ${contentText(lastUser?.content)}` };
    const calls = reply.toolCalls ?? [];
    const finishReason = reply.finishReason ?? (calls.length > 0 ? 'tool_calls' : 'stop');
    const usage = usageOf(reply, typed);
    const id = `chatcmpl-fake${++completions}`;
    const created = Math.floor(Date.now() / 1000);
    const head = (object: string) => ({ id, object, created, model: b.model, system_fingerprint: 'fp_fake' });
    // The client may have hung up while a delay ran; writing then would only raise errors.
    const gone = () => res.destroyed || res.writableEnded;

    if (!stream) {
      // Timers only when scripted, so the default path answers with no added latency.
      if (reply.firstTokenDelayMs) await delay(reply.firstTokenDelayMs);
      if (gone()) return;
      if (reply.dropAfterChunks !== undefined) return void req.socket.destroy();
      const message = {
        role: 'assistant',
        content: reply.text === undefined && calls.length > 0 ? null : (reply.text ?? ''),
        refusal: null,
        ...(calls.length > 0 && {
          tool_calls: calls.map((c, i) => ({ id: c.id ?? `call_fake${i}`, type: 'function', function: { name: c.name, arguments: c.arguments } })),
        }),
      };
      return sendJson(res, 200, {
        ...head('chat.completion'),
        choices: [{ index: 0, message, logprobs: null, finish_reason: finishReason }],
        usage,
        service_tier: 'default',
      });
    }

    const includeUsage = (b.stream_options as { include_usage?: unknown } | null | undefined)?.include_usage === true;
    // With include_usage every chunk carries `usage: null` and one last chunk without choices
    // carries the counts; without it the field is absent.
    const chunk = (choices: unknown[], u: Usage | null = null) => ({ ...head('chat.completion.chunk'), choices, ...(includeUsage && { usage: u }) });
    const chunks = [
      ...streamDeltas(reply).map((delta) => chunk([{ index: 0, delta, logprobs: null, finish_reason: null }])),
      chunk([{ index: 0, delta: {}, logprobs: null, finish_reason: finishReason }]),
      ...(includeUsage ? [chunk([], usage)] : []),
    ];

    res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' });
    // Headers go out now so that a first-token delay is a delay in the body, as with a slow model.
    res.flushHeaders();
    if (reply.firstTokenDelayMs) await delay(reply.firstTokenDelayMs);
    const drop = reply.dropAfterChunks;
    const count = drop === undefined ? chunks.length : Math.min(drop, chunks.length);
    for (let i = 0; i < count; i++) {
      if (i > 0 && reply.chunkDelayMs) await delay(reply.chunkDelayMs);
      if (gone()) return;
      const line = `data: ${JSON.stringify(chunks[i])}\n\n`;
      if (drop !== undefined && i === count - 1) {
        // Wait until the last chunk is handed to the socket, or destroying it could discard it.
        await new Promise<void>((resolve) => res.write(line, () => resolve()));
      } else {
        res.write(line);
      }
    }
    if (drop !== undefined) return void req.socket.destroy();
    if (gone()) return;
    res.end('data: [DONE]\n\n');
  };
}
