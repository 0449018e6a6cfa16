import fc from '../helpers/property.js';
import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { testBackends } from '../helpers/postgres.js';
import { expectProblem } from '../helpers/problem.js';

/**
 * Property tests: random JSON at the write endpoints. Validity is decided by the predicates below,
 * written from API.md §2–§3 (not from the zod schemas): valid → 2xx with the input reflected,
 * invalid → 4xx problem+json and nothing changed; never a 5xx.
 */

const RUNS = 150;

// ---------------------------------------------------------------- validity predicates (API.md)

type Obj = Record<string, unknown>;
const isObject = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);
const within = (n: number, min: number, max: number) => n >= min && n <= max;
/** Text of `min`–`max` characters once surrounding whitespace is dropped. */
const isText = (v: unknown, min: number, max: number): v is string => typeof v === 'string' && within(v.trim().length, min, max);
const isToolRef = (v: unknown) =>
  typeof v === 'string' && /^[A-Za-z0-9_-]{1,64}\.(\*|[A-Za-z0-9_-]{1,128})$/.test(v);

const PERSONA_FIELDS: Record<string, (v: unknown) => boolean> = {
  name: (v) => isText(v, 1, 200),
  instructions: (v) => typeof v === 'string' && within(v.length, 1, 32_000),
  traits: (v) => Array.isArray(v) && v.length <= 50 && v.every((t) => isText(t, 1, 200)),
  model: (v) => v === null || isText(v, 1, 200),
  temperature: (v) => v === null || (typeof v === 'number' && within(v, 0, 2)),
  maxTokens: (v) => v === null || (Number.isInteger(v) && within(v as number, 1, 32_000)),
  tools: (v) => Array.isArray(v) && v.length <= 200 && v.every(isToolRef),
};

/**
 * Whether any string or key anywhere holds half a surrogate pair (JSON can escape one; it is not
 * Unicode) or the NUL character (PostgreSQL text cannot hold it): both refused as sent.
 */
function hasUnstorable(v: unknown): boolean {
  if (typeof v === 'string') return /[\uD800-\uDFFF\u0000]/u.test(v);
  if (Array.isArray(v)) return v.some(hasUnstorable);
  if (isObject(v)) return Object.entries(v).some(([k, x]) => hasUnstorable(k) || hasUnstorable(x));
  return false;
}

function fieldsValid(body: unknown, rules: Record<string, (v: unknown) => boolean>, required: string[]): body is Obj {
  if (!isObject(body) || hasUnstorable(body)) return false;
  if (!required.every((k) => Object.hasOwn(body, k))) return false;
  return Object.entries(body).every(([k, v]) => Object.hasOwn(rules, k) && rules[k]!(v));
}

/** `.` or `..`: encodeURIComponent leaves them as they are, and a URL drops them (RFC 3986 §5.2.4). */
const isDotSegment = (s: string) => s === '.' || s === '..';

const validPersonaCreate = (b: unknown) => fieldsValid(b, PERSONA_FIELDS, ['name', 'instructions']);
const validPersonaUpdate = (b: unknown) => fieldsValid(b, PERSONA_FIELDS, []);

const SCOPE_NAMES = ['read', 'write', 'admin'];
const ISO_INSTANT = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(\.\d+)?(Z|[+-](\d{2}):(\d{2}))$/;

/** An ISO-8601 date-time with seconds and a zone (Z or ±hh:mm), a real calendar date, in the future. */
function isFutureInstant(v: unknown): boolean {
  if (typeof v !== 'string') return false;
  const m = ISO_INSTANT.exec(v);
  if (!m) return false;
  const [y, mo, d, h, mi, s] = m.slice(1, 7).map(Number) as [number, number, number, number, number, number];
  if (y < 100 || !within(mo, 1, 12) || h > 23 || mi > 59 || s > 59) return false;
  if (!within(d, 1, new Date(Date.UTC(y, mo, 0)).getUTCDate())) return false;
  if (m[9] !== undefined && (Number(m[9]) > 23 || Number(m[10]) > 59)) return false;
  return Date.parse(v) > Date.now();
}

const KEY_CREATE_FIELDS: Record<string, (v: unknown) => boolean> = {
  name: (v) => isText(v, 1, 200),
  scopes: (v) => Array.isArray(v) && within(v.length, 1, 3) && v.every((s) => SCOPE_NAMES.includes(s as string)),
  expiresAt: isFutureInstant,
};
const validKeyCreate = (b: unknown) => fieldsValid(b, KEY_CREATE_FIELDS, ['name']);

const ROTATE_FIELDS: Record<string, (v: unknown) => boolean> = {
  gracePeriodSeconds: (v) => Number.isInteger(v) && within(v as number, 0, 604_800),
};
const validRotate = (b: unknown) => fieldsValid(b, ROTATE_FIELDS, []);

// ---------------------------------------------------------------- generators

const near = (...values: unknown[]) => fc.constantFrom(...values);
const anyJson = fc.jsonValue({ maxDepth: 2 });
/**
 * One field's value: mostly from its domain, sometimes at or past its edges, now and then
 * anything at all. Validity is still decided by the predicates, never by which branch made it.
 */
const field = (domain: fc.Arbitrary<unknown>, edges: fc.Arbitrary<unknown>) =>
  fc.oneof({ arbitrary: domain, weight: 10 }, { arbitrary: edges, weight: 3 }, { arbitrary: anyJson, weight: 1 });

/** Text with the NUL character (U+0000) somewhere in it, which PostgreSQL text cannot hold. */
const withNul = fc.tuple(fc.string({ maxLength: 6 }), fc.string({ maxLength: 6 })).map(([a, b]) => `${a}\u0000${b}`);
const word = fc.oneof(
  { arbitrary: fc.stringMatching(/^[A-Za-z][A-Za-z0-9 ._-]{0,15}$/), weight: 6 },
  { arbitrary: fc.string({ unit: 'grapheme', minLength: 1, maxLength: 8 }), weight: 3 },
  // Any UTF-16 code units, lone surrogates included.
  { arbitrary: fc.string({ unit: 'binary', minLength: 1, maxLength: 6 }), weight: 1 },
  { arbitrary: withNul, weight: 1 },
);
const textEdges = fc.oneof(
  near('', ' ', '\t\n', '  padded  ', 'x'.repeat(200), 'x'.repeat(201), ` ${'x'.repeat(200)} `),
  fc.integer({ min: 195, max: 205 }).map((n) => 'y'.repeat(n)),
  fc.string({ maxLength: 6 }),
);
const number = fc.oneof(
  fc.double({ noNaN: true, noDefaultInfinity: true, min: -10, max: 40_000 }),
  fc.integer({ min: -5, max: 33_000 }),
  near(0, 2, 2.000001, -0.0001, 1, 1.5, 32_000, 32_001, 1e21, '1'),
);
const toolRef = fc
  .tuple(fc.stringMatching(/^[A-Za-z0-9_-]{1,8}$/), fc.stringMatching(/^(\*|[A-Za-z0-9_-]{1,8})$/))
  .map(([t, a]) => `${t}.${a}`);
const toolRefEdges = near('bad', 'x.', '.y', 'a.b.c', 'sp ace.x', 'ü.x', '*.*', `${'t'.repeat(64)}.x`, `${'t'.repeat(65)}.x`);

const extraFields = fc.dictionary(
  fc.constantFrom('id', 'workspaceId', 'createdAt', 'updatedAt', 'Name', 'prompt', '__proto__', 'constructor'),
  anyJson,
  { minKeys: 1, maxKeys: 1 },
);
/** A record of the real fields (`required` ones mostly present) plus, sometimes, one that does not exist. */
function fieldSoup(fields: Record<string, fc.Arbitrary<unknown>>, required: string[] = []) {
  const known = fc.oneof(
    { arbitrary: fc.record(fields, { requiredKeys: required }), weight: 4 },
    { arbitrary: fc.record(fields, { requiredKeys: [] }), weight: 1 },
  );
  const extra = fc.oneof({ arbitrary: fc.constant({}), weight: 8 }, { arbitrary: extraFields, weight: 1 });
  return fc.tuple(known, extra).map(([k, e]) => JSON.stringify({ ...k, ...e }));
}

const personaFields = {
  name: field(word, textEdges),
  instructions: field(fc.oneof(word, near('Be brief.', 'z'.repeat(32_000))), fc.oneof(textEdges, near('z'.repeat(32_001)))),
  traits: field(fc.array(word, { maxLength: 4 }), fc.oneof(fc.array(textEdges, { minLength: 1, maxLength: 2 }), near(Array(50).fill('t'), Array(51).fill('t'), [1], 'calm'))),
  model: field(fc.oneof(word, fc.constant(null), near('gpt-4o-mini', 'offline')), textEdges),
  temperature: field(fc.oneof(fc.double({ min: 0, max: 2, noNaN: true }), fc.constant(null)), number),
  maxTokens: field(fc.oneof(fc.integer({ min: 1, max: 32_000 }), fc.constant(null)), number),
  tools: field(fc.array(toolRef, { maxLength: 4 }), fc.array(fc.oneof(toolRef, toolRefEdges), { minLength: 1, maxLength: 3 })),
};
const personaCreateSoup = fieldSoup(personaFields, ['name', 'instructions']);
const personaUpdateSoup = fieldSoup(personaFields);

const DAY = 86_400_000;
function iso(d: Date, offsetMinutes: number, millis: boolean): string {
  const local = new Date(d.getTime() + offsetMinutes * 60_000).toISOString().slice(0, millis ? 23 : 19);
  if (offsetMinutes === 0) return `${local}Z`;
  const abs = Math.abs(offsetMinutes);
  const pad = (n: number) => String(n).padStart(2, '0');
  return `${local}${offsetMinutes > 0 ? '+' : '-'}${pad(Math.floor(abs / 60))}:${pad(abs % 60)}`;
}
/** An instant at least a day in the future or the past, in one of the accepted spellings. */
const instant = fc
  .tuple(
    fc.oneof(
      fc.date({ min: new Date(Date.now() + DAY), max: new Date('9000-01-01T00:00:00Z'), noInvalidDate: true }),
      fc.date({ min: new Date('1971-01-01T00:00:00Z'), max: new Date(Date.now() - DAY), noInvalidDate: true }),
    ),
    fc.constantFrom(0, 0, 120, -480, 330, 840),
    fc.boolean(),
  )
  .map(([d, offset, millis]) => iso(d, offset, millis));
const instantEdges = fc.oneof(
  near(
    '2999-01-01',
    '2999-01-01T00:00Z',
    '2999-01-01T00:00:00+0200',
    '2999-02-30T00:00:00Z',
    '2999-02-28T00:00:00Z',
    '2999-01-01T24:00:00Z',
    '2999-01-01 00:00:00Z',
    'tomorrow',
    '',
  ),
  number,
);
const keyFields = {
  name: field(word, textEdges),
  scopes: field(
    fc.array(fc.constantFrom(...SCOPE_NAMES), { minLength: 1, maxLength: 3 }),
    fc.oneof(near([], ['read', 'read', 'write', 'admin'], 'read'), fc.array(near('READ', 'owner', '', 'read'), { minLength: 1, maxLength: 2 })),
  ),
  expiresAt: field(instant, instantEdges),
};
const keySoup = fieldSoup(keyFields, ['name']);
const rotateSoup = fieldSoup({
  gracePeriodSeconds: field(fc.integer({ min: 0, max: 604_800 }), fc.oneof(number, near(604_801, -1, 0.5, '60', null))),
});

/** Random JSON text (mostly not an object of the right shape). */
const randomJsonText = fc.oneof(fc.json({ maxDepth: 3 }), anyJson.map((v) => JSON.stringify(v)));

// ---------------------------------------------------------------- assertions

/** A 4xx problem+json, and the error code a JSON body that fails validation must have. */
function expectRefused(res: LightMyRequestResponse, rawBody: string) {
  expect(res.statusCode, res.body).toBeGreaterThanOrEqual(400);
  expect(res.statusCode, res.body).toBeLessThan(500);
  expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
  const problem = res.json();
  expect(problem.status).toBe(res.statusCode);
  expect(problem.type).toBe(`https://switchboard.dev/errors/${problem.code}`);
  expect(problem.requestId).toBe(res.headers['x-request-id']);
  // Well-formed JSON that fails the contract is a validation failure; only keys that could poison
  // a prototype, or half a surrogate pair, make the parser itself refuse it.
  const parserMayRefuse = /"(__proto__|constructor)"/.test(rawBody) || hasUnstorable(JSON.parse(rawBody));
  const allowed = parserMayRefuse ? ['validation_failed', 'invalid_json'] : ['validation_failed'];
  expect(allowed, res.body).toContain(problem.code);
  expect(res.statusCode).toBe(400);
}

/** Counts each branch, so a generator that never reaches one of them fails the test. */
function tally() {
  const counts = { accepted: 0, refused: 0 };
  return {
    counts,
    check(minEach: number) {
      expect(counts.accepted, JSON.stringify(counts)).toBeGreaterThanOrEqual(minEach);
      expect(counts.refused, JSON.stringify(counts)).toBeGreaterThanOrEqual(minEach);
    },
  };
}

const fcOptions = { numRuns: RUNS, endOnFailure: true } as const;

describe.each(testBackends())('fuzzing the write endpoints on $kind', (backend) => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp({ backend });
  });
  afterAll(async () => t.close());

  describe('POST /personas', () => {
    async function checkCreate(raw: string, tallied: ReturnType<typeof tally>) {
      const res = await t.request({ method: 'POST', url: '/personas', body: raw });
      expect(res.statusCode, res.body).toBeLessThan(500);
      const body: unknown = JSON.parse(raw);
      if (!validPersonaCreate(body)) {
        expectRefused(res, raw);
        tallied.counts.refused++;
        return;
      }
      tallied.counts.accepted++;
      expect(res.statusCode, `${raw} → ${res.body}`).toBe(201);
      const p = res.json();
      expect(res.headers.location).toBe(`/personas/${p.id}`);
      expect(p).toMatchObject({
        name: (body.name as string).trim(),
        instructions: body.instructions,
        traits: ((body.traits as string[] | undefined) ?? []).map((s) => s.trim()),
        model: typeof body.model === 'string' ? body.model.trim() : null,
        temperature: body.temperature ?? null,
        maxTokens: body.maxTokens ?? null,
      });
      expect([...p.tools].sort()).toEqual([...new Set((body.tools as string[] | undefined) ?? [])].sort());
      const again = await t.request({ method: 'GET', url: `/personas/${p.id}` });
      expect(again.json()).toEqual(p);
    }

    it('random JSON: 201 only for a valid persona, otherwise 400 problem+json', async () => {
      const seen = tally();
      await fc.assert(fc.asyncProperty(randomJsonText, (raw) => checkCreate(raw, seen)), fcOptions);
      expect(seen.counts.refused).toBe(RUNS); // random JSON is practically never a valid persona
    });

    it('the real field names with random values', async () => {
      const seen = tally();
      await fc.assert(fc.asyncProperty(personaCreateSoup, (raw) => checkCreate(raw, seen)), fcOptions);
      seen.check(15);
    });

    it('near-JSON garbage: 400 invalid_json (or validation_failed when it happens to parse)', async () => {
      const jsonish = fc.string({ unit: fc.constantFrom(...'{}[]":,0123456789.eE+-truefalsn \\'.split('')), maxLength: 30 });
      await fc.assert(
        fc.asyncProperty(jsonish, async (raw) => {
          const res = await t.request({ method: 'POST', url: '/personas', body: raw });
          expect(res.statusCode, res.body).toBeLessThan(500);
          let parsed: { ok: true; value: unknown } | { ok: false };
          try {
            parsed = { ok: true, value: JSON.parse(raw) };
          } catch {
            parsed = { ok: false };
          }
          if (parsed.ok) {
            expect(validPersonaCreate(parsed.value)).toBe(false);
            expectRefused(res, raw);
          } else {
            expect(res.statusCode).toBe(400);
            expect(res.json().code, `${JSON.stringify(raw)} → ${res.body}`).toBe(raw.trim() === '' ? 'validation_failed' : 'invalid_json');
          }
        }),
        fcOptions,
      );
    });
  });

  describe('PUT /personas/:id', () => {
    let current: Record<string, unknown>;
    beforeAll(async () => {
      const res = await t.request({ method: 'POST', url: '/personas', body: { name: 'Target', instructions: 'Original.' } });
      expect(res.statusCode).toBe(201);
      current = res.json();
    });

    async function checkUpdate(raw: string, tallied: ReturnType<typeof tally>) {
      const url = `/personas/${current.id as string}`;
      const res = await t.request({ method: 'PUT', url, body: raw });
      expect(res.statusCode, res.body).toBeLessThan(500);
      const body: unknown = JSON.parse(raw);
      if (validPersonaUpdate(body)) {
        tallied.counts.accepted++;
        expect(res.statusCode, `${raw} → ${res.body}`).toBe(200);
        const expected = { ...current };
        if (body.name !== undefined) expected.name = (body.name as string).trim();
        if (body.instructions !== undefined) expected.instructions = body.instructions;
        if (body.traits !== undefined) expected.traits = (body.traits as string[]).map((s) => s.trim());
        if (body.model !== undefined) expected.model = typeof body.model === 'string' ? body.model.trim() : null;
        if (body.temperature !== undefined) expected.temperature = body.temperature;
        if (body.maxTokens !== undefined) expected.maxTokens = body.maxTokens;
        const p = res.json();
        const tools = body.tools === undefined ? (current.tools as string[]) : [...new Set(body.tools as string[])];
        // A change to any field is the next version; an update that changes nothing adds none (API.md §3).
        const same = (k: string) => JSON.stringify(expected[k]) === JSON.stringify(current[k]);
        const changed = !['name', 'instructions', 'traits', 'model', 'temperature', 'maxTokens'].every(same) || JSON.stringify(tools) !== JSON.stringify(current.tools);
        expected.version = (current.version as number) + (changed ? 1 : 0);
        expect([...p.tools].sort()).toEqual([...tools].sort());
        expect({ ...p, tools: undefined, updatedAt: undefined }).toEqual({ ...expected, tools: undefined, updatedAt: undefined });
        current = p;
      } else {
        tallied.counts.refused++;
        expectRefused(res, raw);
      }
      // Whatever happened, the stored persona is exactly what the last accepted update made it.
      const stored = await t.request({ method: 'GET', url });
      expect(stored.json()).toEqual(current);
    }

    it('random JSON', async () => {
      const seen = tally();
      await fc.assert(fc.asyncProperty(randomJsonText, (raw) => checkUpdate(raw, seen)), fcOptions);
      // Random JSON is rarely valid, but `{}` (an empty update) is, and fc.json produces it.
      expect(seen.counts.refused).toBeGreaterThan(RUNS / 2);
    });

    it('the real field names with random values', async () => {
      const seen = tally();
      await fc.assert(fc.asyncProperty(personaUpdateSoup, (raw) => checkUpdate(raw, seen)), fcOptions);
      seen.check(15);
    });

    it('any id that is not a persona of the workspace: 404 problem+json', async () => {
      // `.` and `..` are dot-segments, which no URL carries as a path segment: `/personas/.` is
      // resolved to `/personas/`, the list. They are no ids a client can ask for.
      const id = fc
        .oneof({ arbitrary: fc.string({ unit: 'grapheme', minLength: 1, maxLength: 300 }), weight: 4 }, { arbitrary: withNul, weight: 1 })
        .filter((s) => !isDotSegment(s));
      await fc.assert(
        fc.asyncProperty(id, fc.constantFrom('GET', 'PUT', 'DELETE'), async (raw, method) => {
          const url = `/personas/${encodeURIComponent(raw)}`;
          const res = await t.request({ method, url, ...(method === 'PUT' ? { body: {} } : {}) });
          expect(res.statusCode, `${method} ${url} → ${res.body}`).toBe(404);
          expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
          expect(res.json().code).toBe('not_found');
        }),
        fcOptions,
      );
    });
  });

  describe('GET /personas?q=', () => {
    it('any search text: a page of personas, or a 400 naming q when it holds a NUL', async () => {
      let nul = 0;
      await fc.assert(
        fc.asyncProperty(fc.oneof({ arbitrary: fc.string({ unit: 'grapheme', maxLength: 40 }), weight: 3 }, { arbitrary: withNul, weight: 1 }), async (q) => {
          const res = await t.request({ method: 'GET', url: `/personas?q=${encodeURIComponent(q)}` });
          expect(res.statusCode, `${JSON.stringify(q)} → ${res.body}`).toBeLessThan(500);
          if (q.includes('\u0000')) {
            nul++;
            expectProblem(res, 400, 'validation_failed', 'q');
          } else {
            expect(res.statusCode, `${JSON.stringify(q)} → ${res.body}`).toBe(200);
            expect(Array.isArray(res.json().data)).toBe(true);
          }
        }),
        fcOptions,
      );
      expect(nul).toBeGreaterThan(10);
    });
  });

  describe('POST /auth/api-keys', () => {
    async function checkCreateKey(raw: string, tallied: ReturnType<typeof tally>) {
      const res = await t.request({ method: 'POST', url: '/auth/api-keys', body: raw });
      expect(res.statusCode, res.body).toBeLessThan(500);
      const body: unknown = JSON.parse(raw);
      if (!validKeyCreate(body)) {
        tallied.counts.refused++;
        expectRefused(res, raw);
        return;
      }
      tallied.counts.accepted++;
      expect(res.statusCode, `${raw} → ${res.body}`).toBe(201);
      const k = res.json();
      expect(res.headers.location).toBe(`/auth/api-keys/${k.id}`);
      expect(k.key).toMatch(/^sb_[0-9A-Za-z]{40}$/);
      expect(k.prefix).toBe(k.key.slice(0, 10));
      expect(k.name).toBe((body.name as string).trim());
      expect(k.status).toBe('active');
      expect([...k.scopes].sort()).toEqual([...new Set((body.scopes as string[] | undefined) ?? ['read', 'write'])].sort());
      expect(k.expiresAt === null ? null : Date.parse(k.expiresAt)).toBe(
        body.expiresAt === undefined ? null : Date.parse(body.expiresAt as string),
      );
      // The new secret works at once.
      const me = await t.request({ method: 'GET', url: '/auth/me', as: k.key });
      expect(me.statusCode).toBe(200);
      expect(me.json().key.id).toBe(k.id);
    }

    it('random JSON', async () => {
      const seen = tally();
      await fc.assert(fc.asyncProperty(randomJsonText, (raw) => checkCreateKey(raw, seen)), fcOptions);
      expect(seen.counts.refused).toBe(RUNS);
    });

    it('the real field names with random values', async () => {
      const seen = tally();
      await fc.assert(fc.asyncProperty(keySoup, (raw) => checkCreateKey(raw, seen)), fcOptions);
      seen.check(15);
    });
  });

  describe('PUT /auth/api-keys/:id (rotating a dedicated key, never the admin key in use)', () => {
    let target: { id: string; key: string };
    beforeAll(async () => {
      const res = await t.request({ method: 'POST', url: '/auth/api-keys', body: { name: 'rotation target', scopes: ['read'] } });
      expect(res.statusCode).toBe(201);
      target = { id: res.json().id, key: res.json().key };
    });

    async function checkRotate(raw: string, tallied: ReturnType<typeof tally>) {
      const before = target.key;
      const res = await t.request({ method: 'PUT', url: `/auth/api-keys/${target.id}`, body: raw });
      expect(res.statusCode, res.body).toBeLessThan(500);
      const body: unknown = JSON.parse(raw);
      if (!validRotate(body)) {
        tallied.counts.refused++;
        expectRefused(res, raw);
        // Nothing rotated: the current secret still works.
        expect((await t.request({ method: 'GET', url: '/auth/me', as: before })).statusCode).toBe(200);
        return;
      }
      tallied.counts.accepted++;
      expect(res.statusCode, `${raw} → ${res.body}`).toBe(200);
      const k = res.json();
      expect(k.id).toBe(target.id);
      expect(k.key).toMatch(/^sb_[0-9A-Za-z]{40}$/);
      expect(k.key).not.toBe(before);
      expect(k.scopes).toEqual(['read']);
      target.key = k.key;
      expect((await t.request({ method: 'GET', url: '/auth/me', as: k.key })).statusCode).toBe(200);
      // The old secret works only during a grace period.
      const grace = (body.gracePeriodSeconds as number | undefined) ?? 0;
      expect((await t.request({ method: 'GET', url: '/auth/me', as: before })).statusCode).toBe(grace > 0 ? 200 : 401);
    }

    it('random JSON', async () => {
      const seen = tally();
      await fc.assert(fc.asyncProperty(randomJsonText, (raw) => checkRotate(raw, seen)), fcOptions);
      expect(seen.counts.refused).toBeGreaterThan(RUNS / 2);
    });

    it('the real field names with random values', async () => {
      const seen = tally();
      await fc.assert(fc.asyncProperty(rotateSoup, (raw) => checkRotate(raw, seen)), fcOptions);
      seen.check(15);
    });

    it('the admin key used throughout was never rotated', async () => {
      expect((await t.request({ method: 'GET', url: '/auth/me' })).statusCode).toBe(200);
    });
  });

  it('still answers GET /health afterwards', async () => {
    const res = await t.request({ method: 'GET', url: '/health', as: null });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({ status: 'ok', database: 'ok' });
  });
});
