import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { AppError, UpstreamError, UpstreamTimeoutError } from '../../src/errors.js';
import type { ChatMessage, ChatRequest, ModelEvent, ToolSpec } from '../../src/llm/llm-client.js';
import { createOpenAi } from '../../src/llm/openai-client.js';
import { createOpenAiChat } from '../../src/llm/openai-chat.js';
import { FAKE_OPENAI_KEY, type ChatReply, type FakeOpenAi, startFakeOpenAi } from '../fakes/openai-server.js';
import { chatCompletionsRoute } from '../fakes/openai-chat.js';

let fake: FakeOpenAi;

beforeAll(async () => {
  fake = await startFakeOpenAi();
});
afterAll(async () => {
  await fake.close();
});
beforeEach(() => fake.reset());

const MODEL = 'gpt-4o-mini';

function chat(options: { apiKey?: string; baseUrl?: string; timeoutMs?: number; maxRetries?: number } = {}) {
  const { apiKey = FAKE_OPENAI_KEY, baseUrl = fake.url, timeoutMs = 2_000, maxRetries = 0 } = options;
  return createOpenAiChat({ client: createOpenAi({ apiKey, baseUrl, timeoutMs, maxRetries }), defaultModel: MODEL });
}

const ask = (content: string, extra: Partial<ChatRequest> = {}): ChatRequest => ({ model: MODEL, messages: [{ role: 'user', content }], ...extra });

type End = Extract<ModelEvent, { type: 'end' }>;

/** Every event until the stream ends or throws; `error` is what it threw, if anything. */
async function drain(stream: AsyncIterable<ModelEvent>): Promise<{ events: ModelEvent[]; error?: Error }> {
  const events: ModelEvent[] = [];
  try {
    for await (const event of stream) events.push(event);
  } catch (err) {
    return { events, error: err as Error };
  }
  return { events };
}

async function complete(stream: AsyncIterable<ModelEvent>): Promise<{ texts: string[]; end: End }> {
  const { events, error } = await drain(stream);
  if (error) throw error;
  const ends = events.filter((e): e is End => e.type === 'end');
  expect(ends).toHaveLength(1);
  // `end` is the last event: anything after it would be lost by the agent loop.
  expect(events.at(-1)!.type).toBe('end');
  return { texts: events.flatMap((e) => (e.type === 'text' ? [e.text] : [])), end: ends[0]! };
}

function chatBody(i = 0): Record<string, unknown> {
  return fake.requests.filter((r) => r.path === '/v1/chat/completions')[i]!.body as Record<string, unknown>;
}

const searchSpec: ToolSpec = {
  name: 'knowledge__search',
  qualifiedName: 'knowledge.search',
  description: 'Searches the knowledge base.',
  parameters: { type: 'object', properties: { query: { type: 'string' } }, required: ['query'] },
};

describe('createOpenAiChat through the openai package', { timeout: 5_000 }, () => {
  it('streams text as several events, then one end with the server usage', async () => {
    const text = 'The quick brown fox jumps over the lazy dog.';
    fake.reply({ text, usage: { prompt: 21, completion: 7 } });
    const client = chat();
    const { texts, end } = await complete(client.stream(ask('Tell me about foxes', { temperature: 0.3, maxTokens: 120, tools: [searchSpec] })));

    expect(texts.length).toBeGreaterThan(3);
    expect(texts.join('')).toBe(text);
    expect(end).toEqual({ type: 'end', toolCalls: [], usage: { promptTokens: 21, completionTokens: 7 }, finishReason: 'stop' });
    expect(client.provider).toBe('openai');
    expect(client.defaultModel).toBe(MODEL);

    expect(fake.requests).toHaveLength(1);
    expect(fake.requests[0]!.headers.authorization).toBe(`Bearer ${FAKE_OPENAI_KEY}`);
    expect(chatBody()).toEqual({
      model: MODEL,
      messages: [{ role: 'user', content: 'Tell me about foxes' }],
      stream: true,
      stream_options: { include_usage: true },
      temperature: 0.3,
      max_tokens: 120,
      tools: [{ type: 'function', function: { name: searchSpec.name, description: searchSpec.description, parameters: searchSpec.parameters } }],
    });
  });

  it('leaves out temperature, max_tokens and an empty tool list', async () => {
    await complete(chat().stream(ask('hi', { tools: [] })));
    const body = chatBody();
    expect(body).not.toHaveProperty('tools');
    expect(body).not.toHaveProperty('temperature');
    expect(body).not.toHaveProperty('max_tokens');
    expect(body.stream).toBe(true);
  });

  it('reassembles two tool calls split across chunks', async () => {
    const weather = { id: 'call_weather', name: 'weather__current', arguments: JSON.stringify({ city: 'Zürich', unit: 'celsius' }) };
    const search = { id: 'call_search', name: 'knowledge__search', arguments: JSON.stringify({ query: 'refund policy', limit: 3 }) };
    fake.reply({ toolCalls: [weather, search] });
    const { texts, end } = await complete(chat().stream(ask('weather and refunds?', { tools: [searchSpec] })));

    expect(texts).toEqual([]);
    expect(end.finishReason).toBe('tool_calls');
    expect(end.toolCalls).toEqual([weather, search]);
    expect(end.usage.completionTokens).toBeGreaterThan(0);
  });

  it('reports a length cut-off as finishReason length', async () => {
    fake.reply({ text: 'Cut short', finishReason: 'length' });
    const { end } = await complete(chat().stream(ask('go on')));
    expect(end.finishReason).toBe('length');
  });

  it('maps assistant tool calls and tool results to the wire format', async () => {
    const messages: ChatMessage[] = [
      { role: 'system', content: 'You are Ada.' },
      { role: 'user', content: 'Find refunds' },
      { role: 'assistant', content: '', toolCalls: [{ id: 'call_1', name: 'knowledge__search', arguments: '{"query":"refunds"}' }] },
      { role: 'tool', toolCallId: 'call_1', content: '<tool_result>\n[]\n</tool_result>' },
      { role: 'assistant', content: 'Nothing found.' },
      { role: 'user', content: 'Thanks' },
    ];
    await complete(chat().stream({ model: MODEL, messages }));
    expect(chatBody().messages).toEqual([
      { role: 'system', content: 'You are Ada.' },
      { role: 'user', content: 'Find refunds' },
      {
        role: 'assistant',
        content: null,
        tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'knowledge__search', arguments: '{"query":"refunds"}' } }],
      },
      { role: 'tool', tool_call_id: 'call_1', content: '<tool_result>\n[]\n</tool_result>' },
      { role: 'assistant', content: 'Nothing found.' },
      { role: 'user', content: 'Thanks' },
    ]);
  });

  it('estimates usage when the server sends none', async () => {
    // A server that ignores stream_options (several local ones do) never sends the usage chunk.
    const replies: ChatReply[] = [];
    const inner = chatCompletionsRoute(replies);
    const bare = await startFakeOpenAi({
      routes: { 'POST /v1/chat/completions': (ctx) => inner({ ...ctx, body: { ...(ctx.body as object), stream_options: undefined } }) },
    });
    try {
      const text = 'An answer of a reasonable length, long enough to count several tokens.';
      replies.push({ text, usage: { prompt: 999, completion: 999 } });
      const { texts, end } = await complete(chat({ baseUrl: bare.url }).stream(ask('A question that also has some length to it')));
      expect(texts.join('')).toBe(text);
      expect(end.usage.promptTokens).toBeGreaterThan(0);
      expect(end.usage.completionTokens).toBeGreaterThan(0);
      // Estimated from the text (~4 characters a token), not the counts the server kept to itself.
      expect(end.usage.completionTokens).toBeLessThan(text.length / 2);
      expect(end.usage.promptTokens).toBeLessThan(100);
    } finally {
      await bare.close();
    }
  });

  it('gives up with a 502 once retries are exhausted', async () => {
    fake.fail({ kind: 'status', status: 500 });
    const { events, error } = await drain(chat({ maxRetries: 0 }).stream(ask('hi')));
    expect(events).toEqual([]);
    expect(error).toBeInstanceOf(UpstreamError);
    expect((error as UpstreamError).code).toBe('upstream_error');
    expect((error as UpstreamError).status).toBe(502);
    expect(error!.message).toContain('500');
    expect(fake.requests).toHaveLength(1);
  });

  it('maps a rejected key to a 502 that does not carry the key', async () => {
    const key = 'sk-wrong-secret-0123456789';
    const { error } = await drain(chat({ apiKey: key }).stream(ask('hi')));
    expect(error).toBeInstanceOf(UpstreamError);
    expect((error as UpstreamError).code).toBe('upstream_error');
    expect(error!.message).toContain('401');
    expect(error!.message).not.toContain(key);
    expect(error!.message).not.toContain('wrong-secret');
  });

  it('retries a 500 that comes before the first token', async () => {
    fake.fail({ kind: 'status', status: 500, headers: { 'retry-after': '0' } });
    fake.reply({ text: 'Second time lucky.' });
    const { texts, end } = await complete(chat({ maxRetries: 1 }).stream(ask('hi')));
    expect(texts.join('')).toBe('Second time lucky.');
    expect(end.finishReason).toBe('stop');
    expect(fake.requests).toHaveLength(2);
  });

  it('times out a first token that is slower than the time-out with a 504', async () => {
    fake.reply({ text: 'Too late.', firstTokenDelayMs: 400 });
    const { events, error } = await drain(chat({ timeoutMs: 150, maxRetries: 0 }).stream(ask('hi')));
    expect(events).toEqual([]);
    expect(error).toBeInstanceOf(UpstreamTimeoutError);
    expect((error as UpstreamTimeoutError).code).toBe('upstream_timeout');
    expect((error as UpstreamTimeoutError).status).toBe(504);
    // Not waited out: the first token (at 400 ms) never arrived as an event. A wall-clock bound would fail on a loaded machine.
    await vi.waitFor(() => expect(fake.requests[0]!.closedByClient).toBe(true), { timeout: 1_000 });
  });

  it('yields the streamed text, then a 502, when the connection drops mid-stream, and does not retry', async () => {
    // The role chunk and three words, then the socket goes.
    fake.reply({ text: 'one two three four five six', dropAfterChunks: 4 });
    const { events, error } = await drain(chat({ maxRetries: 2 }).stream(ask('count')));
    expect(events).toEqual([
      { type: 'text', text: 'one' },
      { type: 'text', text: ' two' },
      { type: 'text', text: ' three' },
    ]);
    expect(error).toBeInstanceOf(UpstreamError);
    expect((error as UpstreamError).code).toBe('upstream_error');
    expect(fake.requests).toHaveLength(1);
  });

  it('stops with the abort, not an AppError, and closes the request when the caller aborts', async () => {
    fake.reply({ text: Array.from({ length: 40 }, (_, i) => `word${i}`).join(' '), chunkDelayMs: 30 });
    const controller = new AbortController();
    const events: ModelEvent[] = [];
    let error: unknown;
    try {
      for await (const event of chat({ maxRetries: 2 }).stream(ask('talk', { signal: controller.signal }))) {
        events.push(event);
        if (events.length === 2) controller.abort();
      }
    } catch (err) {
      error = err;
    }
    expect(events.filter((e) => e.type === 'end')).toEqual([]);
    expect(events.length).toBeLessThan(40);
    expect(error).toBeInstanceOf(Error);
    expect(error).not.toBeInstanceOf(AppError);
    expect((error as Error).name).toBe('AbortError');
    await vi.waitFor(() => expect(fake.requests[0]!.closedByClient).toBe(true), { timeout: 1_000 });
    expect(fake.requests).toHaveLength(1);
  });
});
