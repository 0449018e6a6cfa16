import type { AddressInfo } from 'node:net';
import net from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../helpers/app.js';

/** Every network wait in this file is bounded by this. */
const WAIT_MS = 5_000;

interface RawResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
}

function parseResponse(raw: string): RawResponse {
  const headEnd = raw.indexOf('\r\n\r\n');
  if (headEnd === -1) throw new Error(`no complete response head in ${JSON.stringify(raw.slice(0, 200))}`);
  const [statusLine = '', ...lines] = raw.slice(0, headEnd).split('\r\n');
  const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(statusLine)?.[1]);
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const colon = line.indexOf(':');
    headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  let body = raw.slice(headEnd + 4);
  if (headers['content-length'] !== undefined) body = body.slice(0, Number(headers['content-length']));
  return { status, headers, body };
}

/**
 * Writes `parts` on a fresh TCP connection (pausing between them, so the server reads them as
 * separate chunks, as from a slow network) and reads until the server closes the connection.
 */
function exchange(port: number, parts: string[], pauseMs = 50): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`no complete response within ${WAIT_MS} ms: ${Buffer.concat(chunks).toString('latin1').slice(0, 200)}`));
    }, WAIT_MS);
    const finish = (err?: Error) => {
      clearTimeout(timer);
      const raw = Buffer.concat(chunks).toString('latin1');
      if (raw.length === 0) return reject(err ?? new Error('connection closed without a response'));
      try {
        resolve(parseResponse(raw));
      } catch (parseErr) {
        reject(parseErr);
      }
    };
    socket.on('data', (d) => chunks.push(d));
    socket.on('close', () => finish());
    socket.on('error', (err) => finish(err));
    socket.on('connect', async () => {
      for (const [i, part] of parts.entries()) {
        if (i > 0) await sleep(pauseMs);
        if (socket.destroyed || !socket.writable) return;
        socket.write(part);
      }
    });
  });
}

/** Resolves to the error code of a connection attempt ('connected' when it succeeds). */
function tryConnect(port: number): Promise<string> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    const timer = setTimeout(() => {
      socket.destroy();
      resolve('timeout');
    }, WAIT_MS);
    socket.on('connect', () => {
      clearTimeout(timer);
      socket.destroy();
      resolve('connected');
    });
    socket.on('error', (err: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      resolve(err.code ?? 'error');
    });
  });
}

function withTimeout<T>(promise: Promise<T>, what: string, ms = WAIT_MS): Promise<T> {
  return Promise.race([
    promise,
    sleep(ms, undefined, { ref: false }).then(() => {
      throw new Error(`${what}: no answer within ${ms} ms`);
    }),
  ]);
}

function expectProblem(res: RawResponse, status: number, code: string) {
  expect(res.status, res.body.slice(0, 300)).toBe(status);
  expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
  const body = JSON.parse(res.body);
  expect(body).toMatchObject({ type: `https://switchboard.dev/errors/${code}`, status, code });
  expect(typeof body.title).toBe('string');
  expect(typeof body.detail).toBe('string');
  expect(typeof body.requestId).toBe('string');
  expect(res.headers['x-request-id']).toBe(body.requestId);
  return body;
}

function get(target: string, headers: Record<string, string> = {}): string {
  const lines = [`GET ${target} HTTP/1.1`, 'Host: 127.0.0.1', 'Connection: close'];
  for (const [k, v] of Object.entries(headers)) lines.push(`${k}: ${v}`);
  return `${lines.join('\r\n')}\r\n\r\n`;
}

describe('over-long URLs and headers through a real port (API.md §1)', () => {
  let t: TestApp;
  let port: number;
  let auth: Record<string, string>;
  beforeAll(async () => {
    t = await createTestApp();
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    port = (t.app.server.address() as AddressInfo).port;
    auth = { Authorization: `Bearer ${t.adminKey}` };
  });
  afterAll(async () => t.close());

  it('answers an ordinary request (the harness works)', async () => {
    const res = await exchange(port, [get('/personas?q=x', auth)]);
    expect(res.status).toBe(200);
    expect(JSON.parse(res.body)).toEqual({ data: [], nextCursor: null });
  });

  it('answers 8 192 characters of URL normally, and one more with 414', async () => {
    const base = '/personas?q=';
    const atLimit = base + 'a'.repeat(8192 - base.length);
    expect(atLimit.length).toBe(8192);
    // Within the URL limit, the query itself is then validated (q is at most 200 characters).
    const ok = await exchange(port, [get(atLimit, auth)]);
    expect(ok.status).toBe(400);
    const over = await exchange(port, [get(`${atLimit}a`, { ...auth, 'x-request-id': 'long-url-1' })]);
    expect(expectProblem(over, 414, 'uri_too_long').requestId).toBe('long-url-1');
  });

  it('answers 414 for an over-long path, even without a key', async () => {
    const res = await exchange(port, [get(`/personas/per_${'a'.repeat(9000)}`)]);
    expectProblem(res, 414, 'uri_too_long');
    const api = await exchange(port, [get(`/api/personas?q=${'b'.repeat(10_000)}`)]);
    expectProblem(api, 414, 'uri_too_long');
  });

  it("answers 414 for a URL past Node's 16 KiB header limit", async () => {
    const res = await exchange(port, [get(`/personas?q=${'a'.repeat(20_000)}`, auth)]);
    expectProblem(res, 414, 'uri_too_long');
    const huge = await exchange(port, [get(`/${'p'.repeat(100_000)}`)]);
    expectProblem(huge, 414, 'uri_too_long');
  });

  it('answers 431 for a huge header with a short URL', async () => {
    const res = await exchange(port, [get('/personas', { ...auth, Cookie: `session=${'c'.repeat(20_000)}` })]);
    expectProblem(res, 431, 'headers_too_large');
  });

  it('answers 414 when both the URL (over 8 192) and the headers are too large: the URL comes first', async () => {
    const res = await exchange(port, [get(`/personas?q=${'a'.repeat(10_000)}`, { Cookie: 'c'.repeat(10_000) })]);
    expectProblem(res, 414, 'uri_too_long');
  });

  it('answers 431 for many headers that are together too large', async () => {
    const many: Record<string, string> = { ...auth };
    for (let i = 0; i < 300; i++) many[`X-Filler-${i}`] = 'v'.repeat(60);
    const res = await exchange(port, [get('/personas', many)]);
    expectProblem(res, 431, 'headers_too_large');
  });

  describe('when the request arrives in several TCP chunks', () => {
    it('tells a huge header (431) from a long URL even when the header starts a new chunk', async () => {
      const res = await exchange(port, [
        'GET /personas HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n',
        `Cookie: ${'c'.repeat(20_000)}\r\n\r\n`,
      ]);
      expectProblem(res, 431, 'headers_too_large');
    });

    it('answers 431 when a huge header value is split across chunks', async () => {
      const res = await exchange(port, [
        `GET /personas HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nCookie: ${'c'.repeat(10_000)}`,
        `${'c'.repeat(10_000)}\r\n\r\n`,
      ]);
      expectProblem(res, 431, 'headers_too_large');
    });

    it('answers 414 when a long URL is split across chunks', async () => {
      for (const [first, second] of [
        [10_000, 10_000],
        [15_000, 5_000],
        [3_000, 17_000],
      ] as const) {
        const res = await exchange(port, [
          `GET /personas?q=${'a'.repeat(first)}`,
          `${'a'.repeat(second)} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n`,
        ]);
        expectProblem(res, 414, 'uri_too_long');
      }
    });
  });

  it('still serves requests after all that', async () => {
    const res = await exchange(port, [get('/health')]);
    expect(res.status).toBe(200);
    expect(JSON.parse(res.body).status).toBe('ok');
  });
});

describe('graceful shutdown through a real port', () => {
  let custom: TestApp;
  let port: number;
  let entered: () => void;
  const inHandler = new Promise<void>((resolve) => {
    entered = resolve;
  });
  beforeAll(async () => {
    custom = await createTestApp({
      extend: (app) => {
        app.get('/test/slow', { config: { public: true } }, async () => {
          entered();
          await sleep(300);
          return { finished: true };
        });
      },
    });
    await custom.app.listen({ port: 0, host: '127.0.0.1' });
    port = (custom.app.server.address() as AddressInfo).port;
  });
  afterAll(async () => custom.close());

  it('finishes the in-flight request, closes idle connections and refuses new ones', async () => {
    // An idle keep-alive connection: it must not hold the shutdown up.
    const idle = net.connect(port, '127.0.0.1');
    const idleClosed = new Promise<void>((resolve) => idle.on('close', () => resolve()));
    idle.on('error', () => {});
    const idleAnswered = new Promise<string>((resolve) => idle.once('data', (d) => resolve(d.toString('latin1'))));
    idle.write('GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: keep-alive\r\n\r\n');
    expect(await withTimeout(idleAnswered, 'keep-alive request')).toMatch(/^HTTP\/1\.1 200/);

    let settled = false;
    const inflight = exchange(port, [get('/test/slow')]).finally(() => {
      settled = true;
    });
    await withTimeout(inHandler, 'slow handler start');

    const closing = custom.app.close();
    // Stops accepting at once, while the slow request is still running.
    const deadline = Date.now() + WAIT_MS;
    while (custom.app.server.listening && Date.now() < deadline) await sleep(5);
    expect(custom.app.server.listening).toBe(false);
    expect(await tryConnect(port)).toBe('ECONNREFUSED');
    expect(settled).toBe(false);

    const res = await withTimeout(inflight, 'in-flight request');
    expect(res.status).toBe(200);
    expect(JSON.parse(res.body)).toEqual({ finished: true });

    await withTimeout(closing, 'app.close()');
    await withTimeout(idleClosed, 'idle keep-alive connection close');
    expect(await tryConnect(port)).toBe('ECONNREFUSED');
  });
});

describe('a request that arrives while the server shuts down', () => {
  it('is answered 503 problem+json on a busy keep-alive connection', async () => {
    let entered!: () => void;
    const inHandler = new Promise<void>((resolve) => {
      entered = resolve;
    });
    const t = await createTestApp({
      extend: (app) => {
        app.get('/test/slow', { config: { public: true } }, async () => {
          entered();
          await sleep(200);
          return { finished: true };
        });
      },
    });
    try {
      await t.app.listen({ port: 0, host: '127.0.0.1' });
      const port = (t.app.server.address() as AddressInfo).port;
      const socket = net.connect(port, '127.0.0.1');
      socket.on('error', () => {});
      const chunks: Buffer[] = [];
      socket.on('data', (d) => chunks.push(d));
      const closed = new Promise<void>((resolve) => socket.on('close', () => resolve()));
      socket.write('GET /test/slow HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: keep-alive\r\n\r\n');
      await withTimeout(inHandler, 'slow handler start');
      const closing = t.app.close();
      await sleep(30);
      // The connection is busy, so shutdown keeps it open; the next request on it arrives too late.
      socket.write(`GET /personas HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${t.adminKey}\r\nx-request-id: late-1\r\n\r\n`);
      await withTimeout(closed, 'server closing the connection');
      await withTimeout(closing, 'app.close()');

      const raw = Buffer.concat(chunks).toString('latin1');
      const second = raw.indexOf('HTTP/1.1', 1);
      expect(second, raw.slice(0, 400)).toBeGreaterThan(0);
      const first = parseResponse(raw.slice(0, second));
      expect(first.status).toBe(200);
      const late = parseResponse(raw.slice(second));
      const body = expectProblem(late, 503, 'unavailable');
      expect(body.requestId).toBe('late-1');
      expect(late.headers.connection).toBe('close');
    } finally {
      await t.close();
    }
  });
});
