// API.md §13, SIGTERM drains: the built server stops taking connections, lets the answer in flight
// finish (and keeps it), closes what outlives SWITCHBOARD_DRAIN_SECONDS, and exits 0. Real
// processes, a real signal, the real `openai` client against the fake model on 127.0.0.1.
import fs from 'node:fs';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { generateKeySecret } from '../../src/core/auth/keys.js';
import { FAKE_OPENAI_KEY, type FakeOpenAi, startFakeOpenAi } from '../fakes/openai-server.js';
import { tempDir } from '../helpers/app.js';
import { type BuiltServer, builtServers } from '../helpers/built-server.js';
import { chunksOf, readSse, type SseEvent, textOf } from '../integration/chat-helpers.js';

const STREAMED = 'one two three four five six seven eight nine ten';
const WAIT_MS = 15_000;

/** Connection refused (or reset) once the server has stopped listening; a status while it still answers. */
async function probe(url: string): Promise<number | 'refused'> {
  try {
    return (await fetch(`${url}/health/ready`, { signal: AbortSignal.timeout(2_000) })).status;
  } catch {
    return 'refused';
  }
}

describe('SIGTERM drains the built server', () => {
  const key = generateKeySecret();
  const auth = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
  const dirs: string[] = [];
  const killers: Array<() => void> = [];
  let fake: FakeOpenAi;

  afterEach(async () => {
    for (const kill of killers.splice(0)) kill();
    await fake?.close();
  });
  afterAll(() => {
    for (const dir of dirs) fs.rmSync(dir, { recursive: true, force: true });
  });

  async function start(dataDir: string, drainSeconds: number): Promise<BuiltServer> {
    const servers = builtServers({
      dataDir,
      adminKey: key,
      env: { OPENAI_API_KEY: FAKE_OPENAI_KEY, OPENAI_BASE_URL: fake.url, SWITCHBOARD_MODEL: 'gpt-test', SWITCHBOARD_DRAIN_SECONDS: String(drainSeconds) },
    });
    killers.push(servers.killAll);
    return servers.serve();
  }

  async function persona(server: BuiltServer): Promise<string> {
    const res = await fetch(`${server.url}/personas`, { method: 'POST', headers: auth, body: JSON.stringify({ name: 'Counter', instructions: 'Count.' }) });
    expect(res.status).toBe(201);
    return ((await res.json()) as { id: string }).id;
  }

  /** Opens a stream and resolves once its first text chunk has arrived, with the rest still coming. */
  async function streamStarted(server: BuiltServer, personaId: string, seen: SseEvent[] = []) {
    const res = await fetch(`${server.url}/query/stream`, { method: 'POST', headers: auth, body: JSON.stringify({ personaId, message: 'count' }) });
    expect(res.status).toBe(200);
    let first!: () => void;
    const started = new Promise<void>((resolve) => (first = resolve));
    const read = readSse(res, {
      timeoutMs: WAIT_MS,
      stop: (e: SseEvent) => {
        seen.push(e);
        if (e.data.includes('"type":"text"')) first();
        return false;
      },
    });
    await Promise.race([started, read]);
    // Wrapped: an async function returning the promise itself would wait for the whole stream.
    return { read };
  }

  it('finishes the answer in flight, keeps it, stops listening and exits 0', async () => {
    fake = await startFakeOpenAi();
    const dataDir = tempDir('switchboard-drain-');
    dirs.push(dataDir);
    const server = await start(dataDir, 30);
    expect(await probe(server.url)).toBe(200);
    const personaId = await persona(server);
    fake.reply({ text: STREAMED, chunkDelayMs: 100 });

    const { read } = await streamStarted(server, personaId);
    server.child.kill('SIGTERM');
    // New connections are refused while the stream goes on (a condition, not a duration).
    await expect.poll(() => probe(server.url), { timeout: WAIT_MS, interval: 25 }).toBe('refused');

    const chunks = chunksOf(await read);
    expect(textOf(chunks)).toBe(STREAMED);
    const done = chunks.at(-1)!;
    expect(done).toMatchObject({ type: 'done' });
    await server.exited;
    expect(server.child.exitCode).toBe(0);

    // The answer was acknowledged (its `done` chunk arrived): the next start has it.
    const again = await start(dataDir, 30);
    const session = await fetch(`${again.url}/sessions/${done.sessionId as string}`, { headers: auth });
    expect(session.status).toBe(200);
    const body = (await session.json()) as { messages: Array<{ id: string; role: string; content: string }> };
    expect(body.messages.find((m) => m.id === done.messageId)).toMatchObject({ role: 'assistant', content: STREAMED });
  });

  it('closes a stream that outlives SWITCHBOARD_DRAIN_SECONDS and still exits 0', async () => {
    fake = await startFakeOpenAi();
    const dataDir = tempDir('switchboard-drain-');
    dirs.push(dataDir);
    const server = await start(dataDir, 1);
    const personaId = await persona(server);
    // Ten chunks a second apart: the stream would outlive the one-second bound many times over.
    fake.reply({ text: STREAMED, chunkDelayMs: 1_000 });

    const events: SseEvent[] = [];
    const { read } = await streamStarted(server, personaId, events);
    server.child.kill('SIGTERM');
    // Cut off: the stream ends early, or its connection is closed under it.
    await read.catch(() => {});
    const chunks = chunksOf({ events, comments: [] });
    expect(textOf(chunks).length).toBeGreaterThan(0);
    expect(textOf(chunks).length).toBeLessThan(STREAMED.length);
    expect(chunks.some((c) => c.type === 'done')).toBe(false);
    await server.exited;
    expect(server.child.exitCode).toBe(0);
    // The server hung up on the model when it closed the stream.
    expect(fake.requests.find((r) => r.path === '/v1/chat/completions')?.closedByClient).toBe(true);
  });
});
