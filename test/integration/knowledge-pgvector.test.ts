// Vector search through pgvector (issue 25): on a PostgreSQL that has the extension (PGlite, in
// process; the Debian server here has none, which knowledge-backends.test.ts covers), each chunk's
// vector goes to an HNSW index and searches walk it with the workspace, persona and source filters.
// HNSW is approximate: checked against the exact ranking by recall, and never outside the filter.
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SearchFilter } from '../../src/core/knowledge/search-index.js';
import { SHARED_SCOPE, vectorFromBlob } from '../../src/core/knowledge/search-index.js';
import { runMigrations } from '../../src/db/migrations/index.js';
import { createPostgresKnowledge } from '../../src/db/postgres/knowledge.js';
import { type CorpusSide, DIM, embedder, named, sentence, writeCorpus } from '../helpers/knowledge-corpus.js';
import { openPglite } from '../helpers/pglite.js';
import { prng } from '../helpers/prng.js';

describe('vector search through pgvector (PGlite)', { timeout: 120_000 }, () => {
  let close: () => Promise<void>;
  let side: CorpusSide;
  beforeAll(async () => {
    const pglite = await openPglite();
    close = pglite.close;
    await runMigrations(pglite.db.kysely, 'postgres');
    const knowledge = createPostgresKnowledge(pglite.db, { cacheBytes: 1 << 20 });
    side = { kysely: pglite.db.kysely, knowledge, index: await knowledge.openIndex(DIM) };
    await writeCorpus(side);
  }, 120_000);
  afterAll(() => close?.());

  const count = async (table: string) => (await sql<{ n: number }>`SELECT count(*) AS n FROM ${sql.table(table)}`.execute(side.kysely)).rows[0]!.n;

  /** The exact nearest chunks the filter may see, by the dot product over every stored vector. */
  async function exact(filter: SearchFilter, query: Float32Array, k: number) {
    const rows = await sql<{ id: string; scope: string; source_id: string; workspace_id: string; embedding: Buffer }>`
      SELECT id, scope, source_id, workspace_id, embedding FROM knowledge_chunks`.execute(side.kysely);
    return rows.rows
      .filter((r) => r.workspace_id === filter.workspaceId)
      .filter((r) => filter.personaId === undefined || r.scope === SHARED_SCOPE || r.scope === filter.personaId)
      .filter((r) => filter.sourceIds === undefined || filter.sourceIds.includes(r.source_id))
      .map((r) => {
        const v = vectorFromBlob(r.embedding);
        let dot = 0;
        for (let i = 0; i < v.length; i++) dot += v[i]! * query[i]!;
        return { id: r.id, score: dot };
      })
      .sort((a, b) => b.score - a.score)
      .slice(0, k);
  }

  it('indexes every chunk in knowledge_embeddings under an HNSW index the planner can use', async () => {
    expect(await count('knowledge_embeddings')).toBe(await count('knowledge_chunks'));
    const plan = await side.kysely.transaction().execute(async (trx) => {
      await sql`SET LOCAL enable_seqscan = off`.execute(trx);
      const q = `[${Array.from({ length: DIM }, (_, i) => (i === 0 ? 1 : 0)).join(',')}]`;
      return sql<{ 'QUERY PLAN': string }>`EXPLAIN SELECT rowid FROM knowledge_embeddings ORDER BY embedding <#> ${q}::vector LIMIT 10`.execute(trx);
    });
    expect(plan.rows.map((r) => r['QUERY PLAN']).join('\n')).toContain('knowledge_embeddings_hnsw');
  });

  it('finds what the exact ranking finds (recall@10 ≥ 0.9), with its scores, never outside the filter', async () => {
    // Without the binary codes the portable path finds nothing: whatever is found came through pgvector.
    await sql`DELETE FROM knowledge_codes`.execute(side.kysely);
    const rand = prng(11);
    const filters: SearchFilter[] = [{ workspaceId: 'wsp_a' }, { workspaceId: 'wsp_b' }, { workspaceId: 'wsp_a', personaId: 'per_1' }, { workspaceId: 'wsp_a', sourceIds: ['src_1', 'src_2'] }];
    let found = 0;
    let wanted = 0;
    for (const filter of filters) {
      for (let i = 0; i < 10; i++) {
        const [query] = await embedder.embed([sentence(rand, 1 + Math.floor(rand() * 4))]);
        const hits = await named(side, filter, await side.index.vector(filter, query!, 10));
        const truth = await exact(filter, query!, 10);
        expect(hits.length).toBe(truth.length);
        const allowed = new Set((await exact(filter, query!, 10_000)).map((h) => h.id));
        for (const h of hits) expect(allowed.has(h.id!), `${h.id} outside ${JSON.stringify(filter)}`).toBe(true);
        const truthIds = new Set(truth.map((h) => h.id));
        found += hits.filter((h) => truthIds.has(h.id!)).length;
        wanted += truth.length;
        for (const h of hits) {
          const t = truth.find((x) => x.id === h.id);
          if (t) expect(h.score).toBeCloseTo(t.score, 4);
        }
      }
    }
    expect(found / wanted).toBeGreaterThanOrEqual(0.9);
  });

  it('drops the vectors of chunks that go, and searches no longer return them', async () => {
    await side.knowledge.dropChunks('src_0');
    expect(await count('knowledge_embeddings')).toBe(await count('knowledge_chunks'));
    const [query] = await embedder.embed(['protein cell cancer']);
    const hits = await named(side, { workspaceId: 'wsp_a' }, await side.index.vector({ workspaceId: 'wsp_a' }, query!, 50));
    expect(hits.length).toBeGreaterThan(0);
    expect(hits.some((h) => h.id === undefined || h.id.startsWith('src_0_'))).toBe(false);
  });

  it('rebuilds the vector index on a reset (reindex) and takes the new vectors', async () => {
    const index = await side.knowledge.resetIndex(DIM);
    expect(await count('knowledge_embeddings')).toBe(0);
    const rows = await sql<{ rowid: number; workspace_id: string; source_id: string; scope: string; text: string; embedding: Buffer }>`
      SELECT rowid, workspace_id, source_id, scope, text, embedding FROM knowledge_chunks ORDER BY rowid`.execute(side.kysely);
    await side.knowledge.reembed(index, rows.rows.map((r) => ({ rowid: r.rowid, workspaceId: r.workspace_id, sourceId: r.source_id, scope: r.scope, title: '', text: r.text, vector: vectorFromBlob(r.embedding) })));
    expect(await count('knowledge_embeddings')).toBe(rows.rows.length);
    const [query] = await embedder.embed(['protein']);
    expect((await index.vector({ workspaceId: 'wsp_a' }, query!, 5)).length).toBe(5);
  });
});
