// API.md §7 over Streamable HTTP: the fake server on 127.0.0.1, reached through the address guard
// (tests allow exactly 127.0.0.1), credentials sent as headers, unreachable servers and redirects.
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { testBackends } from '../helpers/postgres.js';
import { execute, LOOPBACK_ONLY, registerServer, SECRET, toolText, waitFor } from '../helpers/mcp-tools.js';
import { expectProblem } from '../helpers/problem.js';
import { type HttpTestServer, sha256, startHttpTestServer } from '../fakes/mcp-test-server.mjs';

/** A loopback port nothing listens on. */
async function closedPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

describe.each(testBackends())('MCP tool servers over Streamable HTTP on $kind', { timeout: 30_000 }, (backend) => {
  let t: TestApp;
  let fake: HttpTestServer;
  beforeAll(async () => {
    fake = await startHttpTestServer();
    t = await createTestApp({ backend, overrides: { fetch: LOOPBACK_ONLY, toolHub: { backoffInitialMs: 100, callTimeoutMs: 3_000 } } });
  });
  afterAll(async () => {
    await t?.close();
    await fake?.close();
  });

  it('sends a credential as a header of its name, or inside the header that references it', async () => {
    const plain = await registerServer(t, { name: 'remote', transport: 'http', url: fake.url, credentials: { API_TOKEN: SECRET } });
    expect(plain).toMatchObject({ transport: 'http', url: fake.url, command: null, args: [], status: 'connected', credentialNames: ['API_TOKEN'], headerNames: [] });
    const who = JSON.parse(toolText((await execute(t, { toolName: 'remote', action: 'whoami', parameters: {} })).json()));
    expect(who).toMatchObject({ transport: 'http', API_TOKEN: sha256(SECRET), authorization: null });

    const bearer = await registerServer(t, {
      name: 'bearer',
      transport: 'http',
      url: fake.url,
      headers: { Authorization: 'Bearer ${API_TOKEN}' },
      credentials: { API_TOKEN: SECRET },
    });
    expect(bearer).toMatchObject({ status: 'connected', headerNames: ['Authorization'], credentialNames: ['API_TOKEN'] });
    const res = await execute(t, { toolName: 'bearer', action: 'whoami', parameters: {} });
    expect(JSON.parse(toolText(res.json()))).toMatchObject({ API_TOKEN: null, authorization: sha256(`Bearer ${SECRET}`) });
    // Every request went to the fake with the header, none anywhere else.
    expect(fake.requests.filter((r) => r.headers.authorization !== undefined).length).toBeGreaterThan(0);
  });

  it('lists the http server’s tools and runs each outcome', async () => {
    const tools = (await t.request({ method: 'GET', url: '/api/mcp/tools' })).json().data as Array<{ toolName: string; action: string }>;
    expect(tools.filter((d) => d.toolName === 'remote').map((d) => d.action)).toEqual(expect.arrayContaining(['whoami', 'echo', 'fail', 'hang', 'progress']));
    expect((await execute(t, { toolName: 'remote', action: 'echo', parameters: { text: 'hi', times: 2 } })).json()).toMatchObject({ status: 'succeeded', result: { content: [{ type: 'text', text: 'hi hi' }] } });
    expect((await execute(t, { toolName: 'remote', action: 'fail', parameters: {} })).json()).toMatchObject({ status: 'failed' });
    expectProblem(await execute(t, { toolName: 'remote', action: 'echo', parameters: { text: 3 } }), 400, 'validation_failed', 'parameters.text');
    const monitored = (await execute(t, { toolName: 'remote', action: 'progress', parameters: {}, monitorExecution: true })).json();
    expect(monitored.events.map((e: { type: string }) => e.type)).toEqual(['progress', 'progress', 'log']);
  });

  it('reconnects when the server drops the session: that call is a 502, the next ones succeed', async () => {
    fake.dropSessions();
    expectProblem(await execute(t, { toolName: 'remote', action: 'whoami', parameters: {} }), 502, 'upstream_error');
    await waitFor(async () => (await t.request({ method: 'GET', url: '/api/mcp/servers?limit=100' })).json().data.every((s: { name: string; status: string }) => s.status === 'connected' || s.name !== 'remote'), 8_000, 'reconnect');
    expect((await execute(t, { toolName: 'remote', action: 'whoami', parameters: {} })).json().status).toBe('succeeded');
  });

  it('registers an unreachable server (201, status error) and answers 502 for its tools, recorded', async () => {
    const port = await closedPort();
    const dead = await registerServer(t, { name: 'dead', transport: 'http', url: `http://127.0.0.1:${port}/mcp`, credentials: { API_TOKEN: SECRET } });
    expect(dead.status).toBe('error');
    expect(dead.error).toMatch(/connect/i);
    expect(dead.error).not.toContain(SECRET);
    expect(dead.tools).toEqual([]);
    const body = expectProblem(await execute(t, { toolName: 'dead', action: 'whoami', parameters: {} }), 502, 'upstream_error');
    expect(body.detail).toContain('dead is unreachable');
    const id = /execution (exe_\w+)/.exec(body.detail)?.[1];
    expect((await t.request({ method: 'GET', url: `/api/mcp/executions/${id}` })).json()).toMatchObject({ toolName: 'dead', status: 'failed', result: null });
  });

  it('does not follow a redirect: the server is registered with status error', async () => {
    const before = fake.requests.length;
    const moved = await registerServer(t, { name: 'moved', transport: 'http', url: `http://127.0.0.1:${fake.port}/redirect` });
    expect(moved.status).toBe('error');
    // The era probe (`server/discover`) and then the 2025 `initialize` each met the 307; neither followed it to /mcp.
    expect(fake.requests.slice(before).map((r) => r.url)).toEqual(['/redirect', '/redirect']);
  });

  it('refuses a URL the guard refuses (other private addresses stay refused)', async () => {
    for (const url of ['http://10.0.0.1/mcp', 'http://169.254.169.254/mcp', 'http://[::1]/mcp', 'http://localhost/mcp', 'ftp://example.com/mcp', 'not a url']) {
      expectProblem(await t.request({ method: 'POST', url: '/api/mcp/servers', body: { name: 'bad', transport: 'http', url } }), 400, 'validation_failed', 'url');
    }
  });
});

describe.each(testBackends())('http servers on private addresses on $kind', { timeout: 20_000 }, (backend) => {
  let fake: HttpTestServer;
  beforeAll(async () => {
    fake = await startHttpTestServer();
  });
  afterAll(async () => {
    await fake?.close();
  });

  it('are refused with 400 on url unless SWITCHBOARD_ALLOW_PRIVATE_URLS=1, without contacting them', async () => {
    const t = await createTestApp({ backend });
    try {
      const body = expectProblem(await t.request({ method: 'POST', url: '/api/mcp/servers', body: { name: 'local', transport: 'http', url: fake.url } }), 400, 'validation_failed', 'url');
      expect(body.errors?.[0]?.message).toContain('loopback');
      expect(fake.requests).toEqual([]);
    } finally {
      await t.close();
    }
    const allowed = await createTestApp({ backend, env: { SWITCHBOARD_ALLOW_PRIVATE_URLS: '1' } });
    try {
      expect((await registerServer(allowed, { name: 'local', transport: 'http', url: fake.url })).status).toBe('connected');
    } finally {
      await allowed.close();
    }
  });
});
