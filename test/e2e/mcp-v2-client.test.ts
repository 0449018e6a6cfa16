// Issue 27: clients of the 2026-07-28 era against Switchboard, which speaks MCP up to 2025-11-25.
// The MCP SDK's v2 client (`@modelcontextprotocol/client`, as 2026-era assistants are built), in its
// `auto` negotiation, first probes with `server/discover`; Switchboard has no answer for it, so the
// client falls back to the initialize handshake and 2025-11-25. This proves that fallback works over Streamable HTTP and over
// stdio (the built CLI), with the same tools and answers as the older client, and that the probe
// leaves nothing behind (no session, over HTTP).
import fs from 'node:fs';
import path from 'node:path';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateKeySecret } from '../../src/core/auth/keys.js';
import { createTestApp, type TestApp, tempDir } from '../helpers/app.js';
import { callOk, expectHandbookAnswer } from '../helpers/mcp.js';
import { listen, OFFLINE_ANSWER, seedSupport } from '../integration/chat-helpers.js';

const ROOT = path.resolve(import.meta.dirname, '../..');
const MAIN = path.join(ROOT, 'dist/src/main.js');

describe('an MCP client of the 2026-07-28 era (SDK v2) over Streamable HTTP', { timeout: 30_000 }, () => {
  let t: TestApp;
  let client: Client;
  /** The JSON-RPC methods the client POSTed, with the status each got. */
  const sent: string[] = [];

  beforeAll(async () => {
    t = await createTestApp();
    const origin = await listen(t);
    const recording: typeof fetch = async (input, init) => {
      const res = await fetch(input, init);
      if (init?.method === 'POST' && typeof init.body === 'string') sent.push(`${(JSON.parse(init.body) as { method?: string }).method} ${res.status}`);
      return res;
    };
    // `auto`: as a client of the 2026-07-28 era connects, probing first (the SDK's default stays 2025's handshake).
    client = new Client({ name: 'switchboard-v2-http-test', version: '1.0.0' }, { versionNegotiation: { mode: 'auto' } });
    await client.connect(
      new StreamableHTTPClientTransport(new URL('/mcp', origin), { fetch: recording, requestInit: { headers: { authorization: `Bearer ${t.adminKey}` } } }),
    );
  });
  afterAll(async () => {
    await client?.close();
    await t?.close();
  });

  it('falls back to 2025-11-25 after its server/discover probe, which opens no session', async () => {
    expect(sent.slice(0, 2)).toEqual(['server/discover 400', 'initialize 200']);
    expect(client.getNegotiatedProtocolVersion()).toBe('2025-11-25');
    expect(client.getServerVersion()).toMatchObject({ name: 'switchboard' });
    const sessions = await sql<{ n: number }>`SELECT count(*) AS n FROM mcp_sessions`.execute(t.ctx.db.kysely);
    expect(Number(sessions.rows[0]!.n)).toBe(1);
  });

  it('lists every tool and runs them: a persona made, a question answered with streamed progress', async () => {
    expect((await client.listTools()).tools.map((x) => x.name)).toEqual(expect.arrayContaining(['ask_persona', 'create_persona', 'delete_persona', 'search_knowledge']));
    const persona = await callOk(client, 'create_persona', { name: 'From a v2 client', instructions: 'Answer.' });
    expect((await t.request({ method: 'GET', url: `/personas/${persona.id}` })).json().name).toBe('From a v2 client');
    const personaId = await seedSupport(t);
    const progress: string[] = [];
    const result = await client.callTool({ name: 'ask_persona', arguments: { personaId, message: 'How long do refunds take?' } }, { onprogress: (p) => void progress.push(p.message ?? '') });
    expect((result.structuredContent as { response: string }).response).toBe(OFFLINE_ANSWER);
    expect(progress.join('')).toBe(OFFLINE_ANSWER);
  });
});

describe('an MCP client of the 2026-07-28 era (SDK v2) over stdio (`switchboard mcp`)', { timeout: 30_000 }, () => {
  const home = tempDir('switchboard-mcp-v2-');
  const key = generateKeySecret();
  let client: Client;

  beforeAll(async () => {
    expect(fs.existsSync(MAIN), 'dist/ is built by npm test (and npm install)').toBe(true);
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [MAIN, 'mcp'],
      env: { PATH: process.env.PATH ?? '', SWITCHBOARD_DATA_DIR: path.join(home, 'data'), SWITCHBOARD_API_KEY: key, SWITCHBOARD_ADMIN_KEY: key, LOG_LEVEL: 'warn' },
      stderr: 'pipe',
    });
    client = new Client({ name: 'switchboard-v2-stdio-test', version: '1.0.0' }, { versionNegotiation: { mode: 'auto' } });
    // (Over stdio the probe runs on a short-lived second process of the same command.)
    await client.connect(transport);
  });
  afterAll(async () => {
    await client?.close();
    fs.rmSync(home, { recursive: true, force: true });
  });

  it('falls back to 2025-11-25 and manages personas and knowledge and answers from them', async () => {
    expect(client.getNegotiatedProtocolVersion()).toBe('2025-11-25');
    await expectHandbookAnswer(client);
  });
});
