// API.md §14 over MCP (issue 41 item 9): members, invitations and the audit log as tools, with the
// HTTP routes' rules (admin and up; only an owner touches owners; the last owner stays), the agent
// role for asking and working handoffs, and /mcp refusing a person's sign-in cookie. Through the
// SDK's own client over /mcp on a listening server, with keys of people; on both backends.
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { Client as SdkClient } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { createPersona, invitePerson, PERSON_PASSWORD } from '../helpers/factories.js';
import { callError, callOk, connectInMemory } from '../helpers/mcp.js';
import { authorize } from '../helpers/oauth.js';
import { testBackends } from '../helpers/postgres.js';
import { expectProblem } from '../helpers/problem.js';
import { listen } from './chat-helpers.js';

const MCP_HEADERS = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };

describe.each(testBackends())('members, invitations, audit and the agent role over MCP on $kind', { timeout: 20_000 }, (backend) => {
  let t: TestApp;
  let origin: string;
  const clients: Client[] = [];

  beforeAll(async () => {
    t = await createTestApp({ backend });
    origin = await listen(t);
  });
  afterAll(async () => {
    for (const c of clients) await c.close();
    await t?.close();
  });

  type Person = Awaited<ReturnType<typeof invitePerson>>;
  /** A key of `p`'s own, made signed in (cookie and CSRF token) as the console does. */
  const keyOf = async (p: Person, scopes: string[]) => {
    const res = await t.request({ method: 'POST', url: '/auth/api-keys', as: null, headers: { cookie: p.cookie, 'x-csrf-token': p.csrfToken }, body: { name: 'mcp', scopes } });
    expect(res.statusCode, res.body).toBe(201);
    return res.json() as { id: string; key: string };
  };
  const connect = async (key: string) => {
    const client = new SdkClient({ name: 'people-test', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL('/mcp', origin), { requestInit: { headers: { authorization: `Bearer ${key}` } } }));
    clients.push(client);
    return client;
  };
  /** A raw tools/call: a refusal is answered before any session is looked at. */
  const rawCall = (key: string, name: string, args: Record<string, unknown> = {}) =>
    t.request({ method: 'POST', url: '/mcp', as: key, headers: MCP_HEADERS, body: { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name, arguments: args } } });
  const tokenOf = (url: string) => url.slice(url.indexOf('#') + 1);
  const accept = (token: string, name = 'New person') => t.request({ method: 'POST', url: '/auth/invitations/accept', as: null, body: { token, name, password: PERSON_PASSWORD } });

  it("an admin's key invites, lists, changes a role, revokes and removes as over HTTP, each change audited once", async () => {
    const admin = await invitePerson(t, { email: 'admin@example.com', role: 'admin' });
    const adminKey = await keyOf(admin, ['read', 'write', 'admin']);
    const client = await connect(adminKey.key);

    const invited = await callOk(client, 'invite_member', { email: 'newcomer@example.com', role: 'editor' });
    expect(invited.invitation).toEqual({ id: expect.stringMatching(/^inv_/), email: 'newcomer@example.com', role: 'editor', expiresAt: expect.any(String) });
    // The link the HTTP route gives: the public base (here the listen address), used once.
    expect(invited.url).toMatch(new RegExp(`^${origin}/console/invite#sbi_[0-9A-Za-z]{43}$`));
    expect(invited.note).toBeUndefined();
    const pending = await callOk(client, 'list_invitations', { limit: 100 });
    expect(pending).toEqual((await t.request({ method: 'GET', url: '/members/invitations?limit=100' })).json());
    expect(pending.data.map((i: { id: string }) => i.id)).toContain(invited.invitation.id);
    expect(JSON.stringify(pending)).not.toContain(tokenOf(invited.url));

    const joined = await accept(tokenOf(invited.url));
    expect(joined.statusCode, joined.body).toBe(201);
    const newcomer = joined.json().user.id as string;
    const cookie = /^(sb_session=[^;]+)/.exec(String(joined.headers['set-cookie']))![1]!;
    expect(await callOk(client, 'list_members', { limit: 100 })).toEqual((await t.request({ method: 'GET', url: '/members?limit=100' })).json());

    const changed = await callOk(client, 'change_member_role', { userId: newcomer, role: 'agent' });
    expect(changed).toMatchObject({ userId: newcomer, email: 'newcomer@example.com', role: 'agent' });
    expect((await t.request({ method: 'GET', url: '/members?limit=100' })).json().data.find((m: { userId: string }) => m.userId === newcomer).role).toBe('agent');
    // The audit log through its tool: the same page as GET /audit with the same filters; the actor is the admin's key.
    const roleEvents = await callOk(client, 'list_audit_events', { action: 'member.role', targetId: newcomer });
    expect(roleEvents).toEqual((await t.request({ method: 'GET', url: `/audit?action=member.role&targetId=${newcomer}` })).json());
    expect(roleEvents.data).toEqual([expect.objectContaining({ actor: { type: 'key', id: adminKey.id, name: 'mcp' }, target: { type: 'member', id: newcomer }, changes: ['role'] })]);
    expect(await callError(client, 'list_audit_events', { since: 'yesterday' })).toMatch(/^Validation failed: .*since/);

    const second = await callOk(client, 'invite_member', { email: 'second@example.com', role: 'viewer' });
    expect(await callOk(client, 'revoke_invitation', { id: second.invitation.id })).toEqual({ id: second.invitation.id, revoked: true });
    expectProblem(await accept(tokenOf(second.url)), 410, 'gone');
    expect(await callError(client, 'revoke_invitation', { id: second.invitation.id })).toMatch(/^Conflict: /);
    expect(await callError(client, 'revoke_invitation', { id: 'inv_missing' })).toMatch(/^Not found: /);

    expect((await t.request({ method: 'GET', url: '/auth/me', as: null, headers: { cookie } })).statusCode).toBe(200);
    expect(await callOk(client, 'remove_member', { userId: newcomer })).toEqual({ userId: newcomer, removed: true });
    expect((await t.request({ method: 'GET', url: '/auth/me', as: null, headers: { cookie } })).statusCode).toBe(401);
    expect(await callError(client, 'remove_member', { userId: newcomer })).toMatch(/^Not found: /);

    const mine = await callOk(client, 'list_audit_events', { actor: adminKey.id, limit: 100 });
    expect(mine.data.map((e: { action: string }) => e.action).sort()).toEqual(['invitation.revoke', 'member.invite', 'member.invite', 'member.remove', 'member.role']);
  });

  it('an admin may not touch owners: inviting, promoting to, demoting or removing an owner is forbidden, and nothing changes', async () => {
    const owner = await invitePerson(t, { email: 'owner@example.com', role: 'owner' });
    const admin = await invitePerson(t, { email: 'admin2@example.com', role: 'admin' });
    const viewer = await invitePerson(t, { email: 'viewer2@example.com', role: 'viewer' });
    const client = await connect((await keyOf(admin, ['read', 'write', 'admin'])).key);
    const before = (await t.request({ method: 'GET', url: '/members?limit=100' })).json();
    expect(await callError(client, 'invite_member', { email: 'boss@example.com', role: 'owner' })).toMatch(/^Forbidden: Only an owner may invite an owner/);
    expect(await callError(client, 'change_member_role', { userId: viewer.userId, role: 'owner' })).toMatch(/^Forbidden: Only an owner/);
    expect(await callError(client, 'change_member_role', { userId: owner.userId, role: 'viewer' })).toMatch(/^Forbidden: Only an owner/);
    expect(await callError(client, 'remove_member', { userId: owner.userId })).toMatch(/^Forbidden: Only an owner/);
    expect((await t.request({ method: 'GET', url: '/members?limit=100' })).json()).toEqual(before);
    // An owner may.
    const ownerClient = await connect((await keyOf(owner, ['read', 'write', 'admin'])).key);
    expect((await callOk(ownerClient, 'change_member_role', { userId: viewer.userId, role: 'owner' })).role).toBe('owner');
    expect((await callOk(ownerClient, 'change_member_role', { userId: viewer.userId, role: 'viewer' })).role).toBe('viewer');
  });

  it('keeps the last owner: demoting or removing them is a conflict, for them and for the installation key', async () => {
    const solo = await t.ctx.services.auth.createWorkspace('solo');
    const owner = await invitePerson(t, { email: 'solo-owner@example.com', role: 'owner' }, solo.key.key);
    const own = await connect((await keyOf(owner, ['read', 'write', 'admin'])).key);
    const service = await connect(solo.key.key);
    for (const client of [own, service]) {
      expect(await callError(client, 'change_member_role', { userId: owner.userId, role: 'admin' })).toMatch(/^Conflict: This is the last owner/);
      expect(await callError(client, 'remove_member', { userId: owner.userId })).toMatch(/^Conflict: This is the last owner/);
    }
    expect((await callOk(service, 'list_members')).data).toEqual([expect.objectContaining({ userId: owner.userId, role: 'owner' })]);
    expect((await callOk(service, 'list_audit_events', { targetId: owner.userId })).data.map((e: { action: string }) => e.action)).toEqual(['member.join']);
  });

  it("refuses an editor's key the members and audit tools: 403 naming the admin role before the tool runs, an isError result inside the server", async () => {
    const editor = await invitePerson(t, { email: 'editor@example.com', role: 'editor' });
    const key = await keyOf(editor, ['read', 'write']);
    for (const name of ['list_members', 'change_member_role', 'remove_member', 'invite_member', 'list_invitations', 'revoke_invitation', 'list_audit_events']) {
      const res = await rawCall(key.key, name, { userId: editor.userId, role: 'owner', email: 'x@example.com', id: 'inv_x' });
      expect(expectProblem(res, 403, 'forbidden').detail).toBe(`${name} needs the "admin" role.`);
      expect(res.headers['www-authenticate']).toBe('Bearer realm="switchboard", error="insufficient_scope", scope="admin"');
    }
    // Inside the server (stdio, or a session opened before the role dropped): the tool's own check.
    const inMemory = await connectInMemory(t, key.key);
    clients.push(inMemory);
    expect(await callError(inMemory, 'change_member_role', { userId: editor.userId, role: 'admin' })).toBe('Forbidden: change_member_role needs the "admin" role.');
    expect((await t.request({ method: 'GET', url: '/members?limit=100' })).json().data.find((m: { userId: string }) => m.userId === editor.userId).role).toBe('editor');
    const denied = await t.ctx.db.kysely.selectFrom('audit_events').selectAll().where('action', '=', 'request.denied').where('actor_id', '=', key.id).execute();
    expect(denied.map((e) => `${e.target_type}:${e.target_id}`)).toContain('mcp_tool:change_member_role');
    expect(denied.map((e) => `${e.target_type}:${e.target_id}`)).toContain('mcp_tool:list_audit_events');
  });

  it('asking a persona and working a handoff need the agent role: a read key is refused (the challenge names "write"), a write key and an agent may', async () => {
    const persona = await createPersona(t, { name: 'Asked' });
    const { key: reader } = await t.ctx.services.auth.createKeyInWorkspace('default', 'reader', ['read']);
    for (const name of ['ask_persona', 'accept_handoff', 'reply_to_handoff', 'return_handoff']) {
      const res = await rawCall(reader.key, name, { personaId: persona.id, message: 'Hello?', id: 'hnd_x', text: 'x' });
      expect(expectProblem(res, 403, 'forbidden').detail).toBe(`${name} needs the "agent" role.`);
      // A client asks for scopes, not roles: the lowest scope that includes the agent role.
      expect(res.headers['www-authenticate']).toBe('Bearer realm="switchboard", error="insufficient_scope", scope="write"');
    }
    const { key: writer } = await t.ctx.services.auth.createKeyInWorkspace('default', 'writer', ['read', 'write']);
    const writing = await connect(writer.key);
    expect((await callOk(writing, 'ask_persona', { personaId: persona.id, message: 'Hello?' })).sessionId).toMatch(/^ses_/);
    // Past the role check: the handoff is looked for (and not found).
    expect(await callError(writing as never, 'accept_handoff', { id: 'hnd_missing', member: 'admin@example.com' })).toMatch(/^Not found: /);

    // An agent's key holds `write` but is capped by the agent role: it asks, it does not edit.
    const agent = await invitePerson(t, { email: 'agent@example.com', role: 'agent' });
    const agentKey = await keyOf(agent, ['read', 'write']);
    const asking = await connect(agentKey.key);
    expect((await callOk(asking, 'ask_persona', { personaId: persona.id, message: 'Hello again?' })).response).toEqual(expect.any(String));
    const edit = await rawCall(agentKey.key, 'create_persona', { name: 'No', instructions: 'x' });
    expect(expectProblem(edit, 403, 'forbidden').detail).toBe('create_persona needs the "write" scope.');
    expect(edit.headers['www-authenticate']).toContain('scope="write"');

    // Its OAuth grant (the scopes `read write`, on the agent's key) is the agent too.
    const token = (await authorize(origin, agentKey.key, { scope: 'read write' })).saved!.access_token;
    const viaOAuth = await connect(token);
    expect((await callOk(viaOAuth, 'ask_persona', { personaId: persona.id, message: 'And over OAuth?' })).sessionId).toMatch(/^ses_/);
    expectProblem(await rawCall(token, 'create_persona', { name: 'No', instructions: 'x' }), 403, 'forbidden');
  });

  it("does not take a person's sign-in cookie on /mcp: 401 with the OAuth challenge, as with no credential", async () => {
    const person = await invitePerson(t, { email: 'browser@example.com', role: 'owner' });
    const headers = { cookie: person.cookie, 'x-csrf-token': person.csrfToken };
    expect((await t.request({ method: 'GET', url: '/auth/me', as: null, headers })).statusCode).toBe(200);
    const init = {
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'browser', version: '1' } },
    };
    for (const res of [
      await t.request({ method: 'POST', url: '/mcp', as: null, headers: { ...MCP_HEADERS, ...headers }, body: init }),
      await t.request({ method: 'POST', url: '/mcp', as: null, headers: { ...MCP_HEADERS, ...headers }, body: { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'list_members', arguments: {} } } }),
      await t.request({ method: 'GET', url: '/mcp', as: null, headers: { ...headers, accept: 'text/event-stream' } }),
    ]) {
      expect(expectProblem(res, 401, 'unauthorized').detail).toMatch(/^A valid API key is required/);
      expect(res.headers['www-authenticate']).toContain('resource_metadata=');
    }
  });

  it('over stdio without SWITCHBOARD_PUBLIC_URL (nothing listens), invite_member answers the path and says the link needs the address', async () => {
    // connectInMemory serves as stdio does: no listen address is handed to the tools.
    const client = await connectInMemory(t);
    clients.push(client);
    const invited = await callOk(client, 'invite_member', { email: 'stdio@example.com', role: 'viewer' });
    expect(invited.url).toMatch(/^\/console\/invite#sbi_[0-9A-Za-z]{43}$/);
    expect(invited.note).toContain('SWITCHBOARD_PUBLIC_URL');
    expect((await accept(tokenOf(invited.url), 'Stdio')).statusCode).toBe(201);
  });
});
