/** Shared by the chat streaming tests: a listening app, a seeded persona, and an SSE reader. */
import type { AddressInfo } from 'node:net';
import { createParser } from 'eventsource-parser';
import { createOpenAiChat } from '../../src/llm/openai-chat.js';
import { createOpenAi } from '../../src/llm/openai-client.js';
import { FAKE_OPENAI_KEY, type FakeOpenAi, startFakeOpenAi } from '../fakes/openai-server.js';
import { createTestApp, type TestApp } from '../helpers/app.js';

/** Every network wait in the chat stream tests is bounded by this. */
export const WAIT_MS = 4_000;

export const REFUND_TEXT = 'Refunds take 5 business days. Contact billing for exceptions.';
export const TOOL_MESSAGE = '/tool knowledge.search {"query":"refunds"}';

/**
 * Spelled out rather than taken from the server, so a change to what the offline model says (or to
 * what retrieval hands it) shows up here instead of passing silently on both sides.
 */
export const OFFLINE_ANSWER =
  "Offline model (no language model is configured): here is what Support's knowledge says.\n\n" + `[1] ${REFUND_TEXT}\n\nSources: [1] Refund policy.`;

export async function listen(t: TestApp): Promise<string> {
  await t.app.listen({ port: 0, host: '127.0.0.1' });
  return `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
}

/** A persona allowed `knowledge.*` and one shared knowledge source about refunds, indexed. */
export async function seedSupport(t: TestApp): Promise<string> {
  const persona = await t.request({
    method: 'POST',
    url: '/personas',
    body: { name: 'Support', instructions: 'Answer from the knowledge.', tools: ['knowledge.*'] },
  });
  if (persona.statusCode !== 201) throw new Error(`persona: ${persona.statusCode} ${persona.body}`);
  const source = await t.request({ method: 'POST', url: '/knowledge', body: { kind: 'text', name: 'Refund policy', content: REFUND_TEXT } });
  if (source.statusCode !== 202) throw new Error(`knowledge: ${source.statusCode} ${source.body}`);
  await t.ctx.services.knowledge.idle();
  return persona.json().id as string;
}

export function postJson(origin: string, path: string, key: string, body: unknown, signal?: AbortSignal): Promise<Response> {
  return fetch(origin + path, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
    signal: signal ?? AbortSignal.timeout(WAIT_MS),
  });
}

export interface SseEvent {
  id: string | undefined;
  event: string | undefined;
  data: string;
}

export interface SseRead {
  events: SseEvent[];
  comments: string[];
}

/**
 * Reads an event stream to its end, or until `stop` returns true for an event (then cancels the
 * body). Rejects when the stream has not ended within `timeoutMs`.
 */
export async function readSse(res: Response, opts: { stop?: (e: SseEvent) => boolean; timeoutMs?: number } = {}): Promise<SseRead> {
  const out: SseRead = { events: [], comments: [] };
  let stopped = false;
  const parser = createParser({
    onEvent: (e) => {
      if (stopped) return;
      const event = { id: e.id, event: e.event, data: e.data };
      out.events.push(event);
      if (opts.stop?.(event)) stopped = true;
    },
    onComment: (c) => out.comments.push(c),
  });
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`stream not finished within ${opts.timeoutMs ?? WAIT_MS} ms: ${JSON.stringify(out.events.slice(-3))}`)), opts.timeoutMs ?? WAIT_MS);
  });
  try {
    while (!stopped) {
      const { done, value } = await Promise.race([reader.read(), timeout]);
      if (done) break;
      parser.feed(decoder.decode(value, { stream: true }));
    }
  } finally {
    clearTimeout(timer);
    await reader.cancel().catch(() => {});
  }
  return out;
}

/** The JSON chunks of a native stream, without the final `[DONE]`. */
export function chunksOf(read: SseRead): Array<Record<string, any>> {
  return read.events.filter((e) => e.data !== '[DONE]').map((e) => JSON.parse(e.data) as Record<string, any>);
}

/** Chunk types with runs of `text` collapsed into one, e.g. `tool_call tool_result text done`. */
export function shapeOf(chunks: Array<Record<string, any>>): string {
  return chunks
    .map((c) => c.type as string)
    .filter((type, i, all) => !(type === 'text' && all[i - 1] === 'text'))
    .join(' ');
}

export function textOf(chunks: Array<Record<string, any>>): string {
  return chunks
    .filter((c) => c.type === 'text')
    .map((c) => c.content as string)
    .join('');
}

/** A listening app answering through the real `openai` client against a fake OpenAI-compatible server, with the Support persona seeded. */
export async function startOnFakeModel(): Promise<{ fake: FakeOpenAi; t: TestApp; origin: string; personaId: string }> {
  const fake = await startFakeOpenAi();
  const llm = createOpenAiChat({ client: createOpenAi({ apiKey: FAKE_OPENAI_KEY, baseUrl: fake.url, maxRetries: 0, timeoutMs: 2_000 }), defaultModel: 'gpt-test' });
  const t = await createTestApp({ overrides: { llm } });
  const origin = await listen(t);
  return { fake, t, origin, personaId: await seedSupport(t) };
}

/** The `error` of every interaction recorded so far, oldest first (null for an answer). */
export async function interactionErrors(t: TestApp): Promise<Array<string | null>> {
  return (await t.ctx.db.prepare<{ error: string | null }>('SELECT error FROM interactions ORDER BY seq').all()).map((r) => r.error);
}
