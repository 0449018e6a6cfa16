import type SqliteDatabase from 'better-sqlite3';
import { CodeArray } from './hamming.js';
import { type SearchFilter, SHARED_SCOPE } from './search-index.js';

/**
 * The binary codes of recently searched workspaces, held in memory so the vector first stage is a
 * linear Hamming scan (WebAssembly, ~2.5 ms per 100k codes) instead of sqlite-vec's KNN, whose
 * top-k selection costs O(n·k) and so cannot hand enough candidates to the exact rescoring for
 * recall@10 ≥ 0.95 within the latency budget (measured: 20 ms at k = 160, 159 ms at k = 1,000 on
 * 100k codes).
 *
 * The database stays the truth and any process may write it (the CLI ingests while the server
 * runs), so every search first brings its workspace up to date, cheaply:
 *  - rows are only ever appended with a larger rowid, so new ones are `rowid > last loaded`;
 *  - every deleted chunk bumps its workspace's epoch (a trigger), and a changed epoch reloads the
 *    workspace (which also covers a rowid reused after the largest one was deleted).
 * Both reads run in one read transaction, so they see the same snapshot.
 *
 * Memory is bounded: workspaces are evicted least recently searched first, and a workspace too
 * large for the budget is not cached at all (the caller falls back to sqlite-vec).
 *
 * Given the dimension, the float32 vectors of a workspace are held too (read with the codes, in the
 * same snapshot), so the exact rescoring of the candidates needs no read of their rows: measured at
 * ~470 µs of ~3.7 ms of server CPU per chat answer on a 200-chunk workspace (issue 18). They are
 * held only while codes and vectors together take at most half the budget. A larger workspace keeps
 * them as 16-bit integers with a scale per row (half the bytes), from which the caller picks the few
 * candidates that can still be among the best and reads only their float32 vectors from the table
 * (`mayRankAmong`); larger still, its codes only, and the caller reads every candidate's vector.
 */
export interface VectorCache {
  /**
   * Up to `count` rowids the filter may see, nearest to `query` by Hamming distance (ties in
   * insertion order), or null when the workspace is not held in memory (over the budget).
   */
  nearest(filter: SearchFilter, query: Uint8Array, count: number): Candidates | null;
  /** Bytes currently held. */
  bytes(): number;
}

export interface Candidates {
  rowids: number[];
  /** The float32 vector of each candidate, when the workspace's are held in memory; else null (read them from the table). */
  vectors: Float32Array[] | null;
  /** Without those, each candidate's vector as 16-bit integers (`ReducedVector`) when held; else null. */
  reduced: ReducedVector[] | null;
}

/**
 * A float32 vector `x` as `values[i] · scale`, each within `scale / 2` of `x[i]`: the scale is the
 * largest magnitude over 32,000 (under 32,767, so the rounding of the scale to float32 cannot push a
 * value out of range).
 */
export interface ReducedVector {
  values: Int16Array;
  scale: number;
}
const REDUCED_STEPS = 32_000;

/** Writes `v` reduced (ReducedVector) at row `row` of `into`: values at [row·length, (row+1)·length), the scale at `row`. */
function reduceInto(into: { values: Int16Array; scales: Float32Array }, row: number, v: Float32Array): void {
  let largest = 0;
  for (let i = 0; i < v.length; i++) largest = Math.max(largest, Math.abs(v[i]!));
  const scale = Math.fround(largest / REDUCED_STEPS);
  into.scales[row] = scale;
  const at = row * v.length;
  for (let i = 0; i < v.length; i++) into.values[at + i] = scale === 0 ? 0 : Math.round(v[i]! / scale);
}

/** One vector reduced, as the holder reduces those it holds. */
export function reduceVector(v: Float32Array): ReducedVector {
  const into = { values: new Int16Array(v.length), scales: new Float32Array(1) };
  reduceInto(into, 0, v);
  return { values: into.values, scale: into.scales[0]! };
}

interface WorkspaceCodes {
  epoch: number;
  lastRowid: number;
  codes: CodeArray;
  rowids: number[];
  /** Per row, an index into `scopes` / `sources`. */
  scopeOf: number[];
  sourceOf: number[];
  scopes: Map<string, number>;
  sources: Map<string, number>;
  /** Row i's float32 vector at [i·dimension, (i+1)·dimension); capacity grows by doubling. Null when not held. */
  vectors: Float32Array | null;
  /** When the float32 ones no longer fit: row i's vector reduced to 16 bits, at the same place, and its scale. Null when not held. */
  reduced: { values: Int16Array; scales: Float32Array } | null;
  /** Rough bytes held (codes + per-row arrays), for the budget. */
  bytes: number;
}

const ROW_OVERHEAD_BYTES = 32;

export interface CodeRow {
  rowid: number;
  scope: string;
  source_id: string;
  code: Buffer;
  embedding?: Buffer;
}

/** A workspace's state as the database holds it: its epoch and how many rows it has. */
export interface WorkspaceVersion {
  epoch: number;
  /** Rows of the workspace; asked for only when it is not held yet (to know whether it fits). */
  count: () => number | Promise<number>;
}

/**
 * The memory side of the cache, shared by both backends' loaders: which workspaces are held, the
 * budget, and the Hamming selection. A loader brings a workspace up to date in one snapshot of its
 * database (`refresh`), then asks for the nearest rows.
 */
export function createCodeHolder(bits: number, maxBytes: number, dimension?: number) {
  const held = new Map<string, WorkspaceCodes>(); // insertion order = least recently searched first
  const withVectors = dimension !== undefined && dimension > 0;
  const bytesPerRow = bits / 8 + ROW_OVERHEAD_BYTES;
  const dim = withVectors ? dimension : 0;
  /** Codes and vectors of a workspace beyond this: its float32 vectors are reduced to 16 bits, then dropped. */
  const maxWithVectors = maxBytes / 2;
  let total = 0;
  const fresh = (epoch: number): WorkspaceCodes => ({
    epoch,
    lastRowid: 0,
    codes: new CodeArray(bits),
    rowids: [],
    scopeOf: [],
    sourceOf: [],
    scopes: new Map(),
    sources: new Map(),
    vectors: withVectors ? new Float32Array(0) : null,
    reduced: null,
    bytes: 0,
  });

  const indexIn = (names: Map<string, number>, name: string) => {
    let i = names.get(name);
    if (i === undefined) names.set(name, (i = names.size));
    return i;
  };

  /** Rows to make room for when `rows` are needed and `heldRows` fit: at least double, as arrays grow. */
  const capacity = (rows: number, heldRows: number) => Math.max(rows, heldRows * 2, 64);

  /**
   * Room for `rows` vectors, as float32 while codes and vectors fit half the budget, then as 16-bit
   * integers (the float32 ones held so far reduced) while those fit, then none (the caller reads the
   * table). Once dropped, a workspace's vectors stay dropped until it is read again.
   */
  function makeRoom(ws: WorkspaceCodes, held: number, rows: number): void {
    if (ws.vectors !== null) {
      if (rows * (bytesPerRow + dim * 4) <= maxWithVectors) {
        if (ws.vectors.length < rows * dim) {
          const grown = new Float32Array(capacity(rows, ws.vectors.length / dim) * dim);
          grown.set(ws.vectors);
          ws.vectors = grown;
        }
        return;
      }
      const floats = ws.vectors;
      ws.vectors = null;
      ws.reduced = { values: new Int16Array(0), scales: new Float32Array(0) };
      makeRoom(ws, 0, rows);
      for (let i = 0; i < held && ws.reduced !== null; i++) reduceInto(ws.reduced, i, floats.subarray(i * dim, (i + 1) * dim));
      return;
    }
    const reduced = ws.reduced;
    if (reduced === null) return;
    if (rows * (bytesPerRow + dim * 2 + 4) > maxWithVectors) {
      ws.reduced = null;
      return;
    }
    if (reduced.scales.length < rows) {
      const n = capacity(rows, reduced.scales.length);
      const values = new Int16Array(n * dim);
      values.set(reduced.values);
      const scales = new Float32Array(n);
      scales.set(reduced.scales);
      ws.reduced = { values, scales };
    }
  }

  function append(ws: WorkspaceCodes, rows: CodeRow[]) {
    const first = ws.rowids.length;
    if (rows.length > 0) makeRoom(ws, first, first + rows.length);
    for (let j = 0; j < rows.length; j++) {
      const r = rows[j]!;
      ws.codes.push(r.code);
      ws.rowids.push(r.rowid);
      ws.scopeOf.push(indexIn(ws.scopes, r.scope));
      ws.sourceOf.push(indexIn(ws.sources, r.source_id));
      if (ws.vectors === null && ws.reduced === null) continue;
      const blob = r.embedding;
      if (!blob || blob.byteLength !== dim * 4) {
        // A vector of another length (a reindex to a new dimension under way): rescoring reads the table.
        ws.vectors = null;
        ws.reduced = null;
        continue;
      }
      // A view when the blob is 4-byte aligned, else a copy (blobs need not be).
      const v = blob.byteOffset % 4 === 0 ? new Float32Array(blob.buffer, blob.byteOffset, dim) : new Float32Array(Uint8Array.from(blob).buffer);
      if (ws.vectors !== null) ws.vectors.set(v, (first + j) * dim);
      else reduceInto(ws.reduced!, first + j, v);
    }
    if (rows.length > 0) ws.lastRowid = rows[rows.length - 1]!.rowid;
    total -= ws.bytes;
    ws.bytes = ws.rowids.length * bytesPerRow + (ws.vectors?.byteLength ?? 0) + (ws.reduced ? ws.reduced.values.byteLength + ws.reduced.scales.byteLength : 0);
    total += ws.bytes;
  }

  function drop(workspaceId: string) {
    const ws = held.get(workspaceId);
    if (ws) total -= ws.bytes;
    held.delete(workspaceId);
  }

  return {
    withVectors,
    bytes: () => total,
    /** The epoch and last rowid held for a workspace, or undefined: what a loader must read next. */
    version: (workspaceId: string): { epoch: number; lastRowid: number } | undefined => {
      const ws = held.get(workspaceId);
      return ws && { epoch: ws.epoch, lastRowid: ws.lastRowid };
    },
    /** The rowid after which the workspace's rows must be read (0: all), or null when it would not fit. */
    async refresh(workspaceId: string, version: WorkspaceVersion, rowsAfter: (lastRowid: number) => CodeRow[] | Promise<CodeRow[]>): Promise<WorkspaceCodes | null> {
      return refreshWith(workspaceId, version.epoch, version.count, rowsAfter);
    },
    /** As `refresh`, for a loader that reads synchronously (SQLite, inside one read transaction). */
    refreshNow(workspaceId: string, epoch: number, count: () => number, rowsAfter: (lastRowid: number) => CodeRow[]): WorkspaceCodes | null {
      let ws = held.get(workspaceId);
      if (ws && ws.epoch !== epoch) {
        drop(workspaceId);
        ws = undefined;
      }
      if (!ws) {
        if (count() * bytesPerRow > maxBytes) return null;
        ws = fresh(epoch);
      }
      return settle(workspaceId, ws, rowsAfter(ws.lastRowid));
    },
    nearest: (ws: WorkspaceCodes, filter: SearchFilter, query: Uint8Array, count: number) => nearestIn(ws, dim, filter, query, count),
  };

  async function refreshWith(workspaceId: string, epoch: number, count: () => number | Promise<number>, rowsAfter: (lastRowid: number) => CodeRow[] | Promise<CodeRow[]>) {
    let ws = held.get(workspaceId);
    if (ws && ws.epoch !== epoch) {
      drop(workspaceId);
      ws = undefined;
    }
    if (!ws) {
      if ((await count()) * bytesPerRow > maxBytes) return null;
      ws = fresh(epoch);
    }
    const from = ws.lastRowid;
    const rows = await rowsAfter(from);
    // Another search of the same workspace may have refreshed it meanwhile: add only what it lacks.
    const current = held.get(workspaceId) ?? ws;
    if (current.epoch !== epoch) return null;
    return settle(workspaceId, current, rows.filter((r) => r.rowid > current.lastRowid));
  }

  function settle(workspaceId: string, ws: WorkspaceCodes, rows: CodeRow[]): WorkspaceCodes | null {
    held.delete(workspaceId);
    held.set(workspaceId, ws); // most recently searched last
    append(ws, rows);
    if (ws.bytes > maxBytes) {
      drop(workspaceId);
      return null;
    }
    for (const id of held.keys()) {
      if (total <= maxBytes || id === workspaceId) break;
      drop(id);
    }
    return ws;
  }
}

/** Up to `count` rowids of the workspace the filter may see, nearest to `query` by Hamming distance (ties in insertion order). */
function nearestIn(ws: WorkspaceCodes, dim: number, filter: SearchFilter, query: Uint8Array, count: number): Candidates {
  const n = ws.rowids.length;
  if (n === 0 || count <= 0) return { rowids: [], vectors: ws.vectors && [], reduced: ws.reduced && [] };

  // Which rows the filter may see: the shared scope and the persona's; the listed sources.
  let allowedScope: ((s: number) => boolean) | null = null;
  if (filter.personaId !== undefined) {
    const shared = ws.scopes.get(SHARED_SCOPE) ?? -1;
    const persona = ws.scopes.get(filter.personaId) ?? -1;
    allowedScope = (s) => s === shared || s === persona;
  }
  let allowedSource: Uint8Array | null = null;
  if (filter.sourceIds !== undefined) {
    allowedSource = new Uint8Array(ws.sources.size);
    for (const id of filter.sourceIds) {
      const i = ws.sources.get(id);
      if (i !== undefined) allowedSource[i] = 1;
    }
  }
  const allowed = (i: number) => (allowedScope === null || allowedScope(ws.scopeOf[i]!)) && (allowedSource === null || allowedSource[ws.sourceOf[i]!] === 1);
  const held = ws.vectors;
  const vectors: Float32Array[] | null = held && [];
  const heldReduced = ws.reduced;
  const reduced: ReducedVector[] | null = heldReduced && [];
  const out: number[] = [];
  const take = (i: number) => {
    out.push(ws.rowids[i]!);
    if (held !== null) vectors!.push(held.subarray(i * dim, (i + 1) * dim));
    if (heldReduced !== null) reduced!.push({ values: heldReduced.values.subarray(i * dim, (i + 1) * dim), scale: heldReduced.scales[i]! });
  };

  // Asked for at least every row (a workspace smaller than the candidates): every visible row is
  // a candidate, whatever its distance, so the Hamming pass would only pick them all (same order).
  if (count >= n) {
    for (let i = 0; i < n; i++) if (allowed(i)) take(i);
    return { rowids: out, vectors, reduced };
  }
  const distance = ws.codes.distances(query);

  // A histogram of distances gives the cut-off that keeps `count` rows in one more pass.
  const histogram = new Uint32Array(ws.codes.bytesPerCode * 8 + 1);
  let visible = 0;
  for (let i = 0; i < n; i++) {
    if (!allowed(i)) continue;
    histogram[distance[i]!]!++;
    visible++;
  }
  const wanted = Math.min(count, visible);
  let cut = 0;
  let below = 0;
  while (below + histogram[cut]! < wanted) below += histogram[cut++]!;
  let atCut = wanted - below; // rows at exactly the cut-off distance still to take
  for (let i = 0; i < n && out.length < wanted; i++) {
    const d = distance[i]!;
    if (d > cut || !allowed(i)) continue;
    if (d === cut) {
      if (atCut === 0) continue;
      atCut--;
    }
    take(i);
  }
  return { rowids: out, vectors, reduced };
}

/**
 * The candidates (indexes into `reduced`) whose exact score with `query` could be among the best
 * `k`, ties included: the exact rescoring of these alone ranks the best `k` as that of every
 * candidate would. A reduced vector's score is within `scale / 2 · ‖query‖₁` of the exact one (each
 * value within `scale / 2`), plus a margin for the rounding of the sums; a candidate is kept unless
 * even its highest possible score is below the k-th best of the lowest possible ones.
 */
export function mayRankAmong(query: Float32Array, reduced: ReducedVector[], k: number): number[] {
  const all = reduced.map((_, i) => i);
  if (reduced.length <= k) return all;
  let norm1 = 0;
  for (let i = 0; i < query.length; i++) norm1 += Math.abs(query[i]!);
  const approx = new Float64Array(reduced.length);
  const slack = new Float64Array(reduced.length);
  for (let c = 0; c < reduced.length; c++) {
    const { values, scale } = reduced[c]!;
    let s = 0;
    for (let i = 0; i < query.length; i++) s += query[i]! * values[i]!;
    approx[c] = s * scale;
    slack[c] = (scale / 2) * norm1 + 1e-9 * (1 + Math.abs(approx[c]!));
  }
  const lowest = Float64Array.from(approx, (a, c) => a - slack[c]!).sort();
  const floor = lowest[lowest.length - k]!;
  return all.filter((c) => approx[c]! + slack[c]! >= floor);
}

/** `dimension`: also hold the float32 vectors (see above); without it, codes only. */
export function createVectorCache(sqlite: SqliteDatabase.Database, bits: number, maxBytes: number, dimension?: number): VectorCache {
  const holder = createCodeHolder(bits, maxBytes, dimension);
  const epochOf = sqlite.prepare('SELECT epoch FROM knowledge_vector_epochs WHERE workspace_id = ?').pluck();
  const countOf = sqlite.prepare('SELECT count(*) FROM knowledge_chunk_keys WHERE workspace_id = ?').pluck();
  const rowsAfter = sqlite.prepare(codeRowsSql(holder.withVectors, '?', '?'));
  /** The workspace's codes as of now, or null when they would not fit the budget; one read transaction. */
  const current = sqlite.transaction((workspaceId: string) =>
    holder.refreshNow(
      workspaceId,
      (epochOf.get(workspaceId) as number | undefined) ?? 0,
      () => countOf.get(workspaceId) as number,
      (after) => rowsAfter.all(workspaceId, after) as CodeRow[],
    ),
  );
  return {
    bytes: holder.bytes,
    nearest(filter, query, count) {
      const ws = current(filter.workspaceId);
      return ws === null ? null : holder.nearest(ws, filter, query, count);
    },
  };
}

/** The rows of a workspace after a rowid, oldest first: codes, and the vectors when held. Placeholders by dialect. */
export function codeRowsSql(withVectors: boolean, workspace: string, after: string): string {
  return `
    SELECT k.rowid AS rowid, k.scope AS scope, k.source_id AS source_id, c.code AS code${withVectors ? ', e.embedding AS embedding' : ''}
    FROM knowledge_chunk_keys k JOIN knowledge_codes c ON c.rowid = k.rowid
    ${withVectors ? 'JOIN knowledge_chunks e ON e.rowid = k.rowid' : ''}
    WHERE k.workspace_id = ${workspace} AND k.rowid > ${after} ORDER BY k.rowid`;
}
