// Each feature's main path once against the built server (DESIGN.md "Tests run what ships"): vitest
// transforms imports and Node running dist/ does not, so a feature tested only through vitest is
// untested as shipped (issue 40). One `node dist/src/main.js serve` on the offline model for the
// whole file; datasets and evaluations are in shipped-evaluations.test.ts, tool servers in
// shipped-tools.test.ts, the README walk-through, drain, instances and channels in their own files.
import fs from 'node:fs';
import path from 'node:path';
import SqliteDatabase from 'better-sqlite3';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signature } from '../../bridges/webhook/webhook-bridge.js';
import { generateKeySecret } from '../../src/core/auth/keys.js';
import { startReceiver, type WebhookReceiver } from '../fakes/webhook-receiver.js';
import { type Requester, tempDir } from '../helpers/app.js';
import { type BuiltServer, builtClient, builtServers, MAIN } from '../helpers/built-server.js';
import { addSource, createAbTest, createChannel, createPersona, createTeam } from '../helpers/factories.js';
import { callOk } from '../helpers/mcp.js';
import { signIn } from '../helpers/people.js';
import { waitFor } from '../helpers/mcp-tools.js';
import { expectProblem } from '../helpers/problem.js';
import { chunksOf, readSse, textOf } from '../integration/chat-helpers.js';
import { fixture } from '../integration/knowledge-helpers.js';

const HANDBOOK = 'The office opens at nine and closes at five. Parcels leave every Tuesday.';
const FAQ = '# Returns\n\nReturns are accepted within thirty days with the receipt.\n';
const SECRET = 'webhook-secret-0123456789abcdef';

describe('every feature’s main path on the built server', { timeout: 60_000 }, () => {
  const dataDir = tempDir('switchboard-shipped-');
  const key = generateKeySecret();
  const { serve, killAll } = builtServers({ dataDir, adminKey: key, env: { SWITCHBOARD_ALLOW_PRIVATE_URLS: '1' } });
  let server: BuiltServer;
  let api: Requester;
  let receiver: WebhookReceiver;
  let personaId: string;

  beforeAll(async () => {
    expect(fs.existsSync(MAIN), 'dist/ is built by npm test (or npx tsc -p tsconfig.json)').toBe(true);
    receiver = await startReceiver();
    server = await serve();
    api = builtClient(server, key);
    personaId = (await createPersona(api, { name: 'Desk', instructions: 'Answer from the handbook.' })).id;
  });

  afterAll(async () => {
    killAll();
    await receiver?.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  const post = (url: string, body: unknown = {}, as?: string) => api.request({ method: 'POST', url, body, ...(as ? { as } : {}) });
  const put = (url: string, body: unknown = {}) => api.request({ method: 'PUT', url, body });
  const get = (url: string, as?: string) => api.request({ method: 'GET', url, ...(as ? { as } : {}) });
  const ok = async (res: Promise<{ statusCode: number; body: string; json(): any }>, status = 200) => {
    const r = await res;
    expect(r.statusCode, r.body).toBe(status);
    return r.json();
  };
  const stream = (path: string, body: unknown) =>
    fetch(new URL(path, server.url), { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });

  it('personas: an edit is a version, and an old version restored is the next one', async () => {
    const persona = await createPersona(api, { name: 'Versions', instructions: 'First.' });
    expect((await ok(put(`/personas/${persona.id}`, { instructions: 'Second.' }))).version).toBe(2);
    const versions = await ok(get(`/personas/${persona.id}/versions`));
    expect(versions.data.map((v: { version: number; instructions: string }) => [v.version, v.instructions])).toEqual([[2, 'Second.'], [1, 'First.']]);
    expect(await ok(get(`/personas/${persona.id}/versions/1`))).toMatchObject({ version: 1, instructions: 'First.' });
    expect(await ok(post(`/personas/${persona.id}/versions/1/restore`))).toMatchObject({ version: 3, instructions: 'First.' });
    expect((await ok(get(`/personas?q=Versions`))).data.map((p: { id: string }) => p.id)).toEqual([persona.id]);
  });

  it('API keys: created, used, rotated and revoked', async () => {
    const created = await ok(post('/auth/api-keys', { name: 'reader', scopes: ['read'] }), 201);
    expect(await ok(get('/auth/me', created.key))).toMatchObject({ key: { id: created.id, name: 'reader', scopes: ['read'] } });
    expectProblem(await post('/personas', { name: 'No', instructions: 'No.' }, created.key), 403, 'forbidden');
    const rotated = await ok(put(`/auth/api-keys/${created.id}`, {}));
    expect(rotated.id).toBe(created.id);
    expectProblem(await get('/auth/me', created.key), 401, 'unauthorized');
    expect((await api.request({ method: 'DELETE', url: `/auth/api-keys/${created.id}` })).statusCode).toBe(204);
    expectProblem(await get('/auth/me', rotated.key), 401, 'unauthorized');
  });

  it('people: the first owner from the banner\'s setup link, signed in with the cookie, then by password', async () => {
    const token = /\/console\/setup#(sbi_[0-9A-Za-z]{43})/.exec(server.stderr())?.[1];
    expect(token, server.stderr()).toBeDefined();
    const owner = { email: 'owner@example.com', name: 'Owner', password: 'a long enough password' };
    const made = await api.request({ method: 'POST', url: '/auth/setup', as: null, body: { ...owner, token } });
    expect(made.statusCode, made.body).toBe(201);
    const signed = await signIn(api, owner.email, owner.password);
    const me = await api.request({ method: 'GET', url: '/auth/me', as: null, headers: signed.headers() });
    expect(me.json()).toMatchObject({ user: { email: owner.email }, workspace: { name: 'default' }, role: 'owner' });
    const out = await api.request({ method: 'DELETE', url: '/auth/sessions/current', as: null, headers: signed.headers(true) });
    expect(out.statusCode).toBe(204);
    expectProblem(await api.request({ method: 'GET', url: '/auth/me', as: null, headers: signed.headers() }), 401, 'unauthorized');
  });

  it('knowledge: text and a multipart file ingested and found by search', async () => {
    const text = await addSource(api, { kind: 'text', name: 'Handbook', content: HANDBOOK });
    expect(text.status).toBe('ready');
    const form = new FormData();
    form.append('file', new Blob([FAQ], { type: 'text/markdown' }), 'faq.md');
    form.append('name', 'FAQ');
    const file = await ok(post('/knowledge', form), 202);
    await waitFor(async () => (await ok(get(`/knowledge/${file.id}`))).status === 'ready', 15_000, 'the file to be ready');
    expect((await ok(get(`/knowledge/${file.id}/chunks`))).data[0].headingPath).toEqual(['Returns']);
    const found = await ok(get('/knowledge/search?q=returns%20receipt'));
    expect(found.data[0]).toMatchObject({ sourceId: file.id, sourceName: 'FAQ' });
    expect((await ok(get('/knowledge/search?q=parcels%20Tuesday&mode=keyword'))).data[0]).toMatchObject({ sourceId: text.id });
  });

  // Each extractor loads its library at its first file: the way Node resolves it in dist/ is what ships.
  it.each([
    ['sample.pdf', 'application/pdf', 'pdf', 'passages'],
    ['sample.docx', 'application/vnd.openxmlformats-officedocument.wordprocessingml.document', 'docx', 'migrations'],
    ['sample.html', 'text/html', 'html', 'espresso'],
    ['sample.csv', 'text/csv', 'csv', 'lovelace'],
    ['sample.json', 'application/json', 'json', 'rotate'],
  ])('knowledge: %s (%s) is read as %s and found', async (name, type, kind, word) => {
    const form = new FormData();
    form.append('file', new Blob([fixture(name)], { type }), name);
    const file = await ok(post('/knowledge', form), 202);
    const ready = await waitFor(async () => {
      const s = await ok(get(`/knowledge/${file.id}`));
      return s.status === 'processing' ? null : s;
    }, 15_000, `${name} to be processed`);
    expect(ready).toMatchObject({ kind, status: 'ready', error: null });
    expect((await ok(get(`/knowledge/search?q=${word}&mode=keyword&limit=50`))).data.map((r: { sourceId: string }) => r.sourceId)).toContain(file.id);
  });

  it('queries and sessions: /query, its stream, the AI SDK chat stream, the session with feedback, deleted', async () => {
    const answer = await ok(post('/query', { personaId, message: 'When does the office open?' }));
    expect(answer.response).toContain('The office opens at nine');
    expect(answer.sources.map((s: { sourceName: string }) => s.sourceName)).toContain('Handbook');

    const res = await stream('/query/stream', { personaId, message: 'When do parcels leave?', sessionId: answer.sessionId });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const read = await readSse(res);
    expect(read.events.at(-1)?.data).toBe('[DONE]');
    const chunks = chunksOf(read);
    expect(textOf(chunks)).toContain('Parcels leave every Tuesday');
    expect(chunks.at(-1)).toMatchObject({ type: 'done', sessionId: answer.sessionId });

    const chat = await stream(`/api/ai-sdk/agents/${personaId}/chat`, { messages: [{ role: 'user', content: 'When does the office open?' }], sessionId: answer.sessionId });
    expect(chat.status).toBe(200);
    expect(textOf(chunksOf(await readSse(chat)))).toContain('The office opens at nine');

    const session = await ok(get(`/sessions/${answer.sessionId}`));
    expect(session.messages.map((m: { role: string }) => m.role)).toEqual(['user', 'assistant', 'user', 'assistant', 'user', 'assistant']);
    await ok(post(`/sessions/${answer.sessionId}/feedback`, { rating: 5, messageId: answer.messageId }), 201);
    expect((await ok(get(`/sessions?personaId=${personaId}`))).data.map((s: { id: string }) => s.id)).toContain(answer.sessionId);
    expect((await api.request({ method: 'DELETE', url: `/sessions/${answer.sessionId}` })).statusCode).toBe(204);
    expectProblem(await get(`/sessions/${answer.sessionId}`), 404, 'not_found');
  });

  it('the OpenAI-compatible endpoint: models, an answer, and a stream', async () => {
    expect((await ok(get('/v1/models'))).data.map((m: { id: string }) => m.id)).toContain(personaId);
    const completion = await ok(post('/v1/chat/completions', { model: personaId, messages: [{ role: 'user', content: 'When does the office open?' }] }));
    expect(completion).toMatchObject({ object: 'chat.completion', model: personaId, choices: [{ message: { role: 'assistant' }, finish_reason: 'stop' }] });
    expect(completion.choices[0].message.content).toContain('The office opens at nine');
    const res = await stream('/v1/chat/completions', { model: personaId, messages: [{ role: 'user', content: 'When does the office open?' }], stream: true });
    expect(res.status).toBe(200);
    const read = await readSse(res);
    expect(read.events.at(-1)?.data).toBe('[DONE]');
    const deltas = chunksOf(read).map((c) => c.choices?.[0]?.delta?.content ?? '').join('');
    expect(deltas).toContain('The office opens at nine');
  });

  it('MCP at /mcp: initialize, tools/list and a tools/call', async () => {
    const transport = new StreamableHTTPClientTransport(new URL('/mcp', server.url), { requestInit: { headers: { authorization: `Bearer ${key}` } } });
    const client = new Client({ name: 'shipped-client', version: '1.0.0' });
    await client.connect(transport);
    try {
      expect(client.getServerVersion()?.name).toBeTruthy();
      expect((await client.listTools()).tools.map((tool) => tool.name)).toEqual(expect.arrayContaining(['ask_persona', 'search_knowledge', 'create_persona']));
      const answer = await callOk(client, 'ask_persona', { personaId, message: 'When does the office open?' });
      expect(answer.response).toContain('The office opens at nine');
    } finally {
      await client.close();
    }
  });

  /** A person of the built server's default workspace, written into its database (team members are people, API.md §14). */
  function addPerson(email: string): void {
    const db = new SqliteDatabase(path.join(dataDir, 'switchboard.db'));
    try {
      db.pragma('busy_timeout = 5000');
      const { id: workspaceId } = db.prepare('SELECT id FROM workspaces ORDER BY created_at LIMIT 1').get() as { id: string };
      const at = new Date().toISOString();
      const userId = `usr_shipped${Date.now()}`;
      db.prepare("INSERT INTO users (id, email, email_key, name, status, password, created_at, last_seen_at) VALUES (?, ?, ?, ?, 'active', NULL, ?, NULL)").run(userId, email, email.toLowerCase(), email, at);
      db.prepare("INSERT INTO memberships (workspace_id, user_id, role, joined_at) VALUES (?, ?, 'agent', ?)").run(workspaceId, userId, at);
    } finally {
      db.close();
    }
  }

  it('teams and handoffs: /human offers it, a member accepts, replies and hands it back', async () => {
    addPerson('ada@example.com');
    const team = await createTeam(api, { name: 'Care', members: ['ada@example.com'] });
    const persona = await createPersona(api, { name: 'Care desk', teamId: team.id });
    expect((await ok(get(`/business/teams/${team.id}`))).members.map((m: { email: string }) => m.email)).toEqual(['ada@example.com']);
    const asked = await ok(post('/query', { personaId: persona.id, message: '/human my parcel is lost' }));
    expect(asked.handoff).toMatchObject({ status: 'offered' });
    const handoffId = asked.handoff.id as string;
    expect((await ok(get('/handoffs?status=offered'))).data.map((h: { id: string }) => h.id)).toContain(handoffId);
    expect(await ok(post(`/handoffs/${handoffId}/accept`, { member: 'ada@example.com' }))).toMatchObject({ status: 'accepted', member: 'ada@example.com' });
    await ok(post(`/handoffs/${handoffId}/messages`, { member: 'ada@example.com', text: 'Ada here: I found your parcel.' }), 201);
    expect(await ok(post(`/handoffs/${handoffId}/return`, { member: 'ada@example.com' }))).toMatchObject({ status: 'returned' });
    const contents = (await ok(get(`/sessions/${asked.sessionId}`))).messages.map((m: { content: string }) => m.content);
    expect(contents).toContain('Ada here: I found your parcel.');
    // The user's next message brings what was said since (the reply and the notices), then the persona answers again.
    const after = await ok(post('/query', { personaId: persona.id, message: 'Thanks!', sessionId: asked.sessionId }));
    expect(after.handoff).toMatchObject({ id: handoffId, status: 'returned' });
    expect(after.handoff.messages.map((m: { content: string }) => m.content)).toContain('Ada here: I found your parcel.');
    expect((await ok(post('/query', { personaId: persona.id, message: 'And when?', sessionId: asked.sessionId }))).handoff).toBeUndefined();
  });

  it('A/B tests: started, answering with a variant, results read, stopped', async () => {
    const b = await createPersona(api, { name: 'Desk B', instructions: 'Answer from the handbook, briefly.' });
    const test = await createAbTest(api, { name: 'Brevity', personaA: personaId, personaB: b.id });
    expect(await ok(put(`/business/ab-tests/${test.id}/start`))).toMatchObject({ status: 'running' });
    const answer = await ok(post('/query', { abTestId: test.id, message: 'When does the office open?', userId: 'visitor-1' }));
    expect(answer).toMatchObject({ abTestId: test.id, variant: expect.stringMatching(/^[AB]$/) });
    await ok(post(`/sessions/${answer.sessionId}/feedback`, { rating: 4 }), 201);
    const results = await ok(get(`/business/ab-tests/${test.id}/results`));
    expect(results.variants.A.conversations + results.variants.B.conversations).toBe(1);
    expect(await ok(put(`/business/ab-tests/${test.id}/stop`))).toMatchObject({ status: 'completed' });
  });

  it('analytics: the overview, conversations, performance and an export', async () => {
    const overview = await ok(get('/business/analytics?timeframe=1d'));
    expect(overview.metrics.conversations.total).toBeGreaterThan(0);
    expect((await ok(get('/business/analytics/conversations?timeframe=1d'))).total).toBeGreaterThan(0);
    expect((await ok(get('/business/analytics/performance?timeframe=1d'))).latency.p50Ms).toBeGreaterThanOrEqual(0);
    const csv = await post('/business/analytics/export', { timeframe: '1d', dataset: 'messages', format: 'csv' });
    expect(csv.statusCode, csv.body).toBe(200);
    expect(csv.headers['content-type']).toMatch(/^text\/csv/);
    expect(csv.headers['content-disposition']).toMatch(/^attachment/);
    expect(csv.body.split('\r\n').length).toBeGreaterThan(2);
    const ndjson = await post('/business/analytics/export', { timeframe: '1d', dataset: 'conversations', format: 'ndjson' });
    expect(ndjson.statusCode, ndjson.body).toBe(200);
    expect(ndjson.body.trim().split('\n').map((l) => JSON.parse(l)).length).toBeGreaterThan(0);
  });

  it('members and the audit log: an invitation accepted, a role changed, every change listed and exported', async () => {
    const invited = await ok(post('/members/invitations', { email: 'grace@example.com', role: 'viewer' }), 201);
    const token = invited.url.split('#')[1];
    const joined = await ok(api.request({ method: 'POST', url: '/auth/invitations/accept', as: null, body: { token, name: 'Grace', password: 'correct horse battery' } }), 201);
    const userId = joined.user.id as string;
    expect(await ok(put(`/members/${userId}`, { role: 'editor' }))).toMatchObject({ userId, role: 'editor' });
    const events = (await ok(get('/audit?targetId=' + userId))).data.map((e: { action: string }) => e.action);
    expect(events).toEqual(['member.role', 'member.join']);
    const csv = await get('/audit/export?format=csv&action=member.invite');
    expect(csv.statusCode, csv.body).toBe(200);
    expect(csv.headers['content-type']).toMatch(/^text\/csv/);
    expect(csv.body.trim().split('\r\n')).toHaveLength(2);
    const ndjson = await get('/audit/export?format=ndjson&action=member.role');
    expect(ndjson.statusCode, ndjson.body).toBe(200);
    expect(ndjson.body.trim().split('\n').map((l) => JSON.parse(l).target.id)).toEqual([userId]);
  });

  it('webhook channels: a signed message answered, a send delivered signed', async () => {
    const channel = await createChannel(api, { type: 'webhook', name: 'Site chat', personaId, credentials: { secret: SECRET, outboundUrl: receiver.url } });
    expect(channel.status).toBe('connected');
    const raw = JSON.stringify({ conversationId: 'conv-1', userId: 'visitor-1', message: 'When does the office open?' });
    const inbound = await api.request({ method: 'POST', url: `/business/channels/${channel.id}/inbound`, as: null, body: raw, headers: { 'x-switchboard-signature': signature(SECRET, raw) } });
    expect(inbound.statusCode, inbound.body).toBe(200);
    expect(inbound.json().reply).toContain('The office opens at nine');
    expectProblem(await api.request({ method: 'POST', url: `/business/channels/${channel.id}/inbound`, as: null, body: raw, headers: { 'x-switchboard-signature': signature('another-secret-0123456789', raw) } }), 401, 'unauthorized');

    const sent = await ok(post(`/business/channels/${channel.id}/send`, { to: 'conv-1', message: 'Your parcel left today.' }), 202);
    expect(sent).toMatchObject({ channelId: channel.id, status: 'sent' });
    const delivered = receiver.deliveries.at(-1)!;
    expect(delivered.signature).toBe(signature(SECRET, delivered.body));
    expect(JSON.parse(delivered.body)).toMatchObject({ channelId: channel.id, conversationId: 'conv-1', message: 'Your parcel left today.' });
  });
});
