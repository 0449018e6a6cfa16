import type SqliteDatabase from 'better-sqlite3';
import { isStopword, wordsOf } from '../../lib/text.js';
import { type BinaryCoder, createBinaryCoder } from './binary-code.js';
import { createVectorCache, mayRankAmong } from './vector-cache.js';

/** The scope value of a source every persona of the workspace retrieves (sqlite-vec filters cannot test IS NULL). */
export const SHARED_SCOPE = 'shared';

/** One chunk as the index stores it; `rowid` is the chunk's row in `knowledge_chunks`. */
export interface IndexedChunk {
  rowid: number;
  workspaceId: string;
  sourceId: string;
  scope: string;
  /** Source name and heading path: weighted apart from the body by BM25. */
  title: string;
  text: string;
  vector: Float32Array;
  /** The vector's binary code when already computed (an ingestion worker encodes with the same deterministic coder). */
  code?: Buffer | undefined;
}

/** What a chunk's binary code is stored with. */
type CodedChunk = Pick<IndexedChunk, 'rowid' | 'workspaceId' | 'scope' | 'sourceId' | 'vector' | 'code'>;

/** What a search may see. Always one workspace; optionally one persona's view and an allow-list of sources. */
export interface SearchFilter {
  workspaceId: string;
  /** Only shared chunks and this persona's. */
  personaId?: string | undefined;
  /** Only these sources (from a metadata filter); an empty list matches nothing. */
  sourceIds?: string[] | undefined;
}

/** A chunk row and its score in one mode (higher is better). */
export interface Hit {
  rowid: number;
  score: number;
}

/**
 * Keyword and vector search over chunks, on either backend. Every query filters by workspace (and
 * persona scope, and sources) inside the query itself, so another workspace's rows can never crowd
 * out or leak into the results. Chunks are added by the backend's knowledge writes, in the
 * transaction that inserts their rows (knowledge-dialect.ts); deleting a chunk row removes its
 * index rows.
 */
export interface SearchIndex {
  readonly dimension: number;
  /** BM25 over title and body, best first. */
  keyword(filter: SearchFilter, text: string, k: number): Hit[] | Promise<Hit[]>;
  /** Cosine similarity, best first. */
  vector(filter: SearchFilter, vector: Float32Array, k: number): Hit[] | Promise<Hit[]>;
  /**
   * One step of merging the keyword index into a single segment (FTS5 'merge', about `pages` pages
   * written, one statement): true when it did work, so another step may be due. `first` starts a
   * merge of every segment; the later steps carry that merge on. An index without segments
   * (PostgreSQL's) answers false.
   */
  mergeStep(first: boolean, pages: number): boolean;
  /** The keyword index's size in pages (~4 KB each), counted up to `upTo`. */
  keywordPages(upTo: number): number;
}

/** SQLite's index: synchronous, and chunks are added inside the inserting transaction. */
export interface SqliteSearchIndex extends SearchIndex {
  /** Indexes chunks whose rows were just inserted; call inside the inserting transaction. */
  add(chunks: IndexedChunk[]): void;
  keyword(filter: SearchFilter, text: string, k: number): Hit[];
  vector(filter: SearchFilter, vector: Float32Array, k: number): Hit[];
}

export interface SqliteSearchIndexOptions {
  /** BM25 weights of the title and body columns. */
  titleWeight?: number;
  bodyWeight?: number;
  /**
   * Candidates the binary first stage hands to the exact float32 rescoring. A collection (after
   * filters) no larger than this is therefore searched exactly.
   */
  candidates?: number;
  /**
   * Keyword search cost grows with the chunks its terms match (BM25 is computed for each), so the
   * rarest terms are kept while the chunks they match together stay within this many; the rarest
   * term is always kept. Infinity keeps every term (exact BM25).
   */
  keywordBudget?: number;
  /** Memory for the binary codes of recently searched workspaces; 0 sends every vector search to sqlite-vec. */
  cacheBytes?: number;
}

export const DEFAULT_INDEX_OPTIONS: Required<SqliteSearchIndexOptions> = {
  titleWeight: 1,
  bodyWeight: 1,
  candidates: 400,
  keywordBudget: 12_000,
  cacheBytes: 256 * 2 ** 20,
};

/** sqlite-vec's largest k. */
const MAX_KNN = 4096;

/** Longest keyword query, in distinct terms: more only slows BM25 down. */
const MAX_QUERY_TERMS = 64;

/** A query's FTS5 terms: every distinct word quoted (so no user text is FTS5 syntax), stop words dropped unless nothing else is left. */
export function queryTerms(text: string): string[] {
  const words = [...new Set(wordsOf(text))];
  const content = words.filter((w) => !isStopword(w));
  return (content.length > 0 ? content : words).slice(0, MAX_QUERY_TERMS).map((t) => `"${t}"`);
}

/** An FTS5 MATCH expression for free text: the terms ORed (FTS5 would AND them). Null when no word. */
export function ftsQuery(text: string): string | null {
  const terms = queryTerms(text);
  return terms.length === 0 ? null : terms.join(' OR ');
}

/**
 * A term's chunk count only steers which terms a query keeps, so it is reused for a while: until
 * the index has grown by a tenth (largest rowid; counts from a smaller index would keep too many
 * terms) or for at most five minutes (deletions).
 */
export const TERM_COUNT_TTL_MS = 5 * 60_000;
export const TERM_COUNT_GROWTH = 1.1;
export const TERM_COUNT_CACHE_SIZE = 50_000;

function vectorTableSql(bits: number): string {
  return `CREATE VIRTUAL TABLE knowledge_vec USING vec0(
    workspace_id TEXT PARTITION KEY, scope TEXT, source_id TEXT, code BIT[${bits}]
  )`;
}

/**
 * Drops and recreates the vector table and empties the codes for a new dimension (`switchboard
 * reindex`). Their rows must then be re-added. Every workspace's epoch moves, so in-memory copies reload.
 */
export function resetVectorTable(sqlite: SqliteDatabase.Database, dimension: number): void {
  const { bits } = createBinaryCoder(dimension);
  sqlite.exec('DROP TRIGGER IF EXISTS knowledge_chunks_unvec; DROP TABLE IF EXISTS knowledge_vec; DELETE FROM knowledge_codes;');
  sqlite.exec(vectorTableSql(bits));
  sqlite.exec(`CREATE TRIGGER knowledge_chunks_unvec AFTER DELETE ON knowledge_chunks BEGIN
    DELETE FROM knowledge_vec WHERE rowid = old.rowid;
  END`);
  bumpVectorEpochs(sqlite);
}

/** Marks every workspace's codes as changed, so in-memory copies (in any process) reload. */
export function bumpVectorEpochs(sqlite: SqliteDatabase.Database): void {
  sqlite.exec(`INSERT INTO knowledge_vector_epochs (workspace_id, epoch)
    SELECT DISTINCT workspace_id, 1 FROM knowledge_chunk_keys WHERE true
    ON CONFLICT (workspace_id) DO UPDATE SET epoch = epoch + 1`);
}

/** The settings key recording which coder wrote the stored codes: they are only comparable under the same one. */
export const CODES_SETTING = 'vector_codes';
export const codesSignature = (dimension: number, bits: number) => `${dimension}d:${bits}b`;

/**
 * Four running sums instead of one: the additions no longer wait on each other, ~35 % faster for the
 * exact rescoring of a search's candidates (200 × 384 dimensions: ~95 → ~63 µs). The sum order
 * differs from a single loop's only in the last bits.
 */
export function dot(a: Float32Array, b: Float32Array): number {
  let s0 = 0;
  let s1 = 0;
  let s2 = 0;
  let s3 = 0;
  const n = a.length - (a.length % 4);
  let i = 0;
  for (; i < n; i += 4) {
    s0 += a[i]! * b[i]!;
    s1 += a[i + 1]! * b[i + 1]!;
    s2 += a[i + 2]! * b[i + 2]!;
    s3 += a[i + 3]! * b[i + 3]!;
  }
  for (; i < a.length; i++) s0 += a[i]! * b[i]!;
  return s0 + s1 + (s2 + s3);
}

/** A float32 blob as a vector to read at once: a view when it is 4-byte aligned (no garbage per candidate), else a copy. */
function floatsOf(blob: Buffer): Float32Array {
  return blob.byteOffset % 4 === 0 ? new Float32Array(blob.buffer, blob.byteOffset, blob.byteLength / 4) : vectorFromBlob(blob);
}

/** A float32 blob as a vector (copied: blobs need not be 4-byte aligned). */
export function vectorFromBlob(blob: Buffer): Float32Array {
  const copy = new Uint8Array(blob.byteLength);
  copy.set(blob);
  return new Float32Array(copy.buffer);
}

export function blobFromVector(vector: Float32Array): Buffer {
  return Buffer.from(vector.buffer, vector.byteOffset, vector.byteLength);
}

/**
 * The SQLite index. Keywords: FTS5 BM25, joined to the narrow `knowledge_chunk_keys` for the
 * workspace, scope and source filters, with the commonest terms dropped beyond a cost budget.
 * Vectors: a 2,048-bit binary code per chunk gives candidates by Hamming distance (an in-memory scan
 * of the workspace's codes, or sqlite-vec's KNN, partitioned by workspace, when the workspace does
 * not fit the cache), which are rescored exactly with the float32 vectors kept in `knowledge_chunks`.
 */
export function openSqliteSearchIndex(
  sqlite: SqliteDatabase.Database,
  dimension: number,
  options: SqliteSearchIndexOptions = {},
): SqliteSearchIndex {
  const opts = { ...DEFAULT_INDEX_OPTIONS, ...options };
  const coder: BinaryCoder = createBinaryCoder(dimension);
  const insertFts = sqlite.prepare('INSERT INTO knowledge_fts (rowid, title, body) VALUES (?, ?, ?)');
  // Codes written by another coder (another dimension, or an older code length) are dropped and,
  // where the stored float32 vectors fit this dimension, rebuilt from them. An interrupted rebuild
  // leaves the old record, so the next start simply does it again.
  const signature = codesSignature(dimension, coder.bits);
  const stale = sqlite.prepare('SELECT value FROM settings WHERE key = ?').pluck().get(CODES_SETTING) !== signature;
  if (stale) resetVectorTable(sqlite, dimension); // before preparing statements over the new table
  const insertVec = sqlite.prepare(
    'INSERT INTO knowledge_vec (rowid, workspace_id, scope, source_id, code) VALUES (?, ?, ?, ?, vec_bit(?))',
  );
  const insertCode = sqlite.prepare('INSERT INTO knowledge_codes (rowid, code) VALUES (?, ?)');
  const writeCode = (c: CodedChunk) => {
    const code = c.code ?? coder.encode(c.vector);
    insertVec.run(BigInt(c.rowid), c.workspaceId, c.scope, c.sourceId, code);
    insertCode.run(c.rowid, code);
  };
  if (stale) {
    sqlite.transaction(() => {
      reencodeStored(sqlite, dimension, writeCode);
      sqlite.prepare('INSERT INTO settings (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value').run(CODES_SETTING, signature);
    })();
  }
  const rescoreRows = sqlite.prepare(
    'SELECT rowid, embedding FROM knowledge_chunks WHERE rowid IN (SELECT value FROM json_each(?))',
  );
  const cache = opts.cacheBytes > 0 ? createVectorCache(sqlite, coder.bits, opts.cacheBytes, dimension) : null;

  // FTS5 'merge': a negative page count starts a merge of every segment, a positive one carries it
  // on; a step did work when it changed two rows or more (https://sqlite.org/fts5.html, "The 'merge' Command").
  const mergeFts = sqlite.prepare("INSERT INTO knowledge_fts (knowledge_fts, rank) VALUES ('merge', ?)");
  const totalChanges = sqlite.prepare('SELECT total_changes()').pluck();
  const ftsPages = sqlite.prepare('SELECT count(*) FROM (SELECT 1 FROM knowledge_fts_data LIMIT ?)').pluck();

  // How many chunks each term matches, for the keyword budget (FTS5 applies its own stemming).
  const countMatches = sqlite.prepare('SELECT count(*) FROM knowledge_fts WHERE knowledge_fts MATCH ?').pluck();
  const largestRowid = sqlite.prepare('SELECT coalesce(max(rowid), 0) FROM knowledge_chunk_keys').pluck();
  const termCounts = new Map<string, { count: number; at: number }>();
  let countedAtSize = 0;
  function matchesOf(term: string): number {
    const now = performance.now();
    const known = termCounts.get(term);
    if (known && now - known.at < TERM_COUNT_TTL_MS) return known.count;
    const count = countMatches.get(term) as number;
    if (termCounts.size >= TERM_COUNT_CACHE_SIZE) termCounts.clear();
    termCounts.set(term, { count, at: now });
    return count;
  }
  /** The query's terms, rarest first, while the chunks they match stay within the budget. */
  function budgeted(terms: string[]): string[] {
    if (!Number.isFinite(opts.keywordBudget)) return terms;
    const size = largestRowid.get() as number;
    if (size > countedAtSize * TERM_COUNT_GROWTH) {
      termCounts.clear();
      countedAtSize = size;
    }
    const counted = terms.map((term) => ({ term, count: matchesOf(term) })).sort((a, b) => a.count - b.count);
    let spent = 0;
    return counted.filter((t, i) => (spent += t.count) <= opts.keywordBudget || i === 0).map((t) => t.term);
  }

  // One statement per filter shape, prepared once.
  const keywordStatements = new Map<string, SqliteDatabase.Statement>();
  const vectorStatements = new Map<string, SqliteDatabase.Statement>();
  const shape = (f: SearchFilter) => `${f.personaId !== undefined ? 'p' : ''}${f.sourceIds !== undefined ? 's' : ''}`;

  function keywordStatement(f: SearchFilter) {
    const key = shape(f);
    let stmt = keywordStatements.get(key);
    if (!stmt) {
      stmt = sqlite.prepare(`
        SELECT f.rowid AS rowid, bm25(knowledge_fts, ${opts.titleWeight}, ${opts.bodyWeight}) AS rank
        FROM knowledge_fts f JOIN knowledge_chunk_keys c ON c.rowid = f.rowid
        WHERE knowledge_fts MATCH @match AND c.workspace_id = @workspaceId
        ${f.personaId !== undefined ? `AND c.scope IN ('${SHARED_SCOPE}', @personaId)` : ''}
        ${f.sourceIds !== undefined ? 'AND c.source_id IN (SELECT value FROM json_each(@sourceIds))' : ''}
        ORDER BY rank, f.rowid LIMIT @k`);
      keywordStatements.set(key, stmt);
    }
    return stmt;
  }

  function vectorStatement(f: SearchFilter) {
    const key = shape(f);
    let stmt = vectorStatements.get(key);
    if (!stmt) {
      stmt = sqlite.prepare(`
        SELECT rowid FROM knowledge_vec
        WHERE code MATCH vec_bit(@code) AND k = @k AND workspace_id = @workspaceId
        ${f.personaId !== undefined ? `AND scope IN ('${SHARED_SCOPE}', @personaId)` : ''}
        ${f.sourceIds !== undefined ? 'AND source_id IN (SELECT value FROM json_each(@sourceIds))' : ''}`);
      vectorStatements.set(key, stmt);
    }
    return stmt;
  }

  const params = (f: SearchFilter) => ({
    workspaceId: f.workspaceId,
    ...(f.personaId !== undefined ? { personaId: f.personaId } : {}),
    ...(f.sourceIds !== undefined ? { sourceIds: JSON.stringify(f.sourceIds) } : {}),
  });

  return {
    dimension,

    add(chunks) {
      for (const c of chunks) {
        if (c.vector.length !== dimension) {
          throw new Error(`vector of length ${c.vector.length} for an index of dimension ${dimension}`);
        }
        if (c.code !== undefined && c.code.length !== coder.bits / 8) throw new Error(`code of ${c.code.length} bytes for codes of ${coder.bits} bits`);
      }
      for (const c of chunks) writeCode(c);
      // FTS5 rows last: FTS5 flushes its pending terms to a new segment at every statement savepoint
      // of the transaction (any insert with a trigger, a constraint or a virtual table opens one), so
      // interleaving them with other writes made a segment per chunk (measured: 125 → 61 µs/chunk
      // for the whole write at 2,000 chunks per transaction).
      for (const c of chunks) insertFts.run(c.rowid, c.title, c.text);
    },

    keyword(filter, text, k) {
      const terms = queryTerms(text);
      if (terms.length === 0 || k <= 0 || filter.sourceIds?.length === 0) return [];
      const match = budgeted(terms).join(' OR ');
      const rows = keywordStatement(filter).all({ ...params(filter), match, k }) as { rowid: number; rank: number }[];
      // FTS5's bm25() is lower-is-better; the API's scores are higher-is-better.
      return rows.map((r) => ({ rowid: r.rowid, score: -r.rank }));
    },

    mergeStep(first, pages) {
      const before = totalChanges.get() as number;
      mergeFts.run(first ? -pages : pages);
      return (totalChanges.get() as number) - before >= 2;
    },

    keywordPages: (upTo) => ftsPages.get(upTo) as number,

    vector(filter, vector, k) {
      if (k <= 0 || filter.sourceIds?.length === 0) return [];
      if (vector.length !== dimension) throw new Error(`query vector of length ${vector.length}, index dimension ${dimension}`);
      const code = coder.encode(vector);
      const wanted = Math.max(k, opts.candidates);
      const near = cache?.nearest(filter, code, wanted);
      const candidates = near?.rowids ?? (vectorStatement(filter).pluck().all({ ...params(filter), code, k: Math.min(MAX_KNN, wanted) }) as number[]);
      if (candidates.length === 0) return [];
      // The candidates' vectors from memory when the cache holds them (same snapshot as their codes), else from their rows:
      // those that can still rank among the best k when it holds them reduced, else every one.
      const held = near?.vectors;
      const read = near?.reduced ? mayRankAmong(vector, near.reduced, k).map((i) => candidates[i]!) : candidates;
      const scored = held
        ? candidates.map((rowid, i) => ({ rowid, score: dot(vector, held[i]!) }))
        : (rescoreRows.all(JSON.stringify(read)) as { rowid: number; embedding: Buffer }[]).map((r) => ({ rowid: r.rowid, score: dot(vector, floatsOf(r.embedding)) }));
      return scored.sort((a, b) => b.score - a.score || a.rowid - b.rowid).slice(0, k);
    },
  };
}

/** Re-encodes every stored vector of this dimension (the coder changed): no embedder call needed. Pages by rowid to bound memory. */
function reencodeStored(
  sqlite: SqliteDatabase.Database,
  dimension: number,
  writeCode: (c: CodedChunk) => void,
): void {
  const page = sqlite.prepare(`SELECT rowid, workspace_id AS workspaceId, scope, source_id AS sourceId, embedding FROM knowledge_chunks
    WHERE rowid > ? AND length(embedding) = ? ORDER BY rowid LIMIT 1000`);
  for (let after = 0; ; ) {
    const rows = page.all(after, dimension * 4) as { rowid: number; workspaceId: string; scope: string; sourceId: string; embedding: Buffer }[];
    if (rows.length === 0) return;
    for (const r of rows) writeCode({ ...r, vector: vectorFromBlob(r.embedding) });
    after = rows[rows.length - 1]!.rowid;
  }
}
