/**
 * FTS5's `bm25()` (SQLite 3.54.1, ext/fts5/fts5_aux.c, fts5Bm25Function) as a pure function, so a
 * backend that keeps its own postings (PostgreSQL, terms from `ftsTokens`) ranks keyword matches with
 * the numbers the SQLite index gives. test/unit/bm25.test.ts compares it with SQLite on random corpora.
 *
 * What FTS5 counts, on the keyword index (`knowledge_fts`, contentless_delete=1):
 * - rows and tokens are the whole table's, every workspace's, not the rows a search may see: the
 *   workspace and scope filters are applied to FTS5's matches afterwards. Deleting a row subtracts it
 *   exactly (its sizes are kept in %_docsize); deleting a row that is not there changes nothing.
 * - a row's size is its tokens in all columns, whatever the column weights; a token is one term
 *   instance as `ftsTokens` lists them.
 * - a phrase's hits are the rows it occurs in (in any column); its frequency in a row is the sum,
 *   over its occurrences, of the weight of the column each is in.
 */

/** BM25's k1 and b as FTS5 fixes them. */
export const BM25_K1 = 1.2;
export const BM25_B = 0.75;

/** One phrase of the query (in query order; a phrase given twice counts twice, as FTS5 counts it). */
export interface Bm25Phrase {
  /** Rows of the whole table containing the phrase. */
  hits: number;
  /** Occurrences of the phrase in the row being scored, per column. */
  freq: readonly [title: number, body: number];
}

export interface Bm25Input {
  phrases: readonly Bm25Phrase[];
  /** Tokens of the row being scored, title and body together. */
  rowTokens: number;
  /** Rows in the table (at least one: the row being scored). */
  totalRows: number;
  /** Tokens of every row of the table, all columns. */
  totalTokens: number;
  /** The column weights passed to bm25(): bm25(knowledge_fts, title, body). */
  weights: readonly [title: number, body: number];
}

/**
 * A phrase's IDF: log((N − hits + 0.5) / (hits + 0.5)), or 1e-6 when that is not positive (a phrase
 * in half the rows or more), so a common phrase still adds a little. The same for every row of a query.
 */
export function bm25Idf(totalRows: number, hits: number): number {
  const idf = Math.log((totalRows - hits + 0.5) / (hits + 0.5));
  return idf <= 0.0 ? 1e-6 : idf;
}

/**
 * The value FTS5's bm25() returns for one row: negative, lower is better (negate it for a
 * higher-is-better score, as the search index's `keyword` does). Every operation is FTS5's, in its
 * order: a frequency is built by adding the column weight once per occurrence (title ones first, as
 * FTS5 visits them by position), and the sum runs over the phrases in query order. So the result is
 * the same double, except that V8's Math.log is not always correctly rounded where glibc's log() is:
 * for 2–10 % of IDF arguments (measured) the IDF, and so the score, is one unit in the last place
 * off (a relative ~1e-16). PostgreSQL's ln() is the C library's, so an IDF computed in SQL agrees.
 */
export function bm25Score(input: Bm25Input): number {
  const { phrases, rowTokens, totalRows, totalTokens, weights } = input;
  const k1 = BM25_K1;
  const b = BM25_B;
  const avgdl = totalTokens / totalRows;
  const D = rowTokens;
  let score = 0.0;
  for (const phrase of phrases) {
    let freq = 0.0;
    for (let i = 0; i < phrase.freq[0]; i++) freq += weights[0];
    for (let i = 0; i < phrase.freq[1]; i++) freq += weights[1];
    score += bm25Idf(totalRows, phrase.hits) * ((freq * (k1 + 1.0)) / (freq + k1 * (1 - b + (b * D) / avgdl)));
  }
  return -1.0 * score;
}
