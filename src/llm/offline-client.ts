/**
 * The `offline` model (DESIGN.md "Models"): no network, deterministic. It answers with the
 * retrieved passages' sentences that best match the question, calls a tool when the message says
 * `/tool name.action {json}` and that tool is offered, and says plainly what it is.
 */
import { estimateTokens, isStopword, wordsOf } from '../lib/text.js';
import type { ChatMessage, ChatRequest, LlmClient, ModelEvent, ModelToolCall, Passage } from './llm-client.js';

export const OFFLINE_MODEL = 'offline';
const PREAMBLE = 'Offline model (no language model is configured):';
const TOOL_COMMAND = /^\s*\/tool\s+(\S+)(?:\s+([\s\S]*))?$/;
const SENTENCES_PER_PASSAGE = 2;
const PASSAGES_QUOTED = 3;
const MAX_RESULT_CHARS = 1_000;
const FENCED_RESULT = /^<tool_result[^>]*>\n([\s\S]*)\n<\/tool_result>$/;

type Plan = { text: string; toolCalls: ModelToolCall[] };

function contentWords(text: string): Set<string> {
  return new Set(wordsOf(text).filter((w) => !isStopword(w)));
}

/** The passage's sentences sharing the most words with the question, in their original order. */
function bestSentences(passage: string, question: Set<string>): string {
  const sentences = passage.replace(/\s+/g, ' ').trim().match(/[^.!?]+(?:[.!?]+|$)/g) ?? [passage];
  const scored = sentences.map((s, i) => {
    let hits = 0;
    for (const w of contentWords(s)) if (question.has(w)) hits++;
    return { s: s.trim(), i, hits };
  });
  const chosen = [...scored].sort((a, b) => b.hits - a.hits || a.i - b.i).slice(0, SENTENCES_PER_PASSAGE);
  return chosen
    .sort((a, b) => a.i - b.i)
    .map((c) => c.s)
    .join(' ');
}

function answerFromPassages(question: string, personaName: string, passages: Passage[]): string {
  if (passages.length === 0) {
    return `${PREAMBLE} I found nothing about that in ${personaName}'s knowledge, so I cannot answer it. Add knowledge sources, or set OPENAI_API_KEY to use a language model.`;
  }
  const words = contentWords(question);
  const quoted = passages.slice(0, PASSAGES_QUOTED);
  const lines = quoted.map((p) => `[${p.n}] ${bestSentences(p.text, words)}`);
  const cited = quoted.map((p) => `[${p.n}] ${p.sourceName}`).join('; ');
  return `${PREAMBLE} here is what ${personaName}'s knowledge says.\n\n${lines.join('\n\n')}\n\nSources: ${cited}.`;
}

function planToolCall(message: string, request: ChatRequest, round: number): Plan | null {
  const match = TOOL_COMMAND.exec(message);
  if (!match) return null;
  const [, name, rawArgs] = match as unknown as [string, string, string | undefined];
  const spec = request.tools?.find((t) => t.qualifiedName === name);
  if (!spec) {
    return {
      text: `${PREAMBLE} I cannot call ${name}: it is not offered to me here (tools need enableMCPTools, and the persona's tools must include it).`,
      toolCalls: [],
    };
  }
  const args = (rawArgs ?? '').trim() || '{}';
  try {
    const parsed: unknown = JSON.parse(args);
    if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) throw new Error('not an object');
  } catch {
    return { text: `${PREAMBLE} the arguments after "/tool ${name}" must be one JSON object.`, toolCalls: [] };
  }
  return { text: '', toolCalls: [{ id: `call_offline_${round}`, name: spec.name, arguments: args }] };
}

/** After a tool round: report each result of the latest round. */
function reportToolResults(messages: ChatMessage[], request: ChatRequest): string {
  const results: string[] = [];
  let i = messages.length - 1;
  for (; i >= 0; i--) {
    const m = messages[i]!;
    if (m.role !== 'tool') break;
    results.unshift(m.content);
  }
  const asked = messages[i];
  const calls = asked?.role === 'assistant' ? (asked.toolCalls ?? []) : [];
  const lines = results.map((result, k) => {
    const call = calls[k];
    const name = request.tools?.find((t) => t.name === call?.name)?.qualifiedName ?? call?.name ?? 'the tool';
    // Tool results reach models fenced as data (core/chat/prompt.ts); this model reports the data itself.
    const data = FENCED_RESULT.exec(result)?.[1] ?? result;
    const shown = data.length > MAX_RESULT_CHARS ? `${data.slice(0, MAX_RESULT_CHARS)}…` : data;
    return `${name} returned: ${shown}`;
  });
  return `${PREAMBLE} ${lines.join('\n\n')}`;
}

function plan(request: ChatRequest): Plan {
  const messages = request.messages;
  const last = messages[messages.length - 1];
  if (last?.role === 'tool') return { text: reportToolResults(messages, request), toolCalls: [] };
  const question = last?.role === 'user' ? last.content : '';
  const rounds = messages.filter((m) => m.role === 'assistant' && (m.toolCalls?.length ?? 0) > 0).length;
  const context = request.context ?? { personaName: 'this persona', passages: [] };
  return planToolCall(question, request, rounds) ?? { text: answerFromPassages(question, context.personaName, context.passages), toolCalls: [] };
}

export function createOfflineClient(): LlmClient {
  async function* stream(request: ChatRequest): AsyncGenerator<ModelEvent> {
    request.signal?.throwIfAborted();
    const { text, toolCalls } = plan(request);
    // A word stands in for a token, so maxTokens cuts the answer short as it would a real model's.
    const all = text.match(/\s*\S+\s*/g) ?? [];
    const words = request.maxTokens !== undefined ? all.slice(0, request.maxTokens) : all;
    for (const word of words) {
      if (request.signal?.aborted) throw request.signal.reason;
      yield { type: 'text', text: word };
    }
    yield {
      type: 'end',
      toolCalls,
      usage: {
        promptTokens: request.messages.reduce((n, m) => n + estimateTokens(m.content), 0),
        completionTokens: estimateTokens(words.join('')) + toolCalls.reduce((n, c) => n + estimateTokens(c.arguments), 0),
      },
      finishReason: toolCalls.length > 0 ? 'tool_calls' : words.length < all.length ? 'length' : 'stop',
    };
  }
  return { provider: 'offline', defaultModel: OFFLINE_MODEL, stream };
}
