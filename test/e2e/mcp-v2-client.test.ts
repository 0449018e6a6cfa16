// Issue 27: clients of the 2026-07-28 era against Switchboard. The MCP SDK's v2 client
// (`@modelcontextprotocol/client`, as 2026-era assistants are built), in its `auto` negotiation,
// first probes with `server/discover`; Switchboard answers it and serves the revision itself, over
// Streamable HTTP (no initialize, no session, a server per request) and over stdio (the built CLI),
// with the same tools as the older era, which the SDK's 1.x client keeps using (mcp-http, mcp-stdio).
import fs from 'node:fs';
import path from 'node:path';
import { CLIENT_CAPABILITIES_META_KEY, CLIENT_INFO_META_KEY, Client, PROTOCOL_VERSION_META_KEY, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateKeySecret } from '../../src/core/auth/keys.js';
import { createTestApp, type TestApp, tempDir } from '../helpers/app.js';
import { createPersona } from '../helpers/factories.js';
import { authorize } from '../helpers/oauth.js';
import { expectProblem } from '../helpers/problem.js';
import { type AskedUser, callOk, expectConfirmations, expectHandbookAnswer, personasOf } from '../helpers/mcp.js';
import { listen, OFFLINE_ANSWER, seedSupport } from '../integration/chat-helpers.js';

const ROOT = path.resolve(import.meta.dirname, '../..');
const MAIN = path.join(ROOT, 'dist/src/main.js');

describe('an MCP client of the 2026-07-28 era (SDK v2) over Streamable HTTP: the 2026-07-28 lane', { timeout: 30_000 }, () => {
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

  it('speaks 2026-07-28 after its server/discover probe: no initialize, no session', async () => {
    expect(sent[0]).toBe('server/discover 200');
    expect(sent.some((m) => m.startsWith('initialize'))).toBe(false);
    expect(client.getNegotiatedProtocolVersion()).toBe('2026-07-28');
    expect(client.getServerVersion()).toMatchObject({ name: 'switchboard' });
    await client.listTools();
    const sessions = await sql<{ n: number }>`SELECT count(*) AS n FROM mcp_sessions`.execute(t.ctx.db.kysely);
    expect(Number(sessions.rows[0]!.n)).toBe(0);
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

describe('the 2026-07-28 lane of /mcp: scopes, workspaces, resources and prompts', { timeout: 30_000 }, () => {
  let t: TestApp;
  let origin: string;
  const open = async (key: string) => {
    const c = new Client({ name: 'switchboard-v2-http-test', version: '1.0.0' }, { versionNegotiation: { mode: 'auto' } });
    await c.connect(new StreamableHTTPClientTransport(new URL('/mcp', origin), { requestInit: { headers: { authorization: `Bearer ${key}` } } }));
    expect(c.getNegotiatedProtocolVersion()).toBe('2026-07-28');
    return c;
  };

  beforeAll(async () => {
    t = await createTestApp();
    origin = await listen(t);
  });
  afterAll(async () => t?.close());

  it('refuses a tool a read key may not call, before running it, and lets it read', async () => {
    const { key } = await t.ctx.services.auth.createKeyInWorkspace('default', 'mcp reader', ['read']);
    const reader = await open(key.key);
    expect((await callOk(reader, 'list_personas')).data).toBeInstanceOf(Array);
    const before = (await t.request({ method: 'GET', url: '/personas?limit=100' })).json().data.length;
    const refusal = await reader.callTool({ name: 'create_persona', arguments: { name: 'Nope', instructions: 'x' } }).catch((e: unknown) => e);
    // The 403's WWW-Authenticate names the scope: the client reads it as a scope challenge.
    expect(String(refusal)).toBe('InsufficientScopeError: Insufficient scope: required "write"');
    expect((await t.request({ method: 'GET', url: '/personas?limit=100' })).json().data.length).toBe(before);
    await reader.close();
  });

  it('never shows one workspace’s objects to another', async () => {
    const mine = await createPersona(t, { name: 'Mine' });
    const other = await t.ctx.services.auth.createWorkspace('v2-other');
    const outsider = await open(other.key.key);
    const result = await outsider.callTool({ name: 'get_persona', arguments: { id: mine.id } });
    expect(result.isError).toBe(true);
    expect((result.content[0] as { text: string }).text).toBe(`Not found: Persona ${mine.id} not found.`);
    expect((await callOk(outsider, 'list_personas')).data).toEqual([]);
    await outsider.close();
  });

  it('serves personas as resources and prompts, as the older lane does', async () => {
    const persona = await createPersona(t, { name: 'Resource Desk' });
    const client = await open(t.adminKey);
    const templates = await client.listResourceTemplates();
    expect(templates.resourceTemplates.map((r) => r.uriTemplate)).toContain('switchboard://personas/{id}');
    const read = await client.readResource({ uri: `switchboard://personas/${persona.id}` });
    expect(JSON.parse((read.contents[0] as { text: string }).text)).toMatchObject({ id: persona.id, name: 'Resource Desk' });
    const prompts = await client.listPrompts();
    expect(prompts.prompts.map((p) => p.name)).toContain(persona.id);
    const completion = await client.complete({ ref: { type: 'ref/resource', uri: 'switchboard://personas/{id}' }, argument: { name: 'id', value: persona.id.slice(0, 6) } });
    expect(completion.completion.values).toContain(persona.id);
    await client.close();
  });

  it('lets clients keep the lists that change only with a new version (ttlMs, cacheScope public), and nothing drawn from data', async () => {
    const post = async (method: string, params: Record<string, unknown> = {}) => {
      const res = await t.request({
        method: 'POST',
        url: '/mcp',
        headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2026-07-28', 'mcp-method': method },
        body: { jsonrpc: '2.0', id: 1, method, params: { ...params, _meta: { [PROTOCOL_VERSION_META_KEY]: '2026-07-28', [CLIENT_INFO_META_KEY]: { name: 'raw', version: '1' }, [CLIENT_CAPABILITIES_META_KEY]: {} } } },
      });
      expect(res.statusCode, res.body).toBe(200);
      return (res.json() as { result: { ttlMs?: number; cacheScope?: string } }).result;
    };
    for (const method of ['tools/list', 'resources/templates/list', 'server/discover']) {
      expect(await post(method), method).toMatchObject({ ttlMs: 600_000, cacheScope: 'public' });
    }
    for (const method of ['prompts/list', 'resources/list']) {
      expect(await post(method), method).toMatchObject({ ttlMs: 0, cacheScope: 'private' });
    }
  });

  it('asks a client that can ask its user before a tool that cannot be undone, and does only what was confirmed', async () => {
    const user: AskedUser = { asked: [], answer: { action: 'decline' } };
    const asking = new Client({ name: 'asking-client', version: '1.0.0' }, { capabilities: { elicitation: { form: {} } }, versionNegotiation: { mode: 'auto' } });
    asking.setRequestHandler('elicitation/create', async (request) => {
      user.asked.push((request.params as { message: string }).message);
      return user.answer;
    });
    await asking.connect(new StreamableHTTPClientTransport(new URL('/mcp', origin), { requestInit: { headers: { authorization: `Bearer ${t.adminKey}` } } }));
    await expectConfirmations(asking, user, personasOf(t));
    await asking.close();

    // A client that cannot ask: the tool runs as the older lane runs it (the client's own approval stands).
    const plain = await open(t.adminKey);
    const other = await createPersona(t, { name: 'Plain' });
    expect((await callOk(plain, 'delete_persona', { id: other.id })).deleted).toBe(true);
    await plain.close();
  });

  it('takes an OAuth access token as the older lane does: a read grant reads, and is refused a write tool', async () => {
    const provider = await authorize(origin, t.adminKey, { scope: 'read' });
    const oauthClient = await open(provider.saved!.access_token);
    expect((await callOk(oauthClient, 'list_personas')).data).toBeInstanceOf(Array);
    const refusal = await oauthClient.callTool({ name: 'create_persona', arguments: { name: 'Nope', instructions: 'x' } }).catch((e: unknown) => e);
    expect(String(refusal)).toBe('InsufficientScopeError: Insufficient scope: required "write"');
    await oauthClient.close();
  });

  it('refuses a request of the revision addressed to another host (DNS rebinding), as the older lane does', async () => {
    const res = await t.request({
      method: 'POST',
      url: '/mcp',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', host: 'evil.example:3000', 'mcp-protocol-version': '2026-07-28' },
      body: { jsonrpc: '2.0', id: 1, method: 'server/discover', params: { _meta: { [PROTOCOL_VERSION_META_KEY]: '2026-07-28' } } },
    });
    expectProblem(res, 403, 'forbidden');
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

  it('speaks 2026-07-28 and manages personas and knowledge and answers from them', async () => {
    expect(client.getNegotiatedProtocolVersion()).toBe('2026-07-28');
    await expectHandbookAnswer(client);
  });
});
