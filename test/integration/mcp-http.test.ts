// API.md §10 over Streamable HTTP at /mcp, with the SDK's own StreamableHTTPClientTransport against a
// listening server on 127.0.0.1: bearer keys and scopes, DNS-rebinding checks, sessions per key.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport, StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema, LATEST_PROTOCOL_VERSION } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { testBackends } from '../helpers/postgres.js';
import { createPersona } from '../helpers/factories.js';
import { type AskedUser, callOk, expectConfirmations, personasOf } from '../helpers/mcp.js';
import { expectProblem } from '../helpers/problem.js';
import { listen, OFFLINE_ANSWER, seedSupport, WAIT_MS } from './chat-helpers.js';

const INITIALIZE = {
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: { protocolVersion: LATEST_PROTOCOL_VERSION, capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
};
const MCP_HEADERS = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };

async function connectHttp(origin: string, key: string): Promise<{ client: Client; transport: StreamableHTTPClientTransport }> {
  const transport = new StreamableHTTPClientTransport(new URL('/mcp', origin), { requestInit: { headers: { authorization: `Bearer ${key}` } } });
  const client = new Client({ name: 'switchboard-http-test', version: '1.0.0' });
  await client.connect(transport);
  return { client, transport };
}

describe.each(testBackends())('MCP over Streamable HTTP at /mcp on $kind', { timeout: 15_000 }, (backend) => {
  let t: TestApp;
  let origin: string;

  beforeAll(async () => {
    t = await createTestApp({ backend });
    origin = await listen(t);
  });
  afterAll(async () => t?.close());

  it('refuses a request without a key: 401 with WWW-Authenticate', async () => {
    const res = await t.request({ method: 'POST', url: '/mcp', as: null, headers: MCP_HEADERS, body: INITIALIZE });
    expectProblem(res, 401, 'unauthorized');
    expect(res.headers['www-authenticate']).toMatch(/^Bearer/);
    const wrong = await t.request({ method: 'POST', url: '/mcp', as: `sb_${'x'.repeat(40)}`, headers: MCP_HEADERS, body: INITIALIZE });
    expectProblem(wrong, 401, 'unauthorized');
  });

  it('serves the SDK client: tools, a persona created, a question answered with streamed progress', async () => {
    const { client, transport } = await connectHttp(origin, t.adminKey);
    expect(transport.sessionId).toMatch(/^[0-9a-f-]{36}$/);
    expect((await client.listTools()).tools.map((x) => x.name)).toContain('ask_persona');
    const persona = await callOk(client, 'create_persona', { name: 'Over HTTP', instructions: 'Answer.' });
    expect((await t.request({ method: 'GET', url: `/personas/${persona.id}` })).json().name).toBe('Over HTTP');

    const personaId = await seedSupport(t);
    const progress: string[] = [];
    const result = await client.callTool({ name: 'ask_persona', arguments: { personaId, message: 'How long do refunds take?' } }, undefined, {
      onprogress: (p) => void progress.push(p.message ?? ''),
    });
    expect((result.structuredContent as { response: string }).response).toBe(OFFLINE_ANSWER);
    expect(progress.join('')).toBe(OFFLINE_ANSWER);
    await transport.terminateSession();
    await client.close();
  });

  it('asks a client that can ask its user before a tool that cannot be undone (elicitation/create), and does only what was confirmed', async () => {
    const user: AskedUser = { asked: [], answer: { action: 'decline' } };
    const asking = new Client({ name: 'asking-client', version: '1.0.0' }, { capabilities: { elicitation: {} } });
    asking.setRequestHandler(ElicitRequestSchema, async (request) => {
      user.asked.push(request.params.message);
      return user.answer;
    });
    await asking.connect(new StreamableHTTPClientTransport(new URL('/mcp', origin), { requestInit: { headers: { authorization: `Bearer ${t.adminKey}` } } }));
    await expectConfirmations(asking, user, personasOf(t));
    await asking.close();
    // A client that cannot ask: the tool runs at once (its own approval of tool calls stands).
    const { client } = await connectHttp(origin, t.adminKey);
    const plain = await createPersona(t, { name: 'Plain' });
    expect((await callOk(client, 'delete_persona', { id: plain.id })).deleted).toBe(true);
    await client.close();
  });

  it('answers a tool a read key may not call with 403 and the scope it needs, before running it', async () => {
    const { key } = await t.ctx.services.auth.createKeyInWorkspace('default', 'mcp reader', ['read']);
    const { client, transport } = await connectHttp(origin, key.key);
    expect((await callOk(client, 'list_personas')).data).toBeInstanceOf(Array);
    const before = (await t.request({ method: 'GET', url: '/personas?limit=100' })).json().data.length;
    const refusal = await client.callTool({ name: 'create_persona', arguments: { name: 'Nope', instructions: 'x' } }).catch((e: unknown) => e);
    expect(refusal).toBeInstanceOf(StreamableHTTPError);
    expect((refusal as StreamableHTTPError).code).toBe(403);
    expect((await t.request({ method: 'GET', url: '/personas?limit=100' })).json().data.length).toBe(before);

    const raw = await t.request({
      method: 'POST',
      url: '/mcp',
      as: key.key,
      headers: { ...MCP_HEADERS, 'mcp-session-id': transport.sessionId!, 'mcp-protocol-version': LATEST_PROTOCOL_VERSION },
      body: { jsonrpc: '2.0', id: 9, method: 'tools/call', params: { name: 'delete_persona', arguments: { id: 'per_x' } } },
    });
    expect(expectProblem(raw, 403, 'forbidden').detail).toBe('delete_persona needs the "write" scope.');
    expect(raw.headers['www-authenticate']).toContain('error="insufficient_scope", scope="write"');
    await client.close();
  });

  it('keeps each session to the key that opened it, and ends it on DELETE', async () => {
    const { client, transport } = await connectHttp(origin, t.adminKey);
    const sessionId = transport.sessionId!;
    const headers = { ...MCP_HEADERS, 'mcp-session-id': sessionId, 'mcp-protocol-version': LATEST_PROTOCOL_VERSION };
    const list = { jsonrpc: '2.0', id: 2, method: 'tools/list', params: {} };

    const { key } = await t.ctx.services.auth.createKeyInWorkspace('default', 'someone else', ['read', 'write']);
    expectProblem(await t.request({ method: 'POST', url: '/mcp', as: key.key, headers, body: list }), 404, 'not_found');
    const other = await t.ctx.services.auth.createWorkspace('mcp-other');
    expectProblem(await t.request({ method: 'POST', url: '/mcp', as: other.key.key, headers, body: list }), 404, 'not_found');
    expectProblem(await t.request({ method: 'POST', url: '/mcp', headers: MCP_HEADERS, body: list }), 400, 'validation_failed', 'mcp-session-id');

    const own = await t.request({ method: 'POST', url: '/mcp', headers, body: list });
    expect(own.statusCode, own.body).toBe(200);
    expect(own.headers['x-request-id']).toBeTruthy();

    await transport.terminateSession();
    expectProblem(await t.request({ method: 'POST', url: '/mcp', headers, body: list }), 404, 'not_found');
    await client.close();
  });

  it('keeps at most 20 sessions per key, closing the least recently used', async () => {
    const { key } = await t.ctx.services.auth.createKeyInWorkspace('default', 'leaky client', ['read']);
    const open = async () => {
      const res = await t.request({ method: 'POST', url: '/mcp', as: key.key, headers: MCP_HEADERS, body: INITIALIZE });
      expect(res.statusCode, res.body).toBe(200);
      return res.headers['mcp-session-id'] as string;
    };
    const ids: string[] = [];
    for (let i = 0; i < 20; i++) ids.push(await open());
    const list = (id: string) =>
      t.request({
        method: 'POST',
        url: '/mcp',
        as: key.key,
        headers: { ...MCP_HEADERS, 'mcp-session-id': id, 'mcp-protocol-version': LATEST_PROTOCOL_VERSION },
        body: { jsonrpc: '2.0', id: 3, method: 'tools/list', params: {} },
      });
    // Touch the first so the second is now the least recently used.
    expect((await list(ids[0]!)).statusCode).toBe(200);
    await open();
    expectProblem(await list(ids[1]!), 404, 'not_found');
    expect((await list(ids[0]!)).statusCode).toBe(200);
    expect((await list(ids[19]!)).statusCode).toBe(200);
  });

  it('opens every session while sessions end elsewhere: a check of the rows never ends one whose initialize is under way', async () => {
    // Each signal makes this instance check the sessions it holds against their rows (as a DELETE on another instance does).
    const opens = Array.from({ length: 20 }, () => t.request({ method: 'POST', url: '/mcp', headers: MCP_HEADERS, body: INITIALIZE }));
    const signals = Array.from({ length: 20 }, () => t.ctx.signals.changed('mcp-sessions'));
    const answers = await Promise.all(opens);
    await Promise.all(signals);
    expect(answers.map((r) => r.statusCode)).toEqual(Array(20).fill(200));
    const list = (id: string) =>
      t.request({
        method: 'POST',
        url: '/mcp',
        headers: { ...MCP_HEADERS, 'mcp-session-id': id, 'mcp-protocol-version': LATEST_PROTOCOL_VERSION },
        body: { jsonrpc: '2.0', id: 3, method: 'tools/list', params: {} },
      });
    for (const res of answers.slice(-5)) expect((await list(res.headers['mcp-session-id'] as string)).statusCode).toBe(200);
  });

  it('refuses requests addressed to another host or sent from a foreign origin (DNS rebinding)', async () => {
    const rebound = await t.request({ method: 'POST', url: '/mcp', headers: { ...MCP_HEADERS, host: 'evil.example:3000' }, body: INITIALIZE });
    expect(expectProblem(rebound, 403, 'forbidden').detail).toContain('SWITCHBOARD_MCP_ALLOWED_HOSTS');
    const foreign = await t.request({ method: 'POST', url: '/mcp', headers: { ...MCP_HEADERS, origin: 'https://evil.example' }, body: INITIALIZE });
    expect(expectProblem(foreign, 403, 'forbidden').detail).toContain('https://evil.example');
    const sandboxed = await t.request({ method: 'POST', url: '/mcp', headers: { ...MCP_HEADERS, origin: 'null' }, body: INITIALIZE });
    expectProblem(sandboxed, 403, 'forbidden');
    const local = await t.request({ method: 'POST', url: '/mcp', headers: { ...MCP_HEADERS, host: '127.0.0.1:3000', origin: 'http://localhost:5173' }, body: INITIALIZE });
    expect(local.statusCode, local.body).toBe(200);
  });
});

describe.each(testBackends())('MCP over HTTP: configured hosts and shutdown on $kind', { timeout: 15_000 }, (backend) => {
  it('answers a host the operator listed, and ends open event streams when the server stops', async () => {
    const t = await createTestApp({ backend, env: { SWITCHBOARD_MCP_ALLOWED_HOSTS: 'mcp.example.com' } });
    try {
      const listed = await t.request({ method: 'POST', url: '/mcp', headers: { ...MCP_HEADERS, host: 'mcp.example.com' }, body: INITIALIZE });
      expect(listed.statusCode, listed.body).toBe(200);

      const origin = await listen(t);
      const post = (body: unknown, sessionId?: string) =>
        fetch(`${origin}/mcp`, {
          method: 'POST',
          headers: { ...MCP_HEADERS, authorization: `Bearer ${t.adminKey}`, ...(sessionId ? { 'mcp-session-id': sessionId, 'mcp-protocol-version': LATEST_PROTOCOL_VERSION } : {}) },
          body: JSON.stringify(body),
          signal: AbortSignal.timeout(WAIT_MS),
        });
      const init = await post(INITIALIZE);
      const sessionId = init.headers.get('mcp-session-id')!;
      await init.text();
      expect((await post({ jsonrpc: '2.0', method: 'notifications/initialized' }, sessionId)).status).toBe(202);
      const stream = await fetch(`${origin}/mcp`, {
        headers: { authorization: `Bearer ${t.adminKey}`, accept: 'text/event-stream', 'mcp-session-id': sessionId, 'mcp-protocol-version': LATEST_PROTOCOL_VERSION },
        signal: AbortSignal.timeout(WAIT_MS),
      });
      expect(stream.status).toBe(200);
      expect(stream.headers.get('content-type')).toContain('text/event-stream');
      const ended = (async () => {
        const reader = stream.body!.getReader();
        while (!(await reader.read()).done);
        return 'ended';
      })();
      const started = Date.now();
      await t.app.close();
      expect(await ended).toBe('ended');
      expect(Date.now() - started).toBeLessThan(WAIT_MS);
    } finally {
      await t.close();
    }
  });
});
