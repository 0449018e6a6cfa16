// Issue 27 item 4: the tool hub speaks both MCP eras to tool servers. Against a tool server of the
// 2026-07-28 revision (test/fakes/mcp-modern-test-server.mjs, the SDK's v2 server) over Streamable
// HTTP (that revision only: a fallback to `initialize` would fail) and over stdio, the hub
// negotiates the new era (`server/discover`, no `initialize`) and keeps what it does for the older
// one: credentials in, secrets scrubbed out, progress and log events, failures, time-outs with
// cancellation at the server. The older era's servers are covered by the other mcp-tools tests.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fileURLToPath } from 'node:url';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { execute, LOOPBACK_ONLY, registerServer, SECRET, stdioServer, toolText, waitFor } from '../helpers/mcp-tools.js';
import { expectProblem } from '../helpers/problem.js';
import { sha256 } from '../fakes/mcp-test-server.mjs';
import { startModernHttpTestServer } from '../fakes/mcp-modern-test-server.mjs';

const MODERN_STDIO_SERVER = fileURLToPath(new URL('../fakes/mcp-modern-test-server.mjs', import.meta.url));

describe('the tool hub and tool servers of MCP 2026-07-28', { timeout: 30_000 }, () => {
  let t: TestApp;
  let fake: Awaited<ReturnType<typeof startModernHttpTestServer>>;
  beforeAll(async () => {
    fake = await startModernHttpTestServer();
    t = await createTestApp({ env: { SWITCHBOARD_MCP_STDIO: '1' }, overrides: { fetch: LOOPBACK_ONLY, toolHub: { callTimeoutMs: 1_500, backoffInitialMs: 100 } } });
  });
  afterAll(async () => {
    await t?.close();
    await fake?.close();
  });

  const whoami = async (name: string) => JSON.parse(toolText((await execute(t, { toolName: name, action: 'whoami', parameters: {} })).json())) as { era: string; transport: string; API_TOKEN: string | null };

  it('over Streamable HTTP: negotiates the new era, with no initialize, and sends the credential', async () => {
    const server = await registerServer(t, { name: 'modern', transport: 'http', url: fake.url, credentials: { API_TOKEN: SECRET } });
    expect(server).toMatchObject({ status: 'connected', tools: ['whoami', 'echo', 'fail', 'hang', 'progress'] });
    expect(await whoami('modern')).toMatchObject({ transport: 'http', era: 'modern', API_TOKEN: sha256(SECRET) });
    const methods = fake.requests.map((r) => r.rpc);
    expect(methods[0]).toBe('server/discover');
    expect(methods).not.toContain('initialize');
    expect(methods).toContain('tools/call');
    // Every request says its revision.
    for (const r of fake.requests.filter((r) => r.rpc !== null)) expect(r.headers['mcp-protocol-version']).toBe('2026-07-28');
  });

  it('keeps progress and log events, reports failures, and scrubs the credential from what comes back', async () => {
    const monitored = (await execute(t, { toolName: 'modern', action: 'progress', parameters: {}, monitorExecution: true })).json();
    expect(monitored).toMatchObject({ status: 'succeeded', result: { content: [{ text: 'progress done' }] } });
    expect(monitored.events.map((e: { type: string }) => e.type)).toEqual(['progress', 'progress', 'log']);
    expect((await execute(t, { toolName: 'modern', action: 'fail', parameters: {} })).json()).toMatchObject({ status: 'failed', error: 'the modern fake failed on purpose' });
    const echoed = await execute(t, { toolName: 'modern', action: 'echo', parameters: { text: `the key is ${SECRET}` }, monitorExecution: true });
    expect(toolText(echoed.json())).toBe('the key is [redacted]');
    expect(echoed.body).not.toContain(SECRET);
    expectProblem(await execute(t, { toolName: 'modern', action: 'echo', parameters: { text: 3 } }), 400, 'validation_failed', 'parameters.text');
  });

  it('times a call out (504, recorded) and cancels it at the server', async () => {
    const cancelled = fake.state.cancelled;
    const res = await execute(t, { toolName: 'modern', action: 'hang', parameters: {} });
    expect(expectProblem(res, 504, 'upstream_timeout').detail).toMatch(/Recorded as execution exe_/);
    await waitFor(() => fake.state.cancelled === cancelled + 1, 5_000, 'the cancellation at the server');
  });

  it('over stdio: the same child speaks the new era; a server of the older era is still reached with initialize', async () => {
    const modern = await registerServer(t, { name: 'modern-stdio', transport: 'stdio', command: process.execPath, args: [MODERN_STDIO_SERVER], credentials: { API_TOKEN: SECRET } });
    expect(modern).toMatchObject({ status: 'connected', tools: ['whoami', 'echo', 'fail', 'hang', 'progress'] });
    expect(await whoami('modern-stdio')).toMatchObject({ transport: 'stdio', era: 'modern', API_TOKEN: sha256(SECRET) });
    const events = (await execute(t, { toolName: 'modern-stdio', action: 'progress', parameters: {}, monitorExecution: true })).json().events;
    expect(events.map((e: { type: string }) => e.type)).toEqual(['progress', 'progress', 'log']);

    // The SDK 1.x fake knows nothing of server/discover.
    const legacy = await registerServer(t, stdioServer('legacy-stdio'));
    expect(legacy.status).toBe('connected');
    expect(JSON.parse(toolText((await execute(t, { toolName: 'legacy-stdio', action: 'whoami', parameters: {} })).json()))).toMatchObject({ transport: 'stdio', API_TOKEN: sha256(SECRET) });
  });
});
