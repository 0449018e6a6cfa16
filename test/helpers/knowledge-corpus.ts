// A fixed knowledge corpus for search tests across backends: sources of two workspaces, shared and
// persona-scoped, chunks of random sentences from a small vocabulary (repeated terms, stemming,
// diacritics, phrase-splitting characters), written through a backend's knowledge module.
import type { Kysely } from 'kysely';
import { expect } from 'vitest';
import type { KnowledgeDialect } from '../../src/core/knowledge/knowledge-dialect.js';
import type { SourceWrite } from '../../src/core/knowledge/knowledge.store.js';
import { type Hit, type SearchFilter, type SearchIndex, SHARED_SCOPE } from '../../src/core/knowledge/search-index.js';
import type { Database, KnowledgeSourceRow } from '../../src/db/schema.js';
import { createHashedEmbedder } from '../../src/llm/hashed-embedder.js';
import { prng } from './prng.js';

export const NOW = '2026-11-25T00:00:00.000Z';
export const embedder = createHashedEmbedder();
export const DIM = embedder.dimension()!;

export const WORDS = (
  'protein cell cells gene genes expression running runs ran mutation mutations tumour tumor cancer ' +
  'receptor receptors binding signal signalling signaling pathway pathways mouse mice human humans ' +
  'therapy therapies dose doses trial trials patient patients risk reduced reduction increased ' +
  'the of and in a to with is café naïve Ångström résumé x-ray e-mail 2026 covid-19 β-catenin ' +
  // one word to JavaScript, two terms to FTS5 (U+19B0 is a separator to SQLite): a phrase query
  'cell\u19b0receptor cell\u19b0receptor'
).split(' ');

export interface CorpusSide {
  kysely: Kysely<Database>;
  knowledge: KnowledgeDialect;
  index: SearchIndex;
}

export function sentence(rand: () => number, words: number): string {
  return Array.from({ length: words }, () => WORDS[Math.floor(rand() * WORDS.length)]!).join(' ');
}

/** Sources of two workspaces, shared and persona-scoped, with chunks of a fixed random text. */
export function corpus() {
  const rand = prng(20261125);
  const sources: { row: KnowledgeSourceRow; write: Omit<SourceWrite, 'chunks'> & { texts: string[] } }[] = [];
  for (let s = 0; s < 8; s++) {
    const workspaceId = s % 4 === 3 ? 'wsp_b' : 'wsp_a';
    const personaId = s % 3 === 1 && workspaceId === 'wsp_a' ? 'per_1' : null;
    const id = `src_${s}`;
    const name = `Source ${sentence(rand, 2)}`;
    sources.push({
      row: { id, workspace_id: workspaceId, persona_id: personaId, name, kind: 'text', status: 'processing', error: null, bytes: 1, chunk_count: 0, metadata: '{}', url: null, filename: null, media_type: null, content: null, generation: 1, attempts: 0, lease_owner: null, lease_until: null, created_at: NOW, updated_at: NOW },
      write: {
        source: { id, workspaceId, scope: personaId ?? SHARED_SCOPE, name, generation: 1, bytes: 1, content: null },
        title: (c) => `${name} ${c.headingPath.join(' ')}`,
        now: NOW,
        texts: Array.from({ length: 10 + Math.floor(rand() * 20) }, () => sentence(rand, 5 + Math.floor(rand() * 60))),
      },
    });
  }
  return sources;
}

export async function writeCorpus(side: CorpusSide) {
  const k = side.kysely;
  for (const id of ['wsp_a', 'wsp_b']) await k.insertInto('workspaces').values({ id, name: id, created_at: NOW }).execute();
  await k.insertInto('personas').values({ id: 'per_1', workspace_id: 'wsp_a', name: 'p', instructions: 'i', traits: '[]', model: null, temperature: null, max_tokens: null, tools: '[]', created_at: NOW, updated_at: NOW, version: 1, team_id: null, handoff: '{}' }).execute();
  const sources = corpus();
  for (const s of sources) await side.knowledge.insertSource(s.row);
  const writes: SourceWrite[] = [];
  for (const s of sources) {
    const vectors = await embedder.embed(s.write.texts);
    writes.push({
      ...s.write,
      chunks: s.write.texts.map((text, i) => ({ id: `${s.row.id}_c${i}`, text, position: i, headingPath: [`Part ${i % 3}`], tokens: text.split(' ').length, vector: vectors[i]! })),
    });
  }
  // Two batches, as the chunk writer would make them.
  expect(await side.knowledge.writeSources(side.index, writes.slice(0, 5))).toEqual([true, true, true, true, true]);
  expect(await side.knowledge.writeSources(side.index, writes.slice(5))).toEqual([true, true, true]);
}

/** Hits as chunk ids with their scores. */
export async function named(side: CorpusSide, filter: SearchFilter, hits: Hit[]) {
  const rows = new Map((await side.knowledge.hits(filter.workspaceId, hits.map((h) => h.rowid))).map((r) => [r.rowid, r.id]));
  return hits.map((h) => ({ id: rows.get(h.rowid), score: h.score }));
}

