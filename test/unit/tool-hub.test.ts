// The tool hub's pieces on their own: the vault's header and redaction rules, parameter checking
// against JSON Schema, the guarded fetch, the config file, and one connection's caps and retirement.
import fs from 'node:fs';
import path from 'node:path';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkParameters } from '../../src/core/tools/json-schema.js';
import { guardedFetch } from '../../src/lib/guarded-fetch.js';
import { readMcpConfig } from '../../src/core/tools/mcp-config.js';
import { callDeadline, ConnectionSuperseded, DEFAULT_HUB_LIMITS, type ServerSpec, ServerConnection } from '../../src/core/tools/mcp-clients.js';
import { redactParameters, resolveHeaders, scrub, secretValues } from '../../src/core/tools/vault.js';
import { tempDir } from '../helpers/app.js';
import { FAKE_MCP_SERVER, fakeServerPids, holdFolder, waitFor } from '../helpers/mcp-tools.js';
import { type HttpTestServer, startHttpTestServer } from '../fakes/mcp-test-server.mjs';

describe('vault rules', () => {
  const secrets = { credentials: { API_TOKEN: 'tok-123456', OTHER: 'other-value' }, headers: { Authorization: 'Bearer ${API_TOKEN}', 'X-Static': 'static-value' } };

  it('fills ${NAME} references and sends every unreferenced credential as a header of its name', () => {
    expect(resolveHeaders(secrets)).toEqual({ Authorization: 'Bearer tok-123456', 'X-Static': 'static-value', OTHER: 'other-value' });
  });

  it('scrubs every credential, header value and bearer token out of nested values', () => {
    const values = secretValues(secrets);
    expect(scrub({ a: ['x tok-123456 y', { b: 'static-value' }], n: 1, 'other-value': null }, values)).toEqual({ a: ['x [redacted] y', { b: '[redacted]' }], n: 1, '[redacted]': null });
  });

  it('redacts parameters under secret-looking keys and values holding a credential', () => {
    expect(redactParameters({ query: 'hello', apiKey: 'k', nested: { Password: 1, list: ['tok-123456', 'fine'] }, session_id: 's' }, secretValues(secrets))).toEqual({
      query: 'hello',
      apiKey: '[redacted]',
      nested: { Password: '[redacted]', list: ['[redacted]', 'fine'] },
      session_id: '[redacted]',
    });
  });
});

describe('checkParameters', () => {
  const schema = {
    $schema: 'http://json-schema.org/draft-07/schema#',
    type: 'object',
    properties: { text: { type: 'string' }, opts: { type: 'object', properties: { n: { type: 'integer', minimum: 1 } }, additionalProperties: false } },
    required: ['text'],
  };

  it('names each failing field under parameters', () => {
    expect(checkParameters(schema, { text: 'x' })).toEqual([]);
    expect(checkParameters(schema, {})).toEqual([{ path: 'parameters.text', message: 'is required' }]);
    expect(checkParameters(schema, { text: 1, opts: { n: 0, extra: true } })).toEqual(
      expect.arrayContaining([
        { path: 'parameters.text', message: 'must be string' },
        { path: 'parameters.opts.n', message: 'must be >= 1' },
        { path: 'parameters.opts.extra', message: 'is not allowed' },
      ]),
    );
  });

  it('reads 2020-12 schemas and leaves schemas it cannot compile to the server', () => {
    expect(checkParameters({ $schema: 'https://json-schema.org/draft/2020-12/schema', type: 'object', required: ['q'] }, {})).toEqual([{ path: 'parameters.q', message: 'is required' }]);
    expect(checkParameters({ type: 'object', properties: { a: { $ref: '#/nowhere' } } }, { a: 1 })).toEqual([]);
  });
});

describe('guardedFetch', () => {
  let fake: HttpTestServer;
  beforeAll(async () => {
    fake = await startHttpTestServer();
  });
  afterAll(async () => {
    await fake?.close();
  });

  it('refuses a blocked address before connecting', async () => {
    const fetch = guardedFetch({ allowPrivate: false });
    await expect(fetch(fake.url, { method: 'POST' })).rejects.toThrow(/refused to connect: .*loopback/);
    await expect(fetch('http://metadata.google.internal/', {})).rejects.toThrow(/refused to connect/);
    expect(fake.requests).toEqual([]);
  });

  it('connects to the vetted address only, keeps the host name, and returns a redirect as is', async () => {
    const lookups: string[] = [];
    const fetch = guardedFetch({
      allowPrivate: false,
      isAllowedAddress: (a) => a === '127.0.0.1',
      lookup: async (host) => {
        lookups.push(host);
        return [{ address: '127.0.0.1', family: 4 }];
      },
    });
    const res = await fetch(`http://tools.example.test:${fake.port}/redirect`, { method: 'GET', headers: { 'x-probe': '1' } });
    expect(res.status).toBe(307);
    expect(res.headers.get('location')).toBe('/mcp');
    expect(lookups).toEqual(['tools.example.test']);
    expect(fake.requests.at(-1)).toMatchObject({ url: '/redirect', headers: { host: `tools.example.test:${fake.port}`, 'x-probe': '1' } });
    expect(fake.requests.filter((r) => r.url === '/mcp')).toEqual([]);
  });

  it('honours an abort signal', async () => {
    const fetch = guardedFetch({ allowPrivate: true });
    const controller = new AbortController();
    controller.abort(new Error('stop'));
    await expect(fetch(fake.url, { signal: controller.signal })).rejects.toThrow('stop');
  });
});

describe('readMcpConfig', () => {
  const dir = tempDir();
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));
  const write = (value: unknown) => {
    const file = path.join(dir, 'mcp.json');
    fs.writeFileSync(file, JSON.stringify(value));
    return file;
  };

  it('reads the Claude Desktop format, with or without type', () => {
    const file = write({
      globalShortcut: 'ignored',
      mcpServers: {
        files: { command: 'npx', args: ['-y', 'server-files'], env: { ROOT: '/tmp' } },
        remote: { url: 'https://tools.example.com/mcp', headers: { Authorization: 'Bearer ${TOKEN}' }, env: { TOKEN: 't' } },
        typed: { type: 'http', url: 'https://x.example.com/mcp' },
      },
    });
    expect(readMcpConfig(file)).toEqual([
      { name: 'files', transport: 'stdio', command: 'npx', args: ['-y', 'server-files'], credentials: { ROOT: '/tmp' } },
      { name: 'remote', transport: 'http', url: 'https://tools.example.com/mcp', headers: { Authorization: 'Bearer ${TOKEN}' }, credentials: { TOKEN: 't' } },
      { name: 'typed', transport: 'http', url: 'https://x.example.com/mcp', headers: {}, credentials: {} },
    ]);
  });

  it('refuses a header that references a missing credential', () => {
    const file = write({ mcpServers: { r: { url: 'https://x.example.com/mcp', headers: { Authorization: 'Bearer ${NOPE}' } } } });
    expect(() => readMcpConfig(file)).toThrow(/mcpServers\.r\.headers\.Authorization: references \$\{NOPE\}/);
  });
});

describe('ServerConnection caps', { timeout: 20_000 }, () => {
  it('queues calls over the concurrency cap, refuses beyond the queue with 503, and times out with 504', async () => {
    const connection = new ServerConnection(
      { id: 'mcs_x', name: 'fake', transport: 'stdio', command: process.execPath, args: [FAKE_MCP_SERVER], url: null, secrets: { credentials: {}, headers: {} }, refused: null },
      { ...DEFAULT_HUB_LIMITS, maxConcurrent: 1, maxQueued: 1, callTimeoutMs: 800 },
      { allowPrivate: false },
      pino({ level: 'silent' }),
    );
    // The first call holds the only slot past the queued call's deadline (twice as long), so the
    // queued call can only end by timing out in the queue, whatever the timers' order within a turn.
    const held = callDeadline('fake', 'hang', { ...DEFAULT_HUB_LIMITS, callTimeoutMs: 1_600 });
    try {
      const first = connection.call('hang', {}, { deadline: held.signal });
      const queued = connection.call('echo', { text: 'after' });
      await expect(connection.call('echo', { text: 'refused' })).rejects.toMatchObject({ code: 'unavailable', status: 503 });
      // The queued call's deadline includes its wait in the queue: it times out there.
      await expect(queued).rejects.toMatchObject({ code: 'upstream_timeout', status: 504 });
      await expect(first).rejects.toMatchObject({ code: 'upstream_timeout', status: 504 });
      // The child may still be starting on a loaded machine (its start is not bounded by 0.8 s).
      await connection.settle(DEFAULT_HUB_LIMITS.connectTimeoutMs);
      expect(await connection.call('echo', { text: 'free' })).toMatchObject({ content: [{ type: 'text', text: 'free' }] });
    } finally {
      held.clear();
      await connection.close();
    }
  });

  it('never starts a refused server', async () => {
    const connection = new ServerConnection(
      { id: 'mcs_y', name: 'off', transport: 'stdio', command: '/nonexistent', args: [], url: null, secrets: { credentials: {}, headers: {} }, refused: 'needs SWITCHBOARD_MCP_STDIO=1' },
      DEFAULT_HUB_LIMITS,
      { allowPrivate: false },
      pino({ level: 'silent' }),
    );
    await connection.settle(1_000);
    expect(connection).toMatchObject({ status: 'error', error: 'needs SWITCHBOARD_MCP_STDIO=1' });
    await expect(connection.call('echo', {})).rejects.toMatchObject({ code: 'upstream_error' });
    await connection.close();
  });
});

describe('ServerConnection.retire', { timeout: 20_000 }, () => {
  const spec: ServerSpec = { id: 'mcs_r', name: 'fake', transport: 'stdio', command: process.execPath, args: [FAKE_MCP_SERVER], url: null, secrets: { credentials: {}, headers: {} }, refused: null };

  it('lets the call in flight finish, moves the queued and later calls on, then ends the child', async () => {
    const connection = new ServerConnection(spec, { ...DEFAULT_HUB_LIMITS, maxConcurrent: 1 }, { allowPrivate: false }, pino({ level: 'silent' }));
    const hold = holdFolder();
    try {
      const running = connection.call('hold', { dir: hold.dir });
      await waitFor(() => hold.started().length === 1, 10_000, 'the held call');
      const queued = connection.call('echo', { text: 'queued' });
      const ended = connection.retire();
      await expect(queued).rejects.toBeInstanceOf(ConnectionSuperseded);
      await expect(connection.call('echo', { text: 'late' })).rejects.toBeInstanceOf(ConnectionSuperseded);
      const [pid] = hold.pids();
      expect(fakeServerPids()).toContain(pid);
      hold.release();
      const answer = (await running) as { content: Array<{ text: string }> };
      expect(JSON.parse(answer.content[0]!.text)).toMatchObject({ pid });
      await ended;
      await waitFor(() => !fakeServerPids().includes(pid!), 10_000, 'the child to end');
    } finally {
      hold.release();
      hold.remove();
      await connection.close();
    }
  });
});
