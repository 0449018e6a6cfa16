/**
 * Knowledge on PostgreSQL (knowledge-dialect.ts), ranked and searched as SQLite does it:
 *
 * Keywords: the terms of FTS5's own tokenizer (fts-tokenizer.ts) in plain tables (migration 014),
 * scored here with FTS5's bm25() (bm25.ts) over the whole index's rows and tokens, so both backends
 * return the same rows in the same order. PostgreSQL's ts_rank has no IDF or length normalisation.
 * One statement reads a query's postings, hits and totals, so they come from one snapshot.
 *
 * Vectors, with the pgvector extension (when `CREATE EXTENSION vector` succeeds): each chunk's vector
 * in `knowledge_embeddings` under an HNSW index (inner product), searched with its filters by an
 * iterative index scan. Without it, portably, as the SQLite backend does it:
 * the binary codes of binary-code.ts in `knowledge_codes`, a Hamming first stage over the
 * workspace's codes held in memory (vector-cache.ts), and the exact float32 rescoring. The database
 * is the truth: each search brings its workspace up to date by its epoch (bumped when chunks go) and
 * the rows after the last rowid loaded. For "after the last rowid" to miss nothing, the chunks of a
 * workspace are written one transaction at a time (an advisory lock per workspace), so a workspace's
 * rowids become visible in increasing order.
 */
import { type Kysely, sql, type Transaction } from 'kysely';
import { createBinaryCoder, type BinaryCoder } from '../../core/knowledge/binary-code.js';
import { BM25_B, BM25_K1, bm25Score } from '../../core/knowledge/bm25.js';
import { ftsTokens } from '../../core/knowledge/fts-tokenizer.js';
import type { KnowledgeDialect, ReembeddedChunk } from '../../core/knowledge/knowledge-dialect.js';
import type { ChunkHitRow, SourceWrite } from '../../core/knowledge/knowledge.store.js';
import {
  blobFromVector,
  CODES_SETTING,
  codesSignature,
  DEFAULT_INDEX_OPTIONS,
  dot,
  type Hit,
  type IndexedChunk,
  queryTerms,
  type SearchFilter,
  type SearchIndex,
  SHARED_SCOPE,
  type SqliteSearchIndexOptions,
  TERM_COUNT_CACHE_SIZE,
  TERM_COUNT_GROWTH,
  TERM_COUNT_TTL_MS,
  vectorFromBlob,
} from '../../core/knowledge/search-index.js';
import { type CodeRow, createCodeHolder, mayRankAmong } from '../../core/knowledge/vector-cache.js';
import type { Database, KnowledgeSourceRow } from '../schema.js';
import type { PreparedRead } from '../backend.js';
import type { PostgresDb } from './connection.js';

type Trx = Transaction<Database>;

interface KeywordRow {
  rowid: number;
  tokens: number;
  terms: string[];
  tf_title: number[];
  tf_body: number[];
  hits: number[];
  n: number;
  total: number;
}

/** First key of the advisory locks serialising a workspace's chunk writes (the second is the workspace's hash). */
const WORKSPACE_WRITE_LOCK = 7_102_025;

interface OpenIndex {
  index: SearchIndex;
  coder: BinaryCoder;
  /** Vectors also go to `knowledge_embeddings` (pgvector). */
  pgvector: boolean;
}

/** pgvector's text form of a vector: `[0.1,0.2,…]`. */
const vectorLiteral = (v: Float32Array) => `[${Array.from(v).join(',')}]`;

/** How often a search re-reads the index's size, which decides when the cached term counts are stale. */
const SIZE_RECHECK_MS = 1_000;

/** How many candidates an HNSW scan keeps per step (pgvector's default is 40; higher, better recall). */
const HNSW_EF_SEARCH = 100;

/** Title and body term counts of one chunk, and its size in tokens, as FTS5 counts them. */
function termsOf(title: string, body: string): { tokens: number; freq: Map<string, [number, number]> } {
  const freq = new Map<string, [number, number]>();
  const titleTokens = ftsTokens(title);
  const bodyTokens = ftsTokens(body);
  for (const t of titleTokens) {
    const f = freq.get(t);
    if (f) f[0]++;
    else freq.set(t, [1, 0]);
  }
  for (const t of bodyTokens) {
    const f = freq.get(t);
    if (f) f[1]++;
    else freq.set(t, [0, 1]);
  }
  return { tokens: titleTokens.length + bodyTokens.length, freq };
}

/** Occurrences of `phrase` (consecutive terms) in a token list. */
function phraseCount(tokens: string[], phrase: string[]): number {
  let n = 0;
  for (let i = 0; i + phrase.length <= tokens.length; i++) {
    let j = 0;
    while (j < phrase.length && tokens[i + j] === phrase[j]) j++;
    if (j === phrase.length) n++;
  }
  return n;
}

export function createPostgresKnowledge(db: PostgresDb, options: SqliteSearchIndexOptions = {}): KnowledgeDialect {
  const opts = { ...DEFAULT_INDEX_OPTIONS, ...options };
  const k: Kysely<Database> = db.kysely;
  const opened = new WeakMap<SearchIndex, OpenIndex>();
  const own = (index: SearchIndex): OpenIndex => {
    const found = opened.get(index);
    if (!found) throw new Error('a search index of another backend');
    return found;
  };

  /** Codes, token counts and postings of chunks whose rows were just written, in their transaction. */
  async function addToIndex(trx: Trx, { coder, pgvector }: Pick<OpenIndex, 'coder' | 'pgvector'>, chunks: (IndexedChunk | ReembeddedChunk)[]): Promise<void> {
    if (chunks.length === 0) return;
    const rowids = chunks.map((c) => c.rowid);
    const codes = chunks.map((c) => ('code' in c && c.code !== undefined ? c.code : coder.encode(c.vector)));
    await sql`INSERT INTO knowledge_codes (rowid, code) SELECT * FROM unnest(${rowids}::bigint[], ${codes}::bytea[])`.execute(trx);
    if (pgvector) {
      await sql`INSERT INTO knowledge_embeddings (rowid, workspace_id, scope, source_id, embedding)
        SELECT r, w, s, o, e::vector FROM unnest(${rowids}::bigint[], ${chunks.map((c) => c.workspaceId)}::text[], ${chunks.map((c) => c.scope)}::text[],
          ${chunks.map((c) => c.sourceId)}::text[], ${chunks.map((c) => vectorLiteral(c.vector))}::text[]) AS x(r, w, s, o, e)
        ON CONFLICT (rowid) DO UPDATE SET embedding = excluded.embedding`.execute(trx);
    }
    const terms: string[] = [];
    const termRows: number[] = [];
    const termWorkspaces: string[] = [];
    const termScopes: string[] = [];
    const termTokens: number[] = [];
    const titleFreq: number[] = [];
    const bodyFreq: number[] = [];
    const tokens: number[] = [];
    let totalTokens = 0;
    const termLists: string[] = [];
    for (const c of chunks) {
      const counted = termsOf(c.title, c.text);
      termLists.push([...counted.freq.keys()].join(' '));
      tokens.push(counted.tokens);
      totalTokens += counted.tokens;
      for (const [term, [t, b]] of counted.freq) {
        terms.push(term);
        termRows.push(c.rowid);
        termWorkspaces.push(c.workspaceId);
        termScopes.push(c.scope);
        termTokens.push(counted.tokens);
        titleFreq.push(t);
        bodyFreq.push(b);
      }
    }
    // Its terms as one text: a text[][] of rows of different lengths is not an array PostgreSQL takes.
    await sql`INSERT INTO knowledge_documents (rowid, tokens, title, terms)
      SELECT r, t, h, string_to_array(w, ' ') FROM unnest(${rowids}::bigint[], ${tokens}::integer[], ${chunks.map((c) => c.title)}::text[], ${termLists}::text[]) AS x(r, t, h, w)`.execute(trx);
    // Each posting carries its chunk's workspace, scope and length (migration 016): what a search filters and scores by.
    await sql`INSERT INTO knowledge_postings (term, rowid, workspace_id, scope, tokens, title_freq, body_freq)
      SELECT * FROM unnest(${terms}::text[], ${termRows}::bigint[], ${termWorkspaces}::text[], ${termScopes}::text[],
        ${termTokens}::integer[], ${titleFreq}::integer[], ${bodyFreq}::integer[])`.execute(trx);
    await sql`UPDATE knowledge_keyword_totals SET rows = rows + ${chunks.length}, tokens = tokens + ${totalTokens} WHERE id = 1`.execute(trx);
  }

  /** Every stored vector of this dimension gets a code of the current coder (the coder changed). */
  async function reencodeStored(trx: Trx, coder: BinaryCoder, dimension: number): Promise<void> {
    for (let after = 0; ; ) {
      const rows = await sql<{ rowid: number; embedding: Buffer }>`
        SELECT rowid, embedding FROM knowledge_chunks WHERE rowid > ${after} AND length(embedding) = ${dimension * 4} ORDER BY rowid LIMIT 1000`.execute(trx);
      if (rows.rows.length === 0) return;
      const rowids = rows.rows.map((r) => r.rowid);
      const codes = rows.rows.map((r) => coder.encode(vectorFromBlob(r.embedding)));
      await sql`INSERT INTO knowledge_codes (rowid, code) SELECT * FROM unnest(${rowids}::bigint[], ${codes}::bytea[])`.execute(trx);
      after = rowids[rowids.length - 1]!;
    }
  }

  const bumpEpochs = (trx: Kysely<Database>) =>
    sql`INSERT INTO knowledge_vector_epochs (workspace_id, epoch)
      SELECT DISTINCT workspace_id, 1 FROM knowledge_chunk_keys
      ON CONFLICT (workspace_id) DO UPDATE SET epoch = knowledge_vector_epochs.epoch + 1`.execute(trx);

  /** Whether the pgvector extension is there (or could be created): asked once. */
  let pgvectorAvailable: Promise<boolean> | null = null;
  const hasPgvector = () =>
    (pgvectorAvailable ??= sql`CREATE EXTENSION IF NOT EXISTS vector`.execute(k).then(
      () => true,
      () => false, // not installed on this server, or no right to create it: the portable path
    ));

  /**
   * `knowledge_embeddings` for vectors of `dimension` (pgvector's column type carries it): created,
   * or recreated and filled from the stored vectors when it was made for another dimension.
   */
  async function ensureEmbeddings(trx: Trx, dimension: number, { fill = true } = {}): Promise<void> {
    if (!Number.isInteger(dimension) || dimension <= 0) throw new Error(`bad vector dimension ${dimension}`);
    const held = await sql<{ value: string }>`SELECT value FROM settings WHERE key = 'pgvector_dimension'`.execute(trx);
    if (held.rows[0]?.value === String(dimension)) return;
    await sql`DROP TABLE IF EXISTS knowledge_embeddings`.execute(trx);
    // The dimension is a type parameter, checked to be a positive integer above, not a value.
    await sql`CREATE TABLE knowledge_embeddings (
      rowid BIGINT PRIMARY KEY REFERENCES knowledge_chunks(rowid) ON DELETE CASCADE,
      workspace_id TEXT COLLATE "C" NOT NULL,
      scope TEXT COLLATE "C" NOT NULL,
      source_id TEXT COLLATE "C" NOT NULL,
      embedding vector(${sql.raw(String(dimension))}) NOT NULL
    )`.execute(trx);
    await sql`CREATE INDEX knowledge_embeddings_workspace ON knowledge_embeddings (workspace_id)`.execute(trx);
    await sql`CREATE INDEX knowledge_embeddings_hnsw ON knowledge_embeddings USING hnsw (embedding vector_ip_ops)`.execute(trx);
    for (let after = 0; fill; ) {
      const rows = await sql<{ rowid: number; workspace_id: string; scope: string; source_id: string; embedding: Buffer }>`
        SELECT rowid, workspace_id, scope, source_id, embedding FROM knowledge_chunks
        WHERE rowid > ${after} AND length(embedding) = ${dimension * 4} ORDER BY rowid LIMIT 1000`.execute(trx);
      if (rows.rows.length === 0) break;
      await sql`INSERT INTO knowledge_embeddings (rowid, workspace_id, scope, source_id, embedding)
        SELECT r, w, s, o, e::vector FROM unnest(${rows.rows.map((r) => r.rowid)}::bigint[], ${rows.rows.map((r) => r.workspace_id)}::text[],
          ${rows.rows.map((r) => r.scope)}::text[], ${rows.rows.map((r) => r.source_id)}::text[],
          ${rows.rows.map((r) => vectorLiteral(vectorFromBlob(r.embedding)))}::text[]) AS x(r, w, s, o, e)`.execute(trx);
      after = rows.rows[rows.rows.length - 1]!.rowid;
    }
    await sql`INSERT INTO settings (key, value) VALUES ('pgvector_dimension', ${String(dimension)})
      ON CONFLICT (key) DO UPDATE SET value = excluded.value`.execute(trx);
  }

  async function open(dimension: number): Promise<SearchIndex> {
    const coder = createBinaryCoder(dimension);
    const signature = codesSignature(dimension, coder.bits);
    const pgvector = await hasPgvector();
    // Instances starting together: one builds what is missing, the others wait and find it done.
    await k.transaction().execute(async (trx) => {
      await sql`SELECT pg_advisory_xact_lock(${WORKSPACE_WRITE_LOCK}, 0)`.execute(trx);
      const stored = await trx.selectFrom('settings').select('value').where('key', '=', CODES_SETTING).executeTakeFirst();
      if (stored?.value !== signature) {
        // Codes of another coder are not comparable: rebuilt from the stored vectors of this dimension.
        await sql`DELETE FROM knowledge_codes`.execute(trx);
        await reencodeStored(trx, coder, dimension);
        await trx.insertInto('settings').values({ key: CODES_SETTING, value: signature }).onConflict((oc) => oc.column('key').doUpdateSet({ value: signature })).execute();
        await bumpEpochs(trx);
      }
      if (pgvector) await ensureEmbeddings(trx, dimension);
    });
    const index = openIndex(dimension, coder, pgvector);
    opened.set(index, { index, coder, pgvector });
    return index;
  }

  function openIndex(dimension: number, coder: BinaryCoder, pgvector: boolean): SearchIndex {
    const holder = opts.cacheBytes > 0 ? createCodeHolder(coder.bits, opts.cacheBytes, dimension) : null;

    /** The workspace's codes as of one snapshot: held ones brought up to date, else read for this search only. */
    async function candidates(filter: SearchFilter, code: Uint8Array, wanted: number) {
      const workspaceId = filter.workspaceId;
      if (holder) {
        // Optimistically from where the held copy ends; a changed epoch (chunks went) reads it all again.
        const known = holder.version(workspaceId);
        let after = known?.lastRowid ?? 0;
        let read = await rowsSince(workspaceId, after, true);
        if (known && known.epoch !== read.epoch) {
          after = 0;
          read = await rowsSince(workspaceId, 0, true);
        }
        const { epoch, rows } = read;
        const ws = await holder.refresh(workspaceId, { epoch, count: () => (after === 0 ? rows.length : Number.POSITIVE_INFINITY) }, async (from) =>
          from === after ? rows : (await rowsSince(workspaceId, from, true)).rows,
        );
        if (ws !== null) return holder.nearest(ws, filter, code, wanted);
      }
      // Over the memory budget (or none): the same selection over the workspace read for this search alone.
      const once = createCodeHolder(coder.bits, Number.POSITIVE_INFINITY);
      const { epoch, rows } = await rowsSince(workspaceId, 0, false);
      const all = await once.refresh(workspaceId, { epoch, count: () => 0 }, async () => rows);
      return once.nearest(all!, filter, code, wanted);
    }

    return {
      dimension,
      async keyword(filter, text, limit) {
        const terms = queryTerms(text);
        if (terms.length === 0 || limit <= 0 || filter.sourceIds?.length === 0) return [];
        const kept = await budgeted(terms);
        // The kept terms' postings over the whole index, as the budget counted them (none counted: many).
        const postings = kept.reduce((sum, t) => sum + (termCounts.get(t)?.count ?? Number.POSITIVE_INFINITY), 0);
        return keywordSearch(filter, kept.map((quoted) => ftsTokens(quoted.slice(1, -1))), limit, postings);
      },
      async vector(filter, vector, limit) {
        if (limit <= 0 || filter.sourceIds?.length === 0) return [];
        if (vector.length !== dimension) throw new Error(`query vector of length ${vector.length}, index dimension ${dimension}`);
        if (pgvector) return pgvectorSearch(filter, vector, limit);
        const near = await candidates(filter, coder.encode(vector), Math.max(limit, opts.candidates));
        if (near.rowids.length === 0) return [];
        const held = near.vectors;
        let scored: Hit[];
        if (held) scored = near.rowids.map((rowid, i) => ({ rowid, score: dot(vector, held[i]!) }));
        else {
          // Held reduced: only the candidates that can still rank among the best `limit` are read.
          const read = near.reduced ? mayRankAmong(vector, near.reduced, limit).map((i) => near.rowids[i]!) : near.rowids;
          const rows = await sql<{ rowid: number; embedding: Buffer }>`SELECT rowid, embedding FROM knowledge_chunks WHERE rowid = ANY(${read}::bigint[])`.execute(k);
          scored = rows.rows.map((r) => ({ rowid: r.rowid, score: dot(vector, vectorFromBlob(r.embedding)) }));
        }
        return scored.sort((a, b) => b.score - a.score || a.rowid - b.rowid).slice(0, limit);
      },
      // No segments to merge: postings are rows.
      mergeStep: () => false,
      keywordPages: () => 0,
    };
  }

  /**
   * Nearest by inner product through the HNSW index. An iterative scan keeps walking the graph until
   * `limit` rows pass the workspace (and persona, source) filter, instead of filtering a fixed
   * candidate list down to fewer (pgvector 0.8); relaxed order, so the rows are sorted here.
   */
  async function pgvectorSearch(filter: SearchFilter, vector: Float32Array, limit: number): Promise<Hit[]> {
    const q = vectorLiteral(vector);
    const rows = await k.transaction().execute(async (trx) => {
      await sql`SET LOCAL hnsw.iterative_scan = relaxed_order`.execute(trx);
      await sql`SELECT set_config('hnsw.ef_search', ${String(Math.max(HNSW_EF_SEARCH, limit))}, true)`.execute(trx);
      return sql<{ rowid: number; score: number }>`
        SELECT c.rowid AS rowid, -(c.embedding <#> ${q}::vector) AS score
        FROM knowledge_embeddings c
        WHERE true ${filterSql(filter)}
        ORDER BY c.embedding <#> ${q}::vector
        LIMIT ${limit}`.execute(trx);
    });
    return rows.rows.sort((a, b) => b.score - a.score || a.rowid - b.rowid);
  }

  /**
   * A workspace's epoch and its rows after a rowid (codes, and vectors when asked), in one prepared
   * statement, so one snapshot: a search's first read, where a transaction took four round trips.
   */
  const codeRows = (withVectors: boolean) =>
    db.prepare<CodeRow & { epoch: number | null }>(`
      SELECT (SELECT epoch FROM knowledge_vector_epochs WHERE workspace_id = ?) AS epoch, r.*
      FROM (SELECT 1) AS one LEFT JOIN LATERAL (
        SELECT k.rowid AS rowid, k.scope AS scope, k.source_id AS source_id, c.code AS code${withVectors ? ', e.embedding AS embedding' : ''}
        FROM knowledge_chunk_keys k JOIN knowledge_codes c ON c.rowid = k.rowid
        ${withVectors ? 'JOIN knowledge_chunks e ON e.rowid = k.rowid' : ''}
        WHERE k.workspace_id = ? AND k.rowid > ? ORDER BY k.rowid) AS r ON true`);
  const codeRowsWithVectors = codeRows(true);
  const codeRowsOnly = codeRows(false);
  async function rowsSince(workspaceId: string, after: number, withVectors: boolean): Promise<{ epoch: number; rows: CodeRow[] }> {
    const found = await (withVectors ? codeRowsWithVectors : codeRowsOnly).all(workspaceId, workspaceId, after);
    return { epoch: found[0]?.epoch ?? 0, rows: found.filter((r) => r.rowid !== null) };
  }

  // Every answer's retrieval runs these: prepared by name, as planning them cost more than running them.
  const hitRows = db.prepare<ChunkHitRow>(`
    SELECT c.rowid AS rowid, c.id AS id, c.source_id AS source_id, c.text AS text, c.position AS position,
      s.name AS source_name, s.metadata AS metadata
    FROM knowledge_chunks c JOIN knowledge_sources s ON s.id = c.source_id
    WHERE c.rowid = ANY(?::bigint[]) AND c.workspace_id = ?`);
  const largestRowid = db.prepare<{ size: number }>('SELECT coalesce(max(rowid), 0) AS size FROM knowledge_chunk_keys');

  // How many chunks each query term matches, for the keyword budget: as the SQLite index keeps them.
  const termCounts = new Map<string, { count: number; at: number }>();
  let countedAtSize = 0;
  // The index's size is read at most once a second, not by every search: a round trip an answer
  // (SQLite reads it in process). The counts it guards are approximate anyway (TTL minutes).
  let sizeReadAt = Number.NEGATIVE_INFINITY;

  /** The query's terms, rarest first, while the chunks they match stay within the budget (search-index.ts `budgeted`). */
  async function budgeted(terms: string[]): Promise<string[]> {
    if (!Number.isFinite(opts.keywordBudget)) return terms;
    if (performance.now() - sizeReadAt >= SIZE_RECHECK_MS) {
      sizeReadAt = performance.now();
      const size = (await largestRowid.first())!.size;
      if (size > countedAtSize * TERM_COUNT_GROWTH) {
        termCounts.clear();
        countedAtSize = size;
      }
    }
    const now = performance.now();
    const unknown = terms.filter((t) => {
      const known = termCounts.get(t);
      return !(known && now - known.at < TERM_COUNT_TTL_MS);
    });
    if (unknown.length > 0) {
      const hits = await phraseHits(unknown.map((quoted) => ftsTokens(quoted.slice(1, -1))));
      if (termCounts.size + unknown.length > TERM_COUNT_CACHE_SIZE) termCounts.clear();
      unknown.forEach((t, i) => termCounts.set(t, { count: hits[i]!, at: now }));
    }
    const counted = terms.map((term) => ({ term, count: termCounts.get(term)!.count })).sort((a, b) => a.count - b.count);
    let spent = 0;
    return counted.filter((t, i) => (spent += t.count) <= opts.keywordBudget || i === 0).map((t) => t.term);
  }

  /** Rows of the whole index holding each phrase (FTS5's hits), now. */
  async function phraseHits(phrases: string[][]): Promise<number[]> {
    const single = [...new Set(phrases.filter((p) => p.length === 1).map((p) => p[0]!))];
    const counts = new Map<string, number>();
    if (single.length > 0) {
      const rows = await sql<{ term: string; hits: number }>`
        SELECT term, count(*) AS hits FROM knowledge_postings WHERE term = ANY(${single}::text[]) GROUP BY term`.execute(k);
      for (const r of rows.rows) counts.set(r.term, r.hits);
    }
    const out: number[] = [];
    for (const p of phrases) {
      if (p.length === 0) out.push(0);
      else if (p.length === 1) out.push(counts.get(p[0]!) ?? 0);
      else out.push((await phraseRows(k, p, null)).length);
    }
    return out;
  }

  /**
   * Rows holding a phrase of several terms, with its occurrences per column: the rows holding every
   * term, re-tokenised (terms must follow each other within one column). Rare: a quoted word that
   * FTS5 splits into several terms. `filter` null: the whole index (for its hits).
   */
  async function phraseRows(q: Kysely<Database> | Trx, phrase: string[], filter: SearchFilter | null) {
    const distinct = [...new Set(phrase)];
    const rows = await sql<{ rowid: number; title: string; text: string; tokens: number }>`
      SELECT d.rowid AS rowid, d.title AS title, ch.text AS text, d.tokens AS tokens
      FROM knowledge_postings p
      JOIN knowledge_documents d ON d.rowid = p.rowid
      JOIN knowledge_chunks ch ON ch.rowid = p.rowid
      ${filter === null ? sql`` : sql`JOIN knowledge_chunk_keys c ON c.rowid = p.rowid`}
      WHERE p.term = ${distinct[0]!}
        AND (SELECT count(*) FROM knowledge_postings o WHERE o.term = ANY(${distinct}::text[]) AND o.workspace_id = p.workspace_id AND o.rowid = p.rowid) = ${distinct.length}
        ${filter === null ? sql`` : filterSql(filter)}`.execute(q);
    return rows.rows
      .map((r) => ({ rowid: r.rowid, tokens: r.tokens, freq: [phraseCount(ftsTokens(r.title), phrase), phraseCount(ftsTokens(r.text), phrase)] as [number, number] }))
      .filter((r) => r.freq[0] + r.freq[1] > 0);
  }

  function filterSql(filter: SearchFilter) {
    return sql`AND c.workspace_id = ${filter.workspaceId}
      ${filter.personaId !== undefined ? sql`AND c.scope IN (${SHARED_SCOPE}, ${filter.personaId})` : sql``}
      ${filter.sourceIds !== undefined ? sql`AND c.source_id = ANY(${filter.sourceIds}::text[])` : sql``}`;
  }

  /**
   * The keyword statements per filter shape, prepared by name (planning them anew for every search
   * cost the server more than running them). The postings carry their chunk's workspace, scope and
   * length (migration 016), so a query's postings are an index-only read per term within the
   * workspace, joined to nothing but the query's terms: a SciFact claim over 8,000 postings at 10k
   * chunks took 65 ms when each posting was joined to its chunk's keys and length, 28 ms this way.
   *
   * Two shapes, as the postings compare with the rows asked for (`RANK_FIRST_FROM`):
   *  - `all`: every matching row aggregated with its postings' arrays, then ranked. Where nearly
   *    every row is among the best (a chat answer's search of a small index) this is cheapest: the
   *    chat bench's 200 articles, 153 postings, 0.6–0.7 ms this way, 0.95 ms ranked first;
   *  - `best`: the rows ranked on a sum alone, then the arrays of the best ones only, a probe of
   *    the postings index per row. Building four arrays for each of thousands of rows was most of
   *    the cost of a large query: a SciFact claim's 7,400 postings at 100k chunks, 30 → 12 ms.
   */
  const keywordStatements = new Map<string, PreparedRead<KeywordRow>>();
  function keywordStatement(filter: SearchFilter, shape: 'all' | 'best'): PreparedRead<KeywordRow> {
    const key = `${shape}${filter.personaId !== undefined ? 'p' : ''}${filter.sourceIds !== undefined ? 's' : ''}`;
    let stmt = keywordStatements.get(key);
    if (stmt) return stmt;
    const matching = `
        FROM knowledge_postings p
        JOIN idf ON idf.term = p.term
        CROSS JOIN tot
        CROSS JOIN LATERAL (SELECT p.title_freq * ?::float8 + p.body_freq * ?::float8 AS freq) f
        ${filter.sourceIds !== undefined ? 'JOIN knowledge_chunk_keys c ON c.rowid = p.rowid' : ''}
        WHERE p.term = ANY(?::text[]) AND p.workspace_id = ?
          ${filter.personaId !== undefined ? `AND p.scope IN ('${SHARED_SCOPE}', ?)` : ''}
          ${filter.sourceIds !== undefined ? 'AND c.source_id = ANY(?::text[])' : ''}
        GROUP BY p.rowid`;
    const ranking = `ORDER BY sum(idf.times * CASE WHEN idf.raw <= 0 THEN 1e-6 ELSE idf.raw END
          * ((f.freq * (${BM25_K1} + 1.0)) / (f.freq + ${BM25_K1} * (1 - ${BM25_B} + (${BM25_B} * p.tokens) / (tot.total / tot.n))))) DESC, p.rowid
        LIMIT ?`;
    const common = `
        WITH q AS (SELECT t AS term, count(*) AS times FROM unnest(?::text[]) AS t GROUP BY t),
        tot AS (SELECT rows::float8 AS n, tokens::float8 AS total FROM knowledge_keyword_totals WHERE id = 1),
        hit AS (SELECT term, count(*)::float8 AS hits FROM knowledge_postings WHERE term = ANY(?::text[]) GROUP BY term),
        idf AS (SELECT hit.term, hit.hits, q.times, ln((tot.n - hit.hits + 0.5) / (hit.hits + 0.5)) AS raw FROM hit JOIN q ON q.term = hit.term, tot)`;
    // Parameters, both shapes: terms, distinct terms, title weight, body weight, distinct terms,
    // workspace, [persona], [sources], limit; `best` then the distinct terms and the workspace again.
    stmt =
      shape === 'all'
        ? db.prepare<KeywordRow>(`${common}
        SELECT p.rowid AS rowid, min(p.tokens) AS tokens, array_agg(p.term) AS terms, array_agg(p.title_freq) AS tf_title,
          array_agg(p.body_freq) AS tf_body, array_agg(idf.hits) AS hits, min(tot.n) AS n, min(tot.total) AS total
        ${matching}
        ${ranking}`)
        : db.prepare<KeywordRow>(`${common},
        best AS (SELECT p.rowid AS rowid ${matching} ${ranking})
        SELECT b.rowid AS rowid, x.tokens, x.terms, x.tf_title, x.tf_body, x.hits, tot.n AS n, tot.total AS total
        FROM best b CROSS JOIN tot CROSS JOIN LATERAL (
          SELECT min(p.tokens) AS tokens, array_agg(p.term) AS terms, array_agg(p.title_freq) AS tf_title, array_agg(p.body_freq) AS tf_body,
            array_agg(idf.hits) AS hits
          FROM knowledge_postings p JOIN idf ON idf.term = p.term
          WHERE p.term = ANY(?::text[]) AND p.workspace_id = ? AND p.rowid = b.rowid) x`);
    keywordStatements.set(key, stmt);
    return stmt;
  }

  /** Postings per row asked for from which ranking first (the `best` shape) is cheaper. */
  const RANK_FIRST_FROM = 8;

  /**
   * BM25 of one-term phrases (the usual query), ranked by the server: only the best rows come back,
   * not every posting. The server's sum runs in its own order, so near-equal scores could swap; the
   * candidates (twice the limit and more) are scored again here in FTS5's order (bm25.ts) and cut
   * to the limit. One statement, so hits, totals and postings are of one snapshot.
   */
  async function keywordInSql(filter: SearchFilter, phrases: string[][], terms: string[], distinct: string[], limit: number, postings: number): Promise<Hit[]> {
    if (terms.length === 0) return [];
    const params: unknown[] = [terms, distinct, opts.titleWeight, opts.bodyWeight, distinct, filter.workspaceId];
    if (filter.personaId !== undefined) params.push(filter.personaId);
    if (filter.sourceIds !== undefined) params.push(filter.sourceIds);
    const wanted = limit * 2 + 20;
    params.push(wanted);
    const shape = postings >= wanted * RANK_FIRST_FROM ? 'best' : 'all';
    if (shape === 'best') params.push(distinct, filter.workspaceId);
    const rows = { rows: await keywordStatement(filter, shape).all(...params) };
    const weights = [opts.titleWeight, opts.bodyWeight] as const;
    const scored = rows.rows.map((r) => {
      const freq = new Map<string, readonly [number, number]>(r.terms.map((t, i) => [t, [r.tf_title[i]!, r.tf_body[i]!]]));
      const hits = new Map(r.terms.map((t, i) => [t, r.hits[i]!]));
      const bm25 = bm25Score({
        phrases: phrases.map((p) => (p.length === 1 ? { hits: hits.get(p[0]!) ?? 0, freq: freq.get(p[0]!) ?? ([0, 0] as const) } : { hits: 0, freq: [0, 0] as const })),
        rowTokens: r.tokens,
        totalRows: r.n,
        totalTokens: r.total,
        weights,
      });
      return { rowid: r.rowid, score: -bm25 };
    });
    return scored.sort((a, b) => b.score - a.score || a.rowid - b.rowid).slice(0, limit);
  }

  /** BM25 over the phrases (in the order FTS5 would sum them), best first; ties by rowid. Phrases of several terms re-read their rows. */
  async function keywordSearch(filter: SearchFilter, phrases: string[][], limit: number, postings: number): Promise<Hit[]> {
    const single = [...new Set(phrases.filter((p) => p.length === 1).map((p) => p[0]!))];
    const multi = phrases.filter((p) => p.length > 1);
    if (multi.length === 0) return keywordInSql(filter, phrases, phrases.filter((p) => p.length === 1).map((p) => p[0]!), single, limit, postings);
    // One statement: the postings the search may see, every term's hits and the totals, one snapshot.
    const rows = await sql<{ kind: 'p' | 'h' | 't'; term: string | null; rowid: number | null; a: number; b: number; c: number | null }>`
      SELECT 'p' AS kind, p.term, p.rowid, p.title_freq AS a, p.body_freq AS b, d.tokens AS c
        FROM knowledge_postings p
        JOIN knowledge_chunk_keys c ON c.rowid = p.rowid
        JOIN knowledge_documents d ON d.rowid = p.rowid
        WHERE p.term = ANY(${single}::text[]) ${filterSql(filter)}
      UNION ALL
      SELECT 'h', term, NULL, count(*), 0, NULL FROM knowledge_postings WHERE term = ANY(${single}::text[]) GROUP BY term
      UNION ALL
      SELECT 't', NULL, NULL, rows, tokens, NULL FROM knowledge_keyword_totals WHERE id = 1`.execute(k);
    const hits = new Map<string, number>();
    const perRow = new Map<number, { tokens: number; freq: Map<string, [number, number]> }>();
    let totalRows = 0;
    let totalTokens = 0;
    for (const r of rows.rows) {
      if (r.kind === 't') {
        totalRows = r.a;
        totalTokens = r.b;
      } else if (r.kind === 'h') hits.set(r.term!, r.a);
      else {
        let row = perRow.get(r.rowid!);
        if (!row) perRow.set(r.rowid!, (row = { tokens: r.c!, freq: new Map() }));
        row.freq.set(r.term!, [r.a, r.b]);
      }
    }
    // Phrases of several terms: their rows and hits by re-reading the text (rare).
    const multiStats = new Map<string, { hits: number; rows: Map<number, [number, number]> }>();
    for (const p of multi) {
      const key = p.join(' ');
      if (multiStats.has(key)) continue;
      const everywhere = await phraseRows(k, p, null);
      const visible = await phraseRows(k, p, filter);
      const visibleRows = new Map(visible.map((r) => [r.rowid, r.freq] as const));
      for (const r of visible) if (!perRow.has(r.rowid)) perRow.set(r.rowid, { tokens: r.tokens, freq: new Map() });
      multiStats.set(key, { hits: everywhere.length, rows: visibleRows });
    }
    const weights = [opts.titleWeight, opts.bodyWeight] as const;
    const scored: Hit[] = [];
    for (const [rowid, row] of perRow) {
      const bm25 = bm25Score({
        phrases: phrases.map((p) => {
          if (p.length === 0) return { hits: 0, freq: [0, 0] as const };
          if (p.length === 1) return { hits: hits.get(p[0]!) ?? 0, freq: row.freq.get(p[0]!) ?? ([0, 0] as const) };
          const stats = multiStats.get(p.join(' '))!;
          return { hits: stats.hits, freq: stats.rows.get(rowid) ?? ([0, 0] as const) };
        }),
        rowTokens: row.tokens,
        totalRows,
        totalTokens,
        weights,
      });
      scored.push({ rowid, score: -bm25 });
    }
    return scored.sort((a, b) => b.score - a.score || a.rowid - b.rowid).slice(0, limit);
  }

  return {
    openIndex: (dimension) => open(dimension),

    async resetIndex(dimension) {
      const pgvector = await hasPgvector();
      await k.transaction().execute(async (trx) => {
        await sql`DELETE FROM knowledge_codes`.execute(trx);
        await sql`DELETE FROM knowledge_postings`.execute(trx);
        await sql`DELETE FROM knowledge_documents`.execute(trx);
        await sql`UPDATE knowledge_keyword_totals SET rows = 0, tokens = 0 WHERE id = 1`.execute(trx);
        await sql`DROP TABLE IF EXISTS knowledge_embeddings`.execute(trx);
        await sql`DELETE FROM settings WHERE key = 'pgvector_dimension'`.execute(trx);
        // Empty: reindex adds every chunk's new vector.
        if (pgvector) await ensureEmbeddings(trx, dimension, { fill: false });
        await bumpEpochs(trx);
      });
      const coder = createBinaryCoder(dimension);
      const signature = codesSignature(dimension, coder.bits);
      await k.insertInto('settings').values({ key: CODES_SETTING, value: signature }).onConflict((oc) => oc.column('key').doUpdateSet({ value: signature })).execute();
      return open(dimension);
    },

    insertSource: async (row: KnowledgeSourceRow) => void (await k.insertInto('knowledge_sources').values(row).execute()),

    claimLapsed: (owner, now, until, limit, mine = false) =>
      k
        .updateTable('knowledge_sources')
        .set((eb) => ({ lease_owner: owner, lease_until: until, attempts: eb('attempts', '+', 1) }))
        .where('id', 'in', (eb) =>
          eb
            .selectFrom('knowledge_sources')
            .select('id')
            .where('status', '=', 'processing')
            .where((w) => w.or([w('lease_until', 'is', null), w('lease_until', '<', now), ...(mine ? [w.and([w('lease_owner', '=', owner), w('lease_until', '<', until)])] : [])]))
            .orderBy('created_at')
            .limit(limit)
            .forUpdate()
            .skipLocked(),
        )
        .returning(['id', 'workspace_id', 'generation', 'attempts'])
        .execute(),

    writeSources(index, writes: SourceWrite[]) {
      const open = own(index);
      return k.transaction().execute(async (trx) => {
        // In a fixed order, so two writers never wait on each other's workspace locks.
        for (const workspaceId of [...new Set(writes.map((w) => w.source.workspaceId))].sort()) {
          await sql`SELECT pg_advisory_xact_lock(${WORKSPACE_WRITE_LOCK}, hashtext(${workspaceId}))`.execute(trx);
        }
        // The same source twice in a batch: the later write wins, or both would insert their chunks.
        const last = new Map(writes.map((w, i) => [w.source.id, i]));
        const current: boolean[] = [];
        for (const [i, { source, chunks, now }] of writes.entries()) {
          const row = last.get(source.id) === i ? await trx.selectFrom('knowledge_sources').select('generation').where('id', '=', source.id).forUpdate().executeTakeFirst() : undefined;
          if (row?.generation !== source.generation) {
            current.push(false);
            continue;
          }
          await trx.deleteFrom('knowledge_chunks').where('source_id', '=', source.id).execute();
          await trx
            .updateTable('knowledge_sources')
            .set({ status: 'ready', error: null, chunk_count: chunks.length, bytes: source.bytes, name: source.name, updated_at: now, ...(source.content !== null ? { content: source.content } : {}) })
            .where('id', '=', source.id)
            .where('generation', '=', source.generation)
            .execute();
          current.push(true);
        }
        const rows = writes.flatMap(({ source, chunks, title }, w) => (current[w] ? chunks.map((c) => ({ source, c, title: title(c) })) : []));
        if (rows.length === 0) return current;
        const inserted = await sql<{ rowid: number; id: string }>`
          INSERT INTO knowledge_chunks (id, workspace_id, source_id, scope, position, text, heading_path, tokens, embedding)
          SELECT * FROM unnest(${rows.map((r) => r.c.id)}::text[], ${rows.map((r) => r.source.workspaceId)}::text[], ${rows.map((r) => r.source.id)}::text[],
            ${rows.map((r) => r.source.scope)}::text[], ${rows.map((r) => r.c.position)}::bigint[], ${rows.map((r) => r.c.text)}::text[],
            ${rows.map((r) => JSON.stringify(r.c.headingPath))}::text[], ${rows.map((r) => r.c.tokens)}::bigint[], ${rows.map((r) => blobFromVector(r.c.vector))}::bytea[])
          RETURNING rowid, id`.execute(trx);
        const rowidOf = new Map(inserted.rows.map((r) => [r.id, r.rowid]));
        await addToIndex(
          trx,
          open,
          rows.map(({ source, c, title }) => ({ rowid: rowidOf.get(c.id)!, workspaceId: source.workspaceId, sourceId: source.id, scope: source.scope, title, text: c.text, vector: c.vector, code: c.code })),
        );
        return current;
      });
    },

    markFailed: (id, generation, error, now) =>
      k.transaction().execute(async (trx) => {
        const row = await trx.selectFrom('knowledge_sources').select('generation').where('id', '=', id).forUpdate().executeTakeFirst();
        if (row?.generation !== generation) return false;
        await trx.deleteFrom('knowledge_chunks').where('source_id', '=', id).execute();
        await trx.updateTable('knowledge_sources').set({ status: 'failed', error, chunk_count: 0, updated_at: now }).where('id', '=', id).execute();
        return true;
      }),

    dropChunks: async (sourceId) => void (await k.deleteFrom('knowledge_chunks').where('source_id', '=', sourceId).execute()),

    hits: async (workspaceId, rowids) => (rowids.length === 0 ? [] : hitRows.all(rowids, workspaceId)),

    reembed(index, chunks) {
      const open = own(index);
      return k.transaction().execute(async (trx) => {
        await sql`UPDATE knowledge_chunks c SET embedding = v.embedding
          FROM unnest(${chunks.map((c) => c.rowid)}::bigint[], ${chunks.map((c) => blobFromVector(c.vector))}::bytea[]) AS v(rowid, embedding)
          WHERE c.rowid = v.rowid`.execute(trx);
        await addToIndex(trx, open, chunks);
      });
    },

    bumpVectorEpochs: async () => void (await bumpEpochs(k)),
  };
}
