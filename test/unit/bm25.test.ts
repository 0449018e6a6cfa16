// bm25Score (src/core/knowledge/bm25.ts), fed with counts from ftsTokens, against FTS5's bm25() on
// the keyword index's own table definition, including deleted rows.
import Database from 'better-sqlite3';
import fc from '../helpers/property.js';
import { afterAll, describe, expect, it } from 'vitest';
import { type Bm25Phrase, bm25Idf, bm25Score } from '../../src/core/knowledge/bm25.js';
import { ftsTokens } from '../../src/core/knowledge/fts-tokenizer.js';

const db = new Database(':memory:');
afterAll(() => db.close());

interface Row {
  rowid: number;
  title: string;
  body: string;
}

/** A fresh table exactly like migration 002's knowledge_fts, holding `rows` minus `deleted`. */
function indexOf(rows: Row[], deleted: number[]) {
  db.exec(`DROP TABLE IF EXISTS t;
    CREATE VIRTUAL TABLE t USING fts5(
      title, body, content='', contentless_delete=1, tokenize='porter unicode61 remove_diacritics 2'
    )`);
  const insert = db.prepare('INSERT INTO t (rowid, title, body) VALUES (?, ?, ?)');
  const remove = db.prepare('DELETE FROM t WHERE rowid = ?');
  db.transaction(() => {
    for (const r of rows) insert.run(r.rowid, r.title, r.body);
    for (const rowid of deleted) remove.run(rowid);
  })();
  const search = db.prepare('SELECT rowid, bm25(t, ?, ?) AS score FROM t WHERE t MATCH ? ORDER BY score, rowid');
  return (match: string, weights: [number, number]) => search.all(weights[0], weights[1], match) as { rowid: number; score: number }[];
}

/** Occurrences of the phrase `terms` (consecutive) in `tokens`. */
function occurrences(tokens: string[], terms: string[]): number {
  if (terms.length === 0) return 0;
  let n = 0;
  for (let i = 0; i + terms.length <= tokens.length; i++) if (terms.every((t, k) => tokens[i + k] === t)) n++;
  return n;
}

/** Every matching row's score from bm25Score, with the counts taken from ftsTokens over the rows left. */
function ourScores(rows: Row[], phrases: string[][], weights: [number, number]): Map<number, number> {
  const docs = rows.map((r) => ({ rowid: r.rowid, title: ftsTokens(r.title), body: ftsTokens(r.body) }));
  const totalTokens = docs.reduce((sum, d) => sum + d.title.length + d.body.length, 0);
  const freqs = docs.map((d) => phrases.map((p) => [occurrences(d.title, p), occurrences(d.body, p)] as [number, number]));
  const hits = phrases.map((_, i) => freqs.filter((f) => f[i]![0] + f[i]![1] > 0).length);
  const scores = new Map<number, number>();
  docs.forEach((d, j) => {
    if (!freqs[j]!.some(([a, b]) => a + b > 0)) return;
    const input: Bm25Phrase[] = phrases.map((_, i) => ({ hits: hits[i]!, freq: freqs[j]![i]! }));
    scores.set(d.rowid, bm25Score({ phrases: input, rowTokens: d.title.length + d.body.length, totalRows: docs.length, totalTokens, weights }));
  });
  return scores;
}

/** FTS5's MATCH expression for phrases given as their words: each quoted, ORed. */
const matchOf = (phrases: string[][]) => phrases.map((words) => `"${words.join(' ')}"`).join(' OR ');

const close = (a: number, b: number) => Math.abs(a - b) <= 1e-9 * Math.max(Math.abs(a), Math.abs(b));

/** SQLite's and our scores agree within 1e-9 relative and rank the rows the same (up to such ties). */
function expectSameRanking(theirs: { rowid: number; score: number }[], ours: Map<number, number>, label: string) {
  expect([...ours.keys()].sort((a, b) => a - b), label).toEqual(theirs.map((r) => r.rowid).sort((a, b) => a - b));
  for (const r of theirs) {
    const mine = ours.get(r.rowid)!;
    if (!close(mine, r.score)) expect(mine, `${label}, row ${r.rowid}`).toBe(r.score);
  }
  for (let i = 1; i < theirs.length; i++) {
    const a = ours.get(theirs[i - 1]!.rowid)!;
    const b = ours.get(theirs[i]!.rowid)!;
    if (!(a <= b || close(a, b))) expect.fail(`${label}: rows ${theirs[i - 1]!.rowid} and ${theirs[i]!.rowid} in another order`);
  }
}

/** Words of the corpora: few, so they repeat; stems shared by several words; one phrase SQLite splits. */
const VOCABULARY = ['run', 'running', 'runs', 'Runner', 'jump', 'jumped', 'data', 'base', 'queries', 'query', 'crème', 'CREME', 'the', 'sky', 'ab\u19b0cd'];

describe('bm25Score', () => {
  it('is FTS5 bm25() for named cases: one row, a phrase given twice, a phrase in most rows, weights', () => {
    const rows: Row[] = [
      { rowid: 1, title: 'Running', body: 'the data base runs on data' },
      { rowid: 2, title: 'Data', body: 'data data data' },
      { rowid: 3, title: '', body: 'jumped over the sky' },
      { rowid: 4, title: 'empty', body: '' },
    ];
    const search = indexOf(rows, []);
    const cases: [string[][], [number, number]][] = [
      [[['run']], [1, 1]],
      [[['run'], ['runs']], [1, 1]], // both stem to "run": two phrases, counted twice
      [[['data']], [1, 1]], // in 2 of 4 rows: IDF log(2.5 / 2.5) = 0, so 1e-6
      [[['data'], ['sky']], [10, 0.5]],
      [[['data', 'base']], [0.1, 3.3]],
      [[['nothing'], ['jumped']], [0, 1]],
    ];
    for (const [phrases, weights] of cases) {
      const label = `${matchOf(phrases)} with ${weights}`;
      const stemmed = phrases.map((words) => words.flatMap((w) => ftsTokens(w)));
      expectSameRanking(search(matchOf(phrases), weights), ourScores(rows, stemmed, weights), label);
    }
    // The IDF clamp, and one value worked by hand.
    expect(bm25Idf(4, 2)).toBe(1e-6);
    expect(bm25Idf(4, 3)).toBe(1e-6);
    expect(bm25Idf(4, 1)).toBe(Math.log(3.5 / 1.5));
    const one = bm25Score({ phrases: [{ hits: 1, freq: [1, 0] }], rowTokens: 4, totalRows: 2, totalTokens: 8, weights: [2, 1] });
    // freq 2 (one title occurrence, weight 2); IDF log(1.5 / 1.5) = 0, so 1e-6; D = avgdl: −1e-6 × 2 × 2.2 / (2 + 1.2)
    expect(one).toBeCloseTo(-1.375e-6, 15);
  });

  it('counts rows and tokens exactly after deletions, and ignores deleting a row that is not there', () => {
    const rows: Row[] = [
      { rowid: 1, title: 'alpha', body: 'run run run' },
      { rowid: 2, title: 'beta', body: 'run jump' },
      { rowid: 3, title: 'gamma', body: 'many tokens in this body and no match at all' },
      { rowid: 7, title: 'delta', body: 'jump' },
    ];
    const search = indexOf(rows, [3, 42]);
    const left = rows.filter((r) => r.rowid !== 3);
    for (const q of [[['run']], [['jump']], [['run'], ['jump']]]) {
      expectSameRanking(search(matchOf(q), [1, 1]), ourScores(left, q, [1, 1]), matchOf(q));
    }
    // With row 3 still counted, the scores would differ: the check above can tell.
    const withDeleted = ourScores(rows, [['run']], [1, 1]).get(1)!;
    expect(close(withDeleted, search('"run"', [1, 1]).find((r) => r.rowid === 1)!.score)).toBe(false);
  });

  it('is FTS5 bm25() on random corpora, queries, weights and deletions', () => {
    // Common words (in most rows: IDF clamped to 1e-6) and rarer ones (a positive IDF).
    const word = fc.oneof(fc.constantFrom(...VOCABULARY), fc.integer({ min: 0, max: 60 }).map((n) => `w${n}`));
    const text = (max: number) =>
      fc.array(fc.tuple(word, fc.constantFrom(' ', ' ', ', ', '. ', '-')), { maxLength: max }).map((ws) => ws.map(([w, s]) => w + s).join(''));
    const corpus = fc.array(fc.record({ title: text(5), body: text(40) }), { minLength: 2, maxLength: 60 });
    const phrase = fc.oneof(
      { weight: 4, arbitrary: fc.oneof(word, fc.constant('zebra')).map((w) => [w]) },
      { weight: 1, arbitrary: fc.tuple(word, word).map(([a, b]) => [a, b]) },
    );
    const weight = fc.oneof(fc.constantFrom(1, 0, 0.5, 2, 0.1, 3.3, 10), fc.double({ min: 0, max: 10, noNaN: true }));
    fc.assert(
      fc.property(
        corpus,
        fc.array(fc.nat({ max: 70 }), { maxLength: 20 }),
        fc.array(fc.record({ phrases: fc.array(phrase, { minLength: 1, maxLength: 5 }), weights: fc.tuple(weight, weight) }), { minLength: 1, maxLength: 6 }),
        (docs, deletions, queries) => {
          // Rowids with gaps, as chunks leave them; some deletions name rows that never existed.
          const rows = docs.map((d, i) => ({ rowid: 1 + i * 2, ...d }));
          const deleted = [...new Set(deletions)];
          const search = indexOf(rows, deleted);
          const left = rows.filter((r) => !deleted.includes(r.rowid));
          for (const { phrases, weights } of queries) {
            const stemmed = phrases.map((words) => words.flatMap((w) => ftsTokens(w)));
            const label = `${matchOf(phrases)} with ${weights}`;
            if (left.length === 0) continue;
            expectSameRanking(search(matchOf(phrases), weights), ourScores(left, stemmed, weights), label);
          }
        },
      ),
      { numRuns: 400 },
    );
  }, 120_000);
});
