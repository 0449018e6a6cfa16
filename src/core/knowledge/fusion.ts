import type { Hit } from './search-index.js';

export interface FusionOptions {
  /** RRF's k: larger flattens the difference between ranks. */
  k: number;
  keywordWeight: number;
  vectorWeight: number;
  /** How many hits each mode contributes to the fusion. */
  depth: number;
}

/**
 * Standard RRF (k = 60, equal weights): for semantic embeddings (`openai`), which find what
 * keywords miss. Not tuned here: that needs the model, hence the network.
 */
export const DEFAULT_FUSION: FusionOptions = { k: 60, keywordWeight: 1, vectorWeight: 1, depth: 100 };

/**
 * For the offline `hashed` embedder, tuned on SciFact's 505 train queries only (`npm run
 * eval:retrieval -- --tune`): its vectors are lexical too, without IDF, so they mostly repeat what
 * BM25 knows less well; a small weight lets them break BM25's near-ties without outvoting it.
 */
export const HASHED_FUSION: FusionOptions = { k: 10, keywordWeight: 1, vectorWeight: 0.05, depth: 100 };

/** The fusion weights for an embedder's vectors. */
export function fusionFor(provider: 'hashed' | 'openai'): FusionOptions {
  return provider === 'hashed' ? HASHED_FUSION : DEFAULT_FUSION;
}

/**
 * How many keyword hits a hybrid search needs for its best `limit` to be exactly those of fusing
 * `depth` of them: a hit below keyword rank d scores at most kw/(k + d + 1) + vw/(k + 1) (first in
 * the vector list too), while the `limit`-th best scores at least kw/(k + limit) (the keyword hits
 * ranked 1…limit score that much each), so once the first is below the second no hit deeper than d
 * can reach the best `limit`, and those keep their scores and order. With the offline embedder's
 * weights and 10 hits: 12 instead of 100. Equal weights (k = 60) never allow it: `depth`.
 */
export function keywordDepth(options: FusionOptions, limit: number): number {
  const { k, keywordWeight: kw, vectorWeight: vw, depth } = options;
  if (kw <= 0 || limit >= depth) return depth;
  const floor = kw / (k + limit);
  for (let d = limit; d < depth; d++) {
    // A relative margin, so the sums' rounding cannot turn a tie into a win.
    if (kw / (k + d + 1) + vw / (k + 1) < floor * (1 - 1e-9)) return d;
  }
  return depth;
}

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
