// Issue 27 item 2: long tools as tasks of MCP's tasks extension (io.modelcontextprotocol/tasks,
// revision 2026-07-28) over /mcp, spoken on the wire as a client of that revision would: the
// extension declared by server/discover; ask_persona and add_knowledge (a URL) answered with a task
// handle when the request declares the extension, and at once otherwise; tasks/get until the
// result; tasks/cancel stopping the model's work; another key told the task does not exist.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { CLIENT_CAPABILITIES_META_KEY, CLIENT_INFO_META_KEY, PROTOCOL_VERSION_META_KEY } from '@modelcontextprotocol/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TASKS_EXTENSION } from '../../src/mcp/tasks.js';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { createPersona } from '../helpers/factories.js';
import { gatedModel } from '../helpers/gated-model.js';
import { LOOPBACK_ONLY, waitFor } from '../helpers/mcp-tools.js';

describe('long MCP tools as tasks (2026-07-28)', { timeout: 30_000 }, () => {
  let t: TestApp;
  let page: http.Server;
  let pageUrl: string;
  const model = gatedModel();

  beforeAll(async () => {
    t = await createTestApp({ overrides: { llm: model.llm, fetch: LOOPBACK_ONLY } });
    page = http.createServer((_req, res) => res.writeHead(200, { 'content-type': 'text/html' }).end('<html><head><title>Opening hours</title></head><body><h1>Opening hours</h1><p>We open at nine and close at five.</p></body></html>'));
    await new Promise<void>((resolve) => page.listen(0, '127.0.0.1', resolve));
    pageUrl = `http://127.0.0.1:${(page.address() as AddressInfo).port}/hours`;
  });
  afterAll(async () => {
    model.state.release();
    await t?.close();
    await new Promise((resolve) => page?.close(resolve));
  });

  /** One JSON-RPC request of the 2026-07-28 revision; `tasks`: the client declares the extension. */
  async function rpc(method: string, params: Record<string, unknown>, opts: { tasks?: boolean; as?: string; status?: number } = {}) {
    // tasks/* are for clients that declare the extension.
    const capabilities = (opts.tasks ?? method.startsWith('tasks/')) ? { extensions: { [TASKS_EXTENSION]: {} } } : {};
    const name = (params.name ?? params.taskId) as string | undefined;
    const res = await t.request({
      method: 'POST',
      url: '/mcp',
      ...(opts.as ? { as: opts.as } : {}),
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'mcp-protocol-version': '2026-07-28',
        'mcp-method': method,
        ...(name ? { 'mcp-name': name } : {}),
      },
      body: { jsonrpc: '2.0', id: 1, method, params: { ...params, _meta: { [PROTOCOL_VERSION_META_KEY]: '2026-07-28', [CLIENT_INFO_META_KEY]: { name: 'raw', version: '1' }, [CLIENT_CAPABILITIES_META_KEY]: capabilities } } },
    });
    expect(res.statusCode, res.body).toBe(opts.status ?? 200);
    return res.json() as { result?: Record<string, any>; error?: { code: number; message: string } };
  }
  const poll = (taskId: string, until: (status: string) => boolean, as?: string) =>
    waitFor(async () => {
      const task = (await rpc('tasks/get', { taskId }, as ? { as } : {})).result!;
      return until(task.status) ? task : undefined;
    }, 10_000, `task ${taskId}`) as Promise<Record<string, any>>;

  it('declares the extension in server/discover', async () => {
    const discover = (await rpc('server/discover', {})).result!;
    expect(discover.capabilities.extensions).toEqual({ [TASKS_EXTENSION]: {} });
  });

  it('answers ask_persona with a task, and the result through tasks/get; without the extension, at once', async () => {
    const persona = await createPersona(t, { name: 'Desk' });
    const call = (await rpc('tools/call', { name: 'ask_persona', arguments: { personaId: persona.id, message: 'Hello' } }, { tasks: true })).result!;
    expect(call).toMatchObject({ resultType: 'task', status: 'working', ttlMs: 3_600_000, pollIntervalMs: 500 });
    expect(call.taskId).toMatch(/^tsk_/);
    const done = await poll(call.taskId, (s) => s !== 'working');
    expect(done).toMatchObject({ resultType: 'complete', taskId: call.taskId, status: 'completed' });
    expect(done.result.structuredContent).toMatchObject({ response: 'Answered.' });

    const direct = (await rpc('tools/call', { name: 'ask_persona', arguments: { personaId: persona.id, message: 'Hello' } })).result!;
    expect(direct.resultType).toBe('complete');
    expect(direct.structuredContent).toMatchObject({ response: 'Answered.' });
    // Short tools stay plain calls even for a client that takes tasks.
    expect((await rpc('tools/call', { name: 'list_personas', arguments: {} }, { tasks: true })).result!.resultType).toBe('complete');
  });

  it('cancels a task: the model stops, the task says cancelled, and stays so', async () => {
    const persona = await createPersona(t, { name: 'Slow desk' });
    const waiting = model.state.waiting;
    const aborted = model.state.aborted;
    const call = (await rpc('tools/call', { name: 'ask_persona', arguments: { personaId: persona.id, message: 'answer slowly' } }, { tasks: true })).result!;
    await waitFor(() => model.state.waiting === waiting + 1, 5_000, 'the model to start');
    expect((await rpc('tasks/get', { taskId: call.taskId })).result).toMatchObject({ status: 'working' });
    expect((await rpc('tasks/cancel', { taskId: call.taskId })).result).toMatchObject({ resultType: 'complete' });
    await waitFor(() => model.state.aborted === aborted + 1, 5_000, 'the model call to be aborted');
    expect((await rpc('tasks/get', { taskId: call.taskId })).result).toMatchObject({ status: 'cancelled', statusMessage: 'Cancelled by the client.' });
    // Cancelling again changes nothing.
    expect((await rpc('tasks/cancel', { taskId: call.taskId })).result).toMatchObject({ resultType: 'complete' });
    expect((await rpc('tasks/get', { taskId: call.taskId })).result!.status).toBe('cancelled');
  });

  it('runs a URL source to the end: the task’s result is the processed source', async () => {
    const call = (await rpc('tools/call', { name: 'add_knowledge', arguments: { kind: 'url', url: pageUrl } }, { tasks: true })).result!;
    expect(call.resultType).toBe('task');
    const done = await poll(call.taskId, (s) => s !== 'working');
    expect(done.status).toBe('completed');
    expect(done.result.structuredContent).toMatchObject({ status: 'ready', name: 'Opening hours' });
  });

  it('runs an evaluation to the end: the task’s result is the finished run with its summary', async () => {
    const persona = await createPersona(t, { name: 'Evaluated desk' });
    const dataset = (await t.request({ method: 'POST', url: '/datasets', body: { name: 'Desk checks', cases: [{ input: 'Hi', mustContain: ['answered'] }, { input: 'Hello', expected: 'Answered.' }] } })).json();
    const call = (await rpc('tools/call', { name: 'run_evaluation', arguments: { datasetId: dataset.id, personaId: persona.id } }, { tasks: true })).result!;
    expect(call.resultType).toBe('task');
    const done = await poll(call.taskId, (s) => s !== 'working');
    expect(done.status).toBe('completed');
    expect(done.result.structuredContent).toMatchObject({ status: 'completed', progress: { done: 2, total: 2 }, summary: { passed: 2, passRate: 1 } });
    // Without the extension: the run at once, queued (or already under way).
    const direct = (await rpc('tools/call', { name: 'run_evaluation', arguments: { datasetId: dataset.id, personaId: persona.id } })).result!;
    expect(direct.structuredContent.status).toBe('queued');
    await t.ctx.services.evaluations.idle();
  });

  it('keeps a task to the key that started it', async () => {
    const persona = await createPersona(t, { name: 'Private desk' });
    const call = (await rpc('tools/call', { name: 'ask_persona', arguments: { personaId: persona.id, message: 'Hi' } }, { tasks: true })).result!;
    const other = (await t.ctx.services.auth.createWorkspace('elsewhere')).key.key;
    // Another key of the same workspace, with every scope the starting key has.
    const created = await t.request({ method: 'POST', url: '/auth/api-keys', body: { name: 'sibling', scopes: ['read', 'write', 'admin'] } });
    expect(created.statusCode, created.body).toBe(201);
    const sibling = created.json().key as string;
    for (const [who, as] of [['another workspace', other], ['another key of the workspace', sibling]] as const) {
      for (const method of ['tasks/get', 'tasks/update', 'tasks/cancel']) {
        const answer = await rpc(method, { taskId: call.taskId, ...(method === 'tasks/update' ? { inputResponses: {} } : {}) }, { as });
        expect(answer.error, `${method} by ${who}`).toMatchObject({ code: -32602, message: `Unknown task: ${call.taskId}` });
      }
    }
    // That key reaches tasks of its own: it was refused the task above for not having started it.
    const own = (await rpc('tools/call', { name: 'ask_persona', arguments: { personaId: persona.id, message: 'Hi' } }, { tasks: true, as: sibling })).result!;
    expect((await poll(own.taskId, (s) => s !== 'working', sibling)).status).toBe('completed');
    expect((await rpc('tasks/get', { taskId: own.taskId })).error).toMatchObject({ code: -32602, message: `Unknown task: ${own.taskId}` });
    expect((await rpc('tasks/get', { taskId: 'tsk_nope' })).error).toMatchObject({ code: -32602 });
    // A client that does not declare the extension is told which capability it lacks (-32021, HTTP 400).
    for (const method of ['tasks/get', 'tasks/update', 'tasks/cancel']) {
      const answer = await rpc(method, { taskId: call.taskId, inputResponses: {} }, { tasks: false, status: 400 });
      expect(answer.error, method).toMatchObject({ code: -32021, data: { requiredCapabilities: { extensions: { [TASKS_EXTENSION]: {} } } } });
    }
    expect((await poll(call.taskId, (s) => s !== 'working')).status).toBe('completed');
  });
});
