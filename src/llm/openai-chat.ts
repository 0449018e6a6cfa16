import { estimateTokens } from '../lib/text.js';
import type { ChatMessage, ChatRequest, LlmClient, ModelEvent, ModelToolCall, Usage } from './llm-client.js';
import { type OpenAI, isAbortError, toUpstreamError } from './openai-client.js';

type ChatParams = OpenAI.Chat.Completions.ChatCompletionCreateParamsStreaming;
type WireMessage = OpenAI.Chat.Completions.ChatCompletionMessageParam;

export interface OpenAiChatOptions {
  /**
   * From `createOpenAi`: its time-out (headers, then each silence in the body) and its retries apply.
   * The package retries only before it has a response, so a retry never repeats streamed text.
   */
  client: Pick<OpenAI, 'chat' | 'baseURL' | 'apiKey' | 'timeout'>;
  defaultModel: string;
  /**
   * How long a whole (non-streamed) completion may take. The client's time-out bounds a silence,
   * and a model writing a whole answer is silent until it has finished: a local model on a CPU may
   * take minutes for a long one, which a stream would have delivered token by token. Default
   * WHOLE_ANSWER_TIMEOUT_MS, never less than the client's time-out.
   */
  wholeTimeoutMs?: number | undefined;
}

/** The `openai` package's own default time-out. */
export const WHOLE_ANSWER_TIMEOUT_MS = 10 * 60_000;

function toWire(message: ChatMessage): WireMessage {
  switch (message.role) {
    case 'tool':
      return { role: 'tool', tool_call_id: message.toolCallId, content: message.content };
    case 'assistant':
      if (message.toolCalls && message.toolCalls.length > 0) {
        return {
          role: 'assistant',
          content: message.content === '' ? null : message.content,
          tool_calls: message.toolCalls.map((c) => ({ id: c.id, type: 'function', function: { name: c.name, arguments: c.arguments } })),
        };
      }
      return { role: 'assistant', content: message.content };
    default:
      return { role: message.role, content: message.content };
  }
}

const FINISH: Record<string, 'stop' | 'tool_calls' | 'length'> = { stop: 'stop', tool_calls: 'tool_calls', function_call: 'tool_calls', length: 'length' };

/**
 * An LlmClient over any OpenAI-compatible `/chat/completions`: streamed, tool calls assembled from
 * their deltas, usage from `stream_options.include_usage` (estimated when a server omits it).
 */
export function createOpenAiChat({ client, defaultModel, wholeTimeoutMs = WHOLE_ANSWER_TIMEOUT_MS }: OpenAiChatOptions): LlmClient {
  const wholeTimeout = Math.max(wholeTimeoutMs, client.timeout);
  function paramsOf(request: ChatRequest): Omit<ChatParams, 'stream' | 'stream_options'> {
    return {
      model: request.model,
      messages: request.messages.map(toWire),
      ...(request.temperature !== undefined ? { temperature: request.temperature } : {}),
      // `max_tokens`, not `max_completion_tokens`: every compatible server (Ollama, vLLM, llama.cpp) knows it.
      ...(request.maxTokens !== undefined ? { max_tokens: request.maxTokens } : {}),
      ...(request.tools && request.tools.length > 0
        ? { tools: request.tools.map((t) => ({ type: 'function' as const, function: { name: t.name, description: t.description, parameters: t.parameters } })) }
        : {}),
    };
  }

  /** The last event: calls without an id (some local servers) get one; usage is estimated when a server omits it. */
  function endEvent(request: ChatRequest, text: string, calls: ModelToolCall[], usage: Usage | undefined, finish: string | null | undefined): ModelEvent {
    const toolCalls = calls.filter(Boolean).map((c, i) => ({ ...c, id: c.id || `call_${i}` }));
    return {
      type: 'end',
      toolCalls,
      usage: usage ?? {
        promptTokens: request.messages.reduce((n, m) => n + estimateTokens(m.content), 0),
        completionTokens: estimateTokens(text) + toolCalls.reduce((n, c) => n + estimateTokens(c.arguments), 0),
      },
      finishReason: toolCalls.length > 0 ? 'tool_calls' : (FINISH[finish ?? 'stop'] ?? 'other'),
    };
  }

  function failure(request: ChatRequest, err: unknown): unknown {
    if (request.signal?.aborted && isAbortError(err)) return request.signal.reason ?? err;
    return toUpstreamError(err, 'Chat completion', client);
  }

  /**
   * One completion, not streamed: parsing one JSON body costs a fraction of parsing a chunk per token
   * (issue 18: 359 → 629 answers/s for POST /query, pinned), and nobody reads the text before it is whole.
   */
  async function* whole(request: ChatRequest): AsyncGenerator<ModelEvent> {
    let completion: OpenAI.Chat.Completions.ChatCompletion;
    try {
      completion = await client.chat.completions.create({ ...paramsOf(request), stream: false }, { signal: request.signal, timeout: wholeTimeout });
    } catch (err) {
      throw failure(request, err);
    }
    const choice = completion.choices?.[0];
    const text = typeof choice?.message?.content === 'string' ? choice.message.content : '';
    const calls: ModelToolCall[] = (choice?.message?.tool_calls ?? []).flatMap((c) =>
      c.type === 'function' ? [{ id: c.id ?? '', name: c.function?.name ?? '', arguments: c.function?.arguments ?? '' }] : [],
    );
    if (text !== '') yield { type: 'text', text };
    const u = completion.usage;
    yield endEvent(request, text, calls, u ? { promptTokens: u.prompt_tokens, completionTokens: u.completion_tokens } : undefined, choice?.finish_reason);
  }

  async function* stream(request: ChatRequest): AsyncGenerator<ModelEvent> {
    if (request.stream === false) {
      yield* whole(request);
      return;
    }
    const params: ChatParams = { ...paramsOf(request), stream: true, stream_options: { include_usage: true } };
    const calls: ModelToolCall[] = [];
    let text = '';
    let usage: Usage | undefined;
    let finish: string | null = null;
    try {
      const chunks = await client.chat.completions.create(params, { signal: request.signal });
      for await (const chunk of chunks) {
        if (chunk.usage) usage = { promptTokens: chunk.usage.prompt_tokens, completionTokens: chunk.usage.completion_tokens };
        const choice = chunk.choices?.[0];
        if (!choice) continue;
        if (choice.finish_reason) finish = choice.finish_reason;
        const delta = choice.delta;
        if (!delta) continue;
        if (typeof delta.content === 'string' && delta.content !== '') {
          text += delta.content;
          yield { type: 'text', text: delta.content };
        }
        for (const piece of delta.tool_calls ?? []) {
          const call = (calls[piece.index] ??= { id: '', name: '', arguments: '' });
          if (piece.id) call.id = piece.id;
          if (piece.function?.name) call.name += piece.function.name;
          if (piece.function?.arguments) call.arguments += piece.function.arguments;
        }
      }
      // The package ends the iteration quietly when the signal aborts mid-stream; a cancelled answer must not look finished.
      request.signal?.throwIfAborted();
    } catch (err) {
      throw failure(request, err);
    }
    // Sparse when a server skipped an index.
    yield endEvent(request, text, calls, usage, finish);
  }

  return { provider: 'openai', defaultModel, stream };
}
