// API.md §4: GET /knowledge/search — modes, limits, metadata filters, persona scope, hostile query
// text, and isolation between workspaces.
import fc from '../helpers/property.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { testBackends } from '../helpers/postgres.js';
import { addSource, createPersona } from '../helpers/factories.js';
import { expectProblem } from '../helpers/problem.js';
import { fixture, foundSources, MODES, search, searchUrl } from './knowledge-helpers.js';

describe('knowledge search (API.md §4)', { timeout: 15_000 }, () => {
  let t: TestApp;
  let personaA: string;
  let personaB: string;
  const ids: Record<string, string> = {};

  beforeAll(async () => {
    t = await createTestApp();
    personaA = (await createPersona(t, { name: 'A' })).id;
    personaB = (await createPersona(t, { name: 'B' })).id;
    ids.tea = (await addSource(t, { kind: 'text', name: 'Tea', content: 'Green tea is steeped at eighty degrees for two minutes. Black tea takes boiling water.', metadata: { team: 'support', lang: 'en' } })).id;
    ids.coffee = (await addSource(t, { kind: 'text', name: 'Coffee', content: 'Espresso needs finely ground coffee beans and nine bars of pressure.', metadata: { team: 'support', lang: 'fr' } })).id;
    ids.guide = (await addSource(t, { kind: 'markdown', name: 'Guide', content: fixture('sample.md').toString('utf8'), metadata: { team: 'docs', tags: ['a', 'b'] } })).id;
    ids.privateA = (await addSource(t, { kind: 'text', name: 'Secret of A', content: 'The quokka colony nests behind the lighthouse.', personaId: personaA, metadata: { team: 'support' } })).id;
    ids.sharedZebra = (await addSource(t, { kind: 'text', name: 'Zebra facts', content: 'A zebra has black and white stripes; every zebra pattern is unique.' })).id;
    for (let i = 0; i < 7; i++) {
      ids[`walrus${i}`] = (await addSource(t, { kind: 'text', name: `Walrus ${i}`, content: `Walrus note number ${i}: the walrus rests on sea ice.` })).id;
    }
  });
  afterAll(async () => t.close());

  it('answers every mode with the documented fields, best score first', async () => {
    for (const mode of MODES) {
      const data = await search(t, { q: 'green tea steeped minutes', mode, limit: 10 });
      expect(data.length, mode).toBeGreaterThan(0);
      for (const hit of data) {
        expect(Object.keys(hit).sort()).toEqual(['chunkId', 'metadata', 'position', 'score', 'sourceId', 'sourceName', 'text']);
        expect(hit.chunkId).toMatch(/^chk_/);
        expect(Number.isFinite(hit.score)).toBe(true);
        expect(Number.isInteger(hit.position)).toBe(true);
      }
      const scores = data.map((h) => h.score);
      expect(scores, mode).toEqual([...scores].sort((a, b) => b - a));
      expect(data[0], mode).toMatchObject({ sourceId: ids.tea, sourceName: 'Tea', position: 0, metadata: { team: 'support', lang: 'en' } });
      expect(data[0]!.text).toContain('Green tea');
    }
    // A hit's chunk is the one GET /knowledge/:id/chunks lists.
    const [hit] = await search(t, { q: 'snake_case names', mode: 'keyword' });
    const chunks = (await t.request({ method: 'GET', url: `/knowledge/${ids.guide}/chunks?limit=100` })).json().data;
    expect(chunks.find((c: { id: string }) => c.id === hit!.chunkId)).toMatchObject({ position: hit!.position, text: hit!.text });
  });

  it('applies limit: default 5, at most 50', async () => {
    for (const mode of MODES) {
      expect((await search(t, { q: 'walrus sea ice', mode })).length, mode).toBe(5);
      expect((await search(t, { q: 'walrus sea ice', mode, limit: 7 })).length, mode).toBe(7);
      expect((await search(t, { q: 'walrus', mode, limit: 1 })).length, mode).toBe(1);
    }
    const all = await search(t, { q: 'walrus', mode: 'keyword', limit: 50 });
    expect(new Set(all.map((h) => h.sourceId))).toEqual(new Set(Array.from({ length: 7 }, (_, i) => ids[`walrus${i}`])));
    for (const limit of ['51', '0', '-1', '2.5', 'ten']) {
      expectProblem(await t.request({ method: 'GET', url: searchUrl({ q: 'walrus', limit }) }), 400, 'validation_failed', 'limit');
    }
  });

  it('requires q and refuses unknown parameters and modes', async () => {
    expectProblem(await t.request({ method: 'GET', url: '/knowledge/search' }), 400, 'validation_failed', 'q');
    expectProblem(await t.request({ method: 'GET', url: '/knowledge/search?q=' }), 400, 'validation_failed', 'q');
    expectProblem(await t.request({ method: 'GET', url: '/knowledge/search?q=%20%20%20' }), 400, 'validation_failed', 'q');
    expectProblem(await t.request({ method: 'GET', url: searchUrl({ q: 'x'.repeat(2001) }) }), 400, 'validation_failed', 'q');
    expectProblem(await t.request({ method: 'GET', url: '/knowledge/search?q=tea&mode=fuzzy' }), 400, 'validation_failed', 'mode');
    expectProblem(await t.request({ method: 'GET', url: '/knowledge/search?q=tea&sort=score' }), 400, 'validation_failed', 'sort');
    const alias = await t.request({ method: 'GET', url: '/api/knowledge/search?q=green%20tea' });
    expect(alias.statusCode).toBe(200);
    // hybrid is the default mode.
    expect(alias.json().mode).toBe('hybrid');
    expect(alias.json().data[0].sourceId).toBe(ids.tea);
  });

  it('filters on metadata: exact match, every field ANDed', async () => {
    for (const mode of MODES) {
      const support = await search(t, { q: 'tea coffee quokka', mode, limit: 50, filter: JSON.stringify({ team: 'support' }) });
      expect(new Set(support.map((h) => h.sourceId)), mode).toEqual(new Set([ids.tea, ids.coffee, ids.privateA]));
      const both = await foundSources(t, { q: 'tea coffee', mode, limit: 50, filter: JSON.stringify({ team: 'support', lang: 'fr' }) });
      expect(both, mode).toEqual(new Set([ids.coffee]));
      const array = await foundSources(t, { q: 'install', mode, limit: 50, filter: JSON.stringify({ tags: ['a', 'b'] }) });
      expect(array, mode).toEqual(new Set([ids.guide]));
      expect((await search(t, { q: 'tea', mode, filter: JSON.stringify({ tags: ['b', 'a'] }) })).length, mode).toBe(0);
      expect((await search(t, { q: 'tea', mode, filter: JSON.stringify({ team: 'nobody' }) })).length, mode).toBe(0);
      expect((await search(t, { q: 'tea', mode, filter: JSON.stringify({ missing: null }) })).length, mode).toBe(0);
      // An empty filter filters nothing.
      expect(await foundSources(t, { q: 'green tea', mode, filter: '{}' }), mode).toContain(ids.tea);
    }
    for (const filter of ['notjson', '[1]', '"team"', 'null', '42']) {
      expectProblem(await t.request({ method: 'GET', url: searchUrl({ q: 'tea', filter }) }), 400, 'validation_failed', 'filter');
    }
  });

  it('scopes by persona: private sources only for their persona, shared ones for all', async () => {
    for (const mode of MODES) {
      const q = { q: 'quokka colony lighthouse', mode, limit: 50 } as const;
      expect(await foundSources(t, q), mode).toContain(ids.privateA);
      expect(await foundSources(t, { ...q, personaId: personaA }), mode).toContain(ids.privateA);
      expect(await foundSources(t, { ...q, personaId: personaB }), mode).not.toContain(ids.privateA);
      // With a filter too.
      const filter = JSON.stringify({ team: 'support' });
      expect(await foundSources(t, { ...q, personaId: personaB, filter }), mode).not.toContain(ids.privateA);
      expect(await foundSources(t, { ...q, personaId: personaA, filter }), mode).toContain(ids.privateA);
      const zebra = { q: 'zebra stripes', mode, limit: 50 } as const;
      expect(await foundSources(t, { ...zebra, personaId: personaA }), mode).toContain(ids.sharedZebra);
      expect(await foundSources(t, { ...zebra, personaId: personaB }), mode).toContain(ids.sharedZebra);
    }
    expectProblem(await t.request({ method: 'GET', url: searchUrl({ q: 'quokka', personaId: 'per_missing' }) }), 404, 'not_found');
    expectProblem(await t.request({ method: 'GET', url: '/knowledge/search?q=quokka&personaId=' }), 404, 'not_found');
    const other = await t.ctx.services.auth.createWorkspace('other-persona-search');
    const foreign = (await createPersona(t, { name: 'Foreign' }, other.key.key)).id;
    expectProblem(await t.request({ method: 'GET', url: searchUrl({ q: 'quokka', personaId: foreign }) }), 404, 'not_found');
  });

  it('never answers 5xx to query text that looks like FTS5 syntax', async () => {
    const hostile = [
      '"', '""', '"tea', '*', 'tea*', '*tea', 'NEAR(', 'NEAR(tea coffee, 2)', 'AND OR NOT', 'tea AND', 'NOT tea', '^tea', '^', ':',
      'title:tea', 'body: tea', '-', '-tea', 'tea -coffee', '(', ')', '((tea)', 'tea)', '{title body}: tea', '+', '[', ']',
      'the and of', 'a', '?!.,;', '....', '\\', "'", '🍵☕🦓', '🦓 zebra', 'ￜ', '\u0000', 'x'.repeat(2000), 'tea '.repeat(500), 'Zürich naïve 日本語',
    ];
    for (const q of hostile) {
      for (const mode of MODES) {
        const res = await t.request({ method: 'GET', url: searchUrl({ q, mode }) });
        // A NUL is refused in any query parameter (PostgreSQL text cannot hold it).
        const expected = q.trim() === '' || q.trim().length > 2000 || q.includes('\0') ? 400 : 200;
        expect(res.statusCode, `${mode} ${JSON.stringify(q).slice(0, 40)}: ${res.body.slice(0, 200)}`).toBe(expected);
      }
    }
    expect((await search(t, { q: '"zebra" OR NEAR(', mode: 'keyword' })).map((h) => h.sourceId)).toContain(ids.sharedZebra);
  });

  it('fuzz: arbitrary unicode query text never answers 5xx (keyword and hybrid)', async () => {
    const text = fc.oneof(
      fc.string({ unit: 'binary', maxLength: 60 }),
      fc.string({ unit: 'grapheme', maxLength: 60 }),
      fc.array(fc.constantFrom('"', '*', 'NEAR(', 'AND', 'OR', 'NOT', '^', ':', '-', '(', ')', 'tea', 'zebra', ' ', '🦓', 'the'), { maxLength: 12 }).map((a) => a.join(' ')),
    );
    await fc.assert(
      fc.asyncProperty(text, fc.constantFrom('keyword', 'hybrid'), async (q, mode) => {
        const res = await t.request({ method: 'GET', url: searchUrl({ q, mode }) });
        const expected = q.trim() === '' || q.includes('\0') ? 400 : 200;
        expect(res.statusCode, res.body.slice(0, 200)).toBe(expected);
        if (expected === 200) expect(res.json().mode).toBe(mode);
      }),
      { numRuns: 100, seed: 0x5b0a4d },
    );
  });
});

describe.each(testBackends())('workspace isolation on $kind (API.md §1, §4)', { timeout: 15_000 }, (backend) => {
  let t: TestApp;
  let bKey: string;
  let aSource: { id: string };
  let bSource: { id: string };
  let aPersona: string;

  beforeAll(async () => {
    t = await createTestApp({ backend });
    aPersona = (await createPersona(t, { name: 'A persona' })).id;
    aSource = await addSource(t, { kind: 'text', name: 'A doc', content: 'Marmalade recipe: oranges, sugar and patience.', metadata: { owner: 'a' } });
    await addSource(t, { kind: 'text', name: 'A private', content: 'Marmalade secret ingredient is whisky.', personaId: aPersona, metadata: { owner: 'a' } });
    const b = await t.ctx.services.auth.createWorkspace('b');
    bKey = b.key.key;
    bSource = await addSource(t, { kind: 'text', name: 'B doc', content: 'Bicycle maintenance: oil the chain monthly.', metadata: { owner: 'b' } }, bKey);
  });
  afterAll(async () => t.close());

  it('never shows A’s sources to B: list, get, chunks, search, PUT, DELETE', async () => {
    const list = (await t.request({ method: 'GET', url: '/knowledge', as: bKey })).json();
    expect(list.data.map((s: { id: string }) => s.id)).toEqual([bSource.id]);
    expectProblem(await t.request({ method: 'GET', url: `/knowledge/${aSource.id}`, as: bKey }), 404, 'not_found');
    expectProblem(await t.request({ method: 'GET', url: `/knowledge/${aSource.id}/chunks`, as: bKey }), 404, 'not_found');
    // A's id with a NUL after it (PostgreSQL text cannot hold one) names no source either, and a
    // persona id with one in a query parameter is refused by name.
    expectProblem(await t.request({ method: 'GET', url: `/knowledge/${aSource.id}%00`, as: bKey }), 404, 'not_found');
    expectProblem(await t.request({ method: 'GET', url: `/knowledge?personaId=${aPersona}%00`, as: bKey }), 400, 'validation_failed', 'personaId');
    expectProblem(await t.request({ method: 'GET', url: `/knowledge?personaId=${aPersona}`, as: bKey }), 404, 'not_found');
    expectProblem(await t.request({ method: 'GET', url: searchUrl({ q: 'marmalade', personaId: aPersona }), as: bKey }), 404, 'not_found');
    for (const mode of MODES) {
      for (const filter of [undefined, JSON.stringify({ owner: 'a' }), '{}']) {
        // A's documents match this query far better than B's, which shares one word with it: only B's may come.
        const data = await search(t, { q: 'marmalade oranges whisky sugar chain', mode, limit: 50, ...(filter ? { filter } : {}) }, bKey);
        for (const hit of data) expect(hit.sourceId, `${mode} ${filter}`).toBe(bSource.id);
        expect(data.length, `${mode} ${filter}`).toBe(filter === JSON.stringify({ owner: 'a' }) ? 0 : 1);
      }
    }
    expectProblem(await t.request({ method: 'PUT', url: `/knowledge/${aSource.id}`, body: { name: 'stolen' }, as: bKey }), 404, 'not_found');
    expectProblem(await t.request({ method: 'PUT', url: `/knowledge/${aSource.id}`, body: {}, as: bKey }), 404, 'not_found');
    expectProblem(await t.request({ method: 'DELETE', url: `/knowledge/${aSource.id}`, as: bKey }), 404, 'not_found');
    // B can not move its own source to A's persona either.
    expectProblem(await t.request({ method: 'PUT', url: `/knowledge/${bSource.id}`, body: { personaId: aPersona }, as: bKey }), 404, 'not_found');

    const still = (await t.request({ method: 'GET', url: `/knowledge/${aSource.id}` })).json();
    expect(still).toMatchObject({ id: aSource.id, name: 'A doc', status: 'ready' });
    // And A does not see B's.
    for (const mode of MODES) {
      expect(await foundSources(t, { q: 'bicycle chain', mode, limit: 50 }), mode).not.toContain(bSource.id);
    }
    expectProblem(await t.request({ method: 'GET', url: `/knowledge/${bSource.id}` }), 404, 'not_found');
  });
});
