import type SqliteDatabase from 'better-sqlite3';
import { isStopword, wordsOf } from '../../lib/text.js';
import { type BinaryCoder, createBinaryCoder } from './binary-code.js';

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
}

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
 * Keyword and vector search over chunks. Every query filters by workspace (and persona scope, and
 * sources) inside the query itself, so another workspace's rows can never crowd out or leak into
 * the results. Deleting a chunk row removes its index rows (triggers).
 */
export interface SearchIndex {
  readonly dimension: number;
  /** Indexes chunks whose rows were just inserted; call inside the inserting transaction. */
  add(chunks: IndexedChunk[]): void;
  /** BM25 over title and body, best first. */
  keyword(filter: SearchFilter, text: string, k: number): Hit[];
  /** Cosine similarity, best first. */
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
}

export const DEFAULT_INDEX_OPTIONS: Required<SqliteSearchIndexOptions> = { titleWeight: 1, bodyWeight: 1, candidates: 160 };

/** sqlite-vec's largest k. */
const MAX_KNN = 4096;

/** Longest keyword query, in distinct terms: more only slows BM25 down. */
const MAX_QUERY_TERMS = 64;

/**
 * An FTS5 MATCH expression for free text: every word quoted (so no user text is FTS5 syntax) and
 * ORed (FTS5 would AND them), stop words dropped unless nothing else is left. Null when no word.
 */
export function ftsQuery(text: string): string | null {
  const words = [...new Set(wordsOf(text))];
  const content = words.filter((w) => !isStopword(w));
  const terms = (content.length > 0 ? content : words).slice(0, MAX_QUERY_TERMS);
  return terms.length === 0 ? null : terms.map((t) => `"${t}"`).join(' OR ');
}

function vectorTableSql(bits: number): string {
  return `CREATE VIRTUAL TABLE knowledge_vec USING vec0(
    workspace_id TEXT PARTITION KEY, scope TEXT, source_id TEXT, code BIT[${bits}]
  )`;
}

/** Drops and recreates the vector table for a new dimension (`switchboard reindex`). Its rows must then be re-added. */
export function resetVectorTable(sqlite: SqliteDatabase.Database, dimension: number): void {
  const { bits } = createBinaryCoder(dimension);
  sqlite.exec('DROP TRIGGER IF EXISTS knowledge_chunks_unvec; DROP TABLE IF EXISTS knowledge_vec;');
  sqlite.exec(vectorTableSql(bits));
  sqlite.exec(`CREATE TRIGGER knowledge_chunks_unvec AFTER DELETE ON knowledge_chunks BEGIN
    DELETE FROM knowledge_vec WHERE rowid = old.rowid;
  END`);
}

function vectorTableBits(sqlite: SqliteDatabase.Database): number | null {
  const row = sqlite.prepare(`SELECT sql FROM sqlite_master WHERE name = 'knowledge_vec'`).get() as { sql: string } | undefined;
  const match = row && /BIT\[(\d+)\]/i.exec(row.sql);
  return match ? Number(match[1]) : null;
}

function dot(a: Float32Array, b: Float32Array): number {
  let s = 0;
  for (let i = 0; i < a.length; i++) s += a[i]! * b[i]!;
  return s;
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
 * The SQLite index: FTS5 BM25 for keywords; for vectors, a binary code per chunk in a sqlite-vec
 * table (Hamming KNN, partitioned by workspace, filtered by scope and source) whose candidates are
 * rescored exactly with the float32 vectors kept in `knowledge_chunks`.
 */
export function openSqliteSearchIndex(
  sqlite: SqliteDatabase.Database,
  dimension: number,
  options: SqliteSearchIndexOptions = {},
): SearchIndex {
  const opts = { ...DEFAULT_INDEX_OPTIONS, ...options };
  const coder: BinaryCoder = createBinaryCoder(dimension);
  if (vectorTableBits(sqlite) !== coder.bits) resetVectorTable(sqlite, dimension);

  const insertFts = sqlite.prepare('INSERT INTO knowledge_fts (rowid, title, body) VALUES (?, ?, ?)');
  const insertVec = sqlite.prepare(
    'INSERT INTO knowledge_vec (rowid, workspace_id, scope, source_id, code) VALUES (?, ?, ?, ?, vec_bit(?))',
  );
  const rescoreRows = sqlite.prepare(
    'SELECT rowid, embedding FROM knowledge_chunks WHERE rowid IN (SELECT value FROM json_each(?))',
  );

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
        FROM knowledge_fts f JOIN knowledge_chunks c ON c.rowid = f.rowid
        WHERE knowledge_fts MATCH @match AND c.workspace_id = @workspaceId
        ${f.personaId !== undefined ? `AND c.scope IN ('${SHARED_SCOPE}', @personaId)` : ''}
        ${f.sourceIds !== undefined ? 'AND c.source_id IN (SELECT value FROM json_each(@sourceIds))' : ''}
        ORDER BY rank LIMIT @k`);
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
        insertFts.run(c.rowid, c.title, c.text);
        insertVec.run(BigInt(c.rowid), c.workspaceId, c.scope, c.sourceId, coder.encode(c.vector));
      }
    },

    keyword(filter, text, k) {
      const match = ftsQuery(text);
      if (match === null || k <= 0 || filter.sourceIds?.length === 0) return [];
      const rows = keywordStatement(filter).all({ ...params(filter), match, k }) as { rowid: number; rank: number }[];
      // FTS5's bm25() is lower-is-better; the API's scores are higher-is-better.
      return rows.map((r) => ({ rowid: r.rowid, score: -r.rank }));
    },

    vector(filter, vector, k) {
      if (k <= 0 || filter.sourceIds?.length === 0) return [];
      if (vector.length !== dimension) throw new Error(`query vector of length ${vector.length}, index dimension ${dimension}`);
      const candidates = vectorStatement(filter)
        .pluck()
        .all({ ...params(filter), code: coder.encode(vector), k: Math.min(MAX_KNN, Math.max(k, opts.candidates)) }) as number[];
      if (candidates.length === 0) return [];
      const rows = rescoreRows.all(JSON.stringify(candidates)) as { rowid: number; embedding: Buffer }[];
      return rows
        .map((r) => ({ rowid: r.rowid, score: dot(vector, vectorFromBlob(r.embedding)) }))
        .sort((a, b) => b.score - a.score || a.rowid - b.rowid)
        .slice(0, k);
    },
  };
}
