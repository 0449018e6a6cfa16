/**
 * The agent loop: persona + history + retrieved passages + tools → one stream of events. It knows
 * nothing of HTTP or storage; `emit` is awaited, so a slow reader slows the model stream down.
 */
import type { Logger } from 'pino';
import { AppError, UpstreamError } from '../../errors.js';
import type { ChatMessage, LlmClient, ModelToolCall, Passage, ToolSpec, Usage } from '../../llm/llm-client.js';
import type { KnowledgeService } from '../knowledge/knowledge.service.js';
import type { Persona } from '../personas/personas.schemas.js';
import type { ToolHub } from '../tools/tool-hub.js';
import type { FinishReason } from './chat.schemas.js';
import { allows, fitHistory, systemPrompt, toolResultContent, toolSpecs } from './prompt.js';

export interface ToolCallRecord {
  id: string;
  /** `<toolName>.<action>`. */
  name: string;
  /** The parsed arguments, or the model's text when it was not JSON. */
  arguments: unknown;
  result: unknown;
  isError: boolean;
}

export interface Source {
  chunkId: string;
  sourceId: string;
  sourceName: string;
  score: number;
}

export type AgentEvent =
  | { type: 'text'; content: string }
  | { type: 'tool_call'; toolCall: { id: string; name: string; arguments: unknown } }
  | { type: 'tool_result'; toolCallId: string; result: unknown; isError: boolean };

export interface AgentInput {
  workspaceId: string;
  persona: Persona;
  /** Earlier turns, oldest first; trimmed to the history budget here. */
  history: ChatMessage[];
  message: string;
  callerInstructions?: string[] | undefined;
  enableTools: boolean;
  model?: string | undefined;
  temperature?: number | undefined;
  maxTokens?: number | undefined;
  signal: AbortSignal;
  /** False when the events are not read until the answer is whole: the model is then asked for one completion, not a stream. */
  streamed?: boolean | undefined;
  /** Offer the built-in `handoff` tool (the persona's rules allow it and it has a team): its call hands the conversation to a person. */
  handoff?: boolean | undefined;
}

/** The qualified name of the built-in handoff tool: a call the chat service acts on once the answer is stored. */
export const HANDOFF_TOOL = 'handoff.request';

const handoffSpec: ToolSpec = {
  name: 'handoff',
  qualifiedName: HANDOFF_TOOL,
  description:
    'Hands this conversation to a person of your team, who replies here. Call it when the user asks for a person, in any words, or when you should not answer ' +
    '(a complaint, a decision you may not make, something outside what you know). Then tell the user a person will reply.',
  parameters: {
    type: 'object',
    properties: { reason: { type: 'string', description: 'Why a person should take over, in a sentence, for the team.' } },
    required: ['reason'],
    additionalProperties: false,
  },
};

export interface AgentOutcome {
  content: string;
  model: string;
  /** Each tool round's calls with their results, in order. */
  rounds: ToolCallRecord[][];
  sources: Source[];
  usage: Usage;
  /** From the start of the run to the first text; null when none came. */
  ttftMs: number | null;
  /** The last model turn's: `length` when it stopped at the token limit. */
  finishReason: FinishReason;
}

export interface AgentLimits {
  /** Passages retrieved per message. */
  passages: number;
  /** Tool rounds before the model must answer without tools. */
  maxToolRounds: number;
  /** Calls honoured per round; more get an error result. */
  maxCallsPerRound: number;
  toolTimeoutMs: number;
}

export const DEFAULT_AGENT_LIMITS: AgentLimits = { passages: 5, maxToolRounds: 4, maxCallsPerRound: 8, toolTimeoutMs: 30_000 };

/** Retrieval reads at most this much of a long message. */
const RETRIEVAL_QUERY_CHARS = 2_000;

export interface AgentDeps {
  llm: LlmClient;
  knowledge: KnowledgeService;
  tools: ToolHub;
  logger: Logger;
  limits?: Partial<AgentLimits>;
}

export function createAgent(deps: AgentDeps) {
  const limits = { ...DEFAULT_AGENT_LIMITS, ...deps.limits };

  async function retrieve(workspaceId: string, personaId: string, message: string): Promise<{ passages: Passage[]; sources: Source[] }> {
    const q = message.slice(0, RETRIEVAL_QUERY_CHARS);
    let hits;
    try {
      // The answer has just read its persona in this workspace: the search need not read it again.
      hits = (await deps.knowledge.search(workspaceId, { q, limit: limits.passages, mode: 'hybrid', personaId }, { personaChecked: true })).data;
    } catch (err) {
      // An embeddings endpoint that is down should not silence the persona: keyword search needs no model.
      if (!(err instanceof UpstreamError)) throw err;
      deps.logger.warn({ err: err.message }, 'vector retrieval failed; answering from keyword search');
      hits = (await deps.knowledge.search(workspaceId, { q, limit: limits.passages, mode: 'keyword', personaId }, { personaChecked: true })).data;
    }
    return {
      passages: hits.map((h, i) => ({ n: i + 1, sourceName: h.sourceName, text: h.text })),
      sources: hits.map((h) => ({ chunkId: h.chunkId, sourceId: h.sourceId, sourceName: h.sourceName, score: h.score })),
    };
  }

  async function offeredTools(workspaceId: string, persona: Persona): Promise<ToolSpec[]> {
    if (persona.tools.length === 0) return [];
    const all = await deps.tools.list(workspaceId);
    return toolSpecs(all.filter((d) => allows(persona.tools, `${d.toolName}.${d.action}`)));
  }

  async function runCall(input: AgentInput, spec: ToolSpec | undefined, call: ModelToolCall, args: unknown): Promise<{ result: unknown; isError: boolean }> {
    if (!spec) return { result: { error: `The tool "${call.name}" is not available to this persona.` }, isError: true };
    if (args === null || typeof args !== 'object' || Array.isArray(args)) {
      return { result: { error: 'The arguments must be a JSON object.' }, isError: true };
    }
    // Nothing to run: the chat service hands the conversation over once this answer is stored.
    if (spec.qualifiedName === HANDOFF_TOOL) return { result: { handedOver: true, note: 'A person of your team takes the conversation after this answer; tell the user they will reply here.' }, isError: false };
    const dot = spec.qualifiedName.indexOf('.');
    // One deadline: it aborts the tool's signal and ends the wait even for a tool that ignores it.
    const deadline = new AbortController();
    const timer = setTimeout(() => deadline.abort(), limits.toolTimeoutMs);
    const timedOut = new Promise<never>((_, reject) => deadline.signal.addEventListener('abort', () => reject(deadline.signal.reason)));
    try {
      const running = deps.tools.call(input.workspaceId, spec.qualifiedName.slice(0, dot), spec.qualifiedName.slice(dot + 1), args as Record<string, unknown>, {
        signal: AbortSignal.any([input.signal, deadline.signal]),
        personaId: input.persona.id,
      });
      running.catch(() => {});
      return await Promise.race([running, timedOut]);
    } catch (err) {
      if (input.signal.aborted) throw input.signal.reason;
      if (deadline.signal.aborted) return { result: { error: `${spec.qualifiedName} timed out after ${limits.toolTimeoutMs} ms.` }, isError: true };
      if (err instanceof AppError) return { result: { error: err.message }, isError: true };
      deps.logger.error({ err, tool: spec.qualifiedName }, 'tool call failed');
      return { result: { error: `${spec.qualifiedName} failed unexpectedly.` }, isError: true };
    } finally {
      clearTimeout(timer);
    }
  }

  /** Runs one answer; throws AppErrors from the model, or the signal's reason when cancelled. */
  async function run(input: AgentInput, emit: (event: AgentEvent) => Promise<void> | void): Promise<AgentOutcome> {
    const started = performance.now();
    const { passages, sources } = await retrieve(input.workspaceId, input.persona.id, input.message);
    const tools = [...(input.enableTools ? await offeredTools(input.workspaceId, input.persona) : []), ...(input.handoff ? [handoffSpec] : [])];
    const model = modelFor(input.persona, input.model);
    const messages: ChatMessage[] = [
      { role: 'system', content: systemPrompt({ persona: input.persona, passages, callerInstructions: input.callerInstructions, withTools: tools.length > 0 }) },
      ...fitHistory(input.history),
      { role: 'user', content: input.message },
    ];
    const usage: Usage = { promptTokens: 0, completionTokens: 0 };
    const rounds: ToolCallRecord[][] = [];
    let content = '';
    let ttftMs: number | null = null;
    let finishReason: FinishReason = 'stop';

    for (let round = 0; ; round++) {
      const offer = round < limits.maxToolRounds ? tools : [];
      let calls: ModelToolCall[] = [];
      let roundText = '';
      for await (const event of deps.llm.stream({
        model,
        messages,
        tools: offer,
        temperature: input.temperature ?? input.persona.temperature ?? undefined,
        maxTokens: input.maxTokens ?? input.persona.maxTokens ?? undefined,
        signal: input.signal,
        stream: input.streamed ?? true,
        context: { personaName: input.persona.name, passages },
      })) {
        if (event.type === 'text') {
          ttftMs ??= performance.now() - started;
          roundText += event.text;
          await emit({ type: 'text', content: event.text });
        } else {
          usage.promptTokens += event.usage.promptTokens;
          usage.completionTokens += event.usage.completionTokens;
          calls = event.toolCalls;
          finishReason = event.finishReason === 'length' ? 'length' : 'stop';
        }
      }
      content += roundText;
      if (calls.length === 0 || offer.length === 0) break;

      messages.push({ role: 'assistant', content: roundText, toolCalls: calls });
      const records = calls.map((call) => {
        let args: unknown;
        try {
          args = JSON.parse(call.arguments || '{}');
        } catch {
          args = call.arguments;
        }
        const spec = offer.find((t) => t.name === call.name);
        return { call, spec, record: { id: call.id, name: spec?.qualifiedName ?? call.name, arguments: args, result: null as unknown, isError: false } };
      });
      for (const { record } of records) await emit({ type: 'tool_call', toolCall: { id: record.id, name: record.name, arguments: record.arguments } });
      const outputs = await Promise.all(
        records.map(({ call, spec, record }, i) =>
          i < limits.maxCallsPerRound
            ? runCall(input, spec, call, record.arguments)
            : { result: { error: `At most ${limits.maxCallsPerRound} tool calls are run per round.` }, isError: true },
        ),
      );
      records.forEach(({ record }, i) => Object.assign(record, outputs[i]));
      for (const { record } of records) {
        await emit({ type: 'tool_result', toolCallId: record.id, result: record.result, isError: record.isError });
        messages.push({ role: 'tool', toolCallId: record.id, content: toolResultContent(record.result, record.isError) });
      }
      rounds.push(records.map((r) => r.record));
    }
    return { content, model, rounds, sources, usage, ttftMs: ttftMs === null ? null : Math.round(ttftMs), finishReason };
  }

  /** The request's model, else the persona's, else the server's. */
  function modelFor(persona: Persona, requested: string | undefined): string {
    return requested ?? persona.model ?? deps.llm.defaultModel;
  }

  return { run, modelFor };
}

export type Agent = ReturnType<typeof createAgent>;
