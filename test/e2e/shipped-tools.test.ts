// Tools run what ships (DESIGN.md): the tool hub of the built server (`node dist/src/main.js
// serve`) against tool servers of both MCP eras (the SDK 1.x fake and the 2026-07-28 fake), over
// Streamable HTTP and stdio. A call runs, and parameters that do not fit the tool's input schema are
// a 400 naming the parameter before the call (API.md §7): Ajv is loaded at the first schema, the way
// vitest's transform and Node's loader may resolve differently.
import fs from 'node:fs';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateKeySecret } from '../../src/core/auth/keys.js';
import { startModernHttpTestServer } from '../fakes/mcp-modern-test-server.mjs';
import { startHttpTestServer } from '../fakes/mcp-test-server.mjs';
import { type Requester, tempDir } from '../helpers/app.js';
import { builtClient, builtServers, MAIN } from '../helpers/built-server.js';
import { execute, FAKE_MCP_SERVER, registerServer, toolText } from '../helpers/mcp-tools.js';
import { expectProblem } from '../helpers/problem.js';

const MODERN_SERVER = fileURLToPath(new URL('../fakes/mcp-modern-test-server.mjs', import.meta.url));

describe('tool servers on the built server', { timeout: 60_000 }, () => {
  const dataDir = tempDir('switchboard-shipped-tools-');
  const key = generateKeySecret();
  const { serve, killAll } = builtServers({ dataDir, adminKey: key, env: { SWITCHBOARD_MCP_STDIO: '1', SWITCHBOARD_ALLOW_PRIVATE_URLS: '1' } });
  let api: Requester;
  let legacyHttp: Awaited<ReturnType<typeof startHttpTestServer>>;
  let modernHttp: Awaited<ReturnType<typeof startModernHttpTestServer>>;

  beforeAll(async () => {
    expect(fs.existsSync(MAIN), 'dist/ is built by npm test (or npx tsc -p tsconfig.json)').toBe(true);
    [legacyHttp, modernHttp] = await Promise.all([startHttpTestServer(), startModernHttpTestServer()]);
    api = builtClient(await serve(), key);
  });

  afterAll(async () => {
    killAll();
    await Promise.all([legacyHttp?.close(), modernHttp?.close()]);
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  const servers = () => [
    { name: 'legacy-http', transport: 'http', url: legacyHttp.url },
    { name: 'legacy-stdio', transport: 'stdio', command: process.execPath, args: [FAKE_MCP_SERVER] },
    { name: 'modern-http', transport: 'http', url: modernHttp.url },
    { name: 'modern-stdio', transport: 'stdio', command: process.execPath, args: [MODERN_SERVER] },
  ];

  it.each([0, 1, 2, 3])('server %i: runs echo, and refuses a parameter of the wrong type with a 400 naming it', async (i) => {
    const server = servers()[i]!;
    await registerServer(api, server);
    const ok = await execute(api, { toolName: server.name, action: 'echo', parameters: { text: 'hi' } });
    expect(ok.statusCode, ok.body).toBe(200);
    expect(ok.json()).toMatchObject({ status: 'succeeded' });
    expect(toolText(ok.json())).toBe('hi');

    const wrong = expectProblem(await execute(api, { toolName: server.name, action: 'echo', parameters: { text: 42 } }), 400, 'validation_failed', 'parameters.text');
    expect(wrong.errors).toEqual([{ path: 'parameters.text', message: 'must be string' }]);
    expectProblem(await execute(api, { toolName: server.name, action: 'echo', parameters: {} }), 400, 'validation_failed', 'parameters.text');
  });
});
