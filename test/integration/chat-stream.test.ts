/**
 * API.md §5–§6 over a real port: the native event stream of POST /query/stream and of the AI SDK
 * chat route, read with eventsource-parser as a client would, against the offline model and
 * against the real `openai` package talking to the fake OpenAI server.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { testBackends } from '../helpers/postgres.js';
import type { FakeOpenAi } from '../fakes/openai-server.js';
import { chunksOf, interactionErrors, listen, OFFLINE_ANSWER, postJson, readSse, REFUND_TEXT, type SseRead, seedSupport, shapeOf, startOnFakeModel, textOf, TOOL_MESSAGE } from './chat-helpers.js';

/** The two POST routes of §6, each as a body builder for one question. */
const routes = [
  { name: 'POST /query/stream', path: () => '/query/stream', body: (personaId: string, message: string, extra = {}) => ({ personaId, message, ...extra }) },
  {
    name: 'POST /api/ai-sdk/agents/:id/chat',
    path: (personaId: string) => `/api/ai-sdk/agents/${personaId}/chat`,
    body: (_: string, message: string, extra = {}) => ({ messages: [{ role: 'user', content: message }], ...extra }),
  },
];

/** The §6 framing every native stream must have, whatever its chunks. */
function expectFraming(read: SseRead) {
  expect(read.events.map((e) => e.id)).toEqual(read.events.map((_, i) => String(i + 1)));
  expect(read.events.every((e) => e.event === undefined)).toBe(true);
  expect(read.events.at(-1)?.data).toBe('[DONE]');
  expect(read.events.filter((e) => e.data === '[DONE]')).toHaveLength(1);
}

describe.each(testBackends())('native event stream, offline model on $kind', (backend) => {
  let t: TestApp;
  let origin: string;
  let personaId: string;

  beforeAll(async () => {
    t = await createTestApp({ backend });
    origin = await listen(t);
    personaId = await seedSupport(t);
  });
  afterAll(() => t.close());

  describe.each(routes)('$name', (route) => {
    const ask = (message: string, extra = {}) => postJson(origin, route.path(personaId), t.adminKey, route.body(personaId, message, extra));

    it('streams numbered text chunks, then done, then [DONE]; the text is the stored answer', async () => {
      const res = await ask('How long do refunds take?');
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
      const read = await readSse(res);
      expectFraming(read);
      const chunks = chunksOf(read);
      expect(shapeOf(chunks)).toBe('text done');
      expect(chunks.filter((c) => c.type === 'text').length).toBeGreaterThan(1);
      expect(textOf(chunks)).toBe(OFFLINE_ANSWER);

      const done = chunks.at(-1)!;
      expect(Object.keys(done).sort()).toEqual(['messageId', 'sessionId', 'sources', 'type', 'usage']);
      expect(done.usage.promptTokens).toBeGreaterThan(0);
      expect(done.usage.completionTokens).toBeGreaterThan(0);
      expect(done.sources).toEqual([{ chunkId: expect.stringMatching(/^chk_/), sourceId: expect.stringMatching(/^src_/), sourceName: 'Refund policy', score: expect.any(Number) }]);

      const session = (await t.request({ method: 'GET', url: `/sessions/${done.sessionId}` })).json();
      expect(session.messages.map((m: { role: string }) => m.role)).toEqual(['user', 'assistant']);
      expect(session.messages[1]).toMatchObject({ id: done.messageId, content: OFFLINE_ANSWER });
    });

    it('emits tool_call and tool_result only when enableMCPTools is true', async () => {
      const withTools = chunksOf(await readSse(await ask(TOOL_MESSAGE, { enableMCPTools: true })));
      expect(shapeOf(withTools)).toBe('tool_call tool_result text done');
      const [call, result] = withTools;
      expect(call!.toolCall).toEqual({ id: expect.any(String), name: 'knowledge.search', arguments: { query: 'refunds' } });
      expect(result).toMatchObject({ toolCallId: call!.toolCall.id, isError: false });
      expect(result!.result).toEqual([expect.objectContaining({ sourceName: 'Refund policy', text: REFUND_TEXT })]);
      // The offline model reports the tool's data, so the answer proves the result reached the model.
      expect(textOf(withTools)).toContain('knowledge.search returned: [{');

      const read = await readSse(await ask(TOOL_MESSAGE, { enableMCPTools: false }));
      expectFraming(read);
      const without = chunksOf(read);
      expect(shapeOf(without)).toBe('text done');
      expect(textOf(without)).toContain('I cannot call knowledge.search');
    });

    it('answers an unknown persona with a 404 problem, not an event stream', async () => {
      const res = await postJson(origin, route.path('per_missing'), t.adminKey, route.body('per_missing', 'hello'));
      expect(res.status).toBe(404);
      expect(res.headers.get('content-type')).toMatch(/^application\/problem\+json/);
      expect(await res.json()).toMatchObject({ code: 'not_found', status: 404 });
    });
  });

  it('refuses both personaId and abTestId with a 400, and an unknown A/B test with a 404, before any stream starts', async () => {
    const both = await postJson(origin, '/query/stream', t.adminKey, { personaId, abTestId: 'abt_x', message: 'hello' });
    expect(both.status).toBe(400);
    expect(both.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect(((await both.json()) as { errors: unknown }).errors).toEqual([expect.objectContaining({ path: 'abTestId' })]);
    const unknown = await postJson(origin, '/query/stream', t.adminKey, { abTestId: 'abt_x', message: 'hello' });
    expect(unknown.status).toBe(404);
    expect(await unknown.json()).toMatchObject({ code: 'not_found', detail: 'A/B test abt_x not found.' });
  });

  it('answers stream: false with the JSON of POST /query', async () => {
    const res = await postJson(origin, `/api/ai-sdk/agents/${personaId}/chat`, t.adminKey, {
      messages: [{ role: 'user', content: 'How long do refunds take?' }],
      stream: false,
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    const body = (await res.json()) as Record<string, unknown>;
    const query = (await t.request({ method: 'POST', url: '/query', body: { personaId, message: 'How long do refunds take?' } })).json();
    expect(Object.keys(body).sort()).toEqual(Object.keys(query).sort());
    expect(body).toMatchObject({ personaId, abTestId: null, variant: null, response: OFFLINE_ANSWER, toolCalls: [], sources: query.sources });
    expect(body.sessionId).not.toBe(query.sessionId);
  });
});

describe('native event stream, OpenAI-compatible model (fake server)', () => {
  let fake: FakeOpenAi;
  let t: TestApp;
  let origin: string;
  let personaId: string;
  const chatPath = () => `/api/ai-sdk/agents/${personaId}/chat`;
  const completions = () => fake.requests.filter((r) => r.path === '/v1/chat/completions');

  beforeAll(async () => {
    ({ fake, t, origin, personaId } = await startOnFakeModel());
  });
  beforeEach(() => fake.reset());
  afterAll(async () => {
    // After the aborted fetch, Node's fetch pool opens a spare connection that never sends a
    // request; the server counts it as busy, so a graceful close would wait out the pool's 4 s idle timer.
    t.app.server.closeAllConnections();
    await t.close();
    await fake.close();
  });

  it('streams a scripted tool call, its result and the text; the model gets the result fenced', async () => {
    fake.reply({ toolCalls: [{ id: 'call_1', name: 'knowledge__search', arguments: '{"query":"refunds"}' }] }, { text: 'Refunds take five business days [1].' });
    const res = await postJson(origin, chatPath(), t.adminKey, { messages: [{ role: 'user', content: 'How long do refunds take?' }], enableMCPTools: true });
    const read = await readSse(res);
    expectFraming(read);
    const chunks = chunksOf(read);
    expect(shapeOf(chunks)).toBe('tool_call tool_result text done');
    expect(chunks[0]!.toolCall).toEqual({ id: 'call_1', name: 'knowledge.search', arguments: { query: 'refunds' } });
    expect(chunks[1]).toMatchObject({ toolCallId: 'call_1', isError: false });
    const passages = chunks[1]!.result;
    expect(passages).toEqual([expect.objectContaining({ sourceName: 'Refund policy', text: REFUND_TEXT })]);
    expect(textOf(chunks)).toBe('Refunds take five business days [1].');

    const [first, second] = completions();
    expect(completions()).toHaveLength(2);
    expect((first!.body as any).tools.map((tool: any) => tool.function.name)).toEqual(['knowledge__search']);
    const toolMessage = (second!.body as any).messages.find((m: any) => m.role === 'tool');
    expect(toolMessage.tool_call_id).toBe('call_1');
    const fenced = /^<tool_result>\n([\s\S]*)\n<\/tool_result>$/.exec(toolMessage.content);
    expect(fenced).not.toBeNull();
    expect(JSON.parse(fenced![1]!)).toEqual(passages);

    fake.reset();
    await readSse(await postJson(origin, chatPath(), t.adminKey, { messages: [{ role: 'user', content: 'How long do refunds take?' }] }));
    expect(completions()).toHaveLength(1);
    expect(completions()[0]!.body).not.toHaveProperty('tools');
    // A streamed answer is streamed from the model too, with usage in its last chunk.
    expect(completions()[0]!.body).toMatchObject({ stream: true, stream_options: { include_usage: true } });
  });

  it('turns an upstream 500 after the stream started into an error chunk, then [DONE]', async () => {
    fake.fail({ kind: 'status', status: 500, message: 'the model is on fire' });
    const res = await postJson(origin, '/query/stream', t.adminKey, { personaId, message: 'How long do refunds take?' });
    expect(res.status).toBe(200);
    const read = await readSse(res);
    expectFraming(read);
    const chunks = chunksOf(read);
    expect(chunks).toEqual([{ type: 'error', error: { code: 'upstream_error', message: expect.stringContaining('500') } }]);
    expect((await interactionErrors(t)).at(-1)).toBe('upstream_error');
  });

  it('ends a stream dropped mid-answer with the text so far and an error chunk', async () => {
    // Role chunk plus three words, then the socket is destroyed.
    fake.reply({ text: 'one two three four five six', dropAfterChunks: 4 });
    const read = await readSse(await postJson(origin, chatPath(), t.adminKey, { messages: [{ role: 'user', content: 'count' }] }));
    expectFraming(read);
    const chunks = chunksOf(read);
    expect(shapeOf(chunks)).toBe('text error');
    expect(textOf(chunks)).toBe('one two three');
    expect(chunks.at(-1)!.error.code).toBe('upstream_error');
  });

  it('cancels the upstream call when the client goes away, and stores nothing of the answer', async () => {
    const first = chunksOf(await readSse(await postJson(origin, chatPath(), t.adminKey, { messages: [{ role: 'user', content: 'hello' }] })));
    const sessionId = first.at(-1)!.sessionId as string;
    const before = (await interactionErrors(t)).length;
    fake.reset();

    const words = Array.from({ length: 100 }, (_, i) => `word${i}`).join(' ');
    fake.reply({ text: words, chunkDelayMs: 100 });
    const controller = new AbortController();
    const res = await postJson(origin, chatPath(), t.adminKey, { messages: [{ role: 'user', content: 'talk slowly' }], sessionId }, controller.signal);
    const read = await readSse(res, { stop: (e) => e.data.includes('"type":"text"') });
    expect(chunksOf(read)[0]).toEqual({ type: 'text', content: 'word0' });
    controller.abort();

    // Ten seconds of answer were left; a second is plenty for the hang-up to travel upstream.
    await vi.waitFor(() => expect(completions()[0]!.closedByClient).toBe(true), { timeout: 1_000, interval: 20 });
    // The exchange is over once its interaction row is written, cancelled or (wrongly) stored.
    await vi.waitFor(async () => expect(await interactionErrors(t)).toHaveLength(before + 1), { timeout: 1_000, interval: 20 });
    expect.soft((await interactionErrors(t)).at(-1)).toBe('cancelled');
    const session = (await t.request({ method: 'GET', url: `/sessions/${sessionId}` })).json();
    expect(session.messages.map((m: { content: string }) => m.content)).toEqual(['hello', 'Echo: hello']);
  });

  it('cancels the upstream call of a whole-answer query (stream: false) whose client goes away', async () => {
    fake.reset();
    const before = (await interactionErrors(t)).length;
    // Not streamed upstream either: the model is slow to answer at all.
    fake.reply({ text: 'too late', firstTokenDelayMs: 5_000 });
    const controller = new AbortController();
    const pending = postJson(origin, chatPath(), t.adminKey, { messages: [{ role: 'user', content: 'talk slowly' }], stream: false }, controller.signal);
    await vi.waitFor(() => expect(completions()).toHaveLength(1), { timeout: 1_000, interval: 20 });
    controller.abort();
    await expect(pending).rejects.toThrow();
    await vi.waitFor(() => expect(completions()[0]!.closedByClient).toBe(true), { timeout: 1_000, interval: 20 });
    await vi.waitFor(async () => expect(await interactionErrors(t)).toHaveLength(before + 1), { timeout: 1_000, interval: 20 });
    expect((await interactionErrors(t)).at(-1)).toBe('cancelled');
  });
});
