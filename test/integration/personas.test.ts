import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { manualClock } from '../../src/lib/clock.js';
import { sequentialIds } from '../../src/lib/ids.js';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { testBackends } from '../helpers/postgres.js';

const valid = { name: 'Ada', instructions: 'Answer briefly.', traits: ['precise', 'kind'] };

describe.each(testBackends())('personas on $kind (API.md §3)', (backend) => {
  let t: TestApp;
  const clock = manualClock(new Date('2026-04-01T00:00:00.000Z'));
  beforeAll(async () => {
    t = await createTestApp({ backend, overrides: { clock, ids: sequentialIds() } });
  });
  afterAll(async () => t.close());

  const create = async (body: Record<string, unknown> = valid) => {
    clock.advance(1000);
    const res = await t.request({ method: 'POST', url: '/personas', body });
    expect(res.statusCode, res.body).toBe(201);
    return res.json();
  };

  it('creates with defaults and answers 201 with Location', async () => {
    clock.advance(1000);
    const res = await t.request({ method: 'POST', url: '/personas', body: { name: 'Bare', instructions: 'x' } });
    expect(res.statusCode).toBe(201);
    const p = res.json();
    expect(p).toEqual({
      id: p.id,
      name: 'Bare',
      instructions: 'x',
      traits: [],
      model: null,
      temperature: null,
      maxTokens: null,
      tools: [],
      version: 1,
      teamId: null,
      handoff: { tool: false, keywords: [], lowRating: false, noKnowledge: null },
      createdAt: clock.now().toISOString(),
      updatedAt: clock.now().toISOString(),
    });
    expect(p.id).toMatch(/^per_/);
    expect(res.headers.location).toBe(`/personas/${p.id}`);
  });

  it('reads, updates a subset, resets to server defaults with null, and deletes', async () => {
    const p = await create({ ...valid, model: 'gpt-4o', temperature: 0.3, maxTokens: 500, tools: ['knowledge.search', 'slack.*'] });
    expect((await t.request({ method: 'GET', url: `/personas/${p.id}` })).json()).toEqual(p);

    clock.advance(5000);
    const upd = await t.request({ method: 'PUT', url: `/personas/${p.id}`, body: { traits: ['terse'], temperature: null } });
    expect(upd.statusCode).toBe(200);
    expect(upd.json()).toMatchObject({ name: 'Ada', traits: ['terse'], temperature: null, model: 'gpt-4o', maxTokens: 500, tools: ['knowledge.search', 'slack.*'] });
    expect(upd.json().updatedAt).toBe(clock.now().toISOString());
    expect(upd.json().createdAt).toBe(p.createdAt);
    expect((await t.request({ method: 'GET', url: `/personas/${p.id}` })).json()).toEqual(upd.json());

    expect((await t.request({ method: 'DELETE', url: `/personas/${p.id}` })).statusCode).toBe(204);
    expect((await t.request({ method: 'GET', url: `/personas/${p.id}` })).statusCode).toBe(404);
    expect((await t.request({ method: 'DELETE', url: `/personas/${p.id}` })).statusCode).toBe(404);
  });

  it('validates every field and names it', async () => {
    const cases: [Record<string, unknown>, string][] = [
      [{ instructions: 'x' }, 'name'],
      [{ name: '', instructions: 'x' }, 'name'],
      [{ name: 'n'.repeat(201), instructions: 'x' }, 'name'],
      [{ name: 'n', instructions: '' }, 'instructions'],
      [{ name: 'n', instructions: 'i'.repeat(32_001) }, 'instructions'],
      [{ name: 'n', instructions: 'x', traits: Array(51).fill('t') }, 'traits'],
      [{ name: 'n', instructions: 'x', traits: ['a', 'b', 'c', 't'.repeat(201)] }, 'traits.3'],
      [{ name: 'n', instructions: 'x', temperature: 2.1 }, 'temperature'],
      [{ name: 'n', instructions: 'x', temperature: -0.1 }, 'temperature'],
      [{ name: 'n', instructions: 'x', maxTokens: 0 }, 'maxTokens'],
      [{ name: 'n', instructions: 'x', maxTokens: 32_001 }, 'maxTokens'],
      [{ name: 'n', instructions: 'x', maxTokens: 1.5 }, 'maxTokens'],
      [{ name: 'n', instructions: 'x', tools: ['nodot'] }, 'tools.0'],
      [{ name: 'n', instructions: 'x', id: 'per_mine' }, 'id'],
      [{ name: 'n', instructions: 'x', createdAt: '2020-01-01T00:00:00Z' }, 'createdAt'],
      [{ name: 'n', instructions: 'x', workspaceId: 'wsp_x' }, 'workspaceId'],
    ];
    for (const [body, path] of cases) {
      const res = await t.request({ method: 'POST', url: '/personas', body });
      expect(res.statusCode, JSON.stringify(body).slice(0, 80)).toBe(400);
      expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
      expect(res.json().code).toBe('validation_failed');
      expect(res.json().errors.map((e: { path: string }) => e.path)).toContain(path);
    }
    const p = await create();
    const bad = await t.request({ method: 'PUT', url: `/personas/${p.id}`, body: { name: '', colour: 'red' } });
    expect(bad.statusCode).toBe(400);
    expect(bad.json().errors.map((e: { path: string }) => e.path).sort()).toEqual(['colour', 'name']);
  });

  it('lists newest first with cursor pagination and filters by name', async () => {
    const fresh = await createTestApp({ overrides: { clock, ids: sequentialIds() } });
    try {
      for (const name of ['Alpha support', 'Beta sales', 'alpha ops', '50% off', 'x_y']) {
        clock.advance(1000);
        await fresh.request({ method: 'POST', url: '/personas', body: { name, instructions: 'i' } });
      }
      const all = (await fresh.request({ method: 'GET', url: '/personas' })).json();
      expect(all.data.map((p: { name: string }) => p.name)).toEqual(['x_y', '50% off', 'alpha ops', 'Beta sales', 'Alpha support']);
      expect(all.nextCursor).toBeNull();

      const names: string[] = [];
      let cursor: string | null = null;
      do {
        const url: string = `/personas?limit=2${cursor ? `&cursor=${cursor}` : ''}`;
        const page = (await fresh.request({ method: 'GET', url })).json();
        expect(page.data.length).toBeLessThanOrEqual(2);
        names.push(...page.data.map((p: { name: string }) => p.name));
        cursor = page.nextCursor;
      } while (cursor);
      expect(names).toEqual(all.data.map((p: { name: string }) => p.name));

      const q = (s: string) => fresh.request({ method: 'GET', url: `/personas?q=${encodeURIComponent(s)}` }).then((r) => r.json().data.map((p: { name: string }) => p.name));
      expect(await q('alpha')).toEqual(['alpha ops', 'Alpha support']);
      expect(await q('%')).toEqual(['50% off']); // wildcards are literal
      expect(await q('_')).toEqual(['x_y']);

      for (const url of ['/personas?limit=0', '/personas?limit=101', '/personas?limit=abc', '/personas?cursor=garbage', '/personas?sort=name']) {
        const res = await fresh.request({ method: 'GET', url });
        expect(res.statusCode, url).toBe(400);
        const path = new URL(url, 'http://x').searchParams.keys().next().value;
        expect(res.json().errors.map((e: { path: string }) => e.path), url).toContain(path);
      }
    } finally {
      await fresh.close();
    }
  });

  it('runs on the backend /health names (API.md §11)', async () => {
    const res = await t.request({ method: 'GET', url: '/health', as: null });
    expect(res.json()).toMatchObject({ status: 'ok', database: 'ok', databaseKind: backend.kind });
  });

  it('is served under /api as well', async () => {
    const p = await create();
    expect((await t.request({ method: 'GET', url: `/api/personas/${p.id}` })).json()).toEqual(p);
    expect((await t.request({ method: 'GET', url: '/api/personas?limit=1' })).statusCode).toBe(200);
  });
});

describe.each(testBackends())('workspace isolation of personas on $kind', (backend) => {
  it('answers 404 across workspaces on every route and never lists the other workspace', async () => {
    const t = await createTestApp({ backend });
    try {
      const other = (await t.ctx.services.auth.createWorkspace('acme')).key.key;
      const mine = (await t.request({ method: 'POST', url: '/personas', body: valid })).json();
      const theirs = (await t.request({ method: 'POST', url: '/personas', body: { ...valid, name: 'Theirs' }, as: other })).json();

      for (const [key, foreign] of [[other, mine.id], [t.adminKey, theirs.id]] as const) {
        expect((await t.request({ method: 'GET', url: `/personas/${foreign}`, as: key })).statusCode).toBe(404);
        expect((await t.request({ method: 'PUT', url: `/personas/${foreign}`, body: { name: 'hijack' }, as: key })).statusCode).toBe(404);
        expect((await t.request({ method: 'DELETE', url: `/personas/${foreign}`, as: key })).statusCode).toBe(404);
        // The id with a NUL after it (PostgreSQL text cannot hold one) names no persona either.
        for (const method of ['GET', 'DELETE'] as const) expect((await t.request({ method, url: `/personas/${foreign}%00`, as: key })).statusCode).toBe(404);
      }
      const mineList = (await t.request({ method: 'GET', url: '/personas' })).json().data.map((p: { id: string }) => p.id);
      const theirList = (await t.request({ method: 'GET', url: '/personas', as: other })).json().data.map((p: { id: string }) => p.id);
      expect(mineList).toEqual([mine.id]);
      expect(theirList).toEqual([theirs.id]);
      expect((await t.request({ method: 'GET', url: '/personas?q=Theirs' })).json().data).toEqual([]);
      // Untouched by the attempts.
      expect((await t.request({ method: 'GET', url: `/personas/${theirs.id}`, as: other })).json()).toEqual(theirs);
    } finally {
      await t.close();
    }
  });
});
