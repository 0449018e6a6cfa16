// API.md §7: credentials are write-only. The secret must be absent from every API answer, every log
// line (pino at trace, with the product's redaction) and the database file's bytes — while the
// servers really received it. And chat reaches external tools through the same hub.
import fs from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { databaseFile } from '../../src/context.js';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { createPersona } from '../helpers/factories.js';
import { expectSealed } from '../helpers/sealed.js';
import { callOk, connectInMemory } from '../helpers/mcp.js';
import { captureLogs, execute, LOOPBACK_ONLY, registerServer, SECRET, stdioServer, toolText } from '../helpers/mcp-tools.js';
import { type HttpTestServer, sha256, startHttpTestServer } from '../fakes/mcp-test-server.mjs';

const LITERAL_HEADER = 'literal-header-secret-4711';
const ROTATED = 'sk-rotated-0a1b2c3d4e5f-do-not-leak';

describe('credentials never leave the vault', { timeout: 30_000 }, () => {
  let t: TestApp;
  let fake: HttpTestServer;
  const logs = captureLogs();
  const answers: string[] = [];
  const req = async (opts: Parameters<TestApp['request']>[0]) => {
    const res = await t.request(opts);
    answers.push(JSON.stringify(res.headers), res.body);
    return res;
  };

  beforeAll(async () => {
    fake = await startHttpTestServer();
    t = await createTestApp({ env: { SWITCHBOARD_MCP_STDIO: '1', LOG_LEVEL: 'trace' }, overrides: { logger: logs.logger, fetch: LOOPBACK_ONLY, toolHub: { callTimeoutMs: 1_000 } } });
  });
  afterAll(async () => {
    await t?.close();
    await fake?.close();
  });

  it('uses the secrets, then finds them in no answer, no log line and no database byte', async () => {
    const stdio = await req({ method: 'POST', url: '/api/mcp/servers', body: stdioServer('fake') });
    expect(stdio.statusCode, stdio.body).toBe(201);
    const http = await req({
      method: 'POST',
      url: '/api/mcp/servers',
      body: { name: 'remote', transport: 'http', url: fake.url, headers: { Authorization: 'Bearer ${API_TOKEN}', 'X-Literal': LITERAL_HEADER }, credentials: { API_TOKEN: SECRET } },
    });
    expect(http.statusCode, http.body).toBe(201);
    // A child that prints its credential on stderr and dies: the status error keeps the stderr, scrubbed.
    const leaky = await req({
      method: 'POST',
      url: '/api/mcp/servers',
      body: { name: 'leaky', transport: 'stdio', command: process.execPath, args: ['-e', 'console.error("token is " + process.env.API_TOKEN); process.exit(3)'], credentials: { API_TOKEN: SECRET } },
    });
    expect(leaky.json().status).toBe('error');
    expect(leaky.json().error).toContain('token is [redacted]');

    // The servers did receive the secrets.
    const viaStdio = await req({ method: 'POST', url: '/api/mcp/tools/execute', body: { toolName: 'fake', action: 'whoami', parameters: {} } });
    expect(JSON.parse(toolText(viaStdio.json())).API_TOKEN).toBe(sha256(SECRET));
    const viaHttp = await req({ method: 'POST', url: '/api/mcp/tools/execute', body: { toolName: 'remote', action: 'whoami', parameters: {} } });
    expect(JSON.parse(toolText(viaHttp.json())).authorization).toBe(sha256(`Bearer ${SECRET}`));
    expect(fake.requests.some((r) => r.headers['x-literal'] === LITERAL_HEADER)).toBe(true);

    // Secrets handed back by a tool, in parameters, in failures and in the rotation.
    const echoed = await req({ method: 'POST', url: '/api/mcp/tools/execute', body: { toolName: 'remote', action: 'echo', parameters: { text: `${SECRET} ${LITERAL_HEADER}` }, monitorExecution: true } });
    expect(toolText(echoed.json())).toBe('[redacted] [redacted]');
    await req({ method: 'POST', url: '/api/mcp/tools/execute', body: { toolName: 'fake', action: 'hang', parameters: { token: SECRET }, monitorExecution: true } });
    await req({ method: 'POST', url: '/api/mcp/tools/execute', body: { toolName: 'leaky', action: 'whoami', parameters: {} } });
    const rotated = await req({ method: 'PUT', url: `/api/mcp/servers/${stdio.json().id}/credentials`, body: { credentials: { API_TOKEN: ROTATED } } });
    expect(rotated.statusCode).toBe(200);
    expect(JSON.parse(toolText((await req({ method: 'POST', url: '/api/mcp/tools/execute', body: { toolName: 'fake', action: 'whoami', parameters: {} } })).json())).API_TOKEN).toBe(sha256(ROTATED));

    for (const url of ['/api/mcp/servers', `/api/mcp/servers/${http.json().id}`, '/api/mcp/tools', '/api/mcp/executions?limit=100', '/openapi.json']) {
      expect((await req({ method: 'GET', url })).statusCode, url).toBe(200);
    }
    const executions = (await t.request({ method: 'GET', url: '/api/mcp/executions?limit=100' })).json().data;
    expect(executions.length).toBe(6);

    const secrets = [SECRET, LITERAL_HEADER, ROTATED];
    for (const secret of secrets) {
      for (const answer of answers) expect(answer.includes(secret), `answer leaks ${secret}: ${answer.slice(0, 300)}`).toBe(false);
    }

    const logText = logs.text();
    expect(logText).toContain('tool server connected');
    expect(logText).toContain('tool server unavailable');
    for (const secret of secrets) expect(logText.includes(secret), `log leaks ${secret}`).toBe(false);

    t.ctx.sqlite().sqlite.pragma('wal_checkpoint(TRUNCATE)');
    const file = databaseFile(t.ctx.config);
    const bytes = [file, `${file}-wal`, `${file}-shm`].filter((f) => fs.existsSync(f)).map((f) => fs.readFileSync(f));
    expect(bytes[0]!.length).toBeGreaterThan(0);
    for (const secret of secrets) {
      for (const b of bytes) expect(b.includes(Buffer.from(secret)), `database holds ${secret}`).toBe(false);
    }
    // What is stored is ciphertext, and only the names are readable.
    const row = t.ctx.sqlite().sqlite.prepare("SELECT id, secrets, credential_names FROM mcp_servers WHERE name = 'remote'").get() as { id: string; secrets: string; credential_names: string };
    expect(JSON.parse(expectSealed(t, row.secrets, `mcp-server:${row.id}`))).toEqual({ credentials: { API_TOKEN: SECRET }, headers: { Authorization: 'Bearer ${API_TOKEN}', 'X-Literal': LITERAL_HEADER } });
    expect(JSON.parse(row.credential_names)).toEqual(['API_TOKEN']);
  });
});

describe('chat calls external tools', { timeout: 30_000 }, () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp({ env: { SWITCHBOARD_MCP_STDIO: '1' } });
    await registerServer(t, stdioServer('fake'));
  });
  afterAll(async () => {
    await t?.close();
  });

  /** How often the fake stdio server has run whoami (its own counter: a run the answer leaves out still counts). */
  const whoamiRuns = async () => JSON.parse(toolText((await execute(t, { toolName: 'fake', action: 'stats', parameters: {} })).json())).whoami as number;

  it('a persona allowed fake.* runs fake.whoami with enableMCPTools; the credential hash comes back', async () => {
    const persona = await createPersona(t, { name: 'Ops', tools: ['fake.*'] });
    const runs = await whoamiRuns();
    const res = await t.request({ method: 'POST', url: '/query', body: { personaId: persona.id, message: '/tool fake.whoami {}', enableMCPTools: true } });
    expect(res.statusCode, res.body).toBe(200);
    const answer = res.json();
    expect(answer.toolCalls).toHaveLength(1);
    expect(answer.toolCalls[0]).toMatchObject({ name: 'fake.whoami', arguments: {} });
    expect(JSON.stringify(answer.toolCalls[0].result)).toContain(sha256(SECRET));
    expect(answer.response).toContain('fake.whoami returned:');
    expect(answer.response).toContain(sha256(SECRET));
    expect(res.body).not.toContain(SECRET);

    expect(await whoamiRuns()).toBe(runs + 1);

    // Without enableMCPTools, or for a persona not allowed the server, nothing runs.
    const off = await t.request({ method: 'POST', url: '/query', body: { personaId: persona.id, message: '/tool fake.whoami {}' } });
    expect(off.statusCode, off.body).toBe(200);
    expect(off.json().toolCalls).toEqual([]);
    const other = await createPersona(t, { name: 'Other', tools: ['knowledge.*'] });
    const denied = await t.request({ method: 'POST', url: '/query', body: { personaId: other.id, message: '/tool fake.whoami {}', enableMCPTools: true } });
    expect(denied.statusCode, denied.body).toBe(200);
    expect(denied.json().toolCalls).toEqual([]);
    expect(await whoamiRuns()).toBe(runs + 1);
  });

  it('an MCP client asks a persona through ask_persona, and the persona uses the external tool whose token only the service holds', async () => {
    const persona = await createPersona(t, { name: 'Ops desk', tools: ['fake.whoami'] });
    const client = await connectInMemory(t);
    try {
      const answer = await callOk(client, 'ask_persona', { personaId: persona.id, message: '/tool fake.whoami {}', enableMCPTools: true });
      expect(answer.toolCalls[0]).toMatchObject({ name: 'fake.whoami' });
      expect(answer.response).toContain(sha256(SECRET));
      expect(JSON.stringify(answer)).not.toContain(SECRET);
    } finally {
      await client.close();
    }
  });
});
