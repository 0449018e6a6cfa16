// `switchboard copy-data` (API.md §13, issue 25 item 5): a SQLite instance populated through the
// API moves to a fresh PostgreSQL database and back with every table's count equal, the source file
// unchanged, and the moved instance working: its keys authenticate, its sessions continue, its
// search returns the same hits with the same scores, its sealed credentials open, and new rows get
// new numbers. An interrupted copy continues where it stopped; the refusals explain themselves.
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import SqliteDatabase from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signature } from '../../bridges/webhook/webhook-bridge.js';
import { runCli } from '../../src/cli.js';
import { loadConfig } from '../../src/config.js';
import { runCopyData } from '../../src/db/copy-data.js';
import { createCipher, SECRET_KEY_FILE } from '../../src/lib/cipher.js';
import { startReceiver, type WebhookReceiver } from '../fakes/webhook-receiver.js';
import { createTestApp, tempDir, type TestApp } from '../helpers/app.js';
import { addSource, createAbTest, createChannel, createPersona, createTeam, ensureMembers, workspaceOf } from '../helpers/factories.js';
import { LOOPBACK_ONLY, waitFor } from '../helpers/mcp-tools.js';
import { createTestDatabase, postgresUrl, type TestDatabase, withClient } from '../helpers/postgres.js';
import { prng } from '../helpers/prng.js';

/** Every table of src/db/schema.ts. */
const TABLES = [
  'workspaces', 'settings', 'api_keys', 'personas', 'persona_versions', 'idempotency_keys', 'knowledge_sources', 'knowledge_chunks', 'sessions', 'messages',
  'interactions', 'feedback', 'interaction_tools', 'ab_tests', 'channels', 'channel_inbox', 'channel_conversations', 'channel_messages',
  'mcp_servers', 'mcp_server_oauth', 'tool_executions', 'teams', 'team_members', 'oauth_clients', 'oauth_grants', 'oauth_codes', 'oauth_tokens', 'openai_threads',
  'datasets', 'dataset_cases', 'eval_runs', 'eval_results', 'handoffs', 'handoff_outbox', 'handoff_notifications', 'handoff_desk_threads',
  'users', 'memberships', 'login_sessions', 'invitations', 'audit_events', 'oidc_identities',
];

const WEBHOOK_SECRET = 'webhook-secret-0123456789abcdef';
const MCP_TOKEN = 'mcp-token-5e4d3c2b1a-never-printed';
/** In every URL given to copy-data; the server trusts loopback, so it is never checked, and must never be printed. */
const PASSWORD = 'pw-never-printed-41c7';

const VOCABULARY = 'harbor lantern orbit granite meadow copper signal river falcon willow ember glacier quartz tide beacon cedar'.split(' ');

/** Markdown with a heading per section; `marker` words appear only in a heading or the source's name. */
function markdown(seed: number, headings: string[]): string {
  const rand = prng(seed);
  const sentence = () => `${Array.from({ length: 12 }, () => VOCABULARY[Math.floor(rand() * VOCABULARY.length)]!).join(' ')}.`;
  return headings.map((h) => `## ${h}\n\n${Array.from({ length: 6 }, sentence).join(' ')}`).join('\n\n');
}

/** Queries whose terms sit in bodies, in one heading only (zephyrine), in one source's name only (quillfeather). */
const QUERIES = ['harbor lantern', 'zephyrine', 'quillfeather beacon', 'glacier tide cedar'];
const MODES = ['keyword', 'vector', 'hybrid'] as const;

interface Hits {
  [query: string]: { chunkId: string; score: number }[];
}

interface App {
  request(opts: { method: 'GET' | 'POST' | 'PUT' | 'DELETE'; url: string; as?: string; body?: unknown; headers?: Record<string, string> }): Promise<{ statusCode: number; body: string; json(): any }>;
  close(): Promise<void>;
}

/** `switchboard serve` on the given environment, on a free loopback port: the moved instance as it would really start. */
async function serve(env: Record<string, string>): Promise<App> {
  let server: { url: string; stop: () => Promise<void> } | undefined;
  let errors = '';
  const code = await runCli(['serve'], {
    env: { LOG_LEVEL: 'silent', SWITCHBOARD_RATE_LIMIT: '0', PORT: '0', ...env },
    stdout: () => {},
    stderr: (t) => void (errors += t),
    onServing: (s) => void (server = s),
  });
  expect(code, errors).toBe(0);
  const { url, stop } = server!;
  return {
    async request({ method, url: route, as, body, headers }) {
      const res = await fetch(`${url}${route}`, {
        method,
        headers: { ...headers, ...(as ? { authorization: `Bearer ${as}` } : {}), ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
        ...(body !== undefined ? { body: typeof body === 'string' ? body : JSON.stringify(body) } : {}),
      });
      const text = await res.text();
      return { statusCode: res.status, body: text, json: () => JSON.parse(text) };
    },
    close: stop,
  };
}

async function searchAll(app: Pick<App, 'request'>, key: string, queries = QUERIES): Promise<Hits> {
  const out: Hits = {};
  for (const q of queries) {
    for (const mode of MODES) {
      const res = await app.request({ method: 'GET', url: `/knowledge/search?q=${encodeURIComponent(q)}&mode=${mode}&limit=10`, as: key });
      expect(res.statusCode, res.body).toBe(200);
      out[`${mode}:${q}`] = res.json().data.map((d: { chunkId: string; score: number }) => ({ chunkId: d.chunkId, score: d.score }));
    }
  }
  return out;
}

/**
 * Same chunks in the same order, scores equal to float precision: relative to the score, since BM25
 * over a small corpus gives scores near 1e-6 (both backends compute FTS5's bm25(); an index built
 * from other terms moves them in the fourth digit).
 */
function expectSameHits(actual: Hits, expected: Hits): void {
  expect(Object.keys(actual)).toEqual(Object.keys(expected));
  for (const [q, hits] of Object.entries(expected)) {
    expect(actual[q]!.map((h) => h.chunkId), q).toEqual(hits.map((h) => h.chunkId));
    actual[q]!.forEach((h, i) => expect(Math.abs(h.score - hits[i]!.score), `${q} #${i}: ${h.score} vs ${hits[i]!.score}`).toBeLessThanOrEqual(Math.abs(hits[i]!.score) * 1e-9));
  }
}

function sqliteCounts(file: string): Record<string, number> {
  const db = new SqliteDatabase(file, { readonly: true, fileMustExist: true });
  try {
    return Object.fromEntries(TABLES.map((t) => [t, db.prepare(`SELECT count(*) AS n FROM ${t}`).pluck().get() as number]));
  } finally {
    db.close();
  }
}

const postgresCounts = (url: string) =>
  withClient(url, async (c) => {
    const out: Record<string, number> = {};
    for (const t of TABLES) out[t] = Number((await c.query(`SELECT count(*) AS n FROM ${t}`)).rows[0].n);
    return out;
  });

/** The keyword index of a PostgreSQL database: one document and one code per chunk, totals of exactly those. */
const postgresIndex = (url: string) =>
  withClient(url, async (c) => {
    const one = async (q: string) => (await c.query(q)).rows[0];
    return {
      chunks: Number((await one('SELECT count(*) AS n FROM knowledge_chunks')).n),
      documents: Number((await one('SELECT count(*) AS n FROM knowledge_documents')).n),
      codes: Number((await one('SELECT count(*) AS n FROM knowledge_codes')).n),
      totals: Number((await one('SELECT rows FROM knowledge_keyword_totals WHERE id = 1')).rows),
      tokens: Number((await one('SELECT tokens FROM knowledge_keyword_totals WHERE id = 1')).tokens),
      documentTokens: Number((await one('SELECT coalesce(sum(tokens), 0) AS n FROM knowledge_documents')).n),
    };
  });

function cli(env: Record<string, string>) {
  const out = { stdout: '', stderr: '' };
  return {
    out,
    io: { env: { LOG_LEVEL: 'silent', ...env }, stdout: (t: string) => void (out.stdout += t), stderr: (t: string) => void (out.stderr += t) },
  };
}

/** The first count each table's progress showed, `done/total`, from a run's stderr on a terminal (one line redrawn per table). */
function firstProgress(stderr: string): Record<string, string> {
  const first: Record<string, string> = {};
  for (const line of stderr.split('\r')) {
    const m = /\] (\d+\/\d+) ([^\n]+)/.exec(line);
    if (m && !(m[2]! in first)) first[m[2]!] = m[1]!;
  }
  return first;
}

const sha256 = (file: string) => crypto.createHash('sha256').update(fs.readFileSync(file)).digest('hex');

const withPassword = (url: string) => {
  const u = new URL(url);
  u.password = PASSWORD;
  return u.toString();
};

describe.skipIf(!postgresUrl())('switchboard copy-data', { timeout: 120_000 }, () => {
  const secret = crypto.randomBytes(32).toString('base64');
  let receiver: WebhookReceiver;
  let dataDir: string;
  let dbFile: string;
  let adminKey: string;
  let deployKey: string;
  let acmeKey: string;
  let personaA: string;
  let channelId: string;
  let serverId: string;
  let session: { id: string; messages: number };
  let sqliteHits: Hits;
  let acmeHits: Hits;
  let sourceCounts: Record<string, number>;
  const cleanup: (() => Promise<void> | void)[] = [];

  const env = (extra: Record<string, string> = {}) => ({ SWITCHBOARD_DATA_DIR: dataDir, SWITCHBOARD_SECRET: secret, ...extra });
  const freshDatabase = async (): Promise<TestDatabase> => {
    const db = await createTestDatabase();
    cleanup.push(() => db.drop());
    return db;
  };

  beforeAll(async () => {
    receiver = await startReceiver(0);
    const t: TestApp = await createTestApp({ env: { SWITCHBOARD_SECRET: secret, SWITCHBOARD_ALLOW_PRIVATE_URLS: '1' }, overrides: { fetch: LOOPBACK_ONLY } });
    dataDir = t.dataDir;
    dbFile = path.join(dataDir, 'switchboard.db');
    adminKey = t.adminKey;
    try {
      const ok = async (res: Promise<{ statusCode: number; body: string; json(): any }>, status: number) => {
        const r = await res;
        expect(r.statusCode, r.body).toBe(status);
        return r.json();
      };
      personaA = (await createPersona(t, { name: 'Harbor guide' })).id;
      const personaB = (await createPersona(t, { name: 'Second guide' })).id;
      deployKey = (await ok(t.request({ method: 'POST', url: '/auth/api-keys', body: { name: 'deploy' } }), 201)).key;
      await ok(t.request({ method: 'POST', url: '/personas', body: { name: 'Carol', instructions: 'Be kind.' }, headers: { 'idempotency-key': 'create-carol' } }), 201);

      await addSource(t, { kind: 'markdown', name: 'Quillfeather Handbook', content: markdown(1, ['Mooring', 'Zephyrine Protocols', 'Night watch', 'Tides']) });
      await addSource(t, { kind: 'markdown', name: 'Field notes', content: markdown(2, ['Orbits', 'Granite', 'Meadows', 'Copper', 'Rivers']) });
      await addSource(t, { kind: 'markdown', name: 'Private log', personaId: personaA, content: markdown(3, ['Falcons', 'Willows', 'Embers']) });
      await t.ctx.services.knowledge.idle();

      const first = await ok(t.request({ method: 'POST', url: '/query', body: { personaId: personaA, message: 'Where is the harbor lantern?' } }), 200);
      const second = await ok(t.request({ method: 'POST', url: '/query', body: { personaId: personaA, message: 'And the beacon?', sessionId: first.sessionId } }), 200);
      await ok(t.request({ method: 'POST', url: `/sessions/${first.sessionId}/feedback`, body: { rating: 5, messageId: second.messageId, comment: 'clear' } }), 201);
      session = { id: first.sessionId, messages: 4 };

      const test = await createAbTest(t, { personaA, personaB });
      await ok(t.request({ method: 'PUT', url: `/business/ab-tests/${test.id}/start` }), 200);
      await ok(t.request({ method: 'POST', url: '/query', body: { abTestId: test.id, message: 'Which guide?', userId: 'u-7' } }), 200);

      const dataset = await ok(t.request({ method: 'POST', url: '/datasets', body: { name: 'Harbor questions', cases: [{ input: 'Where is the harbor lantern?', mustContain: ['lantern'] }] } }), 201);
      await ok(t.request({ method: 'POST', url: '/evaluations/runs', body: { datasetId: dataset.id, personaId: personaA } }), 201);
      await t.ctx.services.evaluations.idle();

      // Team members are people of the workspace (API.md §14); Ada (usr_copy) is inserted below and joins the team on the copy.
      const team = await createTeam(t, { name: 'Harbor staff', members: ['dee@example.com'] });
      await ensureMembers(t, ['Bo@example.com']);
      await ok(t.request({ method: 'POST', url: `/business/teams/${team.id}/members`, body: { email: 'Bo@example.com', role: 'lead' } }), 201);
      await ok(t.request({ method: 'PUT', url: `/business/teams/${team.id}/handoff`, body: { notify: { url: receiver.url, secret: 'team-webhook-secret-0123' } } }), 200);
      const desk = await ok(t.request({ method: 'POST', url: '/personas', body: { name: 'Harbor desk', instructions: 'Hand over.', teamId: team.id } }), 201);
      await ok(t.request({ method: 'POST', url: '/query', body: { personaId: desk.id, message: '/human the lantern is out' } }), 200);

      channelId = (await createChannel(t, { type: 'webhook', name: 'Site chat', personaId: personaA, credentials: { secret: WEBHOOK_SECRET, outboundUrl: receiver.url } })).id;
      const raw = JSON.stringify({ conversationId: 'conv-1', userId: 'visitor', message: 'hello harbor' });
      const inbound = await t.app.inject({ method: 'POST', url: `/business/channels/${channelId}/inbound`, headers: { 'content-type': 'application/json', 'x-switchboard-signature': signature(WEBHOOK_SECRET, raw) }, payload: raw });
      expect(inbound.statusCode, inbound.body).toBe(200);
      await ok(t.request({ method: 'POST', url: `/business/channels/${channelId}/send`, body: { to: 'conv-1', message: 'Your boat is ready' } }), 202);
      // A handoff in a channel conversation: the person's notice is queued for the user there.
      const deskChannel = (await createChannel(t, { type: 'webhook', name: 'Desk chat', personaId: desk.id, credentials: { secret: WEBHOOK_SECRET, outboundUrl: receiver.url } })).id;
      const human = JSON.stringify({ conversationId: 'conv-2', userId: 'visitor', message: '/human' });
      const handed = await t.app.inject({ method: 'POST', url: `/business/channels/${deskChannel}/inbound`, headers: { 'content-type': 'application/json', 'x-switchboard-signature': signature(WEBHOOK_SECRET, human) }, payload: human });
      expect(handed.statusCode, handed.body).toBe(200);
      await ok(t.request({ method: 'POST', url: `/handoffs/${handed.json().handoff.id}/accept`, body: { member: 'dee@example.com' } }), 200);
      await t.ctx.services.handoffs.deliver();

      serverId = (await ok(t.request({ method: 'POST', url: '/api/mcp/servers', body: { name: 'remote', transport: 'http', url: 'http://127.0.0.1:9/mcp', credentials: { API_TOKEN: MCP_TOKEN } } }), 201)).id;
      // A tool server with a pre-registered OAuth client: its sign-in row moves too.
      await ok(t.request({ method: 'POST', url: '/api/mcp/servers', body: { name: 'signed', transport: 'http', url: 'http://127.0.0.1:9/mcp', oauth: { clientId: 'switchboard', clientSecret: 'client-secret' } } }), 201);
      await ok(t.request({ method: 'POST', url: '/api/mcp/tools/execute', body: { toolName: 'knowledge', action: 'search', parameters: { query: 'harbor' } } }), 200);
      await ok(t.request({ method: 'POST', url: '/v1/chat/completions', body: { model: personaA, messages: [{ role: 'user', content: 'hi' }] } }), 200);

      // What the API makes only through a model's tool calls or a browser's OAuth consent, written as the stores write it.
      const ws = await workspaceOf(t);
      const keyId = (await ok(t.request({ method: 'GET', url: '/auth/me' }), 200)).key.id;
      const at = new Date().toISOString();
      const k = t.ctx.db.kysely;
      await k.insertInto('handoff_desk_threads').values({ workspace_id: ws, handoff_id: handed.json().handoff.id, channel_id: deskChannel, conversation_id: 'CTEAM:1700000000.000100', member_key: null, created_at: at }).execute();
      await k.insertInto('interaction_tools').values({ workspace_id: ws, started_at: at, persona_id: personaA, channel_id: null, tool_name: 'knowledge.search', is_error: 0 }).execute();
      await k.insertInto('oauth_clients').values({ client_id: 'cli_copy', metadata: '{"client_name":"Copy test"}', created_at: at }).execute();
      await k.insertInto('oauth_grants').values({ id: 'grt_copy', workspace_id: ws, key_id: keyId, client_id: 'cli_copy', client_name: 'Copy test', scope: 'read', resource: 'http://127.0.0.1/mcp', created_at: at, last_used_at: null, revoked_at: null }).execute();
      await k.insertInto('oauth_codes').values({ hash: 'code-hash', grant_id: 'grt_copy', client_id: 'cli_copy', redirect_uri: 'http://127.0.0.1:7/cb', code_challenge: 'x', resource: 'http://127.0.0.1/mcp', scope: 'read', expires_at: at, used_at: null }).execute();
      await k.insertInto('oauth_tokens').values({ hash: 'token-hash', kind: 'access', grant_id: 'grt_copy', family_id: 'fam', resource: 'http://127.0.0.1/mcp', scope: 'read', created_at: at, expires_at: at, revoked_at: null, used_at: null }).execute();
      await k.insertInto('users').values({ id: 'usr_copy', email: 'Ada@Example.com', email_key: 'ada@example.com', name: 'Ada', status: 'active', password: null, created_at: at, last_seen_at: null }).execute();
      await k.insertInto('memberships').values({ workspace_id: ws, user_id: 'usr_copy', role: 'editor', joined_at: at }).execute();
      await k.insertInto('login_sessions').values({ id: 'lgn_copy', token_hash: 'session-hash', csrf_hash: 'csrf-hash', user_id: 'usr_copy', workspace_id: ws, method: 'password', ip: null, user_agent: null, created_at: at, last_seen_at: at, expires_at: at, ended_at: null }).execute();
      await k.insertInto('invitations').values({ id: 'inv_copy', workspace_id: ws, purpose: 'invite', email: 'bo@example.com', role: 'agent', token_hash: 'invite-hash', created_by: null, created_at: at, expires_at: at, used_at: null, revoked_at: null }).execute();
      await k.insertInto('oidc_identities').values({ issuer: 'https://login.example.com', subject: 'ada-subject', user_id: 'usr_copy', created_at: at }).execute();
      await k.insertInto('audit_events').values({ id: 'aud_copy', workspace_id: ws, at, actor_type: 'system', actor_id: 'system', actor_name: 'switchboard', on_behalf_of: null, action: 'member.invite', target_type: 'invitation', target_id: 'inv_copy', outcome: 'success', request_id: null, ip: null, user_agent: null, changes: null }).execute();

      // A second workspace with knowledge of its own: search stays per workspace after the move.
      acmeKey = (await t.ctx.services.auth.createWorkspace('acme')).key.key;
      await addSource(t, { kind: 'markdown', name: 'Acme harbor', content: markdown(4, ['Cranes', 'Docks']) }, acmeKey);
      await t.ctx.services.knowledge.idle();

      sqliteHits = await searchAll(t, adminKey);
      acmeHits = await searchAll(t, acmeKey, ['harbor lantern']);
      // The title-only terms find what they should, so equal hits after the move mean equal titles.
      expect(sqliteHits['keyword:zephyrine']).toHaveLength(1);
      expect(sqliteHits['keyword:quillfeather beacon']!.length).toBeGreaterThanOrEqual(4);
      for (const [q, hits] of Object.entries({ ...sqliteHits, ...acmeHits })) expect(hits.length, q).toBeGreaterThan(0);
    } finally {
      await t.app.close();
      await t.ctx.close();
    }
    // The key file an instance generates, which SWITCHBOARD_SECRET was then set to.
    fs.writeFileSync(path.join(dataDir, SECRET_KEY_FILE), `${secret}\n`, { mode: 0o600 });
    sourceCounts = sqliteCounts(dbFile);
  });

  afterAll(async () => {
    for (const c of cleanup.reverse()) await c();
    await receiver?.close();
    if (dataDir) fs.rmSync(dataDir, { recursive: true, force: true });
  });

  it('the source holds rows in every table', () => {
    expect(TABLES.filter((t) => !(sourceCounts[t]! > 0))).toEqual([]);
    expect(sourceCounts.workspaces).toBe(2);
    expect(sourceCounts.knowledge_chunks).toBeGreaterThanOrEqual(14);
  });

  it('moves the instance to PostgreSQL and back: equal counts, same search, keys, sessions and credentials working', async () => {
    const target = await freshDatabase();
    const url = withPassword(target.url);
    const before = sha256(dbFile);

    const to = cli(env());
    expect(await runCli(['copy-data', '--to', url, '--json'], to.io), to.out.stdout + to.out.stderr).toBe(0);
    const summary = JSON.parse(to.out.stdout);
    expect(summary).toMatchObject({ resumed: false, verified: true, mismatches: [], rows: Object.values(sourceCounts).reduce((a, b) => a + b, 0) });
    // Every row is new to the target but one: the index wrote its own `vector_codes` setting when it opened.
    expect(summary.copied).toBe(summary.rows - 1);
    expect(summary.chunksIndexed).toBe(sourceCounts.knowledge_chunks);
    expect(summary.tables.map((t: { table: string }) => t.table).sort()).toEqual([...TABLES].sort());
    for (const t of summary.tables) expect(t, t.table).toMatchObject({ source: sourceCounts[t.table], target: sourceCounts[t.table] });
    // A progress line per table on stderr, then the index.
    for (const table of TABLES) expect(to.out.stderr).toMatch(new RegExp(`\\] ${sourceCounts[table]}/${sourceCounts[table]} ${table}\\n`));
    expect(to.out.stderr).toContain(`${sourceCounts.knowledge_chunks}/${sourceCounts.knowledge_chunks} chunks indexed`);
    expect(to.out.stdout + to.out.stderr).not.toContain(PASSWORD);
    expect(summary.to).toContain('***');

    expect(sha256(dbFile)).toBe(before);
    expect(await postgresCounts(target.url)).toEqual(sourceCounts);
    const index = await postgresIndex(target.url);
    expect(index).toMatchObject({ chunks: sourceCounts.knowledge_chunks, documents: sourceCounts.knowledge_chunks, codes: sourceCounts.knowledge_chunks, totals: sourceCounts.knowledge_chunks });
    expect(index.tokens).toBe(index.documentTokens);

    // The moved instance, on PostgreSQL.
    const onPostgres = env({ SWITCHBOARD_DATABASE_URL: target.url });
    const p = await serve(onPostgres);
    let moved: Hits;
    try {
      expect((await p.request({ method: 'GET', url: '/auth/me', as: adminKey })).statusCode).toBe(200);
      expect((await p.request({ method: 'GET', url: '/auth/me', as: deployKey })).statusCode).toBe(200);
      expectSameHits(await searchAll(p, adminKey), sqliteHits);
      expectSameHits(await searchAll(p, acmeKey, ['harbor lantern']), acmeHits);

      // The session continues; its new messages and answer records take new numbers.
      const next = await p.request({ method: 'POST', url: '/query', as: adminKey, body: { personaId: personaA, message: 'One more question', sessionId: session.id } });
      expect(next.statusCode, next.body).toBe(200);
      const continued = (await p.request({ method: 'GET', url: `/sessions/${session.id}`, as: adminKey })).json();
      expect(continued.messages).toHaveLength(session.messages + 2);
      expect(continued.messages.at(-1).id).toBe(next.json().messageId);
      expect((await p.request({ method: 'POST', url: `/sessions/${session.id}/feedback`, as: adminKey, body: { rating: 4 } })).statusCode).toBe(201);

      // Sealed credentials open with the same SWITCHBOARD_SECRET: the webhook's signature secret, the MCP server's token.
      const raw = JSON.stringify({ conversationId: 'conv-1', message: 'back again' });
      const signed = { 'content-type': 'application/json', 'x-switchboard-signature': signature(WEBHOOK_SECRET, raw) };
      const inbound = await p.request({ method: 'POST', url: `/business/channels/${channelId}/inbound`, headers: signed, body: raw });
      expect(inbound.statusCode, inbound.body).toBe(200);
      const sealed = await withClient(target.url, async (c) => (await c.query('SELECT secrets FROM mcp_servers WHERE id = $1', [serverId])).rows[0].secrets as string);
      expect(JSON.parse(createCipher(Buffer.from(secret, 'base64')).decrypt(sealed, `mcp-server:${serverId}`)).credentials).toEqual({ API_TOKEN: MCP_TOKEN });

      // New rows of every kind: identity sequences were moved past the copied numbers.
      expect((await p.request({ method: 'POST', url: '/personas', as: adminKey, body: { name: 'Dora', instructions: 'New here.' } })).statusCode).toBe(201);
      const teams = (await p.request({ method: 'GET', url: '/business/teams', as: adminKey })).json().data;
      expect((await p.request({ method: 'POST', url: `/business/teams/${teams[0].id}/members`, as: adminKey, body: { userId: 'usr_copy' } })).statusCode).toBe(201);
      const added = await p.request({ method: 'POST', url: '/knowledge', as: adminKey, body: { kind: 'markdown', name: 'Late addition', content: '## Xylograph\n\nThe xylograph harbor lantern glows.' } });
      expect(added.statusCode, added.body).toBe(202);
      await waitFor(async () => (await p.request({ method: 'GET', url: `/knowledge/${added.json().id}`, as: adminKey })).json().status === 'ready', 10_000, 'the new source');
      const found = (await p.request({ method: 'GET', url: '/knowledge/search?q=xylograph&mode=keyword', as: adminKey })).json().data;
      expect(found.map((d: { sourceName: string }) => d.sourceName)).toEqual(['Late addition']);
      moved = await searchAll(p, adminKey, [...QUERIES, 'xylograph']);
    } finally {
      await p.close();
    }

    // A wrong secret is refused before anything is written: the sealed values in the source do not open with it.
    const elsewhere = tempDir('switchboard-copy-');
    cleanup.push(() => fs.rmSync(elsewhere, { recursive: true, force: true }));
    const wrong = cli({ SWITCHBOARD_DATA_DIR: elsewhere, SWITCHBOARD_SECRET: crypto.randomBytes(32).toString('base64') });
    expect(await runCli(['copy-data', '--from', url], wrong.io)).toBe(1);
    expect(wrong.out.stderr).toMatch(/SWITCHBOARD_SECRET does not open the credentials sealed in the source/);
    expect(sqliteCounts(path.join(elsewhere, 'switchboard.db')).workspaces).toBe(0);

    // And back, into a new data directory.
    const back = tempDir('switchboard-copy-');
    cleanup.push(() => fs.rmSync(back, { recursive: true, force: true }));
    const from = cli({ SWITCHBOARD_DATA_DIR: back, SWITCHBOARD_SECRET: secret });
    expect(await runCli(['copy-data', '--from', url], from.io), from.out.stdout + from.out.stderr).toBe(0);
    expect(from.out.stdout).toMatch(/Every table holds as many rows as in the source/);
    expect(from.out.stdout + from.out.stderr).not.toContain(PASSWORD);
    const pgCounts = await postgresCounts(target.url);
    expect(sqliteCounts(path.join(back, 'switchboard.db'))).toEqual(pgCounts);
    expect(pgCounts.personas).toBe(sourceCounts.personas! + 1);

    const s = await serve({ SWITCHBOARD_DATA_DIR: back, SWITCHBOARD_SECRET: secret });
    try {
      expect((await s.request({ method: 'GET', url: '/auth/me', as: deployKey })).statusCode).toBe(200);
      expectSameHits(await searchAll(s, adminKey, [...QUERIES, 'xylograph']), moved);
      const next = await s.request({ method: 'POST', url: '/query', as: adminKey, body: { personaId: personaA, message: 'Still there?', sessionId: session.id } });
      expect(next.statusCode, next.body).toBe(200);
    } finally {
      await s.close();
    }
  });

  it('continues an interrupted copy where it stopped, never twice, then refuses a second copy', async () => {
    const target = await freshDatabase();
    const config = loadConfig({ LOG_LEVEL: 'silent', ...env() });
    /** What one run did: the rows it read of each table (its batches) and where its progress started per table. */
    const runLog = () => {
      const rows: Record<string, number> = {};
      const progress = { stderr: '' };
      const io = { stdout: () => {}, stderr: (t: string) => void (progress.stderr += t), isTTY: true };
      return { rows, io, firstProgress: () => firstProgress(progress.stderr) };
    };
    const copyUntil = (log: ReturnType<typeof runLog>, stop: (batch: { phase: string; table: string }) => boolean) => {
      let stopped = false;
      return runCopyData(config, {
        direction: 'to', url: target.url, json: true, env: env(), batchRows: 2,
        afterBatch: (b) => {
          if (b.phase === 'copy') log.rows[b.table] = (log.rows[b.table] ?? 0) + b.rows;
          if (!stopped && stop(b)) {
            stopped = true;
            throw new Error('interrupted');
          }
        },
      }, log.io);
    };

    // Stopped in the middle of the messages (batches of 1, then 2 rows)...
    let batches = 0;
    const first = runLog();
    await expect(copyUntil(first, (b) => b.table === 'messages' && ++batches === 2)).rejects.toThrow('interrupted');
    expect(first.rows.messages).toBe(3);
    const partial = await postgresCounts(target.url);
    expect(partial).toMatchObject({ knowledge_chunks: sourceCounts.knowledge_chunks, messages: 3, interactions: 0, settings: sourceCounts.settings! + 1 });
    const record = await withClient(target.url, async (c) => (await c.query("SELECT value FROM settings WHERE key = 'copy_data'")).rows[0]?.value);
    expect(JSON.parse(record).tables.messages).toMatchObject({ done: 3 });
    expect((await postgresIndex(target.url)).documents).toBe(0);

    // ...then, continued, in the middle of indexing the chunks: every row is there once, the record too.
    let indexed = 0;
    const second = runLog();
    await expect(copyUntil(second, (b) => b.phase === 'index' && ++indexed === 3)).rejects.toThrow('interrupted');
    // Each table's progress starts at what the first run copied, and the two runs read every source row once between them.
    const startedAt = second.firstProgress();
    for (const t of TABLES) {
      expect(startedAt[t], t).toBe(`${first.rows[t] ?? 0}/${sourceCounts[t]}`);
      expect((first.rows[t] ?? 0) + (second.rows[t] ?? 0), t).toBe(sourceCounts[t]);
    }
    expect(await postgresCounts(target.url)).toEqual({ ...sourceCounts, settings: sourceCounts.settings! + 1 });
    expect((await postgresIndex(target.url)).documents).toBe(6);

    // Another source cannot take over the unfinished copy.
    const other = tempDir('switchboard-copy-');
    cleanup.push(() => fs.rmSync(other, { recursive: true, force: true }));
    fs.copyFileSync(dbFile, path.join(other, 'switchboard.db'));
    const intruder = cli({ SWITCHBOARD_DATA_DIR: other, SWITCHBOARD_SECRET: secret });
    expect(await runCli(['copy-data', '--to', target.url], intruder.io)).toBe(1);
    expect(intruder.out.stderr).toMatch(/holds an unfinished copy from SQLite .*run that copy again/);

    const resumed = cli(env());
    expect(await runCli(['copy-data', '--to', target.url, '--json'], { ...resumed.io, isTTY: true }), resumed.out.stdout + resumed.out.stderr).toBe(0);
    // Every table was finished: each one's progress starts full.
    const resumedAt = firstProgress(resumed.out.stderr);
    for (const t of TABLES) expect(resumedAt[t], t).toBe(`${sourceCounts[t]}/${sourceCounts[t]}`);
    const summary = JSON.parse(resumed.out.stdout);
    expect(summary).toMatchObject({ resumed: true, verified: true, copied: 0, chunksIndexed: sourceCounts.knowledge_chunks! - 6 });
    expect(await postgresCounts(target.url)).toEqual(sourceCounts);
    const index = await postgresIndex(target.url);
    expect(index).toMatchObject({ documents: sourceCounts.knowledge_chunks, codes: sourceCounts.knowledge_chunks, totals: sourceCounts.knowledge_chunks });
    expect(index.tokens).toBe(index.documentTokens);
    expect(await withClient(target.url, async (c) => (await c.query("SELECT count(*) AS n FROM settings WHERE key = 'copy_data'")).rows[0].n)).toBe('0');

    const p = await serve(env({ SWITCHBOARD_DATABASE_URL: target.url }));
    try {
      expectSameHits(await searchAll(p, adminKey), sqliteHits);
    } finally {
      await p.close();
    }

    const again = cli(env());
    expect(await runCli(['copy-data', '--to', target.url], again.io)).toBe(1);
    expect(again.out.stderr).toMatch(/already holds workspaces "acme" \(wsp_\w+\), "default" \(wsp_\w+\), which the source has too/);
    expect(await postgresCounts(target.url)).toEqual(sourceCounts);
  });

  it('refuses without SWITCHBOARD_SECRET, with one that is not the data directory key, and bad arguments', async () => {
    const target = await freshDatabase();
    const none = cli({ SWITCHBOARD_DATA_DIR: dataDir });
    expect(await runCli(['copy-data', '--to', target.url], none.io)).toBe(1);
    expect(none.out.stderr).toMatch(/copy-data needs SWITCHBOARD_SECRET.*set SWITCHBOARD_SECRET to that file's content/s);
    const other = cli(env({ SWITCHBOARD_SECRET: crypto.randomBytes(32).toString('base64') }));
    expect(await runCli(['copy-data', '--to', target.url, '--json'], other.io)).toBe(1);
    expect(JSON.parse(other.out.stdout).error.message).toMatch(/SWITCHBOARD_SECRET differs from .*secret\.key/);
    expect(await postgresCounts(target.url).catch(() => null)).toBeNull(); // never migrated: nothing was opened

    for (const args of [['copy-data'], ['copy-data', '--to', target.url, '--from', target.url], ['copy-data', '--to', `mysql://u:${PASSWORD}@h/db`]]) {
      const bad = cli(env());
      expect(await runCli(args, bad.io), args.join(' ')).toBe(2);
      expect(bad.out.stderr).toContain('copy-data');
      expect(bad.out.stderr).not.toContain(PASSWORD);
    }
  });
});
