import type { Hit } from './search-index.js';

export interface FusionOptions {
  /** RRF's k: larger flattens the difference between ranks. */
  k: number;
  keywordWeight: number;
  vectorWeight: number;
  /** How many hits each mode contributes to the fusion. */
  depth: number;
}

/** Tuned on SciFact's train queries only (`npm run eval:retrieval -- --tune`); see README. */
export const DEFAULT_FUSION: FusionOptions = { k: 60, keywordWeight: 1, vectorWeight: 1, depth: 100 };

/**
 * Weighted reciprocal rank fusion: each list adds `weight / (k + rank)` for every hit it holds
 * (rank from 1), so the fused order needs no comparable scores, only ranks. Best first; ties by rowid.
 */
export function fuse(keyword: Hit[], vector: Hit[], options: FusionOptions = DEFAULT_FUSION): Hit[] {
  const scores = new Map<number, number>();
  const add = (hits: Hit[], weight: number) => {
    hits.forEach((hit, i) => scores.set(hit.rowid, (scores.get(hit.rowid) ?? 0) + weight / (options.k + i + 1)));
  };
  add(keyword.slice(0, options.depth), options.keywordWeight);
  add(vector.slice(0, options.depth), options.vectorWeight);
  return [...scores]
    .map(([rowid, score]) => ({ rowid, score }))
    .sort((a, b) => b.score - a.score || a.rowid - b.rowid);
}
