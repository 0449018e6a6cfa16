// API.md §10 through the SDK's own Client over InMemoryTransport: every tool of the features that
// exist, resources with completion, personas as prompts, and refusals that read like the HTTP API's.
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { testBackends } from '../helpers/postgres.js';
import { startReceiver, type WebhookReceiver } from '../fakes/webhook-receiver.js';
import { databaseSnapshot } from '../helpers/db-snapshot.js';
import { addSource, createAbTest, createChannel, createPersona, createTeam, invitePerson } from '../helpers/factories.js';
import { callError, callOk, connectInMemory } from '../helpers/mcp.js';
import { LOOPBACK_ONLY } from '../helpers/mcp-tools.js';
import { OFFLINE_ANSWER, REFUND_TEXT, seedSupport } from './chat-helpers.js';

const TOOLS = [
  'accept_handoff',
  'add_knowledge',
  'ask_persona',
  'change_member_role',
  'compare_runs',
  'create_ab_test',
  'create_persona',
  'delete_knowledge',
  'delete_persona',
  'get_ab_test_results',
  'get_analytics',
  'get_evaluation_run',
  'get_handoff',
  'get_persona',
  'get_session',
  'invite_member',
  'list_audit_events',
  'list_channels',
  'list_datasets',
  'list_handoffs',
  'list_invitations',
  'list_knowledge',
  'list_members',
  'list_persona_versions',
  'list_personas',
  'list_sessions',
  'list_teams',
  'promote_ab_test',
  'remove_member',
  'reply_to_handoff',
  'restore_persona_version',
  'return_handoff',
  'revoke_invitation',
  'run_evaluation',
  'search_knowledge',
  'send_channel_message',
  'start_ab_test',
  'stop_ab_test',
  'update_persona',
];

describe.each(testBackends())('MCP server (in memory) on $kind', (backend) => {
  let t: TestApp;
  let client: Client;

  beforeAll(async () => {
    t = await createTestApp({ backend });
    client = await connectInMemory(t);
  });
  afterAll(async () => {
    await client?.close();
    await t?.close();
  });

  it('lists every tool with a description, annotations, and input and output schemas', async () => {
    const { tools } = await client.listTools();
    expect(tools.map((x) => x.name).sort()).toEqual(TOOLS);
    for (const tool of tools) {
      expect(tool.description!.length, tool.name).toBeGreaterThan(40);
      expect(tool.inputSchema.type, tool.name).toBe('object');
      expect(tool.outputSchema?.type, tool.name).toBe('object');
      expect(typeof tool.annotations?.readOnlyHint, tool.name).toBe('boolean');
      expect(typeof tool.annotations?.destructiveHint, tool.name).toBe('boolean');
      expect(typeof tool.annotations?.idempotentHint, tool.name).toBe('boolean');
      // The SDK client checks results with Ajv's draft-07 dialect: a 2020-12 tuple (`prefixItems`
      // beside `items: false`) there refuses every element, so the tool fails in every such client.
      expect(JSON.stringify([tool.inputSchema, tool.outputSchema]), tool.name).not.toContain('prefixItems');
    }
    const byName = Object.fromEntries(tools.map((x) => [x.name, x]));
    expect(byName.list_personas!.annotations).toMatchObject({ readOnlyHint: true, destructiveHint: false });
    expect(byName.delete_persona!.annotations).toMatchObject({ readOnlyHint: false, destructiveHint: true });
    expect(byName.create_persona!.inputSchema.required).toEqual(['name', 'instructions']);
    expect(client.getServerCapabilities()).toMatchObject({ tools: {}, resources: {}, prompts: {} });
    expect(client.getInstructions()).toContain('ask_persona');
  });

  it('creates, reads, updates, lists and deletes personas as the HTTP API does', async () => {
    const created = await callOk(client, 'create_persona', { name: 'Mira', instructions: 'Be kind.', traits: ['warm'] });
    expect(created).toMatchObject({ name: 'Mira', instructions: 'Be kind.', traits: ['warm'], tools: [], model: null });
    expect(created.id).toMatch(/^per_/);
    const http = await t.request({ method: 'GET', url: `/personas/${created.id}` });
    expect(http.json()).toEqual(created);

    expect(await callOk(client, 'get_persona', { id: created.id })).toEqual(created);
    const updated = await callOk(client, 'update_persona', { id: created.id, temperature: 0.3, traits: [] });
    expect(updated).toMatchObject({ id: created.id, temperature: 0.3, traits: [], name: 'Mira' });
    const page = await callOk(client, 'list_personas', { q: 'mir' });
    expect(page.data.map((p: { id: string }) => p.id)).toEqual([created.id]);
    expect(page.nextCursor).toBeNull();

    expect(await callOk(client, 'delete_persona', { id: created.id })).toEqual({ id: created.id, deleted: true });
    expect((await t.request({ method: 'GET', url: `/personas/${created.id}` })).statusCode).toBe(404);
  });

  it('pages a list with limit and cursor', async () => {
    for (const name of ['Page one', 'Page two', 'Page three']) await createPersona(t, { name });
    const first = await callOk(client, 'list_personas', { q: 'Page', limit: 2 });
    expect(first.data).toHaveLength(2);
    const second = await callOk(client, 'list_personas', { q: 'Page', limit: 2, cursor: first.nextCursor });
    // Every persona once across the pages. (Which comes last is not asserted: two made in the same
    // millisecond order by their ids' random part, and on a fast machine that happened.)
    const names = [...first.data, ...second.data].map((p: { name: string }) => p.name);
    expect(second.data).toHaveLength(1);
    expect(second.nextCursor ?? null).toBeNull();
    expect(names.sort()).toEqual(['Page one', 'Page three', 'Page two']);
  });

  it('refuses bad arguments with the HTTP API’s field errors, as isError results', async () => {
    const http = await t.request({ method: 'POST', url: '/personas', body: { name: '', instructions: 'x', colour: 'red' } });
    const text = await callError(client, 'create_persona', { name: '', instructions: 'x', colour: 'red' });
    expect(text).toMatch(/^Validation failed: Invalid arguments: /);
    // The same field errors, in the same words, after the "Invalid <where>:" lead.
    expect(text.slice(text.indexOf(': ', 20) + 2)).toBe(http.json().detail.slice(http.json().detail.indexOf(': ') + 2));
    expect(text).toContain('colour: unknown field');
    expect(await callError(client, 'get_persona', { id: 'per_nope' })).toBe('Not found: Persona per_nope not found.');
    expect(await callError(client, 'list_personas', { limit: 500 })).toContain('limit:');
    expect(await callError(client, 'add_knowledge', { kind: 'text', content: 'No name' })).toContain('name:');
  });

  it('answers an unknown tool with a protocol error, not a result', async () => {
    await expect(client.callTool({ name: 'launch_rockets', arguments: {} })).rejects.toThrow(McpError);
  });

  it('adds, lists, searches and deletes knowledge', async () => {
    const source = await callOk(client, 'add_knowledge', { kind: 'markdown', name: 'Shipping', content: '# Shipping\n\nParcels leave the warehouse every Tuesday.', metadata: { team: 'ops' } });
    expect(source).toMatchObject({ name: 'Shipping', kind: 'markdown', status: 'ready', metadata: { team: 'ops' } });
    const listed = await callOk(client, 'list_knowledge', { status: 'ready' });
    expect(listed.data.map((s: { id: string }) => s.id)).toContain(source.id);
    const found = await callOk(client, 'search_knowledge', { query: 'when do parcels leave', filter: { team: 'ops' } });
    expect(found.mode).toBe('hybrid');
    expect(found.data[0]).toMatchObject({ sourceId: source.id, sourceName: 'Shipping' });
    expect(found.data[0].text).toContain('Tuesday');
    expect(await callOk(client, 'delete_knowledge', { id: source.id })).toEqual({ id: source.id, deleted: true });
    expect((await callOk(client, 'search_knowledge', { query: 'parcels Tuesday' })).data).toEqual([]);
  });

  it('refuses a private URL source through the same guard', async () => {
    const text = await callError(client, 'add_knowledge', { kind: 'url', url: 'http://127.0.0.1:9/' });
    expect(text).toContain('url:');
    expect(text).toContain('loopback');
  });

  it('asks a persona, streaming the answer as progress, and continues the session', async () => {
    const personaId = await seedSupport(t);
    const progress: string[] = [];
    const result = await client.callTool(
      { name: 'ask_persona', arguments: { personaId, message: 'How long do refunds take?' } },
      undefined,
      { onprogress: (p) => void progress.push(p.message ?? '') },
    );
    const answer = result.structuredContent as Record<string, any>;
    expect(answer.response).toBe(OFFLINE_ANSWER);
    expect(progress.length).toBeGreaterThan(3);
    expect(progress.join('')).toBe(OFFLINE_ANSWER);
    expect(answer.sources[0]).toMatchObject({ sourceName: 'Refund policy' });
    expect(answer.sessionId).toMatch(/^ses_/);

    const again = await callOk(client, 'ask_persona', { personaId, message: 'And exceptions?', sessionId: answer.sessionId });
    expect(again.sessionId).toBe(answer.sessionId);
    const session = await callOk(client, 'get_session', { id: answer.sessionId });
    expect(session.messages.map((m: { role: string }) => m.role)).toEqual(['user', 'assistant', 'user', 'assistant']);
    expect(session.messages[0].content).toBe('How long do refunds take?');
    const sessions = await callOk(client, 'list_sessions', { personaId });
    expect(sessions.data.map((s: { id: string }) => s.id)).toEqual([answer.sessionId]);
    expect(await callError(client, 'ask_persona', { personaId: 'per_missing', message: 'hi' })).toBe('Not found: Persona per_missing not found.');
  });

  it('runs a tool the persona allows when asked with enableMCPTools', async () => {
    const personaId = await seedSupport(t);
    const answer = await callOk(client, 'ask_persona', { personaId, message: '/tool knowledge.search {"query":"refunds"}', enableMCPTools: true });
    expect(answer.toolCalls).toHaveLength(1);
    expect(answer.toolCalls[0]).toMatchObject({ name: 'knowledge.search', arguments: { query: 'refunds' } });
    expect(JSON.stringify(answer.toolCalls[0].result)).toContain(REFUND_TEXT.slice(0, 20));
  });

  it('serves personas and knowledge sources as resources, with id completion', async () => {
    const persona = await createPersona(t, { name: 'Resourceful' });
    const { resourceTemplates } = await client.listResourceTemplates();
    expect(resourceTemplates.map((r) => r.uriTemplate).sort()).toEqual(['switchboard://ab-tests/{id}/results', 'switchboard://knowledge/{id}', 'switchboard://personas/{id}']);
    const { resources } = await client.listResources();
    expect(resources).toContainEqual(expect.objectContaining({ uri: `switchboard://personas/${persona.id}`, name: 'Resourceful', mimeType: 'application/json' }));
    const read = await client.readResource({ uri: `switchboard://personas/${persona.id}` });
    expect(JSON.parse((read.contents[0] as { text: string }).text)).toEqual(persona);
    await expect(client.readResource({ uri: 'switchboard://personas/per_nope' })).rejects.toThrow(/Persona per_nope not found/);

    const completion = await client.complete({
      ref: { type: 'ref/resource', uri: 'switchboard://personas/{id}' },
      argument: { name: 'id', value: persona.id.slice(0, 8) },
    });
    expect(completion.completion.values).toContain(persona.id);

    const source = await addSource(t, { kind: 'text', name: 'Resource notes', content: 'Returns are free within 30 days.' });
    expect((await client.listResources()).resources).toContainEqual(expect.objectContaining({ uri: `switchboard://knowledge/${source.id}`, name: 'Resource notes', mimeType: 'application/json' }));
    const knowledge = await client.readResource({ uri: `switchboard://knowledge/${source.id}` });
    expect(JSON.parse((knowledge.contents[0] as { text: string }).text)).toEqual((await t.request({ method: 'GET', url: `/knowledge/${source.id}` })).json());
    await expect(client.readResource({ uri: 'switchboard://knowledge/src_nope' })).rejects.toThrow(/src_nope not found/);
    const sources = await client.complete({ ref: { type: 'ref/resource', uri: 'switchboard://knowledge/{id}' }, argument: { name: 'id', value: source.id } });
    expect(sources.completion.values).toEqual([source.id]);
  });

  it('offers each persona as a prompt named by its id and titled by its name', async () => {
    const persona = await createPersona(t, { name: 'Poet', instructions: 'Answer in verse.', traits: ['brief'] });
    const { prompts } = await client.listPrompts();
    expect(prompts).toContainEqual(expect.objectContaining({ name: persona.id, title: 'Poet' }));
    const prompt = await client.getPrompt({ name: persona.id, arguments: { question: 'What is rain?' } });
    expect(prompt.messages).toEqual([
      { role: 'user', content: { type: 'text', text: 'You are Poet.\n\nAnswer in verse.\n\nYour traits: brief.' } },
      { role: 'user', content: { type: 'text', text: 'What is rain?' } },
    ]);
    await expect(client.getPrompt({ name: 'per_nope' })).rejects.toThrow(/Unknown prompt/);
  });
});

describe.each(testBackends())('MCP server scopes and workspaces on $kind', (backend) => {
  let t: TestApp;
  let receiver: WebhookReceiver;

  beforeAll(async () => {
    receiver = await startReceiver();
    t = await createTestApp({ backend, overrides: { fetch: LOOPBACK_ONLY } });
  });
  afterAll(async () => {
    await t?.close();
    await receiver?.close();
  });

  it('lets a read key look but not change anything: every tool that is not read-only refuses it and writes nothing', async () => {
    const persona = await createPersona(t, { name: 'Visible' });
    const other = await createPersona(t, { name: 'Other' });
    const doomed = await createPersona(t, { name: 'Doomed' });
    const source = await addSource(t, { kind: 'text', name: 'Kept', content: 'Parcels leave the warehouse every Tuesday.' });
    const draft = await createAbTest(t, { personaA: persona.id, personaB: other.id });
    const running = await createAbTest(t, { personaA: persona.id, personaB: other.id });
    expect((await t.request({ method: 'PUT', url: `/business/ab-tests/${running.id}/start` })).statusCode).toBe(200);
    const dataset = (await t.request({ method: 'POST', url: '/datasets', body: { name: 'Checks', cases: [{ input: 'When do parcels leave?' }] } })).json();
    const deskTeam = await createTeam(t, { name: 'Desk', members: ['ada@example.com'] });
    const desk = await createPersona(t, { name: 'Desk', teamId: deskTeam.id });
    const handoff = (await t.request({ method: 'POST', url: '/query', body: { personaId: desk.id, message: '/human' } })).json().handoff;
    const finished = await createAbTest(t, { personaA: persona.id, personaB: other.id });
    for (const step of ['start', 'stop']) expect((await t.request({ method: 'PUT', url: `/business/ab-tests/${finished.id}/${step}` })).statusCode).toBe(200);
    const channel = await createChannel(t, { type: 'webhook', personaId: persona.id, credentials: { secret: 'webhook-secret-0123456789abcdef', outboundUrl: receiver.url } });
    const promoted = await invitePerson(t, { email: 'promoted@example.com', role: 'viewer' });
    const leaving = await invitePerson(t, { email: 'leaving@example.com', role: 'viewer' });
    const pending = (await t.request({ method: 'POST', url: '/members/invitations', body: { email: 'pending@example.com', role: 'viewer' } })).json().invitation;
    /** A call each tool would carry out for a key that may write (checked below). */
    const calls: Record<string, Record<string, unknown>> = {
      accept_handoff: { id: handoff.id, member: 'ada@example.com' },
      add_knowledge: { kind: 'text', name: 'New', content: 'Fresh text.' },
      ask_persona: { personaId: persona.id, message: 'When do parcels leave?' },
      change_member_role: { userId: promoted.userId, role: 'editor' },
      invite_member: { email: 'newcomer@example.com', role: 'agent' },
      remove_member: { userId: leaving.userId },
      revoke_invitation: { id: pending.id },
      create_ab_test: { name: 'New test', personaA: persona.id, personaB: other.id },
      create_persona: { name: 'X', instructions: 'Y' },
      delete_knowledge: { id: source.id },
      delete_persona: { id: doomed.id },
      promote_ab_test: { id: finished.id, variant: 'A' },
      reply_to_handoff: { id: handoff.id, member: 'ada@example.com', text: 'Hello from a person.' },
      restore_persona_version: { id: persona.id, version: 1 },
      return_handoff: { id: handoff.id, member: 'ada@example.com' },
      run_evaluation: { datasetId: dataset.id, personaId: persona.id },
      send_channel_message: { channelId: channel.id, to: 'conv-1', message: 'Hello' },
      start_ab_test: { id: draft.id },
      stop_ab_test: { id: running.id },
      update_persona: { id: persona.id, name: 'Renamed' },
    };

    const { key } = await t.ctx.services.auth.createKeyInWorkspace('default', 'reader', ['read']);
    const reader = await connectInMemory(t, key.key);
    const writers = (await reader.listTools()).tools.filter((x) => x.annotations?.readOnlyHint !== true).map((x) => x.name).sort();
    // A new tool that changes data must be added to `calls`, so it is tried here too.
    expect(writers).toEqual(Object.keys(calls).sort());
    expect((await callOk(reader, 'get_persona', { id: persona.id })).name).toBe('Visible');

    await t.ctx.services.auth.flushUsage();
    // Nothing is written but the refusals' own audit events (API.md §14): one `request.denied` a tool.
    const { audit_events: eventsBefore, ...before } = await databaseSnapshot(t);
    // Each tool needs what its HTTP route needs: the agent role to ask or work a handoff, admin for members.
    const needs = (name: string) =>
      ['ask_persona', 'accept_handoff', 'reply_to_handoff', 'return_handoff'].includes(name)
        ? 'the "agent" role'
        : ['change_member_role', 'invite_member', 'remove_member', 'revoke_invitation'].includes(name)
          ? 'the "admin" role'
          : 'the "write" scope';
    for (const name of writers) {
      expect(await callError(reader, name, calls[name]), name).toBe(`Forbidden: ${name} needs ${needs(name)}.`);
    }
    const { audit_events: eventsAfter, ...after } = await databaseSnapshot(t);
    expect(after).toEqual(before);
    const refusals = eventsAfter!.filter((e) => !eventsBefore!.includes(e)).map((e) => JSON.parse(e) as { action: string; outcome: string; target_type: string; target_id: string });
    expect(refusals.map((e) => `${e.action} ${e.outcome} ${e.target_type}:${e.target_id}`).sort()).toEqual(writers.map((name) => `request.denied denied mcp_tool:${name}`).sort());
    expect(receiver.deliveries).toEqual([]);
    await reader.close();

    // The same calls with a key that may write go through: only the scope stopped them.
    const writer = await connectInMemory(t);
    // Each writes its one audit event, as over HTTP (the services write them): asking is conversation,
    // restoring the version already current changes nothing, handoffs are audited by their own part.
    const audited: Record<string, string[] | null> = {
      accept_handoff: null,
      add_knowledge: ['knowledge.create'],
      ask_persona: [],
      change_member_role: ['member.role'],
      create_ab_test: ['ab_test.create'],
      create_persona: ['persona.create'],
      delete_knowledge: ['knowledge.delete'],
      delete_persona: ['persona.delete'],
      invite_member: ['member.invite'],
      promote_ab_test: ['ab_test.promote'],
      remove_member: ['member.remove'],
      reply_to_handoff: null,
      restore_persona_version: [],
      return_handoff: null,
      revoke_invitation: ['invitation.revoke'],
      run_evaluation: ['eval_run.create'],
      send_channel_message: ['channel.send'],
      start_ab_test: ['ab_test.start'],
      stop_ab_test: ['ab_test.stop'],
      update_persona: ['persona.update'],
    };
    expect(Object.keys(audited).sort()).toEqual(writers);
    const eventIds = async () => (await t.ctx.db.kysely.selectFrom('audit_events').select(['id', 'action']).execute());
    for (const name of writers) {
      const seen = new Set((await eventIds()).map((e) => e.id));
      await callOk(writer, name, calls[name]);
      const added = (await eventIds()).filter((e) => !seen.has(e.id)).map((e) => e.action);
      if (audited[name] !== null) expect(added, name).toEqual(audited[name]);
    }
    expect(receiver.deliveries).toHaveLength(1);
    expect((await t.request({ method: 'GET', url: `/personas/${persona.id}` })).json().name).toBe('Renamed');
    await writer.close();
  });

  it('never shows one workspace’s objects to another: tools, resources, completion and prompts', async () => {
    /** One of each object in a fresh workspace; `word` is in its knowledge only. */
    const seed = async (name: string, word: string) => {
      const key = (await t.ctx.services.auth.createWorkspace(name)).key.key;
      const persona = await createPersona(t, { name: `Persona ${word}` }, key);
      const second = await createPersona(t, { name: `Second ${word}` }, key);
      const source = await addSource(t, { kind: 'text', name: `Notes ${word}`, content: `The ${word} crossing opens at dawn.` }, key);
      expect(source.status).toBe('ready');
      const asked = await t.request({ method: 'POST', url: '/query', body: { personaId: persona.id, message: 'Hello', userId: `user-${word}` }, as: key });
      expect(asked.statusCode, asked.body).toBe(200);
      const abTest = await createAbTest(t, { personaA: persona.id, personaB: second.id }, key);
      const channel = await createChannel(t, { type: 'webhook', personaId: persona.id, credentials: { secret: 'webhook-secret-0123456789abcdef' } }, key);
      const team = await createTeam(t, { name: `Team ${word}` }, key);
      const desk = await createPersona(t, { name: `Desk ${word}`, teamId: team.id }, key);
      const handedOver = (await t.request({ method: 'POST', url: '/query', body: { personaId: desk.id, message: '/human' }, as: key })).json();
      const handoff = handedOver.handoff;
      const dataset = (await t.request({ method: 'POST', url: '/datasets', body: { name: `Cases ${word}`, cases: [{ input: `Where is the ${word} crossing?`, mustContain: ['dawn'] }] }, as: key })).json();
      const run = (await t.request({ method: 'POST', url: '/evaluations/runs', body: { datasetId: dataset.id, personaId: persona.id }, as: key })).json();
      await t.ctx.services.evaluations.idle();
      const member = await invitePerson(t, { email: `member-${word}@example.com`, role: 'editor' }, key);
      const invitation = (await t.request({ method: 'POST', url: '/members/invitations', body: { email: `invited-${word}@example.com`, role: 'viewer' }, as: key })).json().invitation;
      return {
        member: member.userId, invitation: invitation.id as string, workspaceId: (await t.request({ method: 'GET', url: '/auth/me', as: key })).json().workspace.id as string,
        key, word, personas: [persona.id, second.id, desk.id].sort(), persona: persona.id, source: source.id as string, session: asked.json().sessionId as string,
        sessions: [asked.json().sessionId as string, handedOver.sessionId as string].sort(),
        abTest: abTest.id, channel: channel.id, team: team.id, dataset: dataset.id as string, run: run.id as string, handoff: handoff.id as string, desk: desk.id as string,
      };
    };
    const north = await seed('north', 'zebra');
    const south = await seed('south', 'walrus');
    const ids = (page: { data: Array<{ id: string }> }) => page.data.map((x) => x.id).sort();
    const expectNotFound = (text: string, id: string) => {
      expect(text).toMatch(/^Not found: /);
      expect(text).toContain(id);
    };

    for (const [own, foreign] of [[north, south], [south, north]] as const) {
      const client = await connectInMemory(t, own.key);
      // Every read-only tool, probed for the other workspace's objects (a new one must be added here).
      const probes: Record<string, () => Promise<void>> = {
        list_personas: async () => expect(ids(await callOk(client, 'list_personas'))).toEqual(own.personas),
        list_persona_versions: async () => {
          expectNotFound(await callError(client, 'list_persona_versions', { id: foreign.persona }), foreign.persona);
          expect((await callOk(client, 'list_persona_versions', { id: own.persona })).data.map((v: { version: number }) => v.version)).toEqual([1]);
        },
        get_persona: async () => {
          expectNotFound(await callError(client, 'get_persona', { id: foreign.persona }), foreign.persona);
          expect((await callOk(client, 'get_persona', { id: own.persona })).id).toBe(own.persona);
        },
        list_knowledge: async () => expect(ids(await callOk(client, 'list_knowledge'))).toEqual([own.source]),
        search_knowledge: async () => {
          expect((await callOk(client, 'search_knowledge', { query: `${foreign.word} crossing` })).data.map((h: { sourceId: string }) => h.sourceId)).not.toContain(foreign.source);
          expect((await callOk(client, 'search_knowledge', { query: foreign.word, mode: 'keyword' })).data).toEqual([]);
          expect((await callOk(client, 'search_knowledge', { query: own.word, mode: 'keyword' })).data.map((h: { sourceId: string }) => h.sourceId)).toEqual([own.source]);
        },
        list_sessions: async () => {
          expect(ids(await callOk(client, 'list_sessions'))).toEqual(own.sessions);
          expectNotFound(await callError(client, 'list_sessions', { personaId: foreign.persona }), foreign.persona);
          expectNotFound(await callError(client, 'list_sessions', { channelId: foreign.channel }), foreign.channel);
        },
        get_session: async () => {
          expectNotFound(await callError(client, 'get_session', { id: foreign.session }), foreign.session);
          expect((await callOk(client, 'get_session', { id: own.session })).id).toBe(own.session);
        },
        get_ab_test_results: async () => {
          expectNotFound(await callError(client, 'get_ab_test_results', { id: foreign.abTest }), foreign.abTest);
          expect((await callOk(client, 'get_ab_test_results', { id: own.abTest })).testId).toBe(own.abTest);
        },
        get_analytics: async () => {
          expect((await callOk(client, 'get_analytics', { timeframe: '1h' })).metrics.conversations.total).toBe(2);
          expectNotFound(await callError(client, 'get_analytics', { personaId: foreign.persona }), foreign.persona);
          expectNotFound(await callError(client, 'get_analytics', { channelId: foreign.channel }), foreign.channel);
        },
        list_teams: async () => expect(ids(await callOk(client, 'list_teams'))).toEqual([own.team]),
        list_channels: async () => expect(ids(await callOk(client, 'list_channels'))).toEqual([own.channel]),
        list_datasets: async () => expect(ids(await callOk(client, 'list_datasets'))).toEqual([own.dataset]),
        list_handoffs: async () => expect(ids(await callOk(client, 'list_handoffs'))).toEqual([own.handoff]),
        get_handoff: async () => {
          expectNotFound(await callError(client, 'get_handoff', { id: foreign.handoff }), foreign.handoff);
          expect((await callOk(client, 'get_handoff', { id: own.handoff })).messages.length).toBe(2);
        },
        get_evaluation_run: async () => {
          expectNotFound(await callError(client, 'get_evaluation_run', { id: foreign.run }), foreign.run);
          expect((await callOk(client, 'get_evaluation_run', { id: own.run })).status).toBe('completed');
        },
        list_members: async () => {
          // (createTeam makes ada@example.com a member of each workspace too.)
          const members = (await callOk(client, 'list_members')).data.map((m: { userId: string }) => m.userId);
          expect(members).toContain(own.member);
          expect(members).not.toContain(foreign.member);
        },
        list_invitations: async () => expect(ids(await callOk(client, 'list_invitations'))).toEqual([own.invitation]),
        list_audit_events: async () => {
          const events = (await callOk(client, 'list_audit_events', { limit: 100 })).data as Array<{ workspaceId: string; target: { id: string } }>;
          expect(events.length).toBeGreaterThan(0);
          expect(new Set(events.map((e) => e.workspaceId))).toEqual(new Set([own.workspaceId]));
          expect((await callOk(client, 'list_audit_events', { targetId: foreign.member })).data).toEqual([]);
        },
        compare_runs: async () => {
          expectNotFound(await callError(client, 'compare_runs', { a: own.run, b: foreign.run }), foreign.run);
          expectNotFound(await callError(client, 'compare_runs', { a: foreign.run, b: own.run }), foreign.run);
          expect((await callOk(client, 'compare_runs', { a: own.run, b: own.run })).pairs).toBe(1);
        },
      };
      const readOnly = (await client.listTools()).tools.filter((x) => x.annotations?.readOnlyHint === true).map((x) => x.name).sort();
      expect(Object.keys(probes).sort()).toEqual(readOnly);
      for (const name of readOnly) await probes[name]!();

      // Tools that change data find nothing of the other workspace to act on, and change nothing.
      await t.ctx.services.auth.flushUsage();
      const before = await databaseSnapshot(t);
      const writes: Array<[string, Record<string, unknown>, string]> = [
        ['ask_persona', { personaId: foreign.persona, message: 'hi' }, foreign.persona],
        ['update_persona', { id: foreign.persona, name: 'hijack' }, foreign.persona],
        ['delete_persona', { id: foreign.persona }, foreign.persona],
        ['create_ab_test', { name: 'Steal', personaA: foreign.personas[0], personaB: foreign.personas[1] }, foreign.personas[0]!],
        ['start_ab_test', { id: foreign.abTest }, foreign.abTest],
        ['promote_ab_test', { id: foreign.abTest, variant: 'A' }, foreign.abTest],
        ['run_evaluation', { datasetId: foreign.dataset, personaId: own.persona }, foreign.dataset],
        ['accept_handoff', { id: foreign.handoff, member: 'ada@example.com' }, foreign.handoff],
        ['reply_to_handoff', { id: foreign.handoff, member: 'ada@example.com', text: 'x' }, foreign.handoff],
        ['return_handoff', { id: foreign.handoff }, foreign.handoff],
        ['run_evaluation', { datasetId: own.dataset, personaId: foreign.persona }, foreign.persona],
        ['restore_persona_version', { id: foreign.persona, version: 1 }, foreign.persona],
        ['delete_knowledge', { id: foreign.source }, foreign.source],
        ['send_channel_message', { channelId: foreign.channel, to: 'x', message: 'y' }, foreign.channel],
        ['change_member_role', { userId: foreign.member, role: 'viewer' }, foreign.member],
        ['remove_member', { userId: foreign.member }, foreign.member],
        ['revoke_invitation', { id: foreign.invitation }, foreign.invitation],
      ];
      for (const [name, args, id] of writes) expectNotFound(await callError(client, name, args), id);
      expect(await databaseSnapshot(t)).toEqual(before);

      // Resources: listed, read and completed for this workspace only.
      const uris = [...own.personas.map((id) => `switchboard://personas/${id}`), `switchboard://knowledge/${own.source}`, `switchboard://ab-tests/${own.abTest}/results`];
      expect((await client.listResources()).resources.map((r) => r.uri).sort()).toEqual(uris.sort());
      for (const uri of [`switchboard://personas/${foreign.persona}`, `switchboard://knowledge/${foreign.source}`, `switchboard://ab-tests/${foreign.abTest}/results`]) {
        await expect(client.readResource({ uri }), uri).rejects.toThrow(/not found/);
      }
      expect(JSON.parse((((await client.readResource({ uri: `switchboard://knowledge/${own.source}` })).contents[0]) as { text: string }).text).id).toBe(own.source);
      const complete = async (uri: string, value: string) => (await client.complete({ ref: { type: 'ref/resource', uri }, argument: { name: 'id', value } })).completion.values.sort();
      for (const [uri, mine, theirs] of [
        ['switchboard://personas/{id}', own.personas, foreign.persona],
        ['switchboard://knowledge/{id}', [own.source], foreign.source],
        ['switchboard://ab-tests/{id}/results', [own.abTest], foreign.abTest],
      ] as const) {
        expect(await complete(uri, ''), uri).toEqual([...mine].sort());
        expect(await complete(uri, theirs), uri).toEqual([]);
      }

      // Prompts: one per persona of this workspace.
      expect((await client.listPrompts()).prompts.map((p) => p.name).sort()).toEqual(own.personas);
      await expect(client.getPrompt({ name: foreign.persona })).rejects.toThrow(/Unknown prompt/);
      await client.close();
    }
  });
});
