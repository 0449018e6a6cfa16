import { describe, expect, it } from 'vitest';
import { toolResultContent } from '../../src/core/chat/prompt.js';
import type { ChatMessage, ChatRequest, ModelEvent, Passage, ToolSpec } from '../../src/llm/llm-client.js';
import { OFFLINE_MODEL, createOfflineClient } from '../../src/llm/offline-client.js';

type End = Extract<ModelEvent, { type: 'end' }>;

async function collect(request: ChatRequest): Promise<{ events: ModelEvent[]; texts: string[]; text: string; end: End }> {
  const events: ModelEvent[] = [];
  for await (const event of createOfflineClient().stream(request)) events.push(event);
  const ends = events.filter((e): e is End => e.type === 'end');
  expect(ends).toHaveLength(1);
  expect(events.at(-1)!.type).toBe('end');
  const texts = events.flatMap((e) => (e.type === 'text' ? [e.text] : []));
  return { events, texts, text: texts.join(''), end: ends[0]! };
}

const searchSpec: ToolSpec = {
  name: 'knowledge__search',
  qualifiedName: 'knowledge.search',
  description: 'Searches the knowledge base.',
  parameters: { type: 'object', properties: { query: { type: 'string' } } },
};

const passages: Passage[] = [
  {
    n: 1,
    sourceName: 'handbook.md',
    text: 'Our office opens at nine. Parking is free for visitors. The cafeteria serves lunch daily. Refunds are issued within fourteen days of purchase.',
  },
  { n: 2, sourceName: 'faq.txt', text: 'Shipping takes three days. Returns need the original receipt.' },
];

function ask(content: string, extra: Partial<ChatRequest> = {}): ChatRequest {
  return { model: OFFLINE_MODEL, messages: [{ role: 'user', content }], ...extra };
}

describe('createOfflineClient', () => {
  it('is deterministic and streams word by word', async () => {
    const request = ask('How long do refunds take?', { context: { personaName: 'Ada', passages } });
    const first = await collect(request);
    const second = await collect(request);
    expect(second.events).toEqual(first.events);

    expect(first.texts.length).toBeGreaterThan(10);
    // One word per event, whitespace riding along, so the pieces rebuild the answer exactly.
    for (const piece of first.texts) expect(piece.trim()).toMatch(/^\S+$/);
    expect(first.text).toMatch(/^Offline model/);
    expect(first.end.finishReason).toBe('stop');
    expect(first.end.toolCalls).toEqual([]);
    expect(first.end.usage.promptTokens).toBeGreaterThan(0);
    expect(first.end.usage.completionTokens).toBeGreaterThan(0);

    const client = createOfflineClient();
    expect(client.provider).toBe('offline');
    expect(client.defaultModel).toBe(OFFLINE_MODEL);
  });

  it('answers from the passages with the best-matching sentence, citations and sources', async () => {
    const { text } = await collect(ask('How long do refunds take?', { context: { personaName: 'Ada', passages } }));
    expect(text).toMatch(/offline model/i);
    expect(text).toContain("Ada's knowledge");
    expect(text).toContain('Refunds are issued within fourteen days of purchase.');
    // Sentences that share no word with the question and come after the first are left out.
    expect(text).not.toContain('Parking');
    expect(text).not.toContain('cafeteria');
    expect(text).toContain('[1]');
    expect(text).toContain('[2]');
    expect(text).toContain('[1] handbook.md');
    expect(text).toContain('[2] faq.txt');
  });

  it('says it found nothing when there are no passages', async () => {
    const { text, end } = await collect(ask('What is the meaning of life?', { context: { personaName: 'Ada', passages: [] } }));
    expect(text).toMatch(/^Offline model/);
    expect(text).toContain("found nothing about that in Ada's knowledge");
    expect(text).not.toMatch(/\[\d+\]/);
    expect(end.finishReason).toBe('stop');
  });

  it('calls an offered tool from a /tool command', async () => {
    const { texts, end } = await collect(ask('/tool knowledge.search {"query":"x"}', { tools: [searchSpec] }));
    expect(texts).toEqual([]);
    expect(end.finishReason).toBe('tool_calls');
    expect(end.toolCalls).toHaveLength(1);
    expect(end.toolCalls[0]!.name).toBe('knowledge__search');
    expect(end.toolCalls[0]!.id).not.toBe('');
    expect(JSON.parse(end.toolCalls[0]!.arguments)).toEqual({ query: 'x' });
  });

  it('explains in text that it cannot call a tool that is not offered', async () => {
    const { text, end } = await collect(ask('/tool knowledge.search {"query":"x"}'));
    expect(end.toolCalls).toEqual([]);
    expect(end.finishReason).toBe('stop');
    expect(text).toMatch(/^Offline model/);
    expect(text).toContain('cannot call knowledge.search');
  });

  it.each([
    ['not JSON', '{query: x}'],
    ['an array', '["x"]'],
    ['a string', '"x"'],
  ])('answers text, not a call, when the arguments are %s', async (_name, args) => {
    const { text, end } = await collect(ask(`/tool knowledge.search ${args}`, { tools: [searchSpec] }));
    expect(end.toolCalls).toEqual([]);
    expect(end.finishReason).toBe('stop');
    expect(text).toContain('must be one JSON object');
  });

  it('reports the result of a tool round without its fence', async () => {
    const result = { hits: [{ sourceName: 'handbook.md', text: 'Refunds take fourteen days.' }] };
    const messages: ChatMessage[] = [
      { role: 'user', content: '/tool knowledge.search {"query":"refunds"}' },
      { role: 'assistant', content: '', toolCalls: [{ id: 'call_offline_0', name: 'knowledge__search', arguments: '{"query":"refunds"}' }] },
      { role: 'tool', toolCallId: 'call_offline_0', content: toolResultContent(result, false) },
    ];
    const { text, end } = await collect({ model: OFFLINE_MODEL, messages, tools: [searchSpec] });
    expect(end.toolCalls).toEqual([]);
    expect(end.finishReason).toBe('stop');
    expect(text).toContain(`knowledge.search returned: ${JSON.stringify(result)}`);
    expect(text).not.toContain('tool_result');

    const failed: ChatMessage[] = [...messages.slice(0, 2), { role: 'tool', toolCallId: 'call_offline_0', content: toolResultContent({ error: 'boom' }, true) }];
    const { text: errorText } = await collect({ model: OFFLINE_MODEL, messages: failed, tools: [searchSpec] });
    expect(errorText).toContain('knowledge.search returned: {"error":"boom"}');
    expect(errorText).not.toContain('tool_result');
  });

  it('stops after maxTokens words with finishReason length', async () => {
    const { texts, end } = await collect(ask('How long do refunds take?', { maxTokens: 3, context: { personaName: 'Ada', passages } }));
    expect(texts).toHaveLength(3);
    expect(end.finishReason).toBe('length');
  });

  it('throws the abort when the signal is aborted', async () => {
    const reason = new DOMException('client went away', 'AbortError');
    const aborted = AbortSignal.abort(reason);
    const events: ModelEvent[] = [];
    const run = async () => {
      for await (const event of createOfflineClient().stream(ask('hello', { signal: aborted }))) events.push(event);
    };
    await expect(run()).rejects.toBe(reason);
    expect(events).toEqual([]);

    // Aborted mid-answer: no more words, and no `end`.
    const controller = new AbortController();
    const seen: ModelEvent[] = [];
    const midway = async () => {
      for await (const event of createOfflineClient().stream(ask('hello', { signal: controller.signal }))) {
        seen.push(event);
        if (seen.length === 2) controller.abort();
      }
    };
    await expect(midway()).rejects.toMatchObject({ name: 'AbortError' });
    expect(seen).toHaveLength(2);
  });
});
