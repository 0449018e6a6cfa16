/**
 * The fake's chat completions route, driven by the real `openai` package: if the SDK reads its
 * answers, the chat code tested against the fake sees what it would see from OpenAI.
 */
import OpenAI, { APIError } from 'openai';
import type { ChatCompletionChunk, ChatCompletionMessageParam } from 'openai/resources/chat/completions';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { FAKE_OPENAI_KEY, type FakeOpenAi, startFakeOpenAi } from '../fakes/openai-server.js';

let fake: FakeOpenAi;
let client: OpenAI;

beforeAll(async () => {
  fake = await startFakeOpenAi();
  client = new OpenAI({ apiKey: FAKE_OPENAI_KEY, baseURL: fake.url, maxRetries: 0, timeout: 5_000 });
});
afterAll(async () => {
  await fake.close();
});
beforeEach(() => fake.reset());

const MODEL = 'gpt-4o-mini';
const ask = (content: string): ChatCompletionMessageParam[] => [{ role: 'user', content }];

async function collect(stream: AsyncIterable<ChatCompletionChunk>): Promise<ChatCompletionChunk[]> {
  const chunks: ChatCompletionChunk[] = [];
  for await (const chunk of stream) chunks.push(chunk);
  return chunks;
}

const contentOf = (chunks: ChatCompletionChunk[]) => chunks.map((c) => c.choices[0]?.delta.content ?? '').join('');

describe('fake chat completions, streamed', () => {
  it('streams the scripted text in several chunks that concatenate to it exactly', async () => {
    const text = '  Hello there,\nthis is  a scripted   answer. ';
    fake.reply({ text });
    const chunks = await collect(await client.chat.completions.create({ model: MODEL, messages: ask('hi'), stream: true }));

    expect(contentOf(chunks)).toBe(text);
    expect(chunks.filter((c) => c.choices[0]?.delta.content).length).toBeGreaterThan(3);
    expect(chunks[0]!.choices[0]!.delta.role).toBe('assistant');
    expect(chunks.every((c) => c.object === 'chat.completion.chunk' && c.model === MODEL && c.id === chunks[0]!.id)).toBe(true);
    expect(chunks.at(-1)!.choices[0]!.finish_reason).toBe('stop');
    // Without include_usage no chunk carries usage.
    expect(chunks.some((c) => 'usage' in c)).toBe(false);
  });

  it('splits two tool calls across chunks that reassemble by index', async () => {
    const weather = { id: 'call_weather', name: 'get_weather', arguments: JSON.stringify({ city: 'Zürich', unit: 'celsius' }) };
    const search = { name: 'search_docs', arguments: JSON.stringify({ query: 'refund policy', limit: 3 }) };
    fake.reply({ toolCalls: [weather, search] });
    const chunks = await collect(await client.chat.completions.create({ model: MODEL, messages: ask('weather?'), stream: true }));

    const calls: { id?: string; name?: string; arguments: string; pieces: number }[] = [];
    for (const chunk of chunks) {
      for (const tc of chunk.choices[0]?.delta.tool_calls ?? []) {
        const call = (calls[tc.index] ??= { arguments: '', pieces: 0 });
        if (tc.id) call.id = tc.id;
        if (tc.function?.name) call.name = tc.function.name;
        if (tc.function?.arguments) {
          call.arguments += tc.function.arguments;
          call.pieces++;
        }
      }
    }
    expect(calls).toHaveLength(2);
    expect(calls[0]).toMatchObject({ id: 'call_weather', name: 'get_weather', arguments: weather.arguments });
    expect(calls[1]).toMatchObject({ name: 'search_docs', arguments: search.arguments });
    expect(calls[1]!.id).toMatch(/^call_/);
    expect(JSON.parse(calls[0]!.arguments)).toEqual({ city: 'Zürich', unit: 'celsius' });
    for (const call of calls) expect(call.pieces).toBeGreaterThanOrEqual(2);
    expect(chunks.at(-1)!.choices[0]!.finish_reason).toBe('tool_calls');
  });

  it('ends with a usage chunk without choices only when include_usage is asked for', async () => {
    fake.reply({ text: 'Counted answer.', usage: { prompt: 12, completion: 3 } });
    const chunks = await collect(
      await client.chat.completions.create({ model: MODEL, messages: ask('count'), stream: true, stream_options: { include_usage: true } }),
    );
    const last = chunks.at(-1)!;
    expect(last.choices).toEqual([]);
    expect(last.usage).toMatchObject({ prompt_tokens: 12, completion_tokens: 3, total_tokens: 15 });
    expect(chunks.slice(0, -1).every((c) => c.usage === null)).toBe(true);
    expect(contentOf(chunks)).toBe('Counted answer.');
  });

  it('throws from the iteration when the connection drops mid-stream', async () => {
    fake.reply({ text: 'one two three four five six', dropAfterChunks: 3 });
    const stream = await client.chat.completions.create({ model: MODEL, messages: ask('drop'), stream: true });
    const seen: string[] = [];
    await expect(
      (async () => {
        for await (const chunk of stream) seen.push(chunk.choices[0]?.delta.content ?? '');
      })(),
    ).rejects.toThrow();
    // The role chunk and two words arrived before the drop.
    expect(seen.join('')).toBe('one two');
  });

  it('holds the first chunk back by firstTokenDelayMs', async () => {
    fake.reply({ text: 'slow start', firstTokenDelayMs: 150 });
    const started = performance.now();
    const stream = await client.chat.completions.create({ model: MODEL, messages: ask('slow'), stream: true });
    let firstContentAt = 0;
    for await (const chunk of stream) {
      if (!firstContentAt && chunk.choices[0]?.delta.content) firstContentAt = performance.now();
    }
    expect(firstContentAt - started).toBeGreaterThan(150 - 20);
  });
});

describe('fake chat completions, not streamed', () => {
  it('answers one chat.completion with content, tool calls and usage', async () => {
    fake.reply({ text: 'Looking it up.', toolCalls: [{ id: 'call_1', name: 'lookup', arguments: '{"q":"x"}' }] });
    const completion = await client.chat.completions.create({ model: MODEL, messages: ask('look up x') });

    expect(completion.object).toBe('chat.completion');
    const choice = completion.choices[0]!;
    expect(choice.message.content).toBe('Looking it up.');
    expect(choice.message.tool_calls).toEqual([{ id: 'call_1', type: 'function', function: { name: 'lookup', arguments: '{"q":"x"}' } }]);
    expect(choice.finish_reason).toBe('tool_calls');
    // Estimated: "look up x" is 9 characters (3 tokens), the answer 14 (4 tokens).
    expect(completion.usage).toMatchObject({ prompt_tokens: 3, completion_tokens: 4, total_tokens: 7 });
  });

  it('echoes the last user message when no reply is queued', async () => {
    const completion = await client.chat.completions.create({
      model: MODEL,
      messages: [
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: 'first' },
        { role: 'assistant', content: 'ok' },
        { role: 'user', content: [{ type: 'text', text: 'second ' }, { type: 'text', text: 'question' }] },
      ],
    });
    expect(completion.choices[0]!.message.content).toBe('Echo: second question');
    expect(completion.choices[0]!.finish_reason).toBe('stop');
  });

  it('raises an APIError with the scripted status, and keeps the reply for the next request', async () => {
    fake.fail({ kind: 'status', status: 500 });
    fake.reply({ text: 'after the failure' });
    const err = await client.chat.completions.create({ model: MODEL, messages: ask('x') }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(APIError);
    expect((err as APIError).status).toBe(500);

    const completion = await client.chat.completions.create({ model: MODEL, messages: ask('x') });
    expect(completion.choices[0]!.message.content).toBe('after the failure');
  });

  it('rejects a request without model or messages with 400, as the real API does', async () => {
    const noModel = await client.chat.completions.create({ model: '', messages: ask('x') }).catch((e: unknown) => e);
    expect((noModel as APIError).status).toBe(400);
    const noMessages = await client.chat.completions.create({ model: MODEL, messages: [] }).catch((e: unknown) => e);
    expect((noMessages as APIError).status).toBe(400);
    expect(fake.requests).toHaveLength(2);
  });
});
