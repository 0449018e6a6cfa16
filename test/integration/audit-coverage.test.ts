// API.md §14 "Every change … writes exactly one event": walks the OpenAPI document, performs a valid
// request for every write operation (POST, PUT, PATCH, DELETE) and checks that it added exactly one
// audit event with the expected action. A new write operation without an entry below fails the test,
// and so does an exclusion the document no longer has.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { auth as oauthClientAuth } from '@modelcontextprotocol/sdk/client/auth.js';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { type TestBackend, testBackends } from '../helpers/postgres.js';
import { createAbTest, createChannel, createPersona, createTeam, invitePerson, PERSON_PASSWORD } from '../helpers/factories.js';
import { authorize, openConsent, TestOAuthProvider } from '../helpers/oauth.js';
import { LOOPBACK_ONLY } from '../helpers/mcp-tools.js';
import { startReceiver, type WebhookReceiver } from '../fakes/webhook-receiver.js';
import { type OAuthToolServer, startOAuthToolServer } from '../fakes/oauth-tool-server.js';

const WRITE_METHODS = ['post', 'put', 'patch', 'delete'];

/**
 * Write operations this test does not perform, each with why: by design none of them changes data a
 * person would audit (docs/people.md "Not audited").
 */
const EXCLUDED: Record<string, string> = {
  // OAuth protocol traffic of an MCP client: it changes no workspace data a person would audit.
  // The person's act, the consent that creates the grant, and an admin's revocation of a grant
  // are events (oauth_grant.create, oauth_grant.revoke, performed below).
  'POST /oauth/token': 'OAuth protocol: exchanging a code or refreshing a token uses the grant consented to (oauth_grant.create); it changes no workspace data',
  'POST /oauth/register': 'OAuth protocol: an unauthenticated client registers its metadata (RFC 7591); nothing of a workspace changes',
  'POST /oauth/revoke': 'OAuth protocol: a client gives up its own token (RFC 7009); the grant stays, nothing of a workspace changes',
  // Conversation, not a change of the workspace: asking a persona is recorded by its session and
  // analytics (interactions), never in the audit log (docs/people.md "Audit log").
  'POST /query': 'conversation',
  'POST /query/stream': 'conversation',
  'POST /api/ai-sdk/agents/{agentId}/chat': 'conversation',
  'POST /v1/chat/completions': 'conversation',
  'POST /business/channels/{id}/slack/events': "conversation: a channel user's message, signed by the platform",
  'POST /business/channels/{id}/inbound': "conversation: a channel user's message, signed by the platform",
  // The MCP transport: a session opens and ends; the tools it calls write their own events (the
  // services do; test/integration/audit.test.ts checks it over MCP).
  'POST /mcp': 'MCP transport',
  'DELETE /mcp': 'MCP transport',
};

interface Performed {
  method: 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  url: string;
  /** JSON, or a string sent as is (with its `content-type` in `headers`). */
  body?: unknown;
  /** Who sends it: the admin key (default), another key, or nobody (`null`: a cookie in `headers`, or no credential). */
  as?: string | null;
  headers?: Record<string, string>;
  /** The success status expected. */
  status: number;
  action: string;
  /** The event's target id; `null` when it has none (signing out everywhere). Default: any id. */
  targetId?: string | null;
  /** The event's actor: default the admin key; `id` may come from the response (a person who just joined). */
  actor?: { type: 'key' | 'user'; id: string | ((res: { json(): any }) => string) };
  onBehalfOf?: string;
  /** The event's `changes`, when the builder checks them. */
  changes?: string[];
  /** An app of its own (the first owner's setup needs one where nobody exists yet), closed after. */
  app?: TestApp;
}

interface Fixtures {
  t: TestApp;
  backend: TestBackend;
  base: string;
  receiver: WebhookReceiver;
  oauthServer: OAuthToolServer;
}

const SECRET = 'webhook-secret-0123456789abcdef';

async function ok(res: Promise<{ statusCode: number; body: string; json(): any }>, status: number) {
  const r = await res;
  expect(r.statusCode, r.body).toBe(status);
  return r.json();
}

/** A session with one answer (asking is conversation: no event). */
async function session(f: Fixtures, personaId: string): Promise<string> {
  const asked = await ok(f.t.request({ method: 'POST', url: '/query', body: { personaId, message: 'Hello there' } }), 200);
  return asked.sessionId as string;
}

async function dataset(f: Fixtures, cases: unknown[] = []) {
  return ok(f.t.request({ method: 'POST', url: '/datasets', body: { name: 'Regressions', cases } }), 201);
}

async function toolServer(f: Fixtures, name: string) {
  return ok(f.t.request({ method: 'POST', url: '/api/mcp/servers', body: { name, transport: 'http', url: f.oauthServer.url } }), 201);
}

let people = 0;
type Person = Awaited<ReturnType<typeof invitePerson>> & { email: string };

/** A member of the workspace with `role`, invited and signed in (their join is a fixture: outside the count). */
async function person(f: Fixtures, role = 'agent'): Promise<Person> {
  const email = `person${++people}@example.com`;
  return { ...(await invitePerson(f.t, { email, role })), email };
}

/** A request as `p`: their cookie and CSRF token, no key. */
const asPerson = (p: Person) => ({ as: null, headers: { cookie: p.cookie, 'x-csrf-token': p.csrfToken } });
const personActor = (p: Person) => ({ type: 'user' as const, id: p.userId });

async function apiKey(f: Fixtures, body: Record<string, unknown> = { name: 'k', scopes: ['read'] }, p?: Person) {
  return ok(f.t.request({ method: 'POST', url: '/auth/api-keys', body, ...(p ? asPerson(p) : {}) }), 201);
}

/** A team of one real member (`agent`), a persona handing over to it, and a handoff opened through the API (offered to the member). */
async function handoff(f: Fixtures) {
  const member = await person(f);
  const team = await createTeam(f.t, { name: `Desk ${people}`, members: [member.userId] });
  const persona = await createPersona(f.t, { name: 'Front', teamId: team.id });
  const sessionId = await session(f, persona.id);
  const opened = await ok(f.t.request({ method: 'POST', url: `/sessions/${sessionId}/handoff`, body: {} }), 201);
  return { member, team, sessionId, id: opened.id as string };
}

/** A pending OAuth authorization of a registered MCP client, its consent form read (as a browser would). */
async function consentForm(f: Fixtures) {
  const provider = new TestOAuthProvider({ clientName: `Assistant ${++people}` });
  expect(await oauthClientAuth(provider, { serverUrl: `${f.base}/mcp` })).toBe('REDIRECT');
  return openConsent(provider.authorizationUrl!);
}

/** Each write operation of the document: a valid request (its fixtures made first, outside the count) and the event it must add. */
const BUILDERS: Record<string, (f: Fixtures) => Promise<Performed>> = {
  // Personas.
  'POST /personas': async () => ({ method: 'POST', url: '/personas', body: { name: 'Ada', instructions: 'Answer briefly.' }, status: 201, action: 'persona.create' }),
  'PUT /personas/{id}': async ({ t }) => {
    const p = await createPersona(t);
    return { method: 'PUT', url: `/personas/${p.id}`, body: { name: 'Grace' }, status: 200, action: 'persona.update', targetId: p.id };
  },
  'DELETE /personas/{id}': async ({ t }) => {
    const p = await createPersona(t);
    return { method: 'DELETE', url: `/personas/${p.id}`, status: 204, action: 'persona.delete', targetId: p.id };
  },
  'POST /personas/{id}/versions/{n}/restore': async ({ t }) => {
    const p = await createPersona(t);
    await ok(t.request({ method: 'PUT', url: `/personas/${p.id}`, body: { instructions: 'Answer at length.' } }), 200);
    return { method: 'POST', url: `/personas/${p.id}/versions/1/restore`, status: 200, action: 'persona.restore', targetId: p.id };
  },
  // A/B tests.
  'POST /business/ab-tests': async ({ t }) => {
    const [a, b] = [await createPersona(t), await createPersona(t, { name: 'B' })];
    return { method: 'POST', url: '/business/ab-tests', body: { name: 'AB', personaA: a.id, personaB: b.id }, status: 201, action: 'ab_test.create' };
  },
  'PUT /business/ab-tests/{id}/start': async ({ t }) => {
    const test = await createAbTest(t, { personaA: (await createPersona(t)).id, personaB: (await createPersona(t)).id });
    return { method: 'PUT', url: `/business/ab-tests/${test.id}/start`, status: 200, action: 'ab_test.start', targetId: test.id };
  },
  'PUT /business/ab-tests/{id}/stop': async ({ t }) => {
    const test = await createAbTest(t, { personaA: (await createPersona(t)).id, personaB: (await createPersona(t)).id });
    await ok(t.request({ method: 'PUT', url: `/business/ab-tests/${test.id}/start` }), 200);
    return { method: 'PUT', url: `/business/ab-tests/${test.id}/stop`, status: 200, action: 'ab_test.stop', targetId: test.id };
  },
  'POST /business/ab-tests/{id}/promote': async ({ t }) => {
    // A pinned version wins: the promotion restores it too, still one event.
    const a = await createPersona(t);
    await ok(t.request({ method: 'PUT', url: `/personas/${a.id}`, body: { instructions: 'Changed.' } }), 200);
    const test = await createAbTest(t, { personaA: `${a.id}@1`, personaB: a.id });
    await ok(t.request({ method: 'PUT', url: `/business/ab-tests/${test.id}/start` }), 200);
    await ok(t.request({ method: 'PUT', url: `/business/ab-tests/${test.id}/stop` }), 200);
    return { method: 'POST', url: `/business/ab-tests/${test.id}/promote`, body: { variant: 'A' }, status: 200, action: 'ab_test.promote', targetId: test.id };
  },
  // Channels.
  'POST /business/channels': async ({ t }) => {
    const p = await createPersona(t);
    return { method: 'POST', url: '/business/channels', body: { type: 'webhook', name: 'Site', personaId: p.id, credentials: { secret: SECRET } }, status: 201, action: 'channel.create' };
  },
  'PUT /business/channels/{id}/settings': async ({ t }) => {
    const c = await createChannel(t, { type: 'webhook', personaId: (await createPersona(t)).id, credentials: { secret: SECRET } });
    return { method: 'PUT', url: `/business/channels/${c.id}/settings`, body: { respondTo: 'all' }, status: 200, action: 'channel.update', targetId: c.id };
  },
  'POST /business/channels/{id}/send': async ({ t, receiver }) => {
    const c = await createChannel(t, { type: 'webhook', personaId: (await createPersona(t)).id, credentials: { secret: SECRET, outboundUrl: receiver.url } });
    return { method: 'POST', url: `/business/channels/${c.id}/send`, body: { to: 'conv-1', message: 'Your order shipped' }, status: 202, action: 'channel.send', targetId: c.id };
  },
  // Analytics.
  'POST /business/analytics/export': async () => ({
    method: 'POST',
    url: '/business/analytics/export',
    body: { timeframe: '7d', dataset: 'conversations', format: 'csv' },
    status: 200,
    action: 'analytics.export',
    targetId: 'conversations',
  }),
  // Evaluations.
  'POST /datasets': async () => ({ method: 'POST', url: '/datasets', body: { name: 'Regressions' }, status: 201, action: 'dataset.create' }),
  'PUT /datasets/{id}': async (f) => {
    const ds = await dataset(f);
    return { method: 'PUT', url: `/datasets/${ds.id}`, body: { description: 'Weekly' }, status: 200, action: 'dataset.update', targetId: ds.id };
  },
  'DELETE /datasets/{id}': async (f) => {
    const ds = await dataset(f);
    return { method: 'DELETE', url: `/datasets/${ds.id}`, status: 204, action: 'dataset.delete', targetId: ds.id };
  },
  'POST /datasets/{id}/cases': async (f) => {
    const ds = await dataset(f);
    return { method: 'POST', url: `/datasets/${ds.id}/cases`, body: { input: 'How long do refunds take?', mustContain: ['days'] }, status: 201, action: 'dataset_case.create' };
  },
  'DELETE /datasets/{id}/cases/{caseId}': async (f) => {
    const ds = await dataset(f, [{ input: 'Hi?', mustContain: ['hi'] }]);
    const cases = await ok(f.t.request({ method: 'GET', url: `/datasets/${ds.id}/cases` }), 200);
    const caseId = cases.data[0].id as string;
    return { method: 'DELETE', url: `/datasets/${ds.id}/cases/${caseId}`, status: 204, action: 'dataset_case.delete', targetId: caseId };
  },
  'POST /datasets/{id}/cases/from-session': async (f) => {
    const ds = await dataset(f);
    const sessionId = await session(f, (await createPersona(f.t)).id);
    return { method: 'POST', url: `/datasets/${ds.id}/cases/from-session`, body: { sessionId, mustContain: ['x'] }, status: 201, action: 'dataset_case.create' };
  },
  'POST /datasets/{id}/import': async (f) => {
    const ds = await dataset(f);
    const content = `${JSON.stringify({ input: 'Where?', mustContain: ['here'] })}\n`;
    return { method: 'POST', url: `/datasets/${ds.id}/import`, body: { format: 'jsonl', content }, status: 200, action: 'dataset.import', targetId: ds.id };
  },
  'POST /evaluations/runs': async (f) => {
    const ds = await dataset(f, [{ input: 'Hi?', mustContain: ['hi'] }]);
    const p = await createPersona(f.t);
    return { method: 'POST', url: '/evaluations/runs', body: { datasetId: ds.id, personaId: p.id, judge: false }, status: 201, action: 'eval_run.create' };
  },
  'POST /evaluations/runs/{id}/cancel': async (f) => {
    // A queued run another (live) instance holds: it stays queued until cancelled, whatever the timing.
    const ds = await dataset(f, [{ input: 'Hi?', mustContain: ['hi'] }]);
    const p = await createPersona(f.t);
    const workspaceId = (await f.t.ctx.services.auth.authenticate(f.t.adminKey))!.workspaceId;
    const id = `evr_cancel${Math.random().toString(36).slice(2, 10)}`;
    const now = f.t.ctx.clock.now();
    await f.t.ctx.db.kysely
      .insertInto('eval_runs')
      .values({
        id,
        workspace_id: workspaceId,
        dataset_id: ds.id,
        persona_id: p.id,
        persona_version: 1,
        status: 'queued',
        total: 1,
        done: 0,
        concurrency: 1,
        judge: 0,
        summary: null,
        error: null,
        created_by: null,
        created_at: now.toISOString(),
        started_at: null,
        finished_at: null,
        lease_owner: 'another-instance',
        lease_until: new Date(now.getTime() + 3_600_000).toISOString(),
        attempts: 1,
      })
      .execute();
    return { method: 'POST', url: `/evaluations/runs/${id}/cancel`, status: 200, action: 'eval_run.cancel', targetId: id };
  },
  // Knowledge.
  'POST /knowledge': async () => ({ method: 'POST', url: '/knowledge', body: { kind: 'text', name: 'Refunds', content: 'Refunds take five days.' }, status: 202, action: 'knowledge.create' }),
  'PUT /knowledge/{id}': async ({ t }) => {
    const s = await ok(t.request({ method: 'POST', url: '/knowledge', body: { kind: 'text', name: 'Refunds', content: 'Refunds take five days.' } }), 202);
    return { method: 'PUT', url: `/knowledge/${s.id}`, body: { name: 'Refund policy' }, status: 202, action: 'knowledge.update', targetId: s.id };
  },
  'DELETE /knowledge/{id}': async ({ t }) => {
    const s = await ok(t.request({ method: 'POST', url: '/knowledge', body: { kind: 'text', name: 'Refunds', content: 'Refunds take five days.' } }), 202);
    return { method: 'DELETE', url: `/knowledge/${s.id}`, status: 204, action: 'knowledge.delete', targetId: s.id };
  },
  // Sessions.
  'DELETE /sessions/{id}': async (f) => {
    const id = await session(f, (await createPersona(f.t)).id);
    return { method: 'DELETE', url: `/sessions/${id}`, status: 204, action: 'session.delete', targetId: id };
  },
  'POST /sessions/{id}/feedback': async (f) => {
    const id = await session(f, (await createPersona(f.t)).id);
    return { method: 'POST', url: `/sessions/${id}/feedback`, body: { rating: 4 }, status: 201, action: 'session.feedback', targetId: id };
  },
  // Tool servers.
  'POST /api/mcp/servers': async (f) => ({ method: 'POST', url: '/api/mcp/servers', body: { name: 'notes_a', transport: 'http', url: f.oauthServer.url }, status: 201, action: 'tool_server.create' }),
  'PUT /api/mcp/servers/{id}/credentials': async (f) => {
    const s = await toolServer(f, 'notes_b');
    return { method: 'PUT', url: `/api/mcp/servers/${s.id}/credentials`, body: { credentials: { API_TOKEN: 'sk-never-in-the-log' } }, status: 200, action: 'tool_server.credentials', targetId: s.id };
  },
  'DELETE /api/mcp/servers/{id}': async (f) => {
    const s = await toolServer(f, 'notes_c');
    return { method: 'DELETE', url: `/api/mcp/servers/${s.id}`, status: 204, action: 'tool_server.delete', targetId: s.id };
  },
  'POST /api/mcp/servers/{id}/oauth/authorize': async (f) => {
    const s = await toolServer(f, 'notes_d');
    return { method: 'POST', url: `/api/mcp/servers/${s.id}/oauth/authorize`, status: 200, action: 'tool_server.signin', targetId: s.id };
  },
  'DELETE /api/mcp/servers/{id}/oauth': async (f) => {
    const s = await toolServer(f, 'notes_e');
    // Signed in first (the browser's consent and the callback), so there is something to sign out of.
    const { authorizationUrl } = await ok(f.t.request({ method: 'POST', url: `/api/mcp/servers/${s.id}/oauth/authorize` }), 200);
    const back = await fetch(await f.oauthServer.consent(authorizationUrl), { redirect: 'manual' });
    expect(back.status).toBe(303);
    return { method: 'DELETE', url: `/api/mcp/servers/${s.id}/oauth`, status: 200, action: 'tool_server.signout', targetId: s.id };
  },
  'POST /api/mcp/tools/execute': async () => ({
    method: 'POST',
    url: '/api/mcp/tools/execute',
    body: { toolName: 'knowledge', action: 'search', parameters: { query: 'refunds' } },
    status: 200,
    action: 'tool.execute',
    targetId: 'knowledge',
  }),
  // Keys (docs/people.md "Keys of people").
  'POST /auth/api-keys': async () => ({ method: 'POST', url: '/auth/api-keys', body: { name: 'ci', scopes: ['read'] }, status: 201, action: 'key.create' }),
  'PUT /auth/api-keys/{id}': async (f) => {
    const k = await apiKey(f);
    return { method: 'PUT', url: `/auth/api-keys/${k.id}`, body: {}, status: 200, action: 'key.rotate', targetId: k.id };
  },
  'DELETE /auth/api-keys/{id}': async (f) => {
    // A person revoking their own key: the actor is the person.
    const p = await person(f, 'editor');
    const k = await apiKey(f, { name: 'mine' }, p);
    return { method: 'DELETE', url: `/auth/api-keys/${k.id}`, ...asPerson(p), status: 204, action: 'key.revoke', targetId: k.id, actor: personActor(p) };
  },
  // Sign-in and sessions (docs/people.md).
  'POST /auth/sessions': async (f) => {
    const p = await person(f);
    return { method: 'POST', url: '/auth/sessions', as: null, body: { email: p.email, password: PERSON_PASSWORD }, status: 201, action: 'session.signin', actor: personActor(p) };
  },
  'POST /auth/setup': async (f) => {
    // The first owner: only while nobody has an account, so in an app of its own.
    const app = await createTestApp({ backend: f.backend });
    const link = await app.ctx.services.signIn.setup.newLink();
    expect(link).not.toBeNull();
    return {
      app,
      method: 'POST',
      url: '/auth/setup',
      as: null,
      body: { token: link!.token, email: 'owner@example.com', name: 'Olga', password: 'a long enough password' },
      status: 201,
      action: 'member.setup',
      actor: { type: 'user', id: (res) => res.json().user.id },
    };
  },
  'DELETE /auth/sessions/current': async (f) => {
    const p = await person(f);
    return { method: 'DELETE', url: '/auth/sessions/current', ...asPerson(p), status: 204, action: 'session.signout', actor: personActor(p) };
  },
  'DELETE /auth/sessions/{id}': async (f) => {
    const p = await person(f);
    await ok(f.t.request({ method: 'POST', url: '/auth/sessions', as: null, body: { email: p.email, password: PERSON_PASSWORD } }), 201);
    const mine = await ok(f.t.request({ method: 'GET', url: '/auth/sessions', as: null, headers: { cookie: p.cookie } }), 200);
    const other = (mine.data as { id: string; current: boolean }[]).find((s) => !s.current)!;
    return { method: 'DELETE', url: `/auth/sessions/${other.id}`, ...asPerson(p), status: 204, action: 'session.signout', targetId: other.id, actor: personActor(p) };
  },
  'DELETE /auth/sessions': async (f) => {
    // Signed in twice: both end, one event (one workspace), with no single session as its target.
    const p = await person(f);
    await ok(f.t.request({ method: 'POST', url: '/auth/sessions', as: null, body: { email: p.email, password: PERSON_PASSWORD } }), 201);
    return { method: 'DELETE', url: '/auth/sessions', ...asPerson(p), status: 204, action: 'session.signout', targetId: null, actor: personActor(p) };
  },
  // Members and invitations (docs/people.md "Members and invitations").
  'POST /members/invitations': async () => ({ method: 'POST', url: '/members/invitations', body: { email: 'invited@example.com', role: 'viewer' }, status: 201, action: 'member.invite' }),
  'DELETE /members/invitations/{id}': async (f) => {
    const inv = await ok(f.t.request({ method: 'POST', url: '/members/invitations', body: { email: 'revoked@example.com', role: 'viewer' } }), 201);
    return { method: 'DELETE', url: `/members/invitations/${inv.invitation.id}`, status: 204, action: 'invitation.revoke', targetId: inv.invitation.id };
  },
  'POST /auth/invitations/accept': async (f) => {
    const inv = await ok(f.t.request({ method: 'POST', url: '/members/invitations', body: { email: 'joiner@example.com', role: 'editor' } }), 201);
    const token = new URL(inv.url).hash.slice(1);
    return {
      method: 'POST',
      url: '/auth/invitations/accept',
      as: null,
      body: { token, name: 'Joiner', password: PERSON_PASSWORD },
      status: 201,
      action: 'member.join',
      actor: { type: 'user', id: (res) => res.json().user.id },
    };
  },
  'PUT /members/{userId}': async (f) => {
    // A role drop that revokes a key above the new role: still one event, naming the keys it ended.
    const p = await person(f, 'editor');
    await apiKey(f, { name: 'writer', scopes: ['read', 'write'] }, p);
    return { method: 'PUT', url: `/members/${p.userId}`, body: { role: 'viewer' }, status: 200, action: 'member.role', targetId: p.userId, changes: ['role', 'keys'] };
  },
  'DELETE /members/{userId}': async (f) => {
    // Their session and key end with the membership: one event naming them.
    const p = await person(f, 'editor');
    await apiKey(f, { name: 'theirs' }, p);
    return { method: 'DELETE', url: `/members/${p.userId}`, status: 204, action: 'member.remove', targetId: p.userId, changes: ['sessions', 'keys'] };
  },
  // OAuth grants of MCP clients: a person's consent, an admin's revocation.
  'POST /oauth/authorize/consent': async (f) => {
    const form = await consentForm(f);
    const body = new URLSearchParams({ request_id: form.requestId, csrf_token: form.csrf, api_key: f.t.adminKey, scope: 'read write', decision: 'allow' }).toString();
    // The key pasted into the form is the actor (no Authorization header: the form is public).
    return { method: 'POST', url: '/oauth/authorize/consent', as: null, body, headers: { 'content-type': 'application/x-www-form-urlencoded', cookie: form.cookie }, status: 303, action: 'oauth_grant.create' };
  },
  'DELETE /auth/oauth/grants/{id}': async (f) => {
    const provider = await authorize(f.base, f.t.adminKey, { provider: new TestOAuthProvider({ clientName: `Assistant ${++people}` }) });
    const clientId = provider.client!.client_id;
    const grant = await f.t.ctx.db.kysely.selectFrom('oauth_grants').select('id').where('client_id', '=', clientId).where('revoked_at', 'is', null).executeTakeFirstOrThrow();
    return { method: 'DELETE', url: `/auth/oauth/grants/${grant.id}`, status: 204, action: 'oauth_grant.revoke', targetId: grant.id };
  },
  // Teams (docs/people.md "Teams and handoffs").
  'POST /business/teams': async (f) => {
    const p = await person(f);
    return { method: 'POST', url: '/business/teams', body: { name: 'Billing', members: [p.userId] }, status: 201, action: 'team.create' };
  },
  'PUT /business/teams/{id}/availability': async (f) => {
    const team = await createTeam(f.t, { name: 'Away team', members: [(await person(f)).userId] });
    return { method: 'PUT', url: `/business/teams/${team.id}/availability`, body: { status: 'busy' }, status: 200, action: 'team.availability', targetId: team.id };
  },
  'PUT /business/teams/{id}/handoff': async (f) => {
    const team = await createTeam(f.t, { name: 'Slow team', members: [(await person(f)).userId] });
    return { method: 'PUT', url: `/business/teams/${team.id}/handoff`, body: { offerSeconds: 60 }, status: 200, action: 'team.update', targetId: team.id, changes: ['handoff.offerSeconds'] };
  },
  'POST /business/teams/{id}/members': async (f) => {
    const team = await createTeam(f.t, { name: 'Growing team', members: [(await person(f)).userId] });
    const p = await person(f);
    return { method: 'POST', url: `/business/teams/${team.id}/members`, body: { userId: p.userId }, status: 201, action: 'team.member_add', targetId: team.id };
  },
  // Handoffs (docs/handoffs.md "Who acts"): the member acts as themselves, or the admin key names them.
  'POST /sessions/{id}/handoff': async (f) => {
    const team = await createTeam(f.t, { name: 'Open desk', members: [(await person(f)).userId] });
    const persona = await createPersona(f.t, { name: 'Front', teamId: team.id });
    const sessionId = await session(f, persona.id);
    return { method: 'POST', url: `/sessions/${sessionId}/handoff`, body: { reason: 'The user asked for a person.' }, status: 201, action: 'handoff.open' };
  },
  'POST /handoffs/{id}/accept': async (f) => {
    const h = await handoff(f);
    return { method: 'POST', url: `/handoffs/${h.id}/accept`, body: {}, ...asPerson(h.member), status: 200, action: 'handoff.accept', targetId: h.id, actor: personActor(h.member) };
  },
  'POST /handoffs/{id}/messages': async (f) => {
    const h = await handoff(f);
    await ok(f.t.request({ method: 'POST', url: `/handoffs/${h.id}/accept`, body: {}, ...asPerson(h.member) }), 200);
    return { method: 'POST', url: `/handoffs/${h.id}/messages`, body: { text: 'sk-never-in-the-log' }, ...asPerson(h.member), status: 201, action: 'handoff.reply', targetId: h.id, actor: personActor(h.member) };
  },
  'POST /handoffs/{id}/return': async (f) => {
    // The admin key names the member who accepted: the key acts, on their behalf.
    const h = await handoff(f);
    await ok(f.t.request({ method: 'POST', url: `/handoffs/${h.id}/accept`, body: { member: h.member.email } }), 200);
    return { method: 'POST', url: `/handoffs/${h.id}/return`, body: { member: h.member.email }, status: 200, action: 'handoff.return', targetId: h.id, onBehalfOf: h.member.email };
  },
  'POST /handoffs/{id}/resolve': async (f) => {
    const h = await handoff(f);
    await ok(f.t.request({ method: 'POST', url: `/handoffs/${h.id}/accept`, body: {}, ...asPerson(h.member) }), 200);
    return { method: 'POST', url: `/handoffs/${h.id}/resolve`, body: {}, ...asPerson(h.member), status: 200, action: 'handoff.resolve', targetId: h.id, actor: personActor(h.member) };
  },
};

describe.each(testBackends())('every write operation writes exactly one audit event on $kind', { timeout: 120_000 }, (backend) => {
  let f: Fixtures;
  let operations: string[];

  beforeAll(async () => {
    const t = await createTestApp({ backend, env: { HOST: '127.0.0.1' }, overrides: { fetch: LOOPBACK_ONLY } });
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    const base = `http://127.0.0.1:${(t.app.server.address() as { port: number }).port}`;
    f = { t, backend, base, receiver: await startReceiver(0), oauthServer: await startOAuthToolServer() };
    const doc = (await t.request({ method: 'GET', url: '/openapi.json', as: null })).json() as { paths: Record<string, Record<string, unknown>> };
    operations = Object.entries(doc.paths).flatMap(([p, ops]) => Object.keys(ops).filter((m) => WRITE_METHODS.includes(m)).map((m) => `${m.toUpperCase()} ${p}`));
  });
  afterAll(async () => {
    await f?.t.close();
    await f?.receiver.close();
    await f?.oauthServer.close();
  });

  it('finds the write operations, and every one is either performed or excluded with a reason', () => {
    expect(operations.length).toBeGreaterThan(40);
    const unknown = operations.filter((op) => !(op in BUILDERS) && !(op in EXCLUDED));
    expect(unknown, 'write operations with neither a request builder nor an exclusion').toEqual([]);
    const gone = [...Object.keys(BUILDERS), ...Object.keys(EXCLUDED)].filter((op) => !operations.includes(op));
    expect(gone, 'entries naming operations the document no longer has').toEqual([]);
    const both = Object.keys(BUILDERS).filter((op) => op in EXCLUDED);
    expect(both).toEqual([]);
  });

  it('performs each one and finds exactly one new event with its action, the caller and the request', async () => {
    const adminKeyId = (await f.t.ctx.services.auth.authenticate(f.t.adminKey))!.id;
    const missed: string[] = [];
    for (const op of operations.filter((o) => o in BUILDERS)) {
      const performed = await BUILDERS[op]!(f);
      const app = performed.app ?? f.t;
      try {
        const events = () => app.ctx.db.kysely.selectFrom('audit_events').selectAll().execute();
        const before = new Set((await events()).map((e) => e.id));
        const res = await app.request({
          method: performed.method,
          url: performed.url,
          ...(performed.body !== undefined ? { body: performed.body } : {}),
          ...(performed.as !== undefined ? { as: performed.as } : {}),
          headers: { ...performed.headers, 'user-agent': 'audit-coverage' },
        });
        expect(res.statusCode, `${op}: ${res.body}`).toBe(performed.status);
        const added = (await events()).filter((e) => !before.has(e.id));
        if (added.length !== 1 || added[0]!.action !== performed.action) {
          missed.push(`${op}: expected one ${performed.action}, got [${added.map((e) => e.action).join(', ')}]`);
          continue;
        }
        const event = added[0]!;
        const actor = performed.actor ?? { type: 'key', id: adminKeyId };
        const actorId = typeof actor.id === 'function' ? actor.id(res) : actor.id;
        expect(event, op).toMatchObject({ actor_type: actor.type, actor_id: actorId, outcome: 'success', request_id: res.headers['x-request-id'], user_agent: 'audit-coverage' });
        expect(event.on_behalf_of, op).toBe(performed.onBehalfOf ?? null);
        if (performed.targetId !== undefined) expect(event.target_id, op).toBe(performed.targetId);
        else expect(event.target_id, op).toMatch(/^[a-z]+_/);
        if (performed.changes !== undefined) expect(event.changes === null ? [] : JSON.parse(event.changes), op).toEqual(performed.changes);
        // Never a secret or message text: the credentials' values and a reply's text stay out of every column.
        expect(JSON.stringify(event), op).not.toContain('sk-never-in-the-log');
      } finally {
        await performed.app?.close();
      }
    }
    expect(missed).toEqual([]);
  });
});
