import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import fc from '../helpers/property.js';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createBinaryCoder } from '../../src/core/knowledge/binary-code.js';
import { DEFAULT_FUSION, fuse, HASHED_FUSION, keywordDepth } from '../../src/core/knowledge/fusion.js';
import { createVectorCache, mayRankAmong, reduceVector } from '../../src/core/knowledge/vector-cache.js';
import {
  blobFromVector,
  type Hit,
  openSqliteSearchIndex,
  type SearchFilter,
  type SearchIndex,
  SHARED_SCOPE,
  type SqliteSearchIndexOptions,
  ftsQuery,
  vectorFromBlob,
} from '../../src/core/knowledge/search-index.js';
import { type Db, migrate, openDatabase } from '../../src/db/database.js';
import { hashedVector } from '../../src/llm/hashed-embedder.js';
import { prng } from '../helpers/prng.js';

const NOW = '2025-01-01T00:00:00.000Z';
const DIM = 64;

function gaussian(random: () => number): number {
  return Math.sqrt(-2 * Math.log(1 - random())) * Math.cos(2 * Math.PI * random());
}

function unit(v: Float32Array): Float32Array {
  const n = Math.sqrt(v.reduce((s, x) => s + x * x, 0));
  return v.map((x) => x / n);
}

function randomUnit(random: () => number, dim: number): Float32Array {
  return unit(Float32Array.from({ length: dim }, () => gaussian(random)));
}

const dot = (a: Float32Array, b: Float32Array): number => {
  let s = 0;
  for (let i = 0; i < a.length; i++) s += a[i]! * b[i]!;
  return s;
};

interface Row {
  rowid: number;
  workspaceId: string;
  sourceId: string;
  scope: string;
  text: string;
  vector: Float32Array;
}

/**
 * A migrated in-memory database with workspaces A and B; personas a1, a2 (in A) and b1 (in B); and
 * sources: `a-shared`, `a-shared-2`, `a-p1` (persona a1), `a-p2` (persona a2), `b-shared`, `b-p1`.
 */
async function fixture(dim = DIM, options: SqliteSearchIndexOptions = {}, filename = ':memory:') {
  const db = openDatabase({ filename, durability: 'normal' });
  await migrate(db);
  const { sqlite } = db;
  const insertWorkspace = sqlite.prepare('INSERT INTO workspaces (id, name, created_at) VALUES (?, ?, ?)');
  const insertPersona = sqlite.prepare(`INSERT INTO personas (id, workspace_id, name, instructions, traits, tools, created_at, updated_at)
    VALUES (?, ?, ?, '', '[]', '[]', ?, ?)`);
  const insertSource = sqlite.prepare(`INSERT INTO knowledge_sources (id, workspace_id, persona_id, name, kind, status, bytes, metadata, created_at, updated_at)
    VALUES (?, ?, ?, ?, 'text', 'ready', 0, '{}', ?, ?)`);
  for (const ws of ['A', 'B']) insertWorkspace.run(ws, `workspace ${ws}`, NOW);
  for (const [id, ws] of [['a1', 'A'], ['a2', 'A'], ['b1', 'B']]) insertPersona.run(id, ws, id, NOW, NOW);
  const sources: Record<string, { workspaceId: string; scope: string }> = {
    'a-shared': { workspaceId: 'A', scope: SHARED_SCOPE },
    'a-shared-2': { workspaceId: 'A', scope: SHARED_SCOPE },
    'a-p1': { workspaceId: 'A', scope: 'a1' },
    'a-p2': { workspaceId: 'A', scope: 'a2' },
    'b-shared': { workspaceId: 'B', scope: SHARED_SCOPE },
    'b-p1': { workspaceId: 'B', scope: 'b1' },
  };
  for (const [id, s] of Object.entries(sources)) {
    insertSource.run(id, s.workspaceId, s.scope === SHARED_SCOPE ? null : s.scope, id, NOW, NOW);
  }
  const index = openSqliteSearchIndex(sqlite, dim, options);
  const insertChunk = sqlite.prepare(`INSERT INTO knowledge_chunks (id, workspace_id, source_id, scope, position, text, heading_path, tokens, embedding)
    VALUES (?, ?, ?, ?, 0, ?, '[]', 1, ?)`);
  const rows: Row[] = [];
  let n = 0;

  /** Inserts chunks of one source (row and index, in one transaction, as the store does). */
  const add = sqlite.transaction((sourceId: string, items: { text: string; vector?: Float32Array; title?: string }[]) => {
    const { workspaceId, scope } = sources[sourceId]!;
    const added: Row[] = [];
    for (const item of items) {
      const vector = item.vector ?? hashedVector(item.text, dim);
      const rowid = Number(insertChunk.run(`chk_${++n}`, workspaceId, sourceId, scope, item.text, blobFromVector(vector)).lastInsertRowid);
      const row = { rowid, workspaceId, sourceId, scope, text: item.text, vector };
      index.add([{ ...row, title: item.title ?? sourceId }]);
      added.push(row);
    }
    rows.push(...added);
    return added;
  });

  const visible = (f: SearchFilter) =>
    rows.filter(
      (r) =>
        r.workspaceId === f.workspaceId &&
        (f.personaId === undefined || r.scope === SHARED_SCOPE || r.scope === f.personaId) &&
        (f.sourceIds === undefined || f.sourceIds.includes(r.sourceId)),
    );

  /** Exact cosine ranking of the rows a filter may see: best first, ties by rowid. */
  const bruteForce = (f: SearchFilter, query: Float32Array, k: number): Hit[] =>
    visible(f)
      .map((r) => ({ rowid: r.rowid, score: dot(query, r.vector) }))
      .sort((a, b) => b.score - a.score || a.rowid - b.rowid)
      .slice(0, k);

  const remove = (rowid: number) => {
    sqlite.prepare('DELETE FROM knowledge_chunks WHERE rowid = ?').run(rowid);
    rows.splice(
      rows.findIndex((r) => r.rowid === rowid),
      1,
    );
  };

  return { db, sqlite, index, add, rows, visible, bruteForce, remove };
}

const rowidsOf = (hits: { rowid: number }[]): number[] => hits.map((h) => h.rowid);

function expectSortedDescending(hits: Hit[]) {
  for (let i = 1; i < hits.length; i++) expect(hits[i - 1]!.score).toBeGreaterThanOrEqual(hits[i]!.score);
}

describe('ftsQuery', () => {
  it('quotes and ORs the distinct words, lower-cased and without diacritics, dropping stop words', () => {
    expect(ftsQuery('The cat and the Hat')).toBe('"cat" OR "hat"');
    expect(ftsQuery('cat CAT Cat')).toBe('"cat"');
    expect(ftsQuery('Café crème')).toBe('"cafe" OR "creme"');
    expect(ftsQuery('mice-heart rate, 2024')).toBe('"mice" OR "heart" OR "rate" OR "2024"');
  });

  it('keeps stop words when nothing else is left, and is null without words', () => {
    expect(ftsQuery('to be or not to be')).toBe('"to" OR "be" OR "or" OR "not"');
    for (const text of ['', '   ', '!!! ... ---', '"*"()^:']) expect(ftsQuery(text)).toBeNull();
  });

  it('never passes FTS5 syntax through', () => {
    expect(ftsQuery('NEAR(alpha beta, 2) AND "gamma" OR -delta* title:eps ^zeta {x}')).toBe(
      '"near" OR "alpha" OR "beta" OR "2" OR "gamma" OR "delta" OR "title" OR "eps" OR "zeta" OR "x"',
    );
  });

  it('caps the query at 64 terms', () => {
    const words = Array.from({ length: 100 }, (_, i) => `w${i}`);
    expect(ftsQuery(words.join(' '))!.split(' OR ')).toEqual(words.slice(0, 64).map((w) => `"${w}"`));
  });

  it('always yields a valid MATCH expression, whatever the input (property)', async () => {
    const { db, sqlite } = await fixture();
    try {
      const match = sqlite.prepare('SELECT rowid FROM knowledge_fts WHERE knowledge_fts MATCH ?');
      const syntax = fc.constantFrom('"', "'", '*', '(', ')', ':', '^', '+', '-', '{', '}', ',', 'NEAR', 'AND', 'OR', 'NOT', 'title', 'body', ' ', '\u0000', 'é', '漢字', '\u{1F600}', '\uD800');
      const text = fc.oneof(
        fc.string({ unit: 'binary', maxLength: 80 }),
        fc.array(fc.oneof(syntax, fc.string({ maxLength: 4 })), { maxLength: 30 }).map((parts) => parts.join('')),
      );
      fc.assert(
        fc.property(text, (t) => {
          const q = ftsQuery(t);
          if (q !== null) expect(() => match.all(q)).not.toThrow();
        }),
        { numRuns: 1_000 },
      );
    } finally {
      await db.close();
    }
  });
});

// Every behaviour holds whichever first stage serves the vector search: the in-memory codes, or sqlite-vec's KNN.
describe.each([
  ['in-memory codes', {}],
  ['sqlite-vec', { cacheBytes: 0 }],
] as const)('openSqliteSearchIndex (%s)', (_stage, stage: SqliteSearchIndexOptions) => {
  let current: Db | undefined;
  afterEach(async () => {
    await current?.close();
    current = undefined;
  });
  const open = async (dim = DIM, options: SqliteSearchIndexOptions = {}) => {
    const f = await fixture(dim, { ...stage, ...options });
    current = f.db;
    return f;
  };

  it('keyword search: BM25 best first, scores higher-is-better, limited to k', async () => {
    const f = await open();
    const [often, once, none] = f.add('a-shared', [
      { text: 'zebra zebra zebra stripes on a zebra' },
      { text: 'a long text about many things, mentioning a zebra only once among other animals like lions and tigers' },
      { text: 'nothing relevant here at all' },
    ]);
    const hits = f.index.keyword({ workspaceId: 'A' }, 'zebra', 10);
    expect(rowidsOf(hits)).toEqual([often!.rowid, once!.rowid]);
    expect(hits[0]!.score).toBeGreaterThan(hits[1]!.score);
    expect(hits[1]!.score).toBeGreaterThan(0);
    expect(rowidsOf(f.index.keyword({ workspaceId: 'A' }, 'zebra', 1))).toEqual([often!.rowid]);
    expect(f.index.keyword({ workspaceId: 'A' }, 'zebra', 0)).toEqual([]);
    expect(f.index.keyword({ workspaceId: 'A' }, 'the of', 10)).toEqual([]);
    expect(f.index.keyword({ workspaceId: 'A' }, '!!!', 10)).toEqual([]);
    // Words are ORed; stemming and diacritics folding come from the tokenizer.
    expect(rowidsOf(f.index.keyword({ workspaceId: 'A' }, 'Zébras relevance', 10)).sort()).toEqual(
      [often!.rowid, once!.rowid, none!.rowid].sort(),
    );
  });

  it('keyword search weighs the title against the body by the configured weights', async () => {
    for (const [titleWeight, first] of [[10, 'title'], [0.1, 'body']] as const) {
      const f = await open(DIM, { titleWeight, bodyWeight: 1 });
      const [inTitle, inBody] = f.add('a-shared', [
        { text: 'plain words without the term, padded to a similar length', title: 'Okapi guide' },
        { text: 'okapi plain words here, padded to a similar length too', title: 'Misc notes' },
      ]);
      const hits = f.index.keyword({ workspaceId: 'A' }, 'okapi', 10);
      expect(rowidsOf(hits)).toEqual(first === 'title' ? [inTitle!.rowid, inBody!.rowid] : [inBody!.rowid, inTitle!.rowid]);
      await f.db.close();
    }
  });

  it('never returns or is crowded out by another workspace, even when it matches better', async () => {
    const f = await open();
    const target = f.add('a-shared', [{ text: 'quasar observations from the southern telescope' }])[0]!;
    f.add('a-shared', [{ text: 'unrelated gardening notes' }]);
    const query = 'quasar quasar quasar observations';
    const better = f.add(
      'b-shared',
      Array.from({ length: 300 }, (_, i) => ({ text: `${query} ${i}` })),
    );
    const q = hashedVector(query, DIM);
    expect(f.index.keyword({ workspaceId: 'B' }, query, 1)).toHaveLength(1);
    expect(rowidsOf(f.index.keyword({ workspaceId: 'A' }, query, 5))).toEqual([target.rowid]);
    const vectorHits = f.index.vector({ workspaceId: 'A' }, q, 5);
    expect(vectorHits[0]!.rowid).toBe(target.rowid);
    const bRowids = new Set(rowidsOf(better));
    expect(vectorHits.filter((h) => bRowids.has(h.rowid))).toEqual([]);
    expect(rowidsOf(vectorHits)).toEqual(rowidsOf(f.bruteForce({ workspaceId: 'A' }, q, 5)));
    expect(f.index.keyword({ workspaceId: 'C' }, query, 5)).toEqual([]);
    expect(f.index.vector({ workspaceId: 'C' }, q, 5)).toEqual([]);
  });

  it("filters by persona scope: shared chunks and that persona's, never another persona's", async () => {
    const f = await open();
    const text = 'nebula spectra and their emission lines';
    const shared = f.add('a-shared', [{ text }])[0]!;
    const mine = f.add('a-p1', [{ text: `${text} for persona one` }])[0]!;
    // Another persona's chunks match best and are many: they must neither leak nor crowd out.
    f.add(
      'a-p2',
      Array.from({ length: 250 }, () => ({ text })),
    );
    const q = hashedVector(text, DIM);
    const expected = [shared.rowid, mine.rowid].sort((a, b) => a - b);
    const p1 = { workspaceId: 'A', personaId: 'a1' };
    expect(rowidsOf(f.index.keyword(p1, text, 10)).sort((a, b) => a - b)).toEqual(expected);
    expect(rowidsOf(f.index.vector(p1, q, 10)).sort((a, b) => a - b)).toEqual(expected);
    // A persona with no chunks of its own sees the shared ones only.
    const other = { workspaceId: 'A', personaId: 'nobody' };
    expect(rowidsOf(f.index.keyword(other, text, 10))).toEqual([shared.rowid]);
    expect(rowidsOf(f.index.vector(other, q, 10))).toEqual([shared.rowid]);
    // Without a persona, the whole workspace.
    expect(f.index.keyword({ workspaceId: 'A' }, text, 1_000)).toHaveLength(252);
    expect(f.index.vector({ workspaceId: 'A' }, q, 1_000)).toHaveLength(252);
  });

  it('filters by source ids; an empty list matches nothing', async () => {
    const f = await open();
    const text = 'pulsar timing arrays';
    const one = f.add('a-shared', [{ text }])[0]!;
    const two = f.add('a-shared-2', [{ text: `${text} again` }])[0]!;
    const mine = f.add('a-p1', [{ text }])[0]!;
    f.add('b-shared', [{ text }]);
    const q = hashedVector(text, DIM);
    const search = (filter: SearchFilter) => ({
      keyword: rowidsOf(f.index.keyword(filter, text, 10)).sort((a, b) => a - b),
      vector: rowidsOf(f.index.vector(filter, q, 10)).sort((a, b) => a - b),
    });
    const both = (rowids: number[]) => ({ keyword: rowids, vector: rowids });
    expect(search({ workspaceId: 'A', sourceIds: ['a-shared-2'] })).toEqual(both([two.rowid]));
    expect(search({ workspaceId: 'A', sourceIds: ['a-shared', 'a-shared-2'] })).toEqual(both([one.rowid, two.rowid]));
    // Another workspace's source id does not widen the search.
    expect(search({ workspaceId: 'A', sourceIds: ['b-shared'] })).toEqual(both([]));
    expect(search({ workspaceId: 'A', sourceIds: [] })).toEqual(both([]));
    // Combined with a persona: persona a2 may not see a1's source even when asked for it.
    expect(search({ workspaceId: 'A', personaId: 'a2', sourceIds: ['a-p1', 'a-shared'] })).toEqual(both([one.rowid]));
    expect(search({ workspaceId: 'A', personaId: 'a1', sourceIds: ['a-p1'] })).toEqual(both([mine.rowid]));
  });

  it('forgets a chunk in both modes when its row is deleted, directly or through its source', async () => {
    const f = await open();
    const text = 'magnetar flares observed';
    const [first, second] = f.add('a-shared', [{ text }, { text: `${text} twice` }]);
    const third = f.add('a-shared-2', [{ text }])[0]!;
    const q = hashedVector(text, DIM);
    const both = () => ({
      keyword: rowidsOf(f.index.keyword({ workspaceId: 'A' }, text, 10)).sort((a, b) => a - b),
      vector: rowidsOf(f.index.vector({ workspaceId: 'A' }, q, 10)).sort((a, b) => a - b),
    });
    expect(both()).toEqual({ keyword: [first!.rowid, second!.rowid, third.rowid], vector: [first!.rowid, second!.rowid, third.rowid] });
    f.remove(first!.rowid);
    expect(both()).toEqual({ keyword: [second!.rowid, third.rowid], vector: [second!.rowid, third.rowid] });
    f.sqlite.prepare('DELETE FROM knowledge_sources WHERE id = ?').run('a-shared-2');
    expect(both()).toEqual({ keyword: [second!.rowid], vector: [second!.rowid] });
    expect(f.sqlite.prepare('SELECT count(*) FROM knowledge_vec').pluck().get()).toBe(1);
  });

  it('vector search is exact, scores being cosine similarities, when the filtered collection fits in the candidates', async () => {
    const candidates = 40;
    const f = await open(DIM, { candidates });
    const random = prng(7);
    // Persona a1 sees 15 shared + 25 own = 40 chunks; the workspace holds 240, workspace B 200.
    const vectors = (n: number) => Array.from({ length: n }, (_, i) => ({ text: `chunk ${i}`, vector: randomUnit(random, DIM) }));
    f.add('a-shared', vectors(15));
    f.add('a-p1', vectors(25));
    f.add('a-p2', vectors(200));
    f.add('b-shared', vectors(200));
    const filter = { workspaceId: 'A', personaId: 'a1' };
    expect(f.visible(filter)).toHaveLength(candidates);
    for (let i = 0; i < 20; i++) {
      const q = randomUnit(random, DIM);
      for (const k of [1, 10, 40, 100]) {
        const hits = f.index.vector(filter, q, k);
        const exact = f.bruteForce(filter, q, k);
        expect(rowidsOf(hits)).toEqual(rowidsOf(exact));
        hits.forEach((h, j) => expect(h.score).toBeCloseTo(exact[j]!.score, 6));
        expectSortedDescending(hits);
      }
    }
    // The same query vector as a chunk's finds that chunk first, with a score of 1.
    const chunk = f.rows.find((r) => r.scope === 'a1')!;
    const top = f.index.vector(filter, chunk.vector, 1)[0]!;
    expect(top.rowid).toBe(chunk.rowid);
    expect(top.score).toBeCloseTo(1, 5);
    expect(f.index.vector(filter, chunk.vector, 0)).toEqual([]);
  });

  it('rejects vectors of the wrong dimension', async () => {
    const f = await open();
    expect(() => f.index.vector({ workspaceId: 'A' }, new Float32Array(DIM + 1), 5)).toThrow(/dimension/);
    expect(() => f.add('a-shared', [{ text: 'x', vector: new Float32Array(DIM - 1) }])).toThrow(/dimension/);
    // The transaction rolled back: no chunk row without its index rows.
    expect(f.sqlite.prepare('SELECT count(*) FROM knowledge_chunks').pluck().get()).toBe(0);
    expect(f.index.dimension).toBe(DIM);
  });

  it('keeps the codes when reopened with the same dimension and drops them for another', async () => {
    const f = await open();
    const row = f.add('a-shared', [{ text: 'comet tails' }])[0]!;
    const again = openSqliteSearchIndex(f.sqlite, DIM, stage);
    expect(rowidsOf(again.vector({ workspaceId: 'A' }, row.vector, 5))).toEqual([row.rowid]);
    const count = (table: string) => f.sqlite.prepare(`SELECT count(*) FROM ${table}`).pluck().get();
    expect([count('knowledge_vec'), count('knowledge_codes')]).toEqual([1, 1]);
    // Another dimension: the stored vectors do not fit it, so nothing is re-encoded (reindex re-embeds them).
    const wider = openSqliteSearchIndex(f.sqlite, 1536, stage);
    expect(wider.dimension).toBe(1536);
    expect([count('knowledge_vec'), count('knowledge_codes')]).toEqual([0, 0]);
    expect(wider.vector({ workspaceId: 'A' }, randomUnit(prng(1), 1536), 5)).toEqual([]);
  });

  it('re-encodes the stored vectors when the coder changed (a database from before 2,048-bit codes)', async () => {
    const f = await open();
    const rows = f.add('a-shared', [{ text: 'comet tails' }, { text: 'solar wind' }, { text: 'ion engines' }]);
    f.add('b-shared', [{ text: 'comet tails' }]);
    // As such a database looks: codes of another coder (here none at all) and no record of the coder.
    f.sqlite.exec(`DELETE FROM knowledge_codes; DELETE FROM knowledge_vec; DELETE FROM settings WHERE key = 'vector_codes'`);
    const reopened = openSqliteSearchIndex(f.sqlite, DIM, stage);
    expect(f.sqlite.prepare('SELECT count(*) FROM knowledge_codes').pluck().get()).toBe(4);
    for (const row of rows) expect(reopened.vector({ workspaceId: 'A' }, row.vector, 1)[0]?.rowid).toBe(row.rowid);
  });

  // 60 candidates of 3,000 (2 %) keep this meaningful: with all 3,000 rescored it could not fail.
  it('vector search recall@10 against brute force is at least 0.95 on 3,000 hashed embeddings with 60 candidates', async () => {
    const dim = 384;
    const f = await open(dim, { candidates: 60 });
    const random = prng(2024);
    const pick = <T>(xs: readonly T[]): T => xs[Math.floor(random() * xs.length)]!;
    // A Zipf-like vocabulary: a few common words, a long tail of rare ones, inflected forms.
    const stems = Array.from({ length: 600 }, (_, i) => {
      const syllables = ['ka', 'lo', 'mi', 'ren', 'tor', 'sa', 'vin', 'qu', 'el', 'dra', 'po', 'nix', 'ha', 'zu', 'bre', 'ot'];
      let w = '';
      for (let n = i + 1; n > 0; n = Math.floor(n / 16)) w += syllables[n % 16];
      return w + syllables[(i * 7) % 16];
    });
    const zipf = () => stems[Math.floor(stems.length * random() ** 2.5)]!;
    const word = () => {
      const w = zipf();
      const r = random();
      return r < 0.15 ? `${w}s` : r < 0.25 ? `${w}ing` : w;
    };
    const glue = ['the', 'of', 'and', 'in', 'a', 'to', 'with'];
    const sentence = () =>
      Array.from({ length: 6 + Math.floor(random() * 18) }, () => (random() < 0.25 ? pick(glue) : word())).join(' ');
    const texts = Array.from({ length: 3_000 }, () => {
      const n = 1 + Math.floor(random() * 3);
      return Array.from({ length: n }, sentence).join('. ');
    });
    const sources = ['a-shared', 'a-shared-2', 'a-p1'] as const;
    for (let i = 0; i < texts.length; i += 500) {
      const slice = texts.slice(i, i + 500).map((text) => ({ text, vector: hashedVector(text, dim) }));
      f.add(sources[(i / 500) % sources.length]!, slice);
    }
    // A few rows elsewhere so the workspace partition matters.
    f.add('b-shared', texts.slice(0, 200).map((text) => ({ text, vector: hashedVector(text, dim) })));

    const filter = { workspaceId: 'A' };
    const short = Array.from({ length: 60 }, () => Array.from({ length: 2 + Math.floor(random() * 4) }, word).join(' '));
    const paraphrases = Array.from({ length: 60 }, () => {
      const words = pick(texts).split(/[ .]+/);
      return words.filter(() => random() < 0.6).reverse().join(' ') || words[0]!;
    });
    const recallOf = (queries: string[]) => {
      let found = 0;
      for (const query of queries) {
        const q = hashedVector(query, dim);
        const exact = new Set(rowidsOf(f.bruteForce(filter, q, 10)));
        const hits = f.index.vector(filter, q, 10);
        expect(hits).toHaveLength(10);
        expectSortedDescending(hits);
        found += hits.filter((h) => exact.has(h.rowid)).length;
      }
      return found / (queries.length * 10);
    };
    const recallShort = recallOf(short);
    const recallParaphrase = recallOf(paraphrases);
    console.info(`recall@10 vs brute force: short queries ${recallShort.toFixed(3)}, paraphrases ${recallParaphrase.toFixed(3)}`);
    expect(recallShort).toBeGreaterThanOrEqual(0.95);
    expect(recallParaphrase).toBeGreaterThanOrEqual(0.95);
  });
});

describe('the in-memory codes', () => {
  const open: Db[] = [];
  afterEach(async () => {
    for (const db of open.splice(0)) await db.close();
  });

  it('follow writes made through another connection (the CLI while the server runs): appends, deletes, a reused rowid', async () => {
    const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'switchboard-codes-')), 'kb.db');
    const writer = await fixture(DIM, {}, file);
    const reader = openDatabase({ filename: file, durability: 'normal' });
    open.push(writer.db, reader);
    const index = openSqliteSearchIndex(reader.sqlite, DIM);
    const filter = { workspaceId: 'A' };
    const top = (v: Float32Array) => index.vector(filter, v, 1)[0];

    const [a, b] = writer.add('a-shared', [{ text: 'comet tails' }, { text: 'solar wind' }]);
    expect(top(a!.vector)?.rowid).toBe(a!.rowid); // first search: loaded
    const [c] = writer.add('a-p1', [{ text: 'ion engines' }]);
    expect(top(c!.vector)?.rowid).toBe(c!.rowid); // appended since
    writer.remove(a!.rowid);
    expect(rowidsOf(index.vector(filter, a!.vector, 10))).toEqual(rowidsOf(writer.bruteForce(filter, a!.vector, 10)));
    // Deleting the largest rowid lets SQLite hand it out again: the copy must not keep the old code under it.
    writer.remove(c!.rowid);
    const fresh = randomUnit(prng(9), DIM);
    const [d] = writer.add('a-shared', [{ text: 'fresh', vector: fresh }]);
    expect(d!.rowid).toBe(c!.rowid);
    expect(top(fresh)).toEqual({ rowid: d!.rowid, score: expect.closeTo(1, 5) });
    expect(rowidsOf(index.vector(filter, c!.vector, 10))).toEqual(rowidsOf(writer.bruteForce(filter, c!.vector, 10)));
    expect(rowidsOf(index.vector(filter, b!.vector, 10))).toEqual(rowidsOf(writer.bruteForce(filter, b!.vector, 10)));
  });

  it('stay within their memory budget: least recently searched workspaces go first, one too large is not held', async () => {
    const f = await fixture();
    open.push(f.db);
    const random = prng(5);
    const some = (n: number) => Array.from({ length: n }, (_, i) => ({ text: `chunk ${i}`, vector: randomUnit(random, DIM) }));
    f.add('a-shared', some(30));
    f.add('b-shared', some(20));
    const bits = createBinaryCoder(DIM).bits;
    const q = createBinaryCoder(DIM).encode(randomUnit(random, DIM));
    // Room for 40 rows: A (30) or B (20), not both.
    const cache = createVectorCache(f.sqlite, bits, 40 * (bits / 8 + 32));
    expect(cache.nearest({ workspaceId: 'A' }, q, 5)?.rowids).toHaveLength(5);
    const heldA = cache.bytes();
    expect(cache.nearest({ workspaceId: 'B' }, q, 5)?.rowids).toHaveLength(5);
    expect(cache.bytes()).toBeLessThan(heldA); // A evicted, B held
    f.add('b-shared', some(30)); // B (50) no longer fits: not held, the caller falls back
    expect(cache.nearest({ workspaceId: 'B' }, q, 5)).toBeNull();
    expect(cache.bytes()).toBe(0);
  });

  it('hold the float32 vectors for the rescoring while codes and vectors fit half the budget; beyond it the codes only, same results', async () => {
    const f = await fixture();
    open.push(f.db);
    const random = prng(11);
    f.add('a-shared', Array.from({ length: 30 }, (_, i) => ({ text: `chunk ${i}`, vector: randomUnit(random, DIM) })));
    const coder = createBinaryCoder(DIM);
    const q = randomUnit(random, DIM);
    const perRow = coder.bits / 8 + 32;
    const stored = f.sqlite.prepare('SELECT embedding FROM knowledge_chunks WHERE rowid = ?').pluck();
    const roomy = createVectorCache(f.sqlite, coder.bits, 10 ** 6, DIM);
    const near = roomy.nearest({ workspaceId: 'A' }, coder.encode(q), 10)!;
    expect(near.vectors).toHaveLength(10);
    near.rowids.forEach((rowid, i) => expect([...near.vectors![i]!]).toEqual([...vectorFromBlob(stored.get(rowid) as Buffer)]));
    // Room for the codes of 40 rows: the 30 codes fit, codes and vectors do not fit half of it.
    const tight = createVectorCache(f.sqlite, coder.bits, 40 * perRow, DIM);
    const codesOnly = tight.nearest({ workspaceId: 'A' }, coder.encode(q), 10)!;
    expect(codesOnly.vectors).toBeNull();
    expect(codesOnly.rowids).toEqual(near.rowids);
    const held = openSqliteSearchIndex(f.sqlite, DIM).vector({ workspaceId: 'A' }, q, 10);
    const read = openSqliteSearchIndex(f.sqlite, DIM, { cacheBytes: 40 * perRow }).vector({ workspaceId: 'A' }, q, 10);
    expect(held).toHaveLength(10);
    expect(held).toEqual(read);

    // Codes and 16-bit vectors fit half the budget, codes and float32 vectors do not: held reduced,
    // each value within half its scale of the stored one; the same hits with their exact scores.
    const middleBudget = 2 * 30 * (perRow + DIM * 2 + 4);
    expect(30 * (perRow + DIM * 4)).toBeGreaterThan(middleBudget / 2);
    const middle = createVectorCache(f.sqlite, coder.bits, middleBudget, DIM).nearest({ workspaceId: 'A' }, coder.encode(q), 10)!;
    expect(middle.vectors).toBeNull();
    expect(middle.reduced).toHaveLength(10);
    expect(middle.rowids).toEqual(near.rowids);
    middle.rowids.forEach((rowid, i) => {
      const exact = vectorFromBlob(stored.get(rowid) as Buffer);
      const { values, scale } = middle.reduced![i]!;
      exact.forEach((x, d) => expect(Math.abs(x - values[d]! * scale)).toBeLessThanOrEqual(scale / 2 + 1e-12));
    });
    expect(openSqliteSearchIndex(f.sqlite, DIM, { cacheBytes: middleBudget }).vector({ workspaceId: 'A' }, q, 10)).toEqual(held);
  });

  it('rescore from the table only the candidates whose reduced vectors can still rank among the best k, always every one that does', () => {
    // Random unit vectors, clusters of near-duplicates and exact ties: the exact best k (ties by
    // position) are always among those kept, and with spread-out scores few others are.
    const unit = fc.integer({ min: 1, max: 2 ** 31 - 1 }).map((s) => randomUnit(prng(s), 96));
    fc.assert(
      fc.property(
        unit,
        fc.array(fc.tuple(unit, fc.nat({ max: 6 }), fc.integer({ min: 2, max: 12 }).map((e) => 10 ** -e)), { minLength: 1, maxLength: 60 }),
        fc.integer({ min: 1, max: 30 }),
        (query, spec, k) => {
          // Each vector, then `copies` near-duplicates of it (moved by up to `jitter` per value: from 1e-2, to
          // below what 16 bits resolve).
          const vectors = spec.flatMap(([v, copies, jitter]) => [v, ...Array.from({ length: copies }, (_, c) => v.map((x, i) => x + jitter * Math.sin(7 * c + i)))]);
          const exact = vectors.map((v, i) => ({ i, score: dot(query, v) })).sort((a, b) => b.score - a.score || a.i - b.i);
          const kept = new Set(mayRankAmong(query, vectors.map(reduceVector), k));
          for (const { i } of exact.slice(0, k)) expect(kept.has(i)).toBe(true);
          expect(kept.size).toBeGreaterThanOrEqual(Math.min(k, vectors.length));
        },
      ),
      { numRuns: 200 },
    );
    // 400 spread-out candidates, best 10: a handful read, not 400.
    const random = prng(3);
    const query = randomUnit(random, 384);
    const candidates = Array.from({ length: 400 }, () => reduceVector(randomUnit(random, 384)));
    expect(mayRankAmong(query, candidates, 10).length).toBeLessThan(20);
  });
});

describe('keyword budget', () => {
  it('drops the commonest terms beyond the budget, always keeping the rarest; Infinity keeps all', async () => {
    const f = await fixture(DIM, { keywordBudget: 5 });
    const exact = openSqliteSearchIndex(f.sqlite, DIM, { keywordBudget: Infinity });
    try {
      const common = f.add('a-shared', Array.from({ length: 8 }, (_, i) => ({ text: `common words number ${i}` })));
      const rare = f.add('a-shared', [{ text: 'a rare zeppelin' }]);
      const filter = { workspaceId: 'A' };
      // "common" matches 8 chunks, over the budget of 5: only "zeppelin" is searched.
      expect(rowidsOf(f.index.keyword(filter, 'common zeppelin', 10))).toEqual([rare[0]!.rowid]);
      expect(rowidsOf(exact.keyword(filter, 'common zeppelin', 10))).toHaveLength(9);
      // The rarest term is kept even when it alone is over the budget.
      expect(rowidsOf(f.index.keyword(filter, 'common', 10)).sort()).toEqual(rowidsOf(common).sort());
      // Counts are reused, but not once the index has grown: "quasar" fits the budget at first, then no longer.
      f.add('a-shared', [{ text: 'quasar one' }, { text: 'quasar two' }]);
      expect(rowidsOf(f.index.keyword(filter, 'quasar zeppelin', 10))).toHaveLength(3);
      f.add('a-shared', Array.from({ length: 6 }, (_, i) => ({ text: `quasar ${i}` })));
      expect(rowidsOf(f.index.keyword(filter, 'quasar zeppelin', 10))).toEqual([rare[0]!.rowid]);
    } finally {
      await f.db.close();
    }
  });
});

describe('merging the keyword index', () => {
  it('merges every segment into one, a bounded step at a time, with the same keyword results, and says when it is done', async () => {
    const f = await fixture();
    try {
      const segments = () => f.sqlite.prepare('SELECT count(DISTINCT segid) FROM knowledge_fts_idx').pluck().get() as number;
      const random = prng(11);
      const words = ['zebra', 'okapi', 'lion', 'tiger', 'quokka', 'lemur', 'otter', 'heron', 'ibis', 'tapir', 'gecko', 'bison'];
      // Each add is a transaction of its own, so a segment of its own until FTS5 merges some.
      for (let i = 0; i < 40; i++) {
        const text = Array.from({ length: 300 }, () => words[Math.floor(random() * words.length)]).join(' ');
        f.add(i % 3 === 0 ? 'a-p1' : 'a-shared', [{ text }]);
      }
      expect(segments()).toBeGreaterThan(1);
      const queries = ['zebra okapi', 'lion', 'quokka lemur otter', 'heron tapir ibis tiger gecko bison'];
      const filters: SearchFilter[] = [{ workspaceId: 'A' }, { workspaceId: 'A', personaId: 'a2' }];
      const results = () => queries.flatMap((q) => filters.map((filter) => f.index.keyword(filter, q, 50)));
      const before = results();
      let steps = 0;
      for (let first = true; f.index.mergeStep(first, 1); first = false) steps++;
      expect(steps).toBeGreaterThan(1); // a page per step: the merge took several
      expect(segments()).toBe(1);
      expect(f.index.mergeStep(true, 1)).toBe(false); // nothing left to merge
      expect(results()).toEqual(before); // same chunks, same BM25 scores
      expect(f.index.keywordPages(1_000_000)).toBeGreaterThan(2);
      expect(f.index.keywordPages(2)).toBe(2);
    } finally {
      await f.db.close();
    }
  });
});

describe('createBinaryCoder', () => {
  const hamming = (a: Buffer, b: Buffer): number => {
    let d = 0;
    for (let i = 0; i < a.length; i++) {
      let x = a[i]! ^ b[i]!;
      while (x) {
        d += x & 1;
        x >>= 1;
      }
    }
    return d;
  };

  afterEach(() => {
    vi.restoreAllMocks();
  });

  it('makes codes of at least 2,048 bits, a multiple of 64, of bits / 8 bytes', () => {
    for (const dim of [1, 3, 64, 100, 384, 768, 1000, 1536, 3072]) {
      const coder = createBinaryCoder(dim);
      expect(coder.bits).toBeGreaterThanOrEqual(2048);
      expect(coder.bits % 64).toBe(0);
      expect(coder.encode(randomUnit(prng(dim), dim))).toHaveLength(coder.bits / 8);
    }
    expect(createBinaryCoder(384).bits).toBe(2048);
    expect(createBinaryCoder(3072).bits).toBe(4096);
  });

  it('is deterministic across coder instances and module loads, without Math.random', async () => {
    const random = vi.spyOn(Math, 'random');
    const vectors = Array.from({ length: 5 }, (_, i) => randomUnit(prng(i), 384));
    const codes = vectors.map((v) => createBinaryCoder(384).encode(v));
    vi.resetModules();
    const fresh = await import('../../src/core/knowledge/binary-code.js');
    const other = fresh.createBinaryCoder(384);
    vectors.forEach((v, i) => expect(other.encode(v).equals(codes[i]!)).toBe(true));
    // A coder reused for many vectors gives each the same code as a fresh one.
    const reused = createBinaryCoder(384);
    for (const v of [...vectors].reverse()) reused.encode(v);
    vectors.forEach((v, i) => expect(reused.encode(v).equals(codes[i]!)).toBe(true));
    expect(random).not.toHaveBeenCalled();
    // Different vectors, different codes.
    expect(new Set(codes.map((c) => c.toString('hex'))).size).toBe(5);
  });

  it('estimates the angle: the Hamming fraction tracks angle / π (SimHash)', () => {
    const dim = 384;
    const coder = createBinaryCoder(dim);
    const random = prng(99);
    let previous = -1;
    for (const angle of [0, 0.1, 0.3, 0.6, 1.0, Math.PI / 2, 2.5, Math.PI]) {
      let total = 0;
      const samples = 30;
      for (let s = 0; s < samples; s++) {
        const u = randomUnit(random, dim);
        // A unit vector orthogonal to u, then w at the given angle from u.
        const r = randomUnit(random, dim);
        const proj = dot(r, u);
        const v = unit(r.map((x, i) => x - proj * u[i]!));
        const w = u.map((x, i) => Math.cos(angle) * x + Math.sin(angle) * v[i]!);
        total += hamming(coder.encode(u), coder.encode(w)) / coder.bits;
      }
      const fraction = total / samples;
      expect(Math.abs(fraction - angle / Math.PI)).toBeLessThan(0.03);
      expect(fraction).toBeGreaterThan(previous);
      previous = fraction;
    }
  });

  it('codes sparse vectors usefully: similar texts much closer than unrelated ones', () => {
    const coder = createBinaryCoder(384);
    const code = (t: string) => coder.encode(hashedVector(t));
    const near = hamming(code('inductive properties of biomaterials'), code('biomaterials lack inductive properties'));
    const far = hamming(code('inductive properties of biomaterials'), code('the heart rate of mice'));
    expect(near).toBeLessThan(far * 0.7);
    expect(far / coder.bits).toBeGreaterThan(0.4);
    // Orthogonal one-hot vectors: exactly half the bits differ; a one-hot and itself: none.
    const e = (i: number) => Float32Array.from({ length: 384 }, (_, j) => (j === i ? 1 : 0));
    expect(hamming(coder.encode(e(3)), coder.encode(e(200)))).toBe(coder.bits / 2);
    expect(hamming(coder.encode(e(3)), coder.encode(e(3)))).toBe(0);
  });
});

describe('fuse', () => {
  const hits = (...rowids: number[]): Hit[] => rowids.map((rowid, i) => ({ rowid, score: 100 - i }));

  it('adds weight / (k + rank) from each list, best first', () => {
    const fused = fuse(hits(1, 2, 3), hits(3, 4), { k: 10, keywordWeight: 1, vectorWeight: 2, depth: 3 });
    expect(fused.map((h) => h.rowid)).toEqual([3, 4, 1, 2]);
    expect(fused[0]!.score).toBeCloseTo(1 / 13 + 2 / 11, 12);
    expect(fused[1]!.score).toBeCloseTo(2 / 12, 12);
    expect(fused[2]!.score).toBeCloseTo(1 / 11, 12);
    expect(fused[3]!.score).toBeCloseTo(1 / 12, 12);
  });

  it('uses ranks only, not the modes’ scores', () => {
    const a = fuse([{ rowid: 1, score: 1e9 }, { rowid: 2, score: -5 }], [], DEFAULT_FUSION);
    const b = fuse([{ rowid: 1, score: 0.2 }, { rowid: 2, score: 0.1 }], [], DEFAULT_FUSION);
    expect(a).toEqual(b);
    expect(a).toEqual([
      { rowid: 1, score: 1 / 61 },
      { rowid: 2, score: 1 / 62 },
    ]);
  });

  it('needs only keywordDepth keyword hits for the same best `limit`, scores and order included', () => {
    // Lists drawn from few rowids, so they overlap, with any weights: the best `limit` of fusing the
    // keyword list cut at keywordDepth equal those of fusing it whole.
    const list = fc.uniqueArray(fc.integer({ min: 1, max: 40 }), { maxLength: 40 }).map((ids) => hits(...ids));
    const options = fc.record({
      k: fc.integer({ min: 0, max: 80 }),
      keywordWeight: fc.oneof(fc.constant(0), fc.double({ min: 0.01, max: 5, noNaN: true })),
      vectorWeight: fc.oneof(fc.constant(0), fc.double({ min: 0.001, max: 5, noNaN: true })),
      depth: fc.integer({ min: 1, max: 60 }),
    });
    fc.assert(
      fc.property(list, list, options, fc.integer({ min: 1, max: 30 }), (keyword, vector, o, limit) => {
        const d = keywordDepth(o, limit);
        expect(d).toBeGreaterThanOrEqual(Math.min(limit, o.depth));
        expect(fuse(keyword.slice(0, d), vector, o).slice(0, limit)).toEqual(fuse(keyword, vector, o).slice(0, limit));
      }),
      { numRuns: 2000 },
    );
    // The offline embedder's weights cut it short; equal weights never do.
    expect(keywordDepth(HASHED_FUSION, 10)).toBe(12);
    // Keyword rank 11, first in the vector list too: 1/21 + 0.05/11 beats the 10th keyword hit's 1/20.
    const keyword100 = hits(...Array.from({ length: 100 }, (_, i) => i + 1));
    const full = fuse(keyword100, hits(11), HASHED_FUSION).slice(0, 10);
    expect(full.map((h) => h.rowid)).toContain(11);
    expect(fuse(keyword100.slice(0, 12), hits(11), HASHED_FUSION).slice(0, 10)).toEqual(full);
    expect(fuse(keyword100.slice(0, 10), hits(11), HASHED_FUSION).slice(0, 10)).not.toEqual(full);
    expect(keywordDepth(HASHED_FUSION, 5)).toBe(6);
    expect(keywordDepth(DEFAULT_FUSION, 10)).toBe(DEFAULT_FUSION.depth);
  });

  it('takes only the first `depth` hits of each list', () => {
    const fused = fuse(hits(1, 2, 3, 4), hits(5, 6, 7), { k: 1, keywordWeight: 1, vectorWeight: 1, depth: 2 });
    expect(fused.map((h) => h.rowid).sort()).toEqual([1, 2, 5, 6]);
  });

  it('breaks ties by rowid and lets a weight of 0 only contribute zeros', () => {
    expect(fuse(hits(9, 5), hits(5, 9), DEFAULT_FUSION).map((h) => h.rowid)).toEqual([5, 9]);
    expect(fuse(hits(7), hits(3), { k: 60, keywordWeight: 1, vectorWeight: 1, depth: 10 }).map((h) => h.rowid)).toEqual([3, 7]);
    const keywordOnly = fuse(hits(4, 8), hits(8, 2), { k: 60, keywordWeight: 1, vectorWeight: 0, depth: 10 });
    expect(keywordOnly).toEqual([
      { rowid: 4, score: 1 / 61 },
      { rowid: 8, score: 1 / 62 },
      { rowid: 2, score: 0 },
    ]);
  });

  it('defaults to k = 60, equal weights, depth 100', () => {
    expect(DEFAULT_FUSION).toEqual({ k: 60, keywordWeight: 1, vectorWeight: 1, depth: 100 });
    expect(fuse([], [])).toEqual([]);
    const long = Array.from({ length: 150 }, (_, i) => i + 1);
    expect(fuse(hits(...long), [])).toHaveLength(100);
  });
});

describe('vector blobs', () => {
  it('round-trip float32 vectors, also from unaligned buffers', () => {
    const v = Float32Array.from([0.5, -1.25, 3e-8, 0]);
    const blob = blobFromVector(v);
    expect(vectorFromBlob(blob)).toEqual(v);
    const unaligned = Buffer.concat([Buffer.from([1]), blob]).subarray(1);
    expect(vectorFromBlob(unaligned)).toEqual(v);
  });
});
