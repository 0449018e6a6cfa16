// Knowledge search on PostgreSQL against SQLite (issue 25): the same chunks written to both, the
// same queries, the same hits in the same order, keyword (BM25 over FTS5's terms) and vector; the
// filters of workspace, persona scope and sources; deletions and failures changing both alike.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SearchFilter } from '../../src/core/knowledge/search-index.js';
import { type CorpusSide, DIM, embedder, named, NOW, sentence, writeCorpus } from '../helpers/knowledge-corpus.js';
import { postgresUrl } from '../helpers/postgres.js';
import { prng } from '../helpers/prng.js';
import { type OpenedBackend, openTestBackend } from '../helpers/sql-backend.js';

type Side = CorpusSide & { opened: OpenedBackend };

describe.skipIf(!postgresUrl())('knowledge on PostgreSQL ranks as on SQLite', () => {
  const sides: Side[] = [];
  beforeAll(async () => {
    for (const kind of ['sqlite', 'postgres'] as const) {
      const opened = await openTestBackend({ kind });
      const knowledge = opened.knowledge({ cacheBytes: 1 << 20 });
      const side = { opened, kysely: opened.backend.kysely, knowledge, index: await knowledge.openIndex(DIM) };
      await writeCorpus(side);
      sides.push(side);
    }
  }, 60_000);
  afterAll(async () => {
    for (const s of sides) await s.opened.close();
  });

  const FILTERS: SearchFilter[] = [{ workspaceId: 'wsp_a' }, { workspaceId: 'wsp_b' }, { workspaceId: 'wsp_a', personaId: 'per_1' }, { workspaceId: 'wsp_a', personaId: 'per_2' }, { workspaceId: 'wsp_a', sourceIds: ['src_1', 'src_2'] }, { workspaceId: 'wsp_c' }];

  async function compareKeyword(queries: string[]) {
    for (const filter of FILTERS) {
      for (const q of queries) {
        const [a, b] = await Promise.all(sides.map(async (s) => named(s, filter, await s.index.keyword(filter, q, 20))));
        expect(b!.map((h) => h.id), `${q} ${JSON.stringify(filter)}`).toEqual(a!.map((h) => h.id));
        b!.forEach((h, i) => expect(h.score).toBeCloseTo(a![i]!.score, 9));
      }
    }
  }

  const rand = prng(7);
  const QUERIES = ['running mutations', 'cell\u19b0receptor binding', 'the', 'Cancer THERAPY dose', 'x-ray', 'naive cafe', 'e-mail β-catenin', 'covid-19 2026', 'zebra', '', ...Array.from({ length: 30 }, () => sentence(rand, 1 + Math.floor(rand() * 4)))];

  it('answers keyword searches with the same chunks, order and BM25 scores', async () => {
    expect((await sides[0]!.index.keyword({ workspaceId: 'wsp_a' }, 'protein', 50)).length).toBeGreaterThan(5);
    await compareKeyword(QUERIES);
  });

  it('ranks the same when the PostgreSQL statement ranks the rows before reading their postings (queries with no budget to size them)', async () => {
    // Without a budget no term is counted, so every query is taken for a large one: the `best` shape.
    const unbudgeted = sides.map((s) => s.opened.knowledge({ keywordBudget: Number.POSITIVE_INFINITY, cacheBytes: 1 << 20 }));
    const indexes = await Promise.all(unbudgeted.map((k) => k.openIndex(DIM)));
    for (const filter of FILTERS) {
      for (const q of QUERIES) {
        for (const limit of [1, 5, 20]) {
          const [a, b] = await Promise.all(indexes.map(async (index, i) => named(sides[i]!, filter, await index.keyword(filter, q, limit))));
          expect(b!.map((h) => h.id), `${q} ${JSON.stringify(filter)} ${limit}`).toEqual(a!.map((h) => h.id));
          b!.forEach((h, i) => expect(h.score).toBeCloseTo(a![i]!.score, 9));
        }
      }
    }
  });

  it('drops the commonest terms of a query as SQLite does when they match more chunks than the keyword budget', async () => {
    const small = sides.map((s) => s.opened.knowledge({ keywordBudget: 40, cacheBytes: 1 << 20 }));
    const indexes = await Promise.all(small.map((k) => k.openIndex(DIM)));
    const unbudgeted = await sides[0]!.opened.knowledge({ keywordBudget: Number.POSITIVE_INFINITY, cacheBytes: 1 << 20 }).openIndex(DIM);
    // The chunks of wsp_a (of the fixed corpus) each query matches with the budget and with every term
    // kept: the dropped terms' matches are gone. 'the of and' are stop words, never searched: the
    // second query is 'cancer' alone either way.
    const cases: Array<[string, number, number]> = [['the protein cell', 60, 116], ['cancer the of and', 67, 67], ['running runs ran', 52, 101], [QUERIES.slice(10, 20).join(' '), 50, 129]];
    const filter = { workspaceId: 'wsp_a' };
    for (const [q, kept, every] of cases) {
      const [a, b] = await Promise.all(indexes.map(async (index, i) => named(sides[i]!, filter, await index.keyword(filter, q, 50))));
      expect(b!.map((h) => h.id), q).toEqual(a!.map((h) => h.id));
      b!.forEach((h, i) => expect(h.score).toBeCloseTo(a![i]!.score, 9));
      const matched = await Promise.all([...indexes, unbudgeted].map(async (index) => (await index.keyword(filter, q, 500)).length));
      expect(matched, q).toEqual([kept, kept, every]);
    }
  });

  it('answers vector searches with the same chunks in the same order', async () => {
    for (const filter of FILTERS) {
      for (const q of QUERIES.slice(0, 15)) {
        const [vector] = await embedder.embed([q]);
        const [a, b] = await Promise.all(sides.map(async (s) => named(s, filter, await s.index.vector(filter, vector!, 10))));
        expect(b!.map((h) => h.id), q).toEqual(a!.map((h) => h.id));
        b!.forEach((h, i) => expect(h.score).toBeCloseTo(a![i]!.score, 5));
      }
    }
  });

  it('keeps matching after chunks go (a source dropped, one failed) and new ones come', async () => {
    for (const s of sides) {
      await s.knowledge.dropChunks('src_0');
      expect(await s.knowledge.markFailed('src_2', 1, 'broken', NOW)).toBe(true);
      expect(await s.knowledge.markFailed('src_4', 99, 'stale generation', NOW)).toBe(false);
    }
    await compareKeyword(QUERIES.slice(0, 12));
    const [vector] = await embedder.embed(['protein cell']);
    const [a, b] = await Promise.all(sides.map(async (s) => named(s, { workspaceId: 'wsp_a' }, await s.index.vector({ workspaceId: 'wsp_a' }, vector!, 10))));
    expect(b!.map((h) => h.id)).toEqual(a!.map((h) => h.id));
    expect(a!.some((h) => h.id?.startsWith('src_0_') || h.id?.startsWith('src_2_'))).toBe(false);

    // A source processed again after searches held the workspace's codes: its new chunks are found.
    const texts = ['protein cell protein cell signalling', 'cell protein receptor binding'];
    const vectors = await embedder.embed(texts);
    for (const s of sides) {
      await s.kysely.updateTable('knowledge_sources').set({ generation: 2, status: 'processing' }).where('id', '=', 'src_5').execute();
      const source = { id: 'src_5', workspaceId: 'wsp_a', scope: 'shared', name: 'Again', generation: 2, bytes: 1, content: null };
      const write = { source, now: NOW, title: () => 'Again', chunks: texts.map((text, i) => ({ id: `src_5_new${i}`, text, position: i, headingPath: [], tokens: 5, vector: vectors[i]! })) };
      expect(await s.knowledge.writeSources(s.index, [write])).toEqual([true]);
    }
    const [c, d] = await Promise.all(sides.map(async (s) => named(s, { workspaceId: 'wsp_a' }, await s.index.vector({ workspaceId: 'wsp_a' }, vector!, 10))));
    expect(d!.map((h) => h.id)).toEqual(c!.map((h) => h.id));
    expect(c!.some((h) => h.id?.startsWith('src_5_new'))).toBe(true);
    await compareKeyword(['protein cell signalling', 'receptor binding']);
  });

  it('never shows a chunk of another workspace, persona or source', async () => {
    for (const s of sides) {
      const hits = await named(s, { workspaceId: 'wsp_b' }, await s.index.keyword({ workspaceId: 'wsp_b' }, QUERIES.join(' '), 100));
      expect(hits.length).toBeGreaterThan(0);
      expect(hits.every((h) => h.id?.startsWith('src_3_') || h.id?.startsWith('src_7_'))).toBe(true);
      const persona2 = await s.index.keyword({ workspaceId: 'wsp_a', personaId: 'per_2' }, QUERIES.join(' '), 100);
      const ids = (await named(s, { workspaceId: 'wsp_a' }, persona2)).map((h) => h.id!);
      expect(ids.some((id) => id.startsWith('src_1_') || id.startsWith('src_4_'))).toBe(false); // per_1's sources
      // another workspace's rows are not even read back by id
      expect(await s.knowledge.hits('wsp_b', persona2.map((h) => h.rowid))).toEqual([]);
    }
  });
});
