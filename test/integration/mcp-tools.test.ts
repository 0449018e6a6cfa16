// API.md §7 with the real SDK on both sides: a stdio tool server (the fake, spawned with node) —
// registration rules, every execution outcome, monitoring, execution records and workspaces.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { testBackends } from '../helpers/postgres.js';
import { execute, registerServer, SECRET, stdioServer, toolText } from '../helpers/mcp-tools.js';
import { expectProblem } from '../helpers/problem.js';
import { sha256 } from '../fakes/mcp-test-server.mjs';

const CALL_TIMEOUT_MS = 1_500;

describe('MCP tool servers over stdio', { timeout: 30_000 }, () => {
  let t: TestApp;
  let server: Awaited<ReturnType<typeof registerServer>>;
  beforeAll(async () => {
    t = await createTestApp({ env: { SWITCHBOARD_MCP_STDIO: '1' }, overrides: { toolHub: { callTimeoutMs: CALL_TIMEOUT_MS } } });
    server = await registerServer(t, stdioServer('fake'));
  });
  afterAll(async () => {
    await t?.close();
  });

  it('registers a stdio server connected, with its tools and credential names but no secret', async () => {
    expect(server).toMatchObject({
      name: 'fake',
      transport: 'stdio',
      command: process.execPath,
      url: null,
      status: 'connected',
      error: null,
      credentialNames: ['API_TOKEN'],
      headerNames: [],
    });
    expect(server.id).toMatch(/^mcs_/);
    expect(server.tools).toEqual(expect.arrayContaining(['whoami', 'echo', 'fail', 'hang', 'progress', 'add_tool']));
    const list = await t.request({ method: 'GET', url: '/api/mcp/servers' });
    expect(list.statusCode).toBe(200);
    expect(list.json()).toMatchObject({ data: [{ id: server.id, status: 'connected' }], nextCursor: null });
    const one = await t.request({ method: 'GET', url: `/api/mcp/servers/${server.id}` });
    expect(one.json()).toMatchObject({ id: server.id, name: 'fake' });
    for (const body of [list.body, one.body]) expect(body).not.toContain(SECRET);
  });

  it('lists built-in and external tools with their input schemas', async () => {
    const res = await t.request({ method: 'GET', url: '/api/mcp/tools' });
    expect(res.statusCode).toBe(200);
    const data = res.json().data as Array<{ toolName: string; action: string; description: string; inputSchema: Record<string, any> }>;
    expect(data[0]).toMatchObject({ toolName: 'knowledge', action: 'search' });
    const echo = data.find((d) => d.toolName === 'fake' && d.action === 'echo');
    expect(echo?.description).toBe('Echoes its text.');
    expect(echo?.inputSchema.properties.text).toEqual({ type: 'string' });
    expect(echo?.inputSchema.required).toEqual(['text']);
  });

  it('executes a tool: the credential arrived as an environment variable', async () => {
    const res = await execute(t, { toolName: 'fake', action: 'whoami', parameters: {} });
    expect(res.statusCode, res.body).toBe(200);
    const execution = res.json();
    expect(execution).toMatchObject({ toolName: 'fake', action: 'whoami', status: 'succeeded', error: null, monitored: false });
    expect(execution.id).toMatch(/^exe_/);
    expect(execution.parameters).toBeUndefined();
    expect(execution.events).toBeUndefined();
    const who = JSON.parse(toolText(execution));
    expect(who).toMatchObject({ transport: 'stdio', API_TOKEN: sha256(SECRET) });
    expect(Date.parse(execution.finishedAt)).toBeGreaterThanOrEqual(Date.parse(execution.startedAt));
    expect(execution.durationMs).toBeGreaterThanOrEqual(0);
  });

  it('answers 200 failed when the tool reports an error', async () => {
    const res = await execute(t, { toolName: 'fake', action: 'fail', parameters: {} });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({ status: 'failed', error: 'the fake tool failed on purpose' });
  });

  it('404 for an unknown tool or action, 400 naming the parameter that fails the schema', async () => {
    expectProblem(await execute(t, { toolName: 'nope', action: 'whoami', parameters: {} }), 404, 'not_found');
    expectProblem(await execute(t, { toolName: 'fake', action: 'nope', parameters: {} }), 404, 'not_found');
    expectProblem(await execute(t, { toolName: 'knowledge', action: 'nope', parameters: {} }), 404, 'not_found');
    const missing = expectProblem(await execute(t, { toolName: 'fake', action: 'echo', parameters: {} }), 400, 'validation_failed', 'parameters.text');
    expect(missing.errors?.[0]?.message).toBe('is required');
    expectProblem(await execute(t, { toolName: 'fake', action: 'echo', parameters: { text: 'x', times: 'twice' } }), 400, 'validation_failed', 'parameters.times');
    expectProblem(await execute(t, { toolName: 'knowledge', action: 'search', parameters: {} }), 400, 'validation_failed', 'parameters.query');
    expectProblem(await execute(t, { toolName: 'fake', action: 'echo', parameters: { text: 'x' }, extra: 1 }), 400, 'validation_failed');
  });

  it('504 when the tool does not answer in time; the call is cancelled on the server and recorded', async () => {
    const started = Date.now();
    const body = expectProblem(await execute(t, { toolName: 'fake', action: 'hang', parameters: {} }), 504, 'upstream_timeout');
    expect(Date.now() - started).toBeLessThan(CALL_TIMEOUT_MS + 8_000); // the tool never answers: not waited out
    const id = /execution (exe_\w+)/.exec(body.detail)?.[1];
    expect(id, body.detail).toBeDefined();
    const record = await t.request({ method: 'GET', url: `/api/mcp/executions/${id}` });
    expect(record.json()).toMatchObject({ id, action: 'hang', status: 'failed', result: null });
    expect(record.json().error).toContain('did not answer');
    // The SDK sent notifications/cancelled: the fake saw its hang end.
    const stats = await execute(t, { toolName: 'fake', action: 'stats', parameters: {} });
    expect(JSON.parse(toolText(stats.json())).cancelled).toBe(1);
  });

  it('keeps redacted parameters, the result and the progress/log notifications when monitored', async () => {
    const res = await execute(t, {
      toolName: 'fake',
      action: 'progress',
      parameters: { password: 'hunter2', note: SECRET, nested: { apiKey: 'k', plain: 'visible' } },
      monitorExecution: true,
    });
    // The fake's schema has no properties and is not strict: extra parameters pass.
    expect(res.statusCode, res.body).toBe(200);
    const execution = res.json();
    expect(execution).toMatchObject({ status: 'succeeded', monitored: true });
    expect(execution.parameters).toEqual({ password: '[redacted]', note: '[redacted]', nested: { apiKey: '[redacted]', plain: 'visible' } });
    expect(toolText(execution)).toBe('progress done');
    const events = execution.events as Array<Record<string, unknown>>;
    expect(events.filter((e) => e.type === 'progress')).toMatchObject([
      { progress: 1, total: 2, message: 'step 1' },
      { progress: 2, total: 2, message: 'step 2' },
    ]);
    expect(events.filter((e) => e.type === 'log')).toMatchObject([{ level: 'info', logger: 'fake', data: 'halfway there' }]);
    const stored = await t.request({ method: 'GET', url: `/api/mcp/executions/${execution.id}` });
    expect(stored.json()).toEqual(execution);
  });

  it('scrubs a credential a tool echoes back out of the recorded result', async () => {
    const res = await execute(t, { toolName: 'fake', action: 'echo', parameters: { text: `token=${SECRET}` }, monitorExecution: true });
    expect(res.statusCode).toBe(200);
    expect(toolText(res.json())).toBe('token=[redacted]');
    expect(res.json().parameters).toEqual({ text: '[redacted]' });
  });

  it('lists executions newest first with a cursor, filtered by toolName', async () => {
    const page1 = await t.request({ method: 'GET', url: '/api/mcp/executions?limit=2' });
    expect(page1.statusCode).toBe(200);
    const first = page1.json();
    expect(first.data).toHaveLength(2);
    expect(first.data[0].action).toBe('echo');
    expect(first.data[1].action).toBe('progress');
    expect(first.nextCursor).toEqual(expect.any(String));
    const rest = await t.request({ method: 'GET', url: `/api/mcp/executions?limit=100&cursor=${first.nextCursor}` });
    expect(rest.json().data.map((e: { action: string }) => e.action)).toEqual(['stats', 'hang', 'fail', 'whoami']);
    const none = await t.request({ method: 'GET', url: '/api/mcp/executions?toolName=knowledge' });
    expect(none.json()).toEqual({ data: [], nextCursor: null });
    expectProblem(await t.request({ method: 'GET', url: '/api/mcp/executions?bogus=1' }), 400, 'validation_failed');
    expectProblem(await t.request({ method: 'GET', url: '/api/mcp/executions/exe_missing' }), 404, 'not_found');
  });

  it('refuses bad registrations: name rules, duplicates, transport fields, unknown fields', async () => {
    const post = (body: Record<string, unknown>) => t.request({ method: 'POST', url: '/api/mcp/servers', body });
    expectProblem(await post({ ...stdioServer('fake') }), 409, 'conflict');
    expectProblem(await post({ ...stdioServer('knowledge') }), 400, 'validation_failed', 'name');
    expectProblem(await post({ ...stdioServer('Slack') }), 400, 'validation_failed', 'name');
    expectProblem(await post({ ...stdioServer('has space') }), 400, 'validation_failed', 'name');
    expectProblem(await post({ ...stdioServer('x'.repeat(65)) }), 400, 'validation_failed', 'name');
    expectProblem(await post({ name: 'a', transport: 'stdio' }), 400, 'validation_failed', 'command');
    expectProblem(await post({ name: 'a', transport: 'http' }), 400, 'validation_failed', 'url');
    expectProblem(await post({ ...stdioServer('a'), url: 'http://example.com/' }), 400, 'validation_failed', 'url');
    expectProblem(await post({ ...stdioServer('a'), id: 'mcs_x' }), 400, 'validation_failed');
    expectProblem(await post({ name: 'a', transport: 'http', url: 'https://example.com/mcp', headers: { Authorization: 'Bearer ${MISSING}' } }), 400, 'validation_failed', 'headers.Authorization');
    expectProblem(await post({ ...stdioServer('a', { 'BAD-NAME': 'x' }) }), 400, 'validation_failed');
    expect((await t.request({ method: 'GET', url: '/api/mcp/servers' })).json().data).toHaveLength(1);
  });

  it('needs the admin scope to manage servers, write to execute, read to list', async () => {
    const key = async (scopes: string[]) => {
      const res = await t.request({ method: 'POST', url: '/auth/api-keys', body: { name: scopes.join('-'), scopes } });
      expect(res.statusCode, res.body).toBe(201);
      return res.json().key as string;
    };
    const writer = await key(['read', 'write']);
    const reader = await key(['read']);
    expectProblem(await t.request({ method: 'POST', url: '/api/mcp/servers', body: stdioServer('other'), as: writer }), 403, 'forbidden');
    expectProblem(await t.request({ method: 'PUT', url: `/api/mcp/servers/${server.id}/credentials`, body: { credentials: {} }, as: writer }), 403, 'forbidden');
    expectProblem(await t.request({ method: 'DELETE', url: `/api/mcp/servers/${server.id}`, as: writer }), 403, 'forbidden');
    expect((await execute(t, { toolName: 'fake', action: 'echo', parameters: { text: 'hi' } }, writer)).statusCode).toBe(200);
    expectProblem(await execute(t, { toolName: 'fake', action: 'echo', parameters: { text: 'hi' } }, reader), 403, 'forbidden');
    for (const url of ['/api/mcp/servers', '/api/mcp/tools', '/api/mcp/executions']) {
      expect((await t.request({ method: 'GET', url, as: reader })).statusCode, url).toBe(200);
    }
  });

  it('keeps workspaces apart: another workspace sees none of these servers, tools or executions', async () => {
    const other = await t.ctx.services.auth.createWorkspace('other');
    const as = other.key.key;
    expect((await t.request({ method: 'GET', url: '/api/mcp/servers', as })).json().data).toEqual([]);
    expectProblem(await t.request({ method: 'GET', url: `/api/mcp/servers/${server.id}`, as }), 404, 'not_found');
    expectProblem(await t.request({ method: 'PUT', url: `/api/mcp/servers/${server.id}/credentials`, body: { credentials: {} }, as }), 404, 'not_found');
    expectProblem(await t.request({ method: 'DELETE', url: `/api/mcp/servers/${server.id}`, as }), 404, 'not_found');
    const tools = (await t.request({ method: 'GET', url: '/api/mcp/tools', as })).json().data;
    expect(tools.map((d: { toolName: string }) => d.toolName)).toEqual(['knowledge']);
    expectProblem(await execute(t, { toolName: 'fake', action: 'whoami', parameters: {} }, as), 404, 'not_found');
    expect((await t.request({ method: 'GET', url: '/api/mcp/executions', as })).json().data).toEqual([]);
    const mine = (await t.request({ method: 'GET', url: '/api/mcp/executions?limit=1' })).json().data[0];
    expectProblem(await t.request({ method: 'GET', url: `/api/mcp/executions/${mine.id}`, as }), 404, 'not_found');
    // The same name is free in the other workspace.
    const theirs = await registerServer(t, stdioServer('fake', { API_TOKEN: 'theirs-token' }), as);
    expect(theirs.id).not.toBe(server.id);
    const who = await execute(t, { toolName: 'fake', action: 'whoami', parameters: {} }, as);
    expect(JSON.parse(toolText(who.json())).API_TOKEN).toBe(sha256('theirs-token'));
  });

  it('honours Idempotency-Key on registration', async () => {
    const headers = { 'idempotency-key': 'register-echo-1' };
    const body = stdioServer('idem');
    const first = await t.request({ method: 'POST', url: '/api/mcp/servers', body, headers });
    const again = await t.request({ method: 'POST', url: '/api/mcp/servers', body, headers });
    expect(first.statusCode, first.body).toBe(201);
    expect(again.statusCode).toBe(201);
    expect(again.json().id).toBe(first.json().id);
    expect(again.body).not.toContain(SECRET);
  });
});

describe.each(testBackends())('stdio servers without the operator opt-in on $kind', (backend) => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp({ backend });
  });
  afterAll(async () => {
    await t?.close();
  });

  it('answers 403 naming SWITCHBOARD_MCP_STDIO and stores nothing', async () => {
    const body = expectProblem(await t.request({ method: 'POST', url: '/api/mcp/servers', body: stdioServer('fake') }), 403, 'forbidden');
    expect(body.detail).toContain('SWITCHBOARD_MCP_STDIO=1');
    expect((await t.request({ method: 'GET', url: '/api/mcp/servers' })).json().data).toEqual([]);
  });
});
