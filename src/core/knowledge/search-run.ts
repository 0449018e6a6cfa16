/**
 * One search over the index, from the query text to the API's hits: keyword and/or vector, fused,
 * then the hits' rows. Shared by the knowledge service (on the main thread) and the search threads
 * (search-worker.ts), which run exactly this against their own connection.
 */
import type { Embedder } from '../../llm/embedder.js';
import { fuse, type FusionOptions, keywordDepth } from './fusion.js';
import type { SearchMode, SearchResult } from './knowledge.schemas.js';
import type { ChunkHitRow } from './knowledge.store.js';
import type { Hit, SearchFilter, SearchIndex } from './search-index.js';

/** A search whose persona and metadata filters are already resolved to `filter`. */
export interface ResolvedSearch {
  q: string;
  limit: number;
  mode: SearchMode;
}

export interface SearchRunDeps {
  index: SearchIndex | null;
  embedder: Pick<Embedder, 'embed'>;
  hits: (workspaceId: string, rowids: number[]) => Promise<ChunkHitRow[]>;
  fusion: FusionOptions;
}

export async function runSearch(deps: SearchRunDeps, filter: SearchFilter, input: ResolvedSearch): Promise<SearchResult> {
  const { index, embedder, fusion } = deps;
  const depth = Math.max(input.limit, fusion.depth);
  // Both halves at once: on PostgreSQL the keyword statement runs in the database while this
  // process embeds the query and scans the codes (SQLite answers the keyword half synchronously).
  const [keywordHits, vectorHits] = await Promise.all([
    // Hybrid: only as many keyword hits as can still reach the fused best (keywordDepth).
    input.mode !== 'vector' && index ? index.keyword(filter, input.q, input.mode === 'keyword' ? input.limit : Math.min(depth, keywordDepth(fusion, input.limit))) : ([] as Hit[]),
    (async (): Promise<Hit[]> => {
      if (input.mode === 'keyword' || !index) return [];
      const [queryVector] = await embedder.embed([input.q]);
      // A query of stop words only embeds to zero: every chunk would tie at 0, so none is a hit; nor is one pointing away.
      return (await index.vector(filter, queryVector!, input.mode === 'vector' ? input.limit : depth)).filter((h) => h.score > 0);
    })(),
  ]);
  const ranked = input.mode === 'keyword' ? keywordHits : input.mode === 'vector' ? vectorHits : fuse(keywordHits, vectorHits, fusion).slice(0, input.limit);
  const rows = new Map((await deps.hits(filter.workspaceId, ranked.map((h) => h.rowid))).map((r) => [r.rowid, r]));
  const data = ranked.flatMap((hit) => {
    const row = rows.get(hit.rowid);
    if (!row) return [];
    return [
      {
        chunkId: row.id,
        sourceId: row.source_id,
        sourceName: row.source_name,
        text: row.text,
        score: hit.score,
        position: row.position,
        metadata: JSON.parse(row.metadata) as Record<string, unknown>,
      },
    ];
  });
  return { data, mode: input.mode };
}
