// API.md §1: "Bodies nested deeper than 64 levels are a 400 (validation_failed), never a 500." Every
// operation of the OpenAPI document that takes a JSON body gets a 65-level and a 4,100-level body
// (refused, naming the field) and a 64-level one (not refused for its depth); then the places JSON
// arrives as text (a multipart part, a query parameter) and MCP tool arguments.
import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signature } from '../../bridges/webhook/webhook-bridge.js';
import { type FakeSlack, startFakeSlack } from '../fakes/slack-api.js';
import { signSlackRequest } from '../fakes/slack-events.js';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { createChannel, createPersona } from '../helpers/factories.js';
import { callError, connectInMemory } from '../helpers/mcp.js';
import { expectProblem } from '../helpers/problem.js';
import { upload } from './knowledge-helpers.js';

const BOT_TOKEN = 'xoxb-depth-bot';
const SIGNING_SECRET = 'depth-signing-secret';
const WEBHOOK_SECRET = 'depth-webhook-secret-0123456789';
const TOO_DEEP = 'nests deeper than 64 levels';

/** `levels` objects nested in one another: 1 is `{}`. */
function nested(levels: number): string {
  return `${'{"a":'.repeat(levels - 1)}{}${'}'.repeat(levels - 1)}`;
}

/** A body `levels` deep, the body itself being level 1: `{"metadata": <levels - 1>}`. */
const bodyOf = (levels: number) => `{"metadata":${nested(levels - 1)}}`;

/** The field a body past 64 levels is refused at: the first object on level 65. */
const DEEP_PATH = ['metadata', ...Array(63).fill('a')].join('.');

interface Operation {
  method: string;
  path: string;
}

describe('JSON nested deeper than 64 levels (API.md §1)', { timeout: 60_000 }, () => {
  let t: TestApp;
  let fake: FakeSlack;
  let operations: Operation[];
  let slackChannel: string;
  let webhookChannel: string;
  let requests = 0;

  beforeAll(async () => {
    fake = await startFakeSlack({ botToken: BOT_TOKEN });
    t = await createTestApp({ env: { SWITCHBOARD_SLACK_API_URL: fake.apiUrl } });
    const persona = (await createPersona(t)).id;
    slackChannel = (await createChannel(t, { type: 'slack', personaId: persona, credentials: { botToken: BOT_TOKEN, signingSecret: SIGNING_SECRET } })).id;
    webhookChannel = (await createChannel(t, { type: 'webhook', personaId: persona, credentials: { secret: WEBHOOK_SECRET } })).id;
    const doc = (await t.request({ method: 'GET', url: '/openapi.json', as: null })).json() as {
      paths: Record<string, Record<string, { requestBody?: { content: Record<string, unknown> } }>>;
    };
    operations = Object.entries(doc.paths).flatMap(([path, ops]) =>
      Object.entries(ops)
        .filter(([, op]) => op.requestBody?.content['application/json'] !== undefined)
        .map(([method, _op]) => ({ method: method.toUpperCase(), path })),
    );
  });
  afterAll(async () => {
    await t?.close();
    await fake?.close();
  });

  /** Sends `body` to an operation as its callers would: a key, an idempotency key, a signature where the route wants one. */
  function send(op: Operation, body: string): Promise<LightMyRequestResponse> {
    requests += 1;
    const headers: Record<string, string> = {
      authorization: `Bearer ${t.adminKey}`,
      'content-type': 'application/json',
      'idempotency-key': `depth-${requests}`,
      accept: 'application/json, text/event-stream',
    };
    let url = op.path.replace(/\{[^}]+\}/g, 'x');
    if (op.path.endsWith('/slack/events')) {
      url = op.path.replace('{id}', slackChannel);
      Object.assign(headers, signSlackRequest(body, SIGNING_SECRET));
    } else if (op.path.endsWith('/inbound')) {
      url = op.path.replace('{id}', webhookChannel);
      headers['x-switchboard-signature'] = signature(WEBHOOK_SECRET, body);
    }
    return t.app.inject({ method: op.method as 'POST', url, headers, payload: body });
  }

  it('covers every operation that takes a JSON body, the ones the fuzzing found among them', () => {
    const names = operations.map((o) => `${o.method} ${o.path}`);
    expect(names).toEqual(
      expect.arrayContaining([
        'POST /query',
        'POST /query/stream',
        'POST /knowledge',
        'PUT /knowledge/{id}',
        'POST /v1/chat/completions',
        'POST /api/mcp/tools/execute',
        'POST /mcp',
        'POST /business/channels/{id}/slack/events',
        'POST /business/channels/{id}/inbound',
        'POST /oauth/register',
      ]),
    );
    expect(names.length).toBeGreaterThanOrEqual(29); // 29 when this was written
  });

  /** Runs `check` on every operation and lists the ones it failed on, so one run names them all. */
  async function failuresOf(check: (op: Operation) => Promise<void>): Promise<string[]> {
    const failures: string[] = [];
    for (const op of operations) {
      try {
        await check(op);
      } catch (err) {
        failures.push(`${op.method} ${op.path}: ${(err as Error).message.slice(0, 300)}`);
      }
    }
    return failures;
  }

  it('refuses a 65-level and a 4,100-level body on every one with 400 validation_failed naming the field', async () => {
    const failures = await failuresOf(async (op) => {
      for (const levels of [65, 4_100]) {
        const res = await send(op, bodyOf(levels));
        if (op.path.startsWith('/v1/')) {
          // /v1 answers OpenAI's error shape; validation_failed reads as invalid_request_error there.
          expect(res.statusCode, res.body).toBe(400);
          expect(res.json()).toEqual({ error: { message: `Invalid '${DEEP_PATH}': ${TOO_DEEP}.`, type: 'invalid_request_error', param: DEEP_PATH, code: 'invalid_value' } });
        } else {
          const problem = expectProblem(res, 400, 'validation_failed', DEEP_PATH);
          expect(problem.errors).toEqual([{ path: DEEP_PATH, message: TOO_DEEP }]);
        }
      }
    });
    expect(failures).toEqual([]);
  });

  it('does not refuse a 64-level body for its depth anywhere', async () => {
    const failures = await failuresOf(async (op) => {
      const res = await send(op, bodyOf(64));
      expect(res.statusCode, res.body).toBeLessThan(500);
      expect(res.body).not.toContain(TOO_DEEP);
    });
    expect(failures).toEqual([]);
  });

  it('holds JSON sent as text to the same limit: a multipart metadata part, the search filter', async () => {
    const deepArrays = (levels: number) => `{"a":${'['.repeat(levels - 1)}${']'.repeat(levels - 1)}}`;
    const arraysPath = ['metadata', 'a', ...Array(63).fill('0')].join('.');
    // 8,000 levels in a part under the 16 KiB metadata limit.
    for (const [metadata, path] of [
      [deepArrays(65), arraysPath],
      [deepArrays(8_000), arraysPath],
    ] as const) {
      const res = await upload(t, [
        { name: 'file', value: 'Some text.', filename: 'a.txt', type: 'text/plain' },
        { name: 'metadata', value: metadata },
      ]);
      expectProblem(res, 400, 'validation_failed', path);
    }
    const ok = await upload(t, [
      { name: 'file', value: 'Some text.', filename: 'a.txt', type: 'text/plain' },
      { name: 'metadata', value: deepArrays(64) },
    ]);
    expect([201, 202], ok.body).toContain(ok.statusCode);

    const filter = encodeURIComponent(`{"a":${'['.repeat(1_000)}${']'.repeat(1_000)}}`); // under the URL limit
    const search = await t.request({ method: 'GET', url: `/knowledge/search?q=text&filter=${filter}` });
    expectProblem(search, 400, 'validation_failed', ['filter', 'a', ...Array(63).fill('0')].join('.'));
  });

  it('refuses MCP tool arguments past 64 levels as a tool error naming the field (stdio has no body parser before it)', async () => {
    const client = await connectInMemory(t);
    try {
      const metadata = JSON.parse(nested(5_000)) as Record<string, unknown>;
      const text = await callError(client, 'add_knowledge', { kind: 'text', name: 'Deep', content: 'Some text.', metadata });
      const path = ['metadata', ...Array(63).fill('a')].join('.');
      expect(text).toBe(`Validation failed: Invalid arguments: ${path}: ${TOO_DEEP}`);
      const shallow = JSON.parse(nested(63)) as Record<string, unknown>;
      const created = await client.callTool({ name: 'add_knowledge', arguments: { kind: 'text', name: 'Shallow', content: 'Some text.', metadata: shallow } });
      expect(created.isError ?? false, JSON.stringify(created.content)).toBe(false);
    } finally {
      await client.close();
    }
  });
});
