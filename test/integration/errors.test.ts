import { Writable } from 'node:stream';
import type { LightMyRequestResponse } from 'fastify';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { testBackends } from '../helpers/postgres.js';
import { expectProblem } from '../helpers/problem.js';
import { captureLogs } from '../helpers/mcp-tools.js';

function paths(body: { errors?: { path: string }[] }): string[] {
  return (body.errors ?? []).map((e) => e.path);
}

const VALID_PERSONA = { name: 'Ada', instructions: 'Be brief.' };
const UNKNOWN_KEY = `sb_${'Z'.repeat(40)}`;

describe.each(testBackends())('errors as problem+json (API.md §1) on $kind', (backend) => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp({ backend });
  });
  afterAll(async () => t.close());

  describe('request id', () => {
    it('echoes a given x-request-id in the header and the body', async () => {
      const res = await t.request({ method: 'GET', url: '/personas/per_missing', headers: { 'x-request-id': 'trace-abc.123' } });
      const body = expectProblem(res, 404, 'not_found');
      expect(body.requestId).toBe('trace-abc.123');
    });

    it('generates a fresh id per request when none is given', async () => {
      const a = expectProblem(await t.request({ method: 'GET', url: '/nope' }), 404, 'not_found');
      const b = expectProblem(await t.request({ method: 'GET', url: '/nope' }), 404, 'not_found');
      expect(a.requestId).not.toBe(b.requestId);
    });

    it('replaces an unusable x-request-id (too long, odd characters) with its own', async () => {
      for (const given of ['x'.repeat(200), 'has spaces in it', 'semi;colon']) {
        const res = await t.request({ method: 'GET', url: '/nope', headers: { 'x-request-id': given } });
        const body = expectProblem(res, 404, 'not_found');
        expect(body.requestId).not.toBe(given);
      }
    });

    it('carries x-request-id on successful responses too', async () => {
      const res = await t.request({ method: 'GET', url: '/health', as: null, headers: { 'x-request-id': 'ok-1' } });
      expect(res.statusCode).toBe(200);
      expect(res.headers['x-request-id']).toBe('ok-1');
    });
  });

  describe('invalid_json (400)', () => {
    it('answers malformed JSON', async () => {
      for (const body of ['{"name":', '{name: "x"}', "{'a':1}", '[1,2', 'nul']) {
        const res = await t.request({ method: 'POST', url: '/personas', body });
        expectProblem(res, 400, 'invalid_json');
      }
    });

    it('answers malformed JSON under the /api prefix and on PUT', async () => {
      expectProblem(await t.request({ method: 'POST', url: '/api/personas', body: '{"a":}' }), 400, 'invalid_json');
      expectProblem(await t.request({ method: 'PUT', url: '/auth/api-keys/key_x', body: '{,}' }), 400, 'invalid_json');
    });

    it('refuses an unpaired surrogate escape, which could not be stored as sent', async () => {
      for (const body of ['{"name":"a\\ud800b","instructions":"x"}', '{"name":"a","instructions":"x","traits":["\\uDFFF"]}']) {
        const res = await t.request({ method: 'POST', url: '/personas', body });
        expectProblem(res, 400, 'invalid_json');
      }
      // A proper pair is one character, kept as sent.
      const ok = await t.request({ method: 'POST', url: '/personas', body: '{"name":"smile \\ud83d\\ude00","instructions":"x"}' });
      expect(ok.statusCode, ok.body).toBe(201);
      expect(ok.json().name).toBe('smile \u{1F600}');
      const stored = await t.request({ method: 'GET', url: `/personas/${ok.json().id}` });
      expect(stored.json().name).toBe('smile \u{1F600}');
    });

    it('refuses the NUL character in any string or key, naming where it is (PostgreSQL text cannot hold it)', async () => {
      expectProblem(await t.request({ method: 'POST', url: '/personas', body: '{"name":"a\\u0000b","instructions":"x"}' }), 400, 'validation_failed', 'name');
      expectProblem(await t.request({ method: 'POST', url: '/personas', body: '{"name":"a","instructions":"x","traits":["ok","\\u0000"]}' }), 400, 'validation_failed', 'traits.1');
      expectProblem(await t.request({ method: 'POST', url: '/knowledge', body: '{"kind":"text","name":"n","content":"x","metadata":{"k\\u0000":1}}' }), 400, 'validation_failed', 'metadata.k\u0000');
      // An escaped backslash before "u0000" is text, not NUL.
      const ok = await t.request({ method: 'POST', url: '/personas', body: '{"name":"a\\\\u0000","instructions":"x"}' });
      expect(ok.statusCode, ok.body).toBe(201);
      expect(ok.json().name).toBe('a\\u0000');
    });

    it('refuses prototype poisoning', async () => {
      const res = await t.request({ method: 'POST', url: '/personas', body: '{"name":"a","instructions":"b","__proto__":{"x":1}}' });
      expectProblem(res, 400, 'invalid_json');
    });
  });

  describe('validation_failed (400)', () => {
    it('names a bad array element by its dotted path', async () => {
      const res = await t.request({
        method: 'POST',
        url: '/personas',
        body: { ...VALID_PERSONA, traits: ['calm', 'kind', 'brief', 'x'.repeat(201)] },
      });
      const body = expectProblem(res, 400, 'validation_failed');
      expect(paths(body)).toEqual(['traits.3']);
      expect(body.errors?.[0]?.message).toBeTruthy();
    });

    it('names every bad field', async () => {
      const res = await t.request({
        method: 'POST',
        url: '/personas',
        body: { name: '', instructions: 'ok', temperature: 3, maxTokens: 0, tools: ['ok.run', 'not a tool'] },
      });
      const body = expectProblem(res, 400, 'validation_failed');
      expect(paths(body).sort()).toEqual(['maxTokens', 'name', 'temperature', 'tools.1']);
    });

    it('names a bad query parameter by its name', async () => {
      const res = await t.request({ method: 'GET', url: '/personas?limit=0' });
      const body = expectProblem(res, 400, 'validation_failed');
      expect(paths(body)).toEqual(['limit']);
    });

    it('names each unknown body field (no mass assignment)', async () => {
      const res = await t.request({
        method: 'POST',
        url: '/personas',
        body: { ...VALID_PERSONA, id: 'per_mine', workspaceId: 'wsp_other', createdAt: '2020-01-01T00:00:00Z' },
      });
      const body = expectProblem(res, 400, 'validation_failed');
      expect(paths(body).sort()).toEqual(['createdAt', 'id', 'workspaceId']);
      const list = await t.request({ method: 'GET', url: '/personas?q=Ada' });
      expect(list.json().data).toHaveLength(0);
    });

    it('names each unknown field on updates', async () => {
      const created = await t.request({ method: 'POST', url: '/personas', body: VALID_PERSONA });
      expect(created.statusCode).toBe(201);
      const res = await t.request({ method: 'PUT', url: `/personas/${created.json().id}`, body: { updatedAt: 'x', id: 'y' } });
      const body = expectProblem(res, 400, 'validation_failed');
      expect(paths(body).sort()).toEqual(['id', 'updatedAt']);
    });

    it('names each unknown query parameter', async () => {
      const res = await t.request({ method: 'GET', url: '/personas?foo=1&bar=2&limit=5' });
      const body = expectProblem(res, 400, 'validation_failed');
      expect(paths(body).sort()).toEqual(['bar', 'foo']);
    });

    it('refuses unknown query parameters on routes that take none', async () => {
      const created = await t.request({ method: 'POST', url: '/personas', body: VALID_PERSONA });
      const id = created.json().id as string;
      for (const [method, url] of [
        ['GET', `/personas/${id}?foo=1`],
        ['GET', '/auth/me?verbose=true'],
        ['DELETE', `/personas/${id}?force=1`],
        ['GET', '/health?probe=1'],
      ] as const) {
        const res = await t.request({ method, url, as: url.startsWith('/health') ? null : undefined });
        const body = expectProblem(res, 400, 'validation_failed');
        expect(paths(body), `${method} ${url}`).toEqual([url.split('?')[1]?.split('=')[0]]);
      }
      // Nothing was deleted by the refused DELETE.
      expect((await t.request({ method: 'GET', url: `/personas/${id}` })).statusCode).toBe(200);
    });

    it('refuses a malformed URL before routing, still as problem+json with the request id', async () => {
      const res = await t.request({ method: 'GET', url: '/personas/%zz', headers: { 'x-request-id': 'bad-url-1' } });
      expect(expectProblem(res, 400, 'validation_failed').requestId).toBe('bad-url-1');
    });

    it('refuses JSON nested deeper than 64 levels as validation_failed naming the field, not a 500', async () => {
      const depth = 150_000; // the bodies stay under 1 MiB
      for (const [body, field] of [
        ['['.repeat(depth) + ']'.repeat(depth), '0'],
        [`{"name":"a","instructions":"b","tools":${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}}`, 'tools'],
        [`{"name":"\\ud800","instructions":"b","traits":${'['.repeat(depth)}${']'.repeat(depth)}}`, 'traits'],
        // __proto__ deep inside: the prototype-poisoning scan does not recurse either.
        [`{"tools":${'{"a":'.repeat(depth)}{"__proto__":1}${'}'.repeat(depth)}}`, null],
      ] as const) {
        const res = await t.request({ method: 'POST', url: '/personas', body });
        if (field === null) {
          expectProblem(res, 400, 'invalid_json');
          continue;
        }
        const problem = expectProblem(res, 400, 'validation_failed');
        expect(problem.errors).toHaveLength(1);
        const path = problem.errors![0]!.path.split('.');
        // The path leads to the first value past level 64: the body is level 1.
        expect(path[0]).toBe(field);
        expect(path).toHaveLength(64);
        expect(problem.errors![0]!.message).toBe('nests deeper than 64 levels');
      }
    });

    it('refuses a body that is not an object', async () => {
      for (const body of ['[]', '"text"', '42', 'null', 'true']) {
        const res = await t.request({ method: 'POST', url: '/personas', body });
        expectProblem(res, 400, 'validation_failed');
      }
    });

    it('reads an empty JSON body as {} (validation_failed naming the required fields)', async () => {
      const res = await t.request({ method: 'POST', url: '/personas', body: '', headers: { 'content-type': 'application/json' } });
      const body = expectProblem(res, 400, 'validation_failed');
      expect(paths(body).sort()).toEqual(['instructions', 'name']);

      const blank = await t.request({ method: 'POST', url: '/personas', body: '  \n ', headers: { 'content-type': 'application/json' } });
      expect(paths(expectProblem(blank, 400, 'validation_failed')).sort()).toEqual(['instructions', 'name']);
    });

    it('reads a missing body (no content-type) as {}', async () => {
      const res = await t.request({ method: 'POST', url: '/personas' });
      const body = expectProblem(res, 400, 'validation_failed');
      expect(paths(body).sort()).toEqual(['instructions', 'name']);
      // Where every field is optional, a missing body is a valid {}: a rotation with the default grace period.
      const created = await t.request({ method: 'POST', url: '/auth/api-keys', body: { name: 'rotate me' } });
      const rotated = await t.request({ method: 'PUT', url: `/auth/api-keys/${created.json().id}` });
      expect(rotated.statusCode, rotated.body).toBe(200);
      expect(rotated.json().key).not.toBe(created.json().key);
    });
  });

  describe('unauthorized (401)', () => {
    const cases: [string, Record<string, string>][] = [
      ['missing key', {}],
      ['malformed header: Basic', { authorization: 'Basic dXNlcjpwYXNz' }],
      ['malformed header: Bearer without key', { authorization: 'Bearer' }],
      ['malformed header: two tokens', { authorization: 'Bearer a b' }],
      ['unknown key', { authorization: `Bearer ${UNKNOWN_KEY}` }],
      ['not a key at all', { authorization: 'Bearer not-a-key' }],
    ];
    for (const [name, headers] of cases) {
      it(`refuses a ${name} with WWW-Authenticate: Bearer`, async () => {
        const res = await t.request({ method: 'GET', url: '/personas', as: null, headers });
        expectProblem(res, 401, 'unauthorized');
        expect(res.headers['www-authenticate']).toMatch(/^Bearer\b/);
      });
    }

    it('refuses before reading the body (a bad body gets 401, not 400)', async () => {
      const res = await t.request({ method: 'POST', url: '/personas', as: null, body: '{"broken' });
      expectProblem(res, 401, 'unauthorized');
    });

    it('refuses a revoked key at once', async () => {
      const created = await t.request({ method: 'POST', url: '/auth/api-keys', body: { name: 'soon revoked' } });
      expect(created.statusCode).toBe(201);
      const { id, key } = created.json();
      expect((await t.request({ method: 'GET', url: '/personas', as: key })).statusCode).toBe(200);
      expect((await t.request({ method: 'DELETE', url: `/auth/api-keys/${id}` })).statusCode).toBe(204);
      const res = await t.request({ method: 'GET', url: '/personas', as: key });
      expectProblem(res, 401, 'unauthorized');
      expect(res.headers['www-authenticate']).toMatch(/^Bearer\b/);
    });

    it('still serves the public routes without a key', async () => {
      expect((await t.request({ method: 'GET', url: '/health', as: null })).statusCode).toBe(200);
      expect((await t.request({ method: 'GET', url: '/openapi.json', as: null })).statusCode).toBe(200);
    });
  });

  describe('forbidden (403)', () => {
    let readKey: string;
    let writeKey: string;
    beforeAll(async () => {
      const r = await t.request({ method: 'POST', url: '/auth/api-keys', body: { name: 'reader', scopes: ['read'] } });
      expect(r.statusCode, r.body).toBe(201);
      expect(r.json().scopes).toEqual(['read']);
      readKey = r.json().key;
      const w = await t.request({ method: 'POST', url: '/auth/api-keys', body: { name: 'writer', scopes: ['write'] } });
      expect(w.statusCode, w.body).toBe(201);
      writeKey = w.json().key;
    });

    it('refuses a write with a read-only key', async () => {
      expect((await t.request({ method: 'GET', url: '/personas', as: readKey })).statusCode).toBe(200);
      const res = await t.request({ method: 'POST', url: '/personas', as: readKey, body: VALID_PERSONA });
      expectProblem(res, 403, 'forbidden');
      expect(res.headers['www-authenticate']).toBeUndefined();
    });

    it('refuses key management with a write key', async () => {
      expect((await t.request({ method: 'POST', url: '/personas', as: writeKey, body: VALID_PERSONA })).statusCode).toBe(201);
      expectProblem(await t.request({ method: 'GET', url: '/auth/api-keys', as: writeKey }), 403, 'forbidden');
      expectProblem(await t.request({ method: 'POST', url: '/auth/api-keys', as: writeKey, body: { name: 'x' } }), 403, 'forbidden');
    });
  });

  describe('not_found (404)', () => {
    it('answers an unknown route', async () => {
      const body = expectProblem(await t.request({ method: 'GET', url: '/no/such/route' }), 404, 'not_found');
      expect(body.detail).toContain('/no/such/route');
      expectProblem(await t.request({ method: 'GET', url: '/api/no/such/route' }), 404, 'not_found');
      expectProblem(await t.request({ method: 'PATCH', url: '/personas' }), 404, 'not_found');
    });

    it('answers an unknown persona id on every verb', async () => {
      expectProblem(await t.request({ method: 'GET', url: '/personas/per_doesnotexist' }), 404, 'not_found');
      expectProblem(await t.request({ method: 'PUT', url: '/personas/per_doesnotexist', body: { name: 'x' } }), 404, 'not_found');
      expectProblem(await t.request({ method: 'DELETE', url: '/personas/per_doesnotexist' }), 404, 'not_found');
      expectProblem(await t.request({ method: 'PUT', url: '/auth/api-keys/key_doesnotexist', body: {} }), 404, 'not_found');
      expectProblem(await t.request({ method: 'DELETE', url: '/auth/api-keys/key_doesnotexist' }), 404, 'not_found');
    });

    it('answers an id over 64 characters (and one past the router limit) with 404', async () => {
      for (const id of [`per_${'a'.repeat(61)}`, `per_${'a'.repeat(300)}`]) {
        expect(id.length).toBeGreaterThan(64);
        expectProblem(await t.request({ method: 'GET', url: `/personas/${id}` }), 404, 'not_found');
        expectProblem(await t.request({ method: 'PUT', url: `/personas/${id}`, body: { name: 'x' } }), 404, 'not_found');
        expectProblem(await t.request({ method: 'DELETE', url: `/api/personas/${id}` }), 404, 'not_found');
      }
    });

    it("answers another workspace's persona exactly like a missing one", async () => {
      const other = await t.ctx.services.auth.createWorkspace('elsewhere');
      const created = await t.request({ method: 'POST', url: '/personas', as: other.key.key, body: VALID_PERSONA });
      expect(created.statusCode).toBe(201);
      const id = created.json().id as string;
      const theirs = await t.request({ method: 'GET', url: `/personas/${id}` });
      const missing = await t.request({ method: 'GET', url: `/personas/per_${'x'.repeat(20)}` });
      const a = expectProblem(theirs, 404, 'not_found');
      const b = expectProblem(missing, 404, 'not_found');
      expect(a.detail.replace(id, 'ID')).toBe(b.detail.replace(`per_${'x'.repeat(20)}`, 'ID'));
      expectProblem(await t.request({ method: 'DELETE', url: `/personas/${id}` }), 404, 'not_found');
      expect((await t.request({ method: 'GET', url: `/personas/${id}`, as: other.key.key })).statusCode).toBe(200);
    });
  });

  describe('conflict (409)', () => {
    it("refuses to revoke the workspace's last active admin key", async () => {
      const ws = await t.ctx.services.auth.createWorkspace('lonely');
      const admin = ws.key.key;
      const me = await t.request({ method: 'GET', url: '/auth/me', as: admin });
      expect(me.statusCode).toBe(200);
      const res = await t.request({ method: 'DELETE', url: `/auth/api-keys/${me.json().key.id}`, as: admin });
      expectProblem(res, 409, 'conflict');
      // Still works.
      expect((await t.request({ method: 'GET', url: '/auth/me', as: admin })).statusCode).toBe(200);
    });

    it('refuses to rotate a revoked key', async () => {
      const created = await t.request({ method: 'POST', url: '/auth/api-keys', body: { name: 'to revoke' } });
      const id = created.json().id as string;
      expect((await t.request({ method: 'DELETE', url: `/auth/api-keys/${id}` })).statusCode).toBe(204);
      expectProblem(await t.request({ method: 'PUT', url: `/auth/api-keys/${id}`, body: {} }), 409, 'conflict');
    });
  });

  describe('payload_too_large (413)', () => {
    it('refuses a JSON body over 1 MiB', async () => {
      const body = JSON.stringify({ name: 'big', instructions: 'x'.repeat(1024 * 1024) });
      const res = await t.request({ method: 'POST', url: '/personas', body });
      expectProblem(res, 413, 'payload_too_large');
    });

    it('accepts a JSON body just under 1 MiB (and validates it)', async () => {
      const padding = 1024 * 1024 - 100;
      const body = JSON.stringify({ name: 'big', instructions: 'x'.repeat(padding) });
      expect(Buffer.byteLength(body)).toBeLessThanOrEqual(1024 * 1024);
      const res = await t.request({ method: 'POST', url: '/personas', body });
      // 32 000 characters at most: a validation error, not a size error.
      const problem = expectProblem(res, 400, 'validation_failed');
      expect(paths(problem)).toEqual(['instructions']);
    });
  });

  describe('unsupported_media_type (415)', () => {
    it('refuses a text/plain body', async () => {
      const res = await t.request({
        method: 'POST',
        url: '/personas',
        body: JSON.stringify(VALID_PERSONA),
        headers: { 'content-type': 'text/plain' },
      });
      expectProblem(res, 415, 'unsupported_media_type');
    });

    it('refuses form bodies and accepts JSON with a charset or a +json suffix', async () => {
      const form = await t.request({
        method: 'POST',
        url: '/personas',
        body: 'name=a&instructions=b',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
      });
      expectProblem(form, 415, 'unsupported_media_type');
      for (const type of ['application/json; charset=utf-8', 'application/merge-patch+json']) {
        const res = await t.request({ method: 'POST', url: '/personas', body: VALID_PERSONA, headers: { 'content-type': type } });
        expect(res.statusCode, `${type}: ${res.body}`).toBe(201);
      }
    });
  });

  // 502 and 504 arrive with the model and tool clients (issues 4 and 7); 503 is in http-port.test.ts.
});

describe.each(testBackends())('rate_limited (429) on $kind', (backend) => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp({ backend, env: { SWITCHBOARD_RATE_LIMIT: '3' } });
  });
  afterAll(async () => t.close());

  function expectRateHeaders(res: LightMyRequestResponse, remaining: number) {
    expect(res.headers['ratelimit-limit']).toBe('3');
    expect(res.headers['ratelimit-remaining']).toBe(String(remaining));
    const reset = Number(res.headers['ratelimit-reset']);
    expect(reset).toBeGreaterThanOrEqual(0);
    expect(reset).toBeLessThanOrEqual(60);
  }

  it('limits per key: the 4th request gets 429 with Retry-After; every response carries RateLimit-*', async () => {
    const responses = [
      await t.request({ method: 'GET', url: '/personas' }),
      await t.request({ method: 'GET', url: '/personas/per_missing' }),
      await t.request({ method: 'POST', url: '/personas', body: { name: 'a' } }),
    ];
    expect(responses.map((r) => r.statusCode)).toEqual([200, 404, 400]);
    responses.forEach((r, i) => expectRateHeaders(r, 2 - i));
    expect(responses[0]?.headers['retry-after']).toBeUndefined();

    const limited = await t.request({ method: 'GET', url: '/personas', headers: { 'x-request-id': 'limited-1' } });
    const body = expectProblem(limited, 429, 'rate_limited');
    expect(body.requestId).toBe('limited-1');
    expectRateHeaders(limited, 0);
    const retryAfter = Number(limited.headers['retry-after']);
    expect(Number.isInteger(retryAfter)).toBe(true);
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(60);

    // Unknown routes count too, and are refused the same way.
    expectProblem(await t.request({ method: 'GET', url: '/no/such/route' }), 429, 'rate_limited');
  });

  it('gives every key its own budget', async () => {
    const admin = await t.ctx.services.auth.authenticate(t.adminKey);
    if (!admin) throw new Error('admin key does not authenticate');
    const other = await t.ctx.services.auth.createKey(admin, { name: 'second' });
    const res = await t.request({ method: 'GET', url: '/personas', as: other.key });
    expect(res.statusCode).toBe(200);
    expectRateHeaders(res, 2);
  });

  it('limits requests without a valid key per client address', async () => {
    const codes: number[] = [];
    const noKey = [
      () => t.request({ method: 'GET', url: '/personas', as: null }),
      () => t.request({ method: 'GET', url: '/personas', as: UNKNOWN_KEY }),
      () => t.request({ method: 'GET', url: '/health', as: null }),
    ];
    for (const send of noKey) {
      const res = await send();
      codes.push(res.statusCode);
      expect(res.headers['ratelimit-limit']).toBe('3');
    }
    expect(codes).toEqual([401, 401, 200]);
    const limited = await t.request({ method: 'GET', url: '/personas', as: null });
    expectProblem(limited, 429, 'rate_limited');
    expect(Number(limited.headers['retry-after'])).toBeGreaterThanOrEqual(1);

    // Another client address has its own budget.
    const elsewhere = await t.app.inject({ method: 'GET', url: '/health', remoteAddress: '10.1.2.3' });
    expect(elsewhere.statusCode).toBe(200);
    expect(elsewhere.headers['ratelimit-remaining']).toBe('2');
  });
});

describe.each(testBackends())('internal (500) on $kind', (backend) => {
  const SECRET = 'sk-live-FAKE-SECRET-0123456789';
  const lines: string[] = [];
  let app: Awaited<ReturnType<typeof createTestApp>>;
  beforeAll(async () => {
    const logger = pino(
      { level: 'error' },
      new Writable({
        write(chunk, _enc, done) {
          lines.push(String(chunk));
          done();
        },
      }),
    );
    app = await createTestApp({
      backend,
      overrides: { logger },
      extend: (fastify) => {
        fastify.get('/test/explode', async () => {
          throw new Error(`database password is ${SECRET}`);
        });
        fastify.get('/test/explode-nonerror', async () => {
          throw { message: SECRET, statusCode: 500 };
        });
      },
    });
  });
  afterAll(async () => app?.close());

  it('answers 500 internal without the message or a stack, and logs it under the request id', async () => {
    const res = await app.app.inject({
      method: 'GET',
      url: '/test/explode',
      headers: { authorization: `Bearer ${app.adminKey}`, 'x-request-id': 'boom-1' },
    });
    const body = expectProblem(res, 500, 'internal');
    expect(body.requestId).toBe('boom-1');
    expect(res.body).not.toContain(SECRET);
    expect(res.body).not.toContain('password');
    expect(res.body).not.toMatch(/\bat .*\.(ts|js):\d+/);
    expect(res.body).not.toContain('stack');
    expect(Object.keys(res.json()).sort()).toEqual(['code', 'detail', 'requestId', 'status', 'title', 'type']);
    // The operator can find it: one error line carrying the request id.
    expect(lines.some((l) => l.includes('"boom-1"') && l.includes('"level":50'))).toBe(true);
  });

  it('answers a thrown non-Error the same way', async () => {
    const res = await app.app.inject({
      method: 'GET',
      url: '/api/test/explode-nonerror',
      headers: { authorization: `Bearer ${app.adminKey}` },
    });
    expectProblem(res, 500, 'internal');
    expect(res.body).not.toContain(SECRET);
  });
});

describe.each(testBackends())('request logs on $kind', (backend) => {
  it('carry the request id on every line of a request, with the bearer key redacted (the per-request logger is made lazily)', async () => {
    const logs = captureLogs();
    const t = await createTestApp({ backend, overrides: { logger: logs.logger } });
    try {
      const res = await t.app.inject({ method: 'GET', url: '/personas', headers: { authorization: `Bearer ${t.adminKey}`, 'x-request-id': 'trace-me-1' } });
      expect(res.statusCode).toBe(200);
      const lines = logs
        .text()
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as { reqId?: string; msg?: string });
      const mine = lines.filter((l) => l.reqId === 'trace-me-1');
      // fastify's own "incoming request" and "request completed" at info, bound to the request id.
      expect(mine.map((l) => l.msg)).toEqual(expect.arrayContaining(['incoming request', 'request completed']));
      expect(logs.text()).not.toContain(t.adminKey);
    } finally {
      await t.close();
    }
  });
});
