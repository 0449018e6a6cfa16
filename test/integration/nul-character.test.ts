// The NUL character (U+0000), which PostgreSQL text cannot hold, on both backends alike (API.md §1):
// in an id it names no object (404), in a query parameter, a field or a tool argument it is a 400
// naming where, and text read from a document drops it.
import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { signature } from '../../bridges/webhook/webhook-bridge.js';
import { type FakeSlack, startFakeSlack } from '../fakes/slack-api.js';
import { eventCallback, messageEvent, nextTs, signSlackRequest } from '../fakes/slack-events.js';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { createChannel, createPersona } from '../helpers/factories.js';
import { callError, connectInMemory } from '../helpers/mcp.js';
import { testBackends } from '../helpers/postgres.js';
import { expectProblem } from '../helpers/problem.js';
import { upload } from './knowledge-helpers.js';

interface Operation {
  method: string;
  path: string;
  parameters: Array<{ name: string; in: string }>;
}

/** Every operation of the OpenAPI document, with its path and query parameters. */
async function operations(t: TestApp): Promise<Operation[]> {
  const doc = (await t.request({ method: 'GET', url: '/openapi.json' })).json() as {
    paths: Record<string, Record<string, { parameters?: Array<{ name: string; in: string }> }>>;
  };
  return Object.entries(doc.paths).flatMap(([path, ops]) =>
    Object.entries(ops).map(([method, op]) => ({ method: method.toUpperCase(), path, parameters: op.parameters ?? [] })),
  );
}

const withBody = (method: string) => (['POST', 'PUT', 'PATCH'].includes(method) ? { body: {} } : {});

/** `/v1` answers in OpenAI's error shape (API.md §12); everything else problem+json. */
function expectRefusal(res: LightMyRequestResponse, path: string, status: number, code: string, field?: string) {
  if (!path.startsWith('/v1/')) return expectProblem(res, status, code, field);
  expect(res.statusCode, res.body).toBe(status);
  expect(res.json().error.message.length).toBeGreaterThan(0);
  return undefined;
}

describe.each(testBackends())('the NUL character on $kind', (backend) => {
  let t: TestApp;
  let ops: Operation[];
  let fake: FakeSlack;
  beforeAll(async () => {
    fake = await startFakeSlack({ botToken: 'xoxb-nul' });
    t = await createTestApp({ backend, env: { SWITCHBOARD_SLACK_API_URL: fake.apiUrl } });
    ops = await operations(t);
  });
  afterAll(async () => {
    await t?.close();
    await fake?.close();
  });

  it('in any path parameter of any operation: 404 not_found, as an unknown id', async () => {
    let checked = 0;
    for (const op of ops) {
      for (const param of op.parameters.filter((p) => p.in === 'path')) {
        const url = op.path.replace(/\{(\w+)\}/g, (_m, name: string) => (name === param.name ? 'per_x%00y' : 'x'));
        const res = await t.request({ method: op.method, url, ...withBody(op.method) } as Parameters<TestApp['request']>[0]);
        expectRefusal(res, op.path, 404, 'not_found');
        checked++;
      }
    }
    // The document has dozens of operations on an id: a sweep that found none proves nothing.
    expect(checked).toBeGreaterThan(60);
  });

  it('in any query parameter of any operation: 400 validation_failed naming the parameter', async () => {
    let checked = 0;
    for (const op of ops) {
      for (const param of op.parameters.filter((p) => p.in === 'query')) {
        const url = `${op.path.replace(/\{(\w+)\}/g, 'x')}?${param.name}=a%00b`;
        const res = await t.request({ method: op.method, url, ...withBody(op.method) } as Parameters<TestApp['request']>[0]);
        expectRefusal(res, op.path, 400, 'validation_failed', param.name);
        checked++;
      }
    }
    expect(checked).toBeGreaterThan(40);
    // An existing persona's id with a NUL after it is no persona either.
    const persona = (await t.request({ method: 'POST', url: '/personas', body: { name: 'Nul', instructions: 'x' } })).json();
    expectProblem(await t.request({ method: 'GET', url: `/personas/${persona.id}%00` }), 404, 'not_found');
    expectProblem(await t.request({ method: 'GET', url: `/personas?q=Nul%00` }), 400, 'validation_failed', 'q');
    // JSON sent as text escapes it: no NUL in the URL, one once parsed.
    const filter = encodeURIComponent('{"team":"a\\u0000"}');
    expectProblem(await t.request({ method: 'GET', url: `/knowledge/search?q=tea&filter=${filter}` }), 400, 'validation_failed', 'filter.team');
    expect((await t.request({ method: 'GET', url: `/personas/${persona.id}` })).json()).toEqual(persona);
  });

  describe('knowledge uploads', () => {
    it('refuses a file name, a media type or a text part holding a NUL, naming it', async () => {
      const file = { name: 'file', value: 'Plain words.', filename: 'notes.txt', type: 'text/plain' };
      expectProblem(await upload(t, [{ ...file, filename: 'no\0tes.txt' }]), 400, 'validation_failed', 'file.filename');
      expectProblem(await upload(t, [{ ...file, type: 'text/plain\0' }]), 400, 'validation_failed', 'file.mediaType');
      expectProblem(await upload(t, [{ name: 'name', value: 'a\0b' }, file]), 400, 'validation_failed', 'name');
      expectProblem(await upload(t, [{ name: 'metadata', value: '{"k":"\\u0000"}' }, file]), 400, 'validation_failed', 'metadata.k');
      expect((await t.request({ method: 'GET', url: '/knowledge' })).json().data).toEqual([]);
    });

    it.each([
      ['notes.txt', 'text/plain', 'Zebra\0 crossings are striped.'],
      ['notes.md', 'text/markdown', '# Zebra\0\n\nZebra crossings are striped.'],
      ['notes.json', 'application/json', '{"title":"Zebra\\u0000","body":"Zebra crossings are striped.\\u0000"}'],
      ['notes.csv', 'text/csv', 'name,text\nZebra\0,Zebra crossings are striped.\0\n'],
      ['notes.html', 'text/html', '<html><head><title>Zebra\0</title></head><body><p>Zebra crossings are\0 striped.</p></body></html>'],
    ])('drops the NULs of %s (%s) and keeps its text', async (filename, type, text) => {
      const res = await upload(t, [{ name: 'file', value: Buffer.from(text), filename, type }]);
      expect(res.statusCode, res.body).toBe(202);
      const source = res.json();
      expect(source).toMatchObject({ status: 'ready', error: null });
      const chunks = (await t.request({ method: 'GET', url: `/knowledge/${source.id}/chunks?limit=100` })).json().data as Array<{ text: string; headingPath: string[] }>;
      const all = JSON.stringify(chunks);
      expect(all).toContain('striped');
      expect(all).not.toContain('\\u0000');
    });
  });

  it('in MCP tool arguments, resource ids and prompt names (stdio has no JSON parser to refuse it)', async () => {
    const client = await connectInMemory(t);
    try {
      expect(await callError(client, 'get_persona', { id: 'per_x\0' })).toBe('Validation failed: Invalid arguments: id: must not contain the NUL character (U+0000)');
      expect(await callError(client, 'create_persona', { name: 'Refused', instructions: 'x', traits: ['ok', 'a\0'] })).toContain('traits.1: must not contain the NUL character');
      await expect(client.readResource({ uri: 'switchboard://personas/per_x%00' })).rejects.toMatchObject({ code: -32002 });
      await expect(client.getPrompt({ name: 'per_x\0' })).rejects.toThrow(/not found|unknown/i);
      expect((await t.request({ method: 'GET', url: '/personas?q=Refused' })).json().data).toEqual([]);
    } finally {
      await client.close();
    }
  });

  it('in a case of an imported dataset (JSONL escapes it, the request body only held text): 400 naming case and field', async () => {
    const created = await t.request({ method: 'POST', url: '/datasets', body: { name: 'Nul cases', cases: [] } });
    expect(created.statusCode, created.body).toBe(201);
    const importUrl = `/datasets/${created.json().id}/import`;
    const jsonl = '{"input":"fine"}\n{"input":"a\\u0000b"}\n';
    const problem = expectProblem(await t.request({ method: 'POST', url: importUrl, body: { format: 'jsonl', content: jsonl } }), 400, 'validation_failed', 'cases.1.input');
    expect(JSON.stringify(problem.errors)).toContain('line 2');
    const csv = 'input,messages\nhello,"[{""role"":""user"",""content"":""x\\u0000""}]"\n';
    expectProblem(await t.request({ method: 'POST', url: importUrl, body: { format: 'csv', content: csv } }), 400, 'validation_failed', 'cases.0.messages.0.content');
    expect((await t.request({ method: 'GET', url: `/datasets/${created.json().id}` })).json().caseCount).toBe(0);
  });

  describe('channels', () => {
    let persona: string;
    beforeAll(async () => {
      persona = (await createPersona(t, { name: 'Channel desk', instructions: 'Help.' })).id;
    });

    it('a webhook message holding a NUL is a 400 naming its field (the integrator can be told)', async () => {
      const secret = 'webhook-secret-0123456789abcdef';
      const channel = await createChannel(t, { type: 'webhook', personaId: persona, credentials: { secret } });
      const inbound = (raw: string) =>
        t.app.inject({ method: 'POST', url: `/business/channels/${channel.id}/inbound`, headers: { 'content-type': 'application/json', 'x-switchboard-signature': signature(secret, raw) }, payload: raw });
      expectProblem(await inbound('{"conversationId":"c","message":"hi\\u0000"}'), 400, 'validation_failed', 'message');
      expectProblem(await inbound('{"conversationId":"c\\u0000","message":"hi"}'), 400, 'validation_failed', 'conversationId');
      expect((await t.request({ method: 'GET', url: `/sessions?channelId=${channel.id}` })).json().data).toEqual([]);
    });

    it('a Slack message holding a NUL is answered, its NULs dropped (a person on Slack cannot be sent a 400)', async () => {
      const signingSecret = 'nul-signing-secret';
      const channel = await createChannel(t, { type: 'slack', personaId: persona, credentials: { botToken: 'xoxb-nul', signingSecret } });
      const ts = nextTs();
      const raw = JSON.stringify(eventCallback(messageEvent({ text: `<@${fake.botUserId}> Where is the zebra\u0000 crossing?`, ts, user: 'U7' }), { botUserId: fake.botUserId }));
      const res = await t.app.inject({ method: 'POST', url: `/business/channels/${channel.id}/slack/events`, headers: signSlackRequest(raw, signingSecret), payload: raw });
      expect(res.statusCode, res.body).toBe(200);
      const session = await vi.waitFor(
        async () => {
          const [found] = (await t.request({ method: 'GET', url: `/sessions?channelId=${channel.id}` })).json().data;
          expect(found?.messageCount).toBe(2);
          return found as { id: string };
        },
        { timeout: 8_000, interval: 50 },
      );
      const { messages } = (await t.request({ method: 'GET', url: `/sessions/${session.id}` })).json() as { messages: Array<{ role: string; content: string }> };
      expect(messages[0]).toMatchObject({ role: 'user', content: 'Where is the zebra crossing?' });
      expect(messages[1]!.role).toBe('assistant');
      expect(messages[1]!.content).not.toMatch(/^Sorry/);
    });
  });
});
