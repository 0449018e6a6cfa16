/**
 * The model port (DESIGN.md "Models"): the agent loop talks to this interface only. Two
 * implementations: `openai-chat.ts` (any OpenAI-compatible endpoint) and `offline-client.ts`.
 */

/** A tool call as the model asked for it; `arguments` is the model's JSON text, unparsed. */
export interface ModelToolCall {
  id: string;
  /** The function name the model was offered (see ToolSpec.name). */
  name: string;
  arguments: string;
}

export type ChatMessage =
  | { role: 'system'; content: string }
  | { role: 'user'; content: string }
  | { role: 'assistant'; content: string; toolCalls?: ModelToolCall[] }
  | { role: 'tool'; toolCallId: string; content: string };

/** A function the model may call. `name` matches `^[A-Za-z0-9_-]{1,64}$`, as OpenAI requires. */
export interface ToolSpec {
  name: string;
  /** The `<toolName>.<action>` it stands for (the offline model matches `/tool` commands on it). */
  qualifiedName: string;
  description: string;
  /** JSON Schema of the arguments object. */
  parameters: Record<string, unknown>;
}

/** A retrieved passage, given to the model in the prompt and, structured, to the offline model. */
export interface Passage {
  /** 1-based citation number, as `[n]` in the prompt. */
  n: number;
  sourceName: string;
  text: string;
}

export interface ChatRequest {
  model: string;
  messages: ChatMessage[];
  tools?: ToolSpec[] | undefined;
  temperature?: number | undefined;
  maxTokens?: number | undefined;
  /** Aborting it cancels the upstream call (the client disconnected). */
  signal?: AbortSignal | undefined;
  /**
   * False when nobody reads the answer before it is whole (`POST /query`, a non-streamed OpenAI
   * completion): a client may then ask for one completion instead of a token stream, which costs
   * far less to parse. It still yields the same events (the text in one piece). Default true.
   */
  stream?: boolean | undefined;
  /**
   * What the prompt was built from, for a model that cannot read prose (offline). Models that read
   * the messages ignore it: the same passages are already in the system message.
   */
  context?: { personaName: string; passages: Passage[] } | undefined;
}

export interface Usage {
  promptTokens: number;
  completionTokens: number;
}

/** What a model stream yields: text pieces as they come, then exactly one `end`. */
export type ModelEvent =
  | { type: 'text'; text: string }
  | {
      type: 'end';
      toolCalls: ModelToolCall[];
      usage: Usage;
      finishReason: 'stop' | 'tool_calls' | 'length' | 'other';
    };

export interface LlmClient {
  readonly provider: 'openai' | 'offline';
  /** The model used when neither the request nor the persona names one. */
  readonly defaultModel: string;
  /**
   * Streams one completion. Throws AppErrors (UpstreamError 502, UpstreamTimeoutError 504) on
   * failure, or the AbortError of `signal` when the caller cancelled.
   */
  stream(request: ChatRequest): AsyncIterable<ModelEvent>;
}
