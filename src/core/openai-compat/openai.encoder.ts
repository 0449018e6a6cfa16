/**
 * OpenAI's `chat.completion.chunk` stream, fed the agent's events like the encoders of
 * `chat/encoders.ts`: the role in the first delta, text deltas, a chunk with `finish_reason`, the
 * usage in a last chunk with empty `choices` when asked, then `data: [DONE]`. The persona's own
 * tool rounds run server-side and are not shown (an OpenAI client would try to run them).
 */
import type { Answer } from '../chat/chat.schemas.js';
import type { StreamEncoder } from '../chat/encoders.js';
import { AppError, type ErrorCode } from '../../errors.js';
import { toOpenAiError } from './openai.errors.js';

export interface ChunkStreamOptions {
  id: string;
  model: string;
  created: number;
  includeUsage: boolean;
  sessionId: string;
}

/** Switchboard's extras of an answer, in the `switchboard` field of a completion or of the last chunk. */
export function switchboardOf(a: Answer) {
  return {
    session_id: a.sessionId,
    message_id: a.messageId,
    persona_id: a.personaId,
    ab_test_id: a.abTestId,
    variant: a.variant,
    sources: a.sources.map((s) => ({ chunk_id: s.chunkId, source_id: s.sourceId, source_name: s.sourceName, score: s.score })),
  };
}

export function usageOf(a: Answer) {
  return { prompt_tokens: a.usage.promptTokens, completion_tokens: a.usage.completionTokens, total_tokens: a.usage.promptTokens + a.usage.completionTokens };
}

export function completionChunkEncoder(o: ChunkStreamOptions): StreamEncoder {
  // OpenAI sends `usage: null` on every chunk but the last when usage was asked for.
  const head = `{"id":${JSON.stringify(o.id)},"object":"chat.completion.chunk","created":${o.created},"model":${JSON.stringify(o.model)},`;
  const tail = o.includeUsage ? ',"usage":null}' : '}';
  const choice = (delta: string, finish: string | null) => `"choices":[{"index":0,"delta":${delta},"logprobs":null,"finish_reason":${finish === null ? 'null' : `"${finish}"`}}]`;
  const send = (json: string) => `data: ${json}\n\n`;
  return {
    headers: { 'x-switchboard-session-id': o.sessionId },
    start: () => send(head + choice('{"role":"assistant","content":"","refusal":null}', null) + tail),
    event: (event) => (event.type === 'text' && event.content !== '' ? send(head + choice(`{"content":${JSON.stringify(event.content)}}`, null) + tail) : ''),
    done(a) {
      let out = send(`${head + choice('{}', a.finishReason)},"switchboard":${JSON.stringify(switchboardOf(a))}${tail}`);
      if (o.includeUsage) out += send(`${head}"choices":[],"usage":${JSON.stringify(usageOf(a))}}`);
      return out;
    },
    // After the stream started, an error travels as OpenAI's error object; the openai package throws it.
    error: (e) => send(JSON.stringify(toOpenAiError(new AppError(e.code as ErrorCode, e.message)))),
    end: () => 'data: [DONE]\n\n',
  };
}
