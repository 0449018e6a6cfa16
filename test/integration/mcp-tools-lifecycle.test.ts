// API.md §7 lifecycles with the real SDK: tool list changes, a killed stdio child, rotated
// credentials, removal, shutdown, and servers declared in SWITCHBOARD_MCP_CONFIG.
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { startServer } from '../../src/server.js';
import { createTestApp, tempDir, type TestApp } from '../helpers/app.js';
import { testBackends } from '../helpers/postgres.js';
import { execute, FAKE_MCP_SERVER, registerServer, SECRET, stdioServer, toolText, waitFor } from '../helpers/mcp-tools.js';
import { expectProblem } from '../helpers/problem.js';
import { type HttpTestServer, sha256, startHttpTestServer } from '../fakes/mcp-test-server.mjs';

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

async function whoami(t: TestApp, toolName = 'fake') {
  const res = await execute(t, { toolName, action: 'whoami', parameters: {} });
  expect(res.statusCode, res.body).toBe(200);
  return JSON.parse(toolText(res.json())) as { pid: number; API_TOKEN: string | null };
}

const serverStatus = async (t: TestApp, id: string) => (await t.request({ method: 'GET', url: `/api/mcp/servers/${id}` })).json() as { status: string; tools: string[]; credentialNames: string[] };

describe.each(testBackends())('stdio server lifecycle on $kind', { timeout: 30_000 }, (backend) => {
  let t: TestApp;
  let id: string;
  beforeAll(async () => {
    t = await createTestApp({ backend, env: { SWITCHBOARD_MCP_STDIO: '1' }, overrides: { toolHub: { backoffInitialMs: 100, backoffMaxMs: 400 } } });
    id = (await registerServer(t, stdioServer('fake'))).id;
  });
  afterAll(async () => {
    await t?.close();
  });

  it('refreshes its tool list on notifications/tools/list_changed', async () => {
    expectProblem(await execute(t, { toolName: 'fake', action: 'late', parameters: {} }), 404, 'not_found');
    expect((await execute(t, { toolName: 'fake', action: 'add_tool', parameters: { name: 'late' } })).json().status).toBe('succeeded');
    await waitFor(async () => (await serverStatus(t, id)).tools.includes('late'), 5_000, 'the new tool');
    const tools = (await t.request({ method: 'GET', url: '/api/mcp/tools' })).json().data;
    expect(tools).toContainEqual(expect.objectContaining({ toolName: 'fake', action: 'late', description: 'Added at run time: late.' }));
    expect(toolText((await execute(t, { toolName: 'fake', action: 'late', parameters: {} })).json())).toBe('hello from late');
  });

  it('reconnects with back-off after the child process is killed', async () => {
    const { pid } = await whoami(t);
    process.kill(pid, 'SIGKILL');
    await waitFor(() => !alive(pid), 5_000, 'the child to die');
    await waitFor(async () => (await serverStatus(t, id)).status === 'connected' && !alive(pid), 8_000, 'the reconnect');
    const after = await whoami(t);
    expect(after.pid).not.toBe(pid);
    expect(after.API_TOKEN).toBe(sha256(SECRET));
  });

  it('replaces the credentials with PUT and reconnects with them', async () => {
    const before = await whoami(t);
    const res = await t.request({ method: 'PUT', url: `/api/mcp/servers/${id}/credentials`, body: { credentials: { API_TOKEN: 'rotated-token-value', EXTRA: 'more' } } });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toMatchObject({ id, status: 'connected', credentialNames: ['API_TOKEN', 'EXTRA'] });
    expect(res.body).not.toContain('rotated-token-value');
    const after = await whoami(t);
    expect(after.API_TOKEN).toBe(sha256('rotated-token-value'));
    expect(after.pid).not.toBe(before.pid);
    await waitFor(() => !alive(before.pid), 6_000, 'the old child to end');
    expectProblem(await t.request({ method: 'PUT', url: `/api/mcp/servers/${id}/credentials`, body: { credentials: { API_TOKEN: 'x' }, extra: true } }), 400, 'validation_failed');
    expectProblem(await t.request({ method: 'PUT', url: '/api/mcp/servers/mcs_missing/credentials', body: { credentials: {} } }), 404, 'not_found');
  });

  it('DELETE answers 204, ends the child and forgets the tools', async () => {
    const { pid } = await whoami(t);
    expect((await t.request({ method: 'DELETE', url: `/api/mcp/servers/${id}` })).statusCode).toBe(204);
    await waitFor(() => !alive(pid), 6_000, 'the child to end');
    expectProblem(await execute(t, { toolName: 'fake', action: 'whoami', parameters: {} }), 404, 'not_found');
    expectProblem(await t.request({ method: 'DELETE', url: `/api/mcp/servers/${id}` }), 404, 'not_found');
    const tools = (await t.request({ method: 'GET', url: '/api/mcp/tools' })).json().data;
    expect(tools.map((d: { toolName: string }) => d.toolName)).toEqual(['knowledge']);
  });

  it('closing the context ends every child process', async () => {
    const other = await createTestApp({ backend, env: { SWITCHBOARD_MCP_STDIO: '1' } });
    await registerServer(other, stdioServer('fake'));
    const { pid } = await whoami(other);
    await other.close();
    await waitFor(() => !alive(pid), 6_000, 'the child to end');
  });
});

describe('SWITCHBOARD_MCP_CONFIG', { timeout: 30_000 }, () => {
  const ADMIN_KEY = `sb_${'C'.repeat(40)}`;
  let fake: HttpTestServer;
  let dataDir: string;
  beforeAll(async () => {
    fake = await startHttpTestServer();
    dataDir = tempDir();
  });
  afterAll(async () => {
    await fake?.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  const writeConfig = (value: unknown) => {
    const file = path.join(dataDir, `mcp-${Math.random().toString(36).slice(2)}.json`);
    fs.writeFileSync(file, typeof value === 'string' ? value : JSON.stringify(value));
    return file;
  };
  const start = (file: string) =>
    startServer(
      loadConfig({ SWITCHBOARD_DATA_DIR: dataDir, SWITCHBOARD_ADMIN_KEY: ADMIN_KEY, SWITCHBOARD_MCP_CONFIG: file, PORT: '0', LOG_LEVEL: 'silent', SWITCHBOARD_RATE_LIMIT: '0' }),
      () => {},
    );

  it('loads stdio (no opt-in needed) and http servers into the default workspace, without duplicates on restart', async () => {
    const file = writeConfig({
      mcpServers: {
        local: { command: process.execPath, args: [FAKE_MCP_SERVER], env: { API_TOKEN: SECRET } },
        remote: { type: 'streamable-http', url: fake.url, headers: { Authorization: 'Bearer ${API_TOKEN}' }, env: { API_TOKEN: SECRET } },
      },
    });
    for (let run = 0; run < 2; run++) {
      const server = await start(file);
      try {
        const inject = (method: 'GET' | 'POST', url: string, body?: unknown) =>
          server.app.inject({ method, url, headers: { authorization: `Bearer ${ADMIN_KEY}`, 'content-type': 'application/json' }, ...(body ? { payload: JSON.stringify(body) } : {}) });
        const servers = (await inject('GET', '/api/mcp/servers')).json().data as Array<{ name: string; transport: string; credentialNames: string[] }>;
        expect(servers.map((s) => [s.name, s.transport]).sort()).toEqual([['local', 'stdio'], ['remote', 'http']]);
        const local = await inject('POST', '/api/mcp/tools/execute', { toolName: 'local', action: 'whoami', parameters: {} });
        expect(JSON.parse(toolText(local.json())).API_TOKEN).toBe(sha256(SECRET));
        const remote = await inject('POST', '/api/mcp/tools/execute', { toolName: 'remote', action: 'whoami', parameters: {} });
        expect(JSON.parse(toolText(remote.json())).authorization).toBe(sha256(`Bearer ${SECRET}`));
      } finally {
        await server.close();
      }
    }
  });

  it('drops servers the file no longer declares', async () => {
    const server = await start(writeConfig({ mcpServers: { remote: { url: fake.url } } }));
    try {
      const res = await server.app.inject({ method: 'GET', url: '/api/mcp/servers', headers: { authorization: `Bearer ${ADMIN_KEY}` } });
      expect(res.json().data.map((s: { name: string }) => s.name)).toEqual(['remote']);
    } finally {
      await server.close();
    }
  });

  it('stops start-up with a message naming the file and the problem', async () => {
    const cases: Array<[unknown, RegExp]> = [
      ['{ not json', /is not valid JSON/],
      [{ servers: {} }, /mcpServers/],
      [{ mcpServers: { knowledge: { command: 'x' } } }, /mcpServers\.knowledge: the name is the name of a built-in tool/],
      [{ mcpServers: { a: { args: ['x'] } } }, /mcpServers\.a\.command: is required/],
      [{ mcpServers: { a: { url: 'ftp://x' } } }, /mcpServers\.a\.url/],
    ];
    for (const [content, problem] of cases) {
      const file = writeConfig(content);
      const error = await start(file).then(
        () => null,
        (err: Error) => err,
      );
      expect(error?.name).toBe('ConfigError');
      expect(error?.message).toContain(`SWITCHBOARD_MCP_CONFIG: ${file}: `);
      expect(error?.message).toMatch(problem);
    }
    const missing = path.join(dataDir, 'absent.json');
    await expect(start(missing)).rejects.toThrow(`${missing}: cannot be read (ENOENT)`);
  });
});
