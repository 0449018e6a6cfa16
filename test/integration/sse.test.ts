/**
 * The event-stream writer (src/core/chat/sse.ts) on a real socket: keep-alive pings, back-pressure
 * from a client that stops reading, and the abort signal when the client goes away. The ping
 * interval is 15 s in production, so a small app opens streams with a 50 ms one.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import Fastify, { type FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { openSse, type SseWriter } from '../../src/core/chat/sse.js';

const WAIT_MS = 4_000;
const CHUNK = `data: ${'x'.repeat(64 * 1024 - 8)}\n\n`;
/** Loopback socket buffers hold a few MiB at most; a writer ignoring back-pressure passes this in well under a second. */
const STALL_LIMIT_BYTES = 64 * 1024 * 1024;

let app: FastifyInstance;
let port: number;
/** The writer of the latest stream the small app opened. */
let current: { sse: SseWriter; written: number; finished: boolean } | undefined;

beforeAll(async () => {
  app = Fastify();
  app.get('/ping', async (_request, reply) => {
    const sse = openSse(reply, { 'x-test': 'ping' }, 50);
    current = { sse, written: 0, finished: false };
    await new Promise((resolve) => sse.signal.addEventListener('abort', resolve, { once: true }));
  });
  app.get('/flood', async (_request, reply) => {
    const sse = openSse(reply, {}, 60_000);
    const state = { sse, written: 0, finished: false };
    current = state;
    // Capped, so a writer that ignored back-pressure ends the loop (and fails the test) instead of
    // spinning on resolved promises until memory runs out.
    while (!sse.signal.aborted && state.written * CHUNK.length < STALL_LIMIT_BYTES) {
      await sse.write(CHUNK);
      state.written++;
    }
    state.finished = true;
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  port = (app.server.address() as AddressInfo).port;
});
afterAll(() => app.close());

/** Opens a GET on the small app; resolves with the response once its headers are in. */
function get(path: string): Promise<{ req: http.ClientRequest; res: http.IncomingMessage }> {
  return new Promise((resolve, reject) => {
    const req = http.get({ host: '127.0.0.1', port, path, timeout: WAIT_MS }, (res) => resolve({ req, res }));
    req.on('timeout', () => req.destroy(new Error(`no response within ${WAIT_MS} ms`)));
    req.on('error', reject);
  });
}

/** Polls until the writer's count has not moved for `quietMs`; returns the count. */
async function settled(quietMs = 150): Promise<number> {
  const deadline = Date.now() + WAIT_MS;
  let last = -1;
  let since = Date.now();
  while (Date.now() < deadline) {
    const now = current!.written;
    if (now !== last) {
      last = now;
      since = Date.now();
    } else if (Date.now() - since >= quietMs) {
      return now;
    }
    await sleep(10);
  }
  throw new Error(`the writer never stalled: ${last} chunks written`);
}

describe('openSse', () => {
  it('sends event-stream headers and a `: ping` comment every interval', async () => {
    const { req, res } = await get('/ping');
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toMatch(/^text\/event-stream/);
    expect(res.headers['cache-control']).toContain('no-cache');
    expect(res.headers['x-test']).toBe('ping');
    let body = '';
    res.setEncoding('utf8');
    res.on('data', (d: string) => (body += d));
    // Two pings prove the interval repeats (about four in 220 ms at 50 ms; a loaded machine may send fewer, later).
    const deadline = Date.now() + 5_000;
    while (body.split('\n\n').filter((line) => line !== '').length < 2 && Date.now() < deadline) await sleep(10);
    req.destroy();
    const pings = body.split('\n\n').filter((line) => line !== '');
    expect(pings.length).toBeGreaterThanOrEqual(2);
    expect(new Set(pings)).toEqual(new Set([': ping']));
  });

  it('aborts its signal when the client closes the connection', async () => {
    const { req } = await get('/ping');
    const sse = current!.sse;
    expect(sse.signal.aborted).toBe(false);
    req.destroy();
    await vi.waitFor(() => expect(sse.signal.aborted).toBe(true), { timeout: 1_000, interval: 10 });
    expect((sse.signal.reason as Error).name).toBe('AbortError');
  });

  it('stalls writes while the client does not read and resumes when it does', async () => {
    const { req, res } = await get('/flood');
    res.pause();
    const stalledAt = await settled();
    const state = current!;
    expect(stalledAt).toBeGreaterThan(0);
    expect(stalledAt * CHUNK.length).toBeLessThan(STALL_LIMIT_BYTES);
    expect(state.finished).toBe(false);

    // Reading again lets the pending write resolve and the loop go on.
    let received = 0;
    res.on('data', (d: Buffer) => (received += d.length));
    res.resume();
    await vi.waitFor(() => expect(state.written).toBeGreaterThan(stalledAt + 16), { timeout: 2_000, interval: 10 });
    expect(received).toBeGreaterThan(0);

    // A writer blocked on a departed client must not wait for a drain that never comes.
    res.pause();
    await settled();
    req.destroy();
    await vi.waitFor(() => expect(state.finished).toBe(true), { timeout: 1_000, interval: 10 });
    expect(state.sse.signal.aborted).toBe(true);
  });
});
