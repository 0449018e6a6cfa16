// API.md §4: PUT and DELETE /knowledge/:id, persona deletion, restart recovery, OpenAI embeddings.
import fs from 'node:fs';
import type { FastifyInstance } from 'fastify';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../src/app.js';
import { loadConfig } from '../../src/config.js';
import { type AppContext, type ContextOverrides, createContext } from '../../src/context.js';
import { embeddingText } from '../../src/core/knowledge/ingest.js';
import type { Embedder } from '../../src/llm/embedder.js';
import { createHashedEmbedder } from '../../src/llm/hashed-embedder.js';
import { createTestApp, tempDir, type TestApp } from '../helpers/app.js';
import { FAKE_OPENAI_KEY, type FakeOpenAi, startFakeOpenAi } from '../fakes/openai-server.js';
import { addSource, createPersona } from '../helpers/factories.js';
import { expectProblem } from '../helpers/problem.js';
import { foundSources, indexCounts, MODES, search } from './knowledge-helpers.js';

const chunkIds = async (t: TestApp, id: string): Promise<string[]> =>
  (await t.request({ method: 'GET', url: `/knowledge/${id}/chunks?limit=100` })).json().data.map((c: { id: string }) => c.id);

describe('PUT and DELETE /knowledge/:id', { timeout: 15_000 }, () => {
  let t: TestApp;
  let personaA: string;
  let personaB: string;
  beforeAll(async () => {
    t = await createTestApp();
    personaA = (await createPersona(t, { name: 'A' })).id;
    personaB = (await createPersona(t, { name: 'B' })).id;
  });
  afterAll(async () => t.close());

  const put = (id: string, body: unknown) => t.request({ method: 'PUT', url: `/knowledge/${id}`, body });

  it('changes metadata: 202, re-processed, and search carries the new metadata', async () => {
    const s = await addSource(t, { kind: 'text', name: 'Kiwi', content: 'The kiwi is a flightless bird of New Zealand.', metadata: { v: 1 } });
    const res = await put(s.id, { metadata: { v: 2, team: 'birds' } });
    expect(res.statusCode, res.body).toBe(202);
    expect(res.json()).toMatchObject({ id: s.id, name: 'Kiwi', kind: 'text', status: 'ready', metadata: { v: 2, team: 'birds' }, createdAt: s.createdAt });
    for (const mode of MODES) {
      const hits = (await search(t, { q: 'flightless kiwi bird', mode, limit: 50 })).filter((h) => h.sourceId === s.id);
      expect(hits.length, mode).toBeGreaterThan(0);
      for (const h of hits) expect(h.metadata, mode).toEqual({ v: 2, team: 'birds' });
      expect(await foundSources(t, { q: 'kiwi', mode, filter: JSON.stringify({ v: 1 }) }), mode).not.toContain(s.id);
      expect(await foundSources(t, { q: 'kiwi', mode, filter: JSON.stringify({ team: 'birds' }) }), mode).toContain(s.id);
    }
    // A rename shows in search results' sourceName.
    expect((await put(s.id, { name: 'Kiwi (bird)' })).json().name).toBe('Kiwi (bird)');
    expect((await search(t, { q: 'flightless kiwi', mode: 'keyword' }))[0]).toMatchObject({ sourceId: s.id, sourceName: 'Kiwi (bird)' });
  });

  it('moves a source between persona scopes when personaId changes', async () => {
    const s = await addSource(t, { kind: 'text', name: 'Okapi', content: 'The okapi is a forest giraffe of the Congo.' });
    const q = { q: 'okapi forest giraffe', limit: 50 } as const;
    const seenBy = async (personaId: string) => {
      const out: boolean[] = [];
      for (const mode of MODES) out.push((await foundSources(t, { ...q, mode, personaId })).has(s.id));
      return out;
    };
    expect(await seenBy(personaB)).toEqual([true, true, true]);
    expect((await put(s.id, { personaId: personaA })).json()).toMatchObject({ personaId: personaA, status: 'ready' });
    expect(await seenBy(personaA)).toEqual([true, true, true]);
    expect(await seenBy(personaB)).toEqual([false, false, false]);
    expect((await t.request({ method: 'GET', url: `/knowledge?personaId=${personaA}` })).json().data.map((x: { id: string }) => x.id)).toContain(s.id);
    expect((await put(s.id, { personaId: null })).json().personaId).toBeNull();
    expect(await seenBy(personaB)).toEqual([true, true, true]);
    expectProblem(await put(s.id, { personaId: 'per_missing' }), 404, 'not_found');
  });

  it('moves a queued (large) source out of a persona’s reach at once, not when re-processing ends', async () => {
    const content = Array.from({ length: 4000 }, (_, i) => `Capybara log ${i}: the herd grazed by the river.`).join('\n\n');
    const s = await addSource(t, { kind: 'text', name: 'Herd', content });
    await t.ctx.services.knowledge.idle();
    const q = { q: 'capybara herd grazed', limit: 50 } as const;
    expect(await foundSources(t, { ...q, mode: 'keyword', personaId: personaB })).toContain(s.id);
    const moved = await put(s.id, { personaId: personaA });
    expect(moved.json()).toMatchObject({ status: 'processing', personaId: personaA });
    for (const mode of MODES) expect(await foundSources(t, { ...q, mode, personaId: personaB }), mode).not.toContain(s.id);
    await t.ctx.services.knowledge.idle();
    for (const mode of MODES) {
      expect(await foundSources(t, { ...q, mode, personaId: personaB }), mode).not.toContain(s.id);
      expect(await foundSources(t, { ...q, mode, personaId: personaA }), mode).toContain(s.id);
    }
    expect(await t.request({ method: 'DELETE', url: `/knowledge/${s.id}` }).then((r) => r.statusCode)).toBe(204);
  });

  it('replaces content: old text gone, new chunks with new ids; an empty body re-processes', async () => {
    const s = await addSource(t, { kind: 'text', name: 'Volcano', content: 'The caldera of the volcano collapsed after the eruption.' });
    const before = await chunkIds(t, s.id);
    const res = await put(s.id, { kind: 'markdown', content: '# Glaciers\n\nA glacier carves fjords into the mountains.' });
    expect(res.statusCode, res.body).toBe(202);
    expect(res.json()).toMatchObject({ name: 'Volcano', kind: 'markdown', status: 'ready' });
    const after = await chunkIds(t, s.id);
    expect(after.length).toBe(res.json().chunkCount);
    expect(after.some((id) => before.includes(id))).toBe(false);
    expect((await search(t, { q: 'caldera eruption', mode: 'keyword' })).length).toBe(0);
    for (const mode of MODES) {
      expect(await foundSources(t, { q: 'glacier fjords', mode, limit: 50 }), mode).toContain(s.id);
      const hits = await search(t, { q: 'caldera volcano eruption', mode, limit: 50 });
      expect(hits.filter((h) => h.text.includes('caldera')), mode).toEqual([]);
    }

    const again = await put(s.id, {});
    expect(again.statusCode, again.body).toBe(202);
    expect(again.json()).toMatchObject({ kind: 'markdown', status: 'ready', chunkCount: after.length });
    const reprocessed = await chunkIds(t, s.id);
    expect(reprocessed.some((id) => after.includes(id))).toBe(false);
    expect(await foundSources(t, { q: 'glacier fjords', mode: 'keyword' })).toContain(s.id);
    // A bodiless PUT (no Content-Type) reads as {} too.
    const bare = await t.app.inject({ method: 'PUT', url: `/knowledge/${s.id}`, headers: { authorization: `Bearer ${t.adminKey}` } });
    expect(bare.statusCode, bare.body).toBe(202);
  });

  it('validates PUT bodies', async () => {
    const s = await addSource(t, { kind: 'text', name: 'Valid', content: 'valid words' });
    const cases: [unknown, string][] = [
      [{ content: 'new text' }, 'content'],
      [{ url: 'https://example.com/' }, 'url'],
      [{ kind: 'text' }, 'content'],
      [{ kind: 'url' }, 'url'],
      [{ kind: 'text', content: 'x', url: 'https://example.com/' }, 'url'],
      [{ kind: 'pdf', content: 'x' }, 'kind'],
      [{ id: 'src_other' }, 'id'],
      [{ workspaceId: 'wsp_x' }, 'workspaceId'],
      [{ metadata: 'x' }, 'metadata'],
      [{ name: '' }, 'name'],
    ];
    for (const [body, path] of cases) expectProblem(await put(s.id, body), 400, 'validation_failed', path);
    expectProblem(await put('src_missing', {}), 404, 'not_found');
    expect((await t.request({ method: 'GET', url: `/knowledge/${s.id}` })).json()).toMatchObject({ name: 'Valid', kind: 'text', status: 'ready' });
  });

  it('DELETE: 204, then 404, and its chunks never come back from search', async () => {
    const s = await addSource(t, { kind: 'text', name: 'Narwhal', content: 'The narwhal tusk is a spiral tooth.', metadata: { k: 'n' } });
    const counts = indexCounts(t);
    expect(counts.fts).toBe(counts.chunks);
    expect(counts.vec).toBe(counts.chunks);
    const res = await t.request({ method: 'DELETE', url: `/knowledge/${s.id}` });
    expect(res.statusCode).toBe(204);
    expect(res.body).toBe('');
    for (const mode of MODES) {
      for (const filter of [undefined, JSON.stringify({ k: 'n' })]) {
        const hits = await search(t, { q: 'narwhal tusk spiral tooth', mode, limit: 50, ...(filter ? { filter } : {}) });
        expect(hits.filter((h) => h.sourceId === s.id), mode).toEqual([]);
      }
    }
    expectProblem(await t.request({ method: 'GET', url: `/knowledge/${s.id}` }), 404, 'not_found');
    expectProblem(await t.request({ method: 'GET', url: `/knowledge/${s.id}/chunks` }), 404, 'not_found');
    expectProblem(await t.request({ method: 'DELETE', url: `/knowledge/${s.id}` }), 404, 'not_found');
    expectProblem(await put(s.id, {}), 404, 'not_found');
    const left = indexCounts(t);
    expect(left.chunks).toBe(counts.chunks - s.chunkCount);
    expect(left).toEqual({ chunks: left.chunks, fts: left.chunks, vec: left.chunks });
  });

  it('deleting a persona deletes its private sources, which leave search; shared ones stay', async () => {
    const persona = (await createPersona(t, { name: 'Doomed' })).id;
    const own = await addSource(t, { kind: 'text', name: 'Doomed notes', content: 'The axolotl regrows its limbs.', personaId: persona });
    const shared = await addSource(t, { kind: 'text', name: 'Shared notes', content: 'The axolotl lives in Mexican lakes.' });
    expect(await foundSources(t, { q: 'axolotl', mode: 'keyword' })).toEqual(new Set([own.id, shared.id]));
    expect((await t.request({ method: 'DELETE', url: `/personas/${persona}` })).statusCode).toBe(204);
    expectProblem(await t.request({ method: 'GET', url: `/knowledge/${own.id}` }), 404, 'not_found');
    expect((await t.request({ method: 'GET', url: `/knowledge/${shared.id}` })).json().status).toBe('ready');
    for (const mode of MODES) {
      expect(await foundSources(t, { q: 'axolotl regrows limbs', mode, limit: 50 }), mode).not.toContain(own.id);
    }
    expect(await foundSources(t, { q: 'axolotl', mode: 'keyword' })).toEqual(new Set([shared.id]));
    const counts = indexCounts(t);
    expect(counts).toEqual({ chunks: counts.chunks, fts: counts.chunks, vec: counts.chunks });
  });
});

/** An app on a data directory that outlives it (createTestApp removes its own). */
async function openOn(dataDir: string, env: Record<string, string> = {}, overrides: ContextOverrides = {}) {
  const config = loadConfig({ SWITCHBOARD_DATA_DIR: dataDir, LOG_LEVEL: 'silent', SWITCHBOARD_RATE_LIMIT: '0', ...env });
  const ctx = await createContext(config, overrides);
  const boot = await ctx.services.auth.bootstrap(config.adminKey);
  const app = await buildApp(ctx);
  await app.ready();
  return { ctx, app, key: boot?.key };
}

describe('restart and embedders', { timeout: 15_000 }, () => {
  const open: { ctx: AppContext; app: FastifyInstance }[] = [];
  const dirs: string[] = [];
  let fake: FakeOpenAi | undefined;
  afterEach(async () => {
    for (const o of open.splice(0)) {
      await o.app.close();
      await o.ctx.close();
    }
    await fake?.close();
    fake = undefined;
    for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
  });
  const dir = () => {
    const d = tempDir();
    dirs.push(d);
    return d;
  };
  const start = async (dataDir: string, env: Record<string, string> = {}, overrides: ContextOverrides = {}) => {
    const o = await openOn(dataDir, env, overrides);
    open.push(o);
    return o;
  };
  const stop = async (o: { ctx: AppContext; app: FastifyInstance }) => {
    open.splice(open.indexOf(o), 1);
    await o.app.close();
    await o.ctx.close();
  };
  const call = (o: { app: FastifyInstance }, key: string, method: 'GET' | 'POST', url: string, body?: unknown) =>
    o.app.inject({ method, url, headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, ...(body ? { payload: JSON.stringify(body) } : {}) });

  it('resumes sources left processing at the next start; fails those interrupted too often', async () => {
    const dataDir = dir();
    const first = await start(dataDir);
    const key = first.key!;
    const post = async (name: string, content: string) => {
      const res = await call(first, key, 'POST', '/knowledge', { kind: 'text', name, content });
      expect(res.statusCode, res.body).toBe(202);
      return res.json().id as string;
    };
    const resumed = await post('Resumed', 'The pangolin is covered in keratin scales.');
    const doomed = await post('Doomed', 'The tardigrade survives in space.');
    // As a crash mid-processing leaves them: processing, no chunks; one already started twice.
    await first.ctx.db.kysely.updateTable('knowledge_sources').set({ status: 'processing', chunk_count: 0 }).where('id', 'in', [resumed, doomed]).execute();
    await first.ctx.db.kysely.deleteFrom('knowledge_chunks').where('source_id', 'in', [resumed, doomed]).execute();
    await first.ctx.db.kysely.updateTable('knowledge_sources').set({ attempts: 2 }).where('id', '=', doomed).execute();
    await stop(first);

    const second = await start(dataDir);
    expect((await call(second, key, 'GET', `/knowledge/${resumed}`)).json().status).toBe('processing');
    expect(await second.ctx.services.knowledge.resumeUnfinished()).toBe(1);
    await second.ctx.services.knowledge.idle();
    const r = (await call(second, key, 'GET', `/knowledge/${resumed}`)).json();
    expect(r).toMatchObject({ status: 'ready', error: null });
    expect(r.chunkCount).toBeGreaterThan(0);
    const hits = (await call(second, key, 'GET', '/knowledge/search?q=pangolin%20keratin&mode=keyword')).json().data;
    expect(hits.map((h: { sourceId: string }) => h.sourceId)).toEqual([resumed]);
    const d = (await call(second, key, 'GET', `/knowledge/${doomed}`)).json();
    expect(d).toMatchObject({ status: 'failed', chunkCount: 0 });
    expect(d.error).toMatch(/interrupted/i);
    // Nothing left to resume.
    expect(await second.ctx.services.knowledge.resumeUnfinished()).toBe(0);
  });

  it('a large source still processing at shutdown is resumed and finished at the next start', async () => {
    const dataDir = dir();
    // The default embedder's identity, but it never answers: the job is surely still running at shutdown.
    const hashed = createHashedEmbedder();
    const stalled: Embedder = {
      provider: hashed.provider,
      model: hashed.model,
      dimension: () => hashed.dimension(),
      embed: (_texts, signal) => new Promise((_resolve, reject) => signal?.addEventListener('abort', () => reject(signal.reason), { once: true })),
    };
    const first = await start(dataDir, {}, { embedder: stalled });
    const key = first.key!;
    const content = Array.from({ length: 4000 }, (_, i) => `Capybara herd log entry ${i}: the herd grazed by the river today.`).join('\n\n');
    const res = await call(first, key, 'POST', '/knowledge', { kind: 'text', name: 'Herd log', content });
    expect(res.json().status).toBe('processing');
    await stop(first); // before idle(): the running job is aborted, not finished
    const second = await start(dataDir);
    const before = (await call(second, key, 'GET', `/knowledge/${res.json().id}`)).json();
    expect(before.status).toBe('processing');
    expect(await second.ctx.services.knowledge.resumeUnfinished()).toBe(1);
    await second.ctx.services.knowledge.idle();
    expect((await call(second, key, 'GET', `/knowledge/${res.json().id}`)).json()).toMatchObject({ status: 'ready', bytes: Buffer.byteLength(content) });
  });

  it('embeds with an OpenAI-compatible endpoint end to end; the hashed embedder then refuses to start', async () => {
    fake = await startFakeOpenAi({ dimension: 16 });
    const dataDir = dir();
    const env = { SWITCHBOARD_EMBEDDINGS: 'openai', OPENAI_BASE_URL: fake.url, OPENAI_API_KEY: FAKE_OPENAI_KEY };
    const o = await start(dataDir, env);
    const key = o.key!;
    const content = 'The ocelot hunts at night in the rainforest.';
    const created = await call(o, key, 'POST', '/knowledge', { kind: 'text', name: 'Ocelot', content });
    expect(created.statusCode, created.body).toBe(202);
    expect(created.json()).toMatchObject({ status: 'ready', chunkCount: 1 });
    const embeddings = fake.requests.filter((r) => r.path === '/v1/embeddings');
    expect(embeddings.length).toBeGreaterThan(0);
    for (const r of embeddings) {
      expect(r.method).toBe('POST');
      expect(r.headers.authorization).toBe(`Bearer ${FAKE_OPENAI_KEY}`);
      expect(r.body).toMatchObject({ model: 'text-embedding-3-small', encoding_format: 'float' });
    }
    const [chunk] = (await call(o, key, 'GET', `/knowledge/${created.json().id}/chunks`)).json().data;
    // Searching with exactly the text the chunk was embedded as must find it with cosine 1.
    const q = embeddingText('Ocelot', chunk);
    const res = await call(o, key, 'GET', `/knowledge/search?mode=vector&q=${encodeURIComponent(q)}`);
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().mode).toBe('vector');
    expect(res.json().data[0]).toMatchObject({ chunkId: chunk.id, sourceName: 'Ocelot' });
    expect(res.json().data[0].score).toBeCloseTo(1, 5);
    expect(fake.requests.at(-1)!.body).toMatchObject({ input: [q], encoding_format: 'float' });
    const hybrid = await call(o, key, 'GET', '/knowledge/search?q=ocelot%20night');
    expect(hybrid.json().data[0]).toMatchObject({ chunkId: chunk.id });

    // The endpoint refusing the key (and echoing it back): a readable failure that never repeats the key.
    fake.set({ apiKey: 'sk-another-key' });
    const refused = await call(o, key, 'POST', '/knowledge', { kind: 'text', name: 'Refused', content: 'The serval leaps for birds.' });
    expect(refused.statusCode).toBe(202);
    expect(refused.json()).toMatchObject({ status: 'failed', chunkCount: 0 });
    expect(refused.json().error).toMatch(/401|API key/);
    expect(refused.json().error).not.toContain(FAKE_OPENAI_KEY);
    const down = await call(o, key, 'GET', '/knowledge/search?q=ocelot&mode=vector');
    expectProblem(down, 502, 'upstream_error');
    expect(down.body).not.toContain(FAKE_OPENAI_KEY);
    // Keyword search needs no embedder.
    expect((await call(o, key, 'GET', '/knowledge/search?q=ocelot&mode=keyword')).json().data[0]).toMatchObject({ chunkId: chunk.id });
    fake.set({ apiKey: FAKE_OPENAI_KEY });
    await stop(o);

    const config = loadConfig({ SWITCHBOARD_DATA_DIR: dataDir, LOG_LEVEL: 'silent' });
    await expect(createContext(config)).rejects.toThrow(/switchboard reindex/);
    // The configured embedder again: starts fine, and the data is intact.
    const again = await start(dataDir, env);
    expect((await call(again, key, 'GET', `/knowledge/${created.json().id}`)).json().status).toBe('ready');
  });
});
