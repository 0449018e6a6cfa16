/**
 * API.md §6 as third-party clients see it, over a real port: the `eventsource` package on the GET
 * form, and AI SDK's own DefaultChatTransport + readUIMessageStream on the UI message stream.
 */
import { AbstractChat, type ChatInit, type ChatState, DefaultChatTransport, readUIMessageStream, type UIMessage, type UIMessageChunk } from 'ai';
import { EventSource } from 'eventsource';
import { EventSourceParserStream } from 'eventsource-parser/stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { createPersona } from '../helpers/factories.js';
import { listen, OFFLINE_ANSWER, postJson, REFUND_TEXT, seedSupport, TOOL_MESSAGE, WAIT_MS } from './chat-helpers.js';

let t: TestApp;
let origin: string;
let personaId: string;

beforeAll(async () => {
  t = await createTestApp();
  origin = await listen(t);
  personaId = await seedSupport(t);
});
afterAll(() => t.close());

const chatUrl = () => `${origin}/api/ai-sdk/agents/${personaId}/chat`;

describe('GET for EventSource clients', () => {
  /** Opens an EventSource with the bearer header and collects message events until `[DONE]`. */
  function listenOnce(query: string): Promise<MessageEvent[]> {
    return new Promise((resolve, reject) => {
      const messages: MessageEvent[] = [];
      const es = new EventSource(`${chatUrl()}?${query}`, {
        fetch: (input, init) => fetch(input, { ...init, headers: { ...init.headers, authorization: `Bearer ${t.adminKey}` } }),
      });
      const timer = setTimeout(() => {
        es.close();
        reject(new Error(`no [DONE] within ${WAIT_MS} ms; got ${messages.map((m) => m.data).join(' | ')}`));
      }, WAIT_MS);
      es.onmessage = (m) => {
        messages.push(m);
        if (m.data !== '[DONE]') return;
        // Closed at once, or the client would reconnect once the server ends the response.
        es.close();
        clearTimeout(timer);
        resolve(messages);
      };
      es.onerror = (e) => {
        es.close();
        clearTimeout(timer);
        reject(new Error(`EventSource error: ${e.message ?? e.code}`));
      };
    });
  }

  it('streams the answer, starts a session, continues it, and refuses replays', async () => {
    const first = await listenOnce('message=hello');
    expect(first.map((m) => m.lastEventId)).toEqual(first.map((_, i) => String(i + 1)));
    expect(new Set(first.map((m) => m.type))).toEqual(new Set(['message']));
    const chunks = first.slice(0, -1).map((m) => JSON.parse(m.data as string));
    const done = chunks.at(-1);
    expect(done).toMatchObject({ type: 'done', sessionId: expect.stringMatching(/^ses_/), messageId: expect.stringMatching(/^msg_/) });

    const second = await listenOnce(`message=${encodeURIComponent('How long do refunds take?')}&sessionId=${done.sessionId}`);
    const answer = second
      .slice(0, -1)
      .map((m) => JSON.parse(m.data as string))
      .filter((c) => c.type === 'text')
      .map((c) => c.content)
      .join('');
    expect(answer).toBe(OFFLINE_ANSWER);
    const session = (await t.request({ method: 'GET', url: `/sessions/${done.sessionId}` })).json();
    expect(session.messages.map((m: { role: string; content: string }) => [m.role, m.content])).toEqual([
      ['user', 'hello'],
      ['assistant', textFromChunks(chunks)],
      ['user', 'How long do refunds take?'],
      ['assistant', OFFLINE_ANSWER],
    ]);

    const sessionsBefore = (await t.request({ method: 'GET', url: '/sessions' })).json().data.length;
    const replay = await fetch(`${chatUrl()}?message=hello`, {
      headers: { authorization: `Bearer ${t.adminKey}`, accept: 'text/event-stream', 'last-event-id': '3' },
      signal: AbortSignal.timeout(WAIT_MS),
    });
    expect(replay.status).toBe(204);
    expect(await replay.text()).toBe('');
    expect((await t.request({ method: 'GET', url: '/sessions' })).json().data).toHaveLength(sessionsBefore);
  });
});

function textFromChunks(chunks: Array<{ type: string; content?: string }>): string {
  return chunks
    .filter((c) => c.type === 'text')
    .map((c) => c.content)
    .join('');
}

describe('AI SDK UI message stream', () => {
  /** Sends one user message through DefaultChatTransport; the final message and the response headers. */
  async function sendThroughTransport(text: string, body?: object): Promise<{ message: UIMessage; headers: Headers }> {
    let headers: Headers | undefined;
    const transport = new DefaultChatTransport<UIMessage>({
      api: chatUrl(),
      headers: { authorization: `Bearer ${t.adminKey}` },
      ...(body && { body }),
      fetch: async (input, init) => {
        const res = await fetch(input, { ...init, signal: init?.signal ?? AbortSignal.timeout(WAIT_MS) });
        headers = res.headers;
        return res;
      },
    });
    const stream = await transport.sendMessages({
      chatId: 'c1',
      messages: [{ id: 'u1', role: 'user', parts: [{ type: 'text', text }] }],
      trigger: 'submit-message',
      messageId: undefined,
      abortSignal: undefined,
    });
    return { message: await lastMessage(stream), headers: headers! };
  }

  /** The last snapshot readUIMessageStream builds; an `error` chunk makes it throw. */
  async function lastMessage(stream: ReadableStream<UIMessageChunk>): Promise<UIMessage> {
    let last: UIMessage | undefined;
    const reading = (async () => {
      for await (const message of readUIMessageStream({ stream, terminateOnError: true })) last = message;
    })();
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([reading, new Promise((_, reject) => (timer = setTimeout(() => reject(new Error('UI stream did not finish')), WAIT_MS)))]);
    clearTimeout(timer);
    if (!last) throw new Error('the stream built no message');
    return last;
  }

  it('answers a useChat request with text, sources and the session in metadata', async () => {
    const { message, headers } = await sendThroughTransport('How long do refunds take?');
    expect(headers.get('x-vercel-ai-ui-message-stream')).toBe('v1');
    expect(headers.get('content-type')).toMatch(/^text\/event-stream/);
    expect(message.role).toBe('assistant');
    const texts = message.parts.filter((p) => p.type === 'text');
    expect(texts).toEqual([expect.objectContaining({ text: OFFLINE_ANSWER, state: 'done' })]);
    expect(message.parts.filter((p) => p.type === 'source-document')).toEqual([
      expect.objectContaining({ sourceId: expect.stringMatching(/^chk_/), mediaType: 'text/plain', title: 'Refund policy' }),
    ]);
    const metadata = message.metadata as { sessionId: string; messageId: string };
    expect(metadata.sessionId).toMatch(/^ses_/);
    const session = (await t.request({ method: 'GET', url: `/sessions/${metadata.sessionId}` })).json();
    expect(session.messages.at(-1)).toMatchObject({ id: metadata.messageId, content: OFFLINE_ANSWER });
  });

  it('shows a tool call as a dynamic-tool part when the body enables tools', async () => {
    const { message } = await sendThroughTransport(TOOL_MESSAGE, { enableMCPTools: true });
    const tools = message.parts.filter((p) => p.type === 'dynamic-tool');
    expect(tools).toEqual([
      expect.objectContaining({
        toolName: 'knowledge.search',
        state: 'output-available',
        input: { query: 'refunds' },
        output: [expect.objectContaining({ sourceName: 'Refund policy', text: REFUND_TEXT })],
      }),
    ]);
    const text = message.parts.filter((p) => p.type === 'text').map((p) => p.text);
    expect(text.join('')).toContain('knowledge.search returned:');

    const { message: without } = await sendThroughTransport(TOOL_MESSAGE);
    expect(without.parts.filter((p) => p.type === 'dynamic-tool')).toEqual([]);
  });

  it('answers plain content messages in the UI protocol when ?protocol=ui-message-stream asks', async () => {
    const res = await postJson(origin, `/api/ai-sdk/agents/${personaId}/chat?protocol=ui-message-stream`, t.adminKey, {
      messages: [{ role: 'user', content: 'How long do refunds take?' }],
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('x-vercel-ai-ui-message-stream')).toBe('v1');
    const types: string[] = [];
    const finishes: UIMessageChunk[] = [];
    const stream = res
      .body!.pipeThrough(new TextDecoderStream())
      .pipeThrough(new EventSourceParserStream())
      .pipeThrough(
        new TransformStream<{ data: string }, UIMessageChunk>({
          transform(event, controller) {
            types.push(event.data === '[DONE]' ? '[DONE]' : (JSON.parse(event.data) as UIMessageChunk).type);
            if (event.data === '[DONE]') return;
            const chunk = JSON.parse(event.data) as UIMessageChunk;
            if (chunk.type === 'finish') finishes.push(chunk);
            controller.enqueue(chunk);
          },
        }),
      );
    const message = await lastMessage(stream);
    expect(message.parts.filter((p) => p.type === 'text').map((p) => p.text)).toEqual([OFFLINE_ANSWER]);
    expect(types.slice(0, 3)).toEqual(['start', 'start-step', 'text-start']);
    expect(types.slice(-4)).toEqual(['source-document', 'finish-step', 'finish', '[DONE]']);
    expect(finishes).toMatchObject([{ finishReason: 'stop' }]);

    // A persona whose answers stop at 3 tokens: the finish chunk says so.
    const short = await createPersona(t, { name: 'Terse', maxTokens: 3 });
    const cut = await postJson(origin, `/api/ai-sdk/agents/${short.id}/chat?protocol=ui-message-stream`, t.adminKey, { messages: [{ role: 'user', content: 'How long do refunds take?' }] });
    const finish = (await cut.text()).split('\n\n').find((e) => e.includes('"type":"finish"'))!;
    expect(JSON.parse(finish.slice(finish.indexOf('{')))).toMatchObject({ type: 'finish', finishReason: 'length' });

    // Without the parameter the same body gets the native chunks.
    const native = await postJson(origin, `/api/ai-sdk/agents/${personaId}/chat`, t.adminKey, { messages: [{ role: 'user', content: 'hi' }] });
    expect(native.headers.get('x-vercel-ai-ui-message-stream')).toBeNull();
    expect(await native.text()).toMatch(/^id: 1\ndata: \{"type":"text"/);
  });
});

describe('the AI SDK chat state machine (what useChat runs)', () => {
  /** The state `@ai-sdk/react` keeps in React; here in plain arrays, as AbstractChat allows. */
  class PlainChat extends AbstractChat<UIMessage> {
    constructor(init: ChatInit<UIMessage>) {
      const messages: UIMessage[] = [];
      const state: ChatState<UIMessage> = {
        status: 'ready',
        error: undefined,
        messages,
        pushMessage: (m) => void messages.push(m),
        popMessage: () => void messages.pop(),
        replaceMessage: (i, m) => void (messages[i] = m),
        snapshot: (x) => structuredClone(x),
      };
      super({ ...init, state });
    }
    get current() {
      return this.state;
    }
  }

  it('holds a two-turn conversation with tools, each request carrying the previous answer’s parts', async () => {
    const chat = new PlainChat({
      transport: new DefaultChatTransport({ api: chatUrl(), headers: { authorization: `Bearer ${t.adminKey}` }, body: { enableMCPTools: true } }),
    });
    await chat.sendMessage({ text: TOOL_MESSAGE });
    await chat.sendMessage({ text: 'How long do refunds take?' });
    const state = chat.current;
    expect(state.error).toBeUndefined();
    expect(state.status).toBe('ready');
    expect(state.messages.map((m) => m.role)).toEqual(['user', 'assistant', 'user', 'assistant']);
    expect(state.messages[1]!.parts.some((p) => p.type === 'dynamic-tool')).toBe(true);
    const last = state.messages[3]!;
    expect(last.parts.filter((p) => p.type === 'text').map((p) => (p as { text: string }).text).join('')).toBe(OFFLINE_ANSWER);
    // Both turns went into the same kind of record: two sessions, since useChat sends no sessionId.
    const meta = state.messages.filter((m) => m.role === 'assistant').map((m) => (m.metadata as { sessionId: string }).sessionId);
    expect(meta.every((id) => typeof id === 'string' && id.startsWith('ses_'))).toBe(true);
  });
});
