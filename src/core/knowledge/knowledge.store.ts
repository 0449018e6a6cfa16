import type { Db } from '../../db/database.js';
import type { KnowledgeSourceRow, SourceStatus } from '../../db/schema.js';
import { ValidationError } from '../../errors.js';
import { type PageRequest, paginate, type Page } from '../../lib/pagination.js';
import type { Chunk } from './chunk.js';
import { blobFromVector, type IndexedChunk, type SearchIndex } from './search-index.js';

export interface ChunkWrite extends Chunk {
  id: string;
  vector: Float32Array;
  /** Its binary code, when an ingestion worker computed it. */
  code?: Buffer | undefined;
}

/** One processed source as the writer hands it to `writeSources`. */
export interface SourceWrite {
  source: { id: string; workspaceId: string; scope: string; name: string; generation: number; bytes: number; content: Buffer | null };
  chunks: ChunkWrite[];
  /** The index title of a chunk (source name and headings). */
  title: (chunk: Chunk) => string;
  now: string;
}

/** The columns of a source the API returns (`toKnowledgeSource`). */
export type SourceSummaryRow = Omit<KnowledgeSourceRow, 'content' | 'url' | 'filename' | 'media_type' | 'generation' | 'attempts'>;

export interface ChunkListRow {
  id: string;
  position: number;
  text: string;
  heading_path: string;
  tokens: number;
}

export interface ChunkHitRow {
  rowid: number;
  id: string;
  source_id: string;
  text: string;
  position: number;
  source_name: string;
  metadata: string;
}

function decodePositionCursor(cursor: string): number {
  const text = Buffer.from(cursor, 'base64url').toString('utf8');
  const n = Number(text);
  // Number('') is 0: a cursor of junk characters decodes to '' and must not read as position 0.
  if (!/^\d+$/.test(text) || !Number.isSafeInteger(n)) throw ValidationError.field('cursor', 'is not a cursor this list returned');
  return n;
}

export function createKnowledgeStore(db: Db) {
  const k = db.kysely;
  const sqlite = db.sqlite;
  const insertChunk = sqlite.prepare(`
    INSERT INTO knowledge_chunks (id, workspace_id, source_id, scope, position, text, heading_path, tokens, embedding)
    VALUES (@id, @workspaceId, @sourceId, @scope, @position, @text, @headingPath, @tokens, @embedding)`);
  const deleteChunks = sqlite.prepare('DELETE FROM knowledge_chunks WHERE source_id = ?');
  // Every upload inserts its source, its job reads it back and the response reads its state: three
  // statements a source, prepared (Kysely built each per call), and the response's without the
  // stored bytes (a 15 KiB upload read back only to be dropped). Issue 18: ingestion throughput.
  const insertSource = sqlite.prepare(`
    INSERT INTO knowledge_sources (id, workspace_id, persona_id, name, kind, status, error, bytes, chunk_count, metadata, url, filename, media_type, content, generation, attempts, created_at, updated_at)
    VALUES (@id, @workspace_id, @persona_id, @name, @kind, @status, @error, @bytes, @chunk_count, @metadata, @url, @filename, @media_type, @content, @generation, @attempts, @created_at, @updated_at)`);
  const sourceForJob = sqlite.prepare('SELECT * FROM knowledge_sources WHERE id = ?');
  const sourceSummary = sqlite.prepare(
    'SELECT id, workspace_id, persona_id, name, kind, status, error, bytes, chunk_count, metadata, created_at, updated_at FROM knowledge_sources WHERE workspace_id = ? AND id = ?',
  );
  const generationOf = sqlite.prepare('SELECT generation FROM knowledge_sources WHERE id = ?').pluck();
  const markReady = sqlite.prepare(`
    UPDATE knowledge_sources SET status = 'ready', error = NULL, chunk_count = @count, bytes = @bytes, name = @name,
      content = COALESCE(@content, content), updated_at = @now
    WHERE id = @id AND generation = @generation`);
  const markFailedStmt = sqlite.prepare(
    `UPDATE knowledge_sources SET status = 'failed', error = @error, chunk_count = 0, updated_at = @now WHERE id = @id`,
  );
  const hitRows = sqlite.prepare(`
    SELECT c.rowid AS rowid, c.id AS id, c.source_id AS source_id, c.text AS text, c.position AS position,
      s.name AS source_name, s.metadata AS metadata
    FROM knowledge_chunks c JOIN knowledge_sources s ON s.id = c.source_id
    WHERE c.rowid IN (SELECT value FROM json_each(?)) AND c.workspace_id = ?`);

  /**
   * Swaps the chunks of several sources for new ones and marks them ready, in one transaction (the
   * ingestion writer's batch): one commit, and one FTS5 segment, for them all. Each source is written
   * only if its generation is still current (not changed or deleted since); the result says which were. Writes go in phases (sources and old chunks, chunk rows,
   * then the index: codes, and FTS5 last, see `SearchIndex.add`) so no other statement runs between
   * FTS5 inserts. A search never sees part of a source: it runs between transactions.
   */
  function writeSources(index: SearchIndex, writes: SourceWrite[]): boolean[] {
    return sqlite.transaction(() => {
      // The same source twice in a batch: the later write wins, or both would insert their chunks.
      const last = new Map(writes.map((w, i) => [w.source.id, i]));
      const current = writes.map(({ source, chunks, now }, i) => {
        if (last.get(source.id) !== i || generationOf.get(source.id) !== source.generation) return false;
        deleteChunks.run(source.id);
        markReady.run({ id: source.id, generation: source.generation, count: chunks.length, bytes: source.bytes, name: source.name, content: source.content, now });
        return true;
      });
      const indexed: IndexedChunk[] = [];
      writes.forEach(({ source, chunks, title }, w) => {
        if (!current[w]) return;
        for (const c of chunks) {
          const { lastInsertRowid } = insertChunk.run({
            id: c.id,
            workspaceId: source.workspaceId,
            sourceId: source.id,
            scope: source.scope,
            position: c.position,
            text: c.text,
            headingPath: JSON.stringify(c.headingPath),
            tokens: c.tokens,
            embedding: blobFromVector(c.vector),
          });
          indexed.push({ rowid: Number(lastInsertRowid), workspaceId: source.workspaceId, sourceId: source.id, scope: source.scope, title: title(c), text: c.text, vector: c.vector, code: c.code });
        }
      });
      index.add(indexed);
      return current;
    })();
  }

  return {
    insert: async (row: KnowledgeSourceRow): Promise<void> => void insertSource.run(row),

    find: (workspaceId: string, id: string) =>
      k.selectFrom('knowledge_sources').selectAll().where('workspace_id', '=', workspaceId).where('id', '=', id).executeTakeFirst(),

    /** A source as the API shows it (no stored bytes, url, generation). */
    summary: async (workspaceId: string, id: string): Promise<SourceSummaryRow | undefined> => sourceSummary.get(workspaceId, id) as SourceSummaryRow | undefined,

    /** Any workspace's source: for the job runner, which got the id from a trusted place. */
    findForJob: async (id: string): Promise<KnowledgeSourceRow | undefined> => sourceForJob.get(id) as KnowledgeSourceRow | undefined,

    list(workspaceId: string, page: PageRequest, filters: { personaId?: string | undefined; status?: SourceStatus | undefined }) {
      let q = k
        .selectFrom('knowledge_sources')
        .select(['id', 'workspace_id', 'persona_id', 'name', 'kind', 'status', 'error', 'bytes', 'chunk_count', 'metadata', 'created_at', 'updated_at'])
        .where('workspace_id', '=', workspaceId);
      if (filters.personaId !== undefined) q = q.where('persona_id', '=', filters.personaId);
      if (filters.status !== undefined) q = q.where('status', '=', filters.status);
      return paginate(q, page);
    },

    update: (workspaceId: string, id: string, patch: Partial<KnowledgeSourceRow>) =>
      k.updateTable('knowledge_sources').set(patch).where('workspace_id', '=', workspaceId).where('id', '=', id).execute(),

    /** Drops a source's chunks (and through triggers their index rows) without touching the source. */
    dropChunks: (sourceId: string) => void deleteChunks.run(sourceId),

    async delete(workspaceId: string, id: string): Promise<boolean> {
      const r = await k.deleteFrom('knowledge_sources').where('workspace_id', '=', workspaceId).where('id', '=', id).executeTakeFirst();
      return Number(r.numDeletedRows) > 0;
    },

    /** Sources still `processing`, oldest first: the jobs a restart must resume. */
    unfinished: () =>
      k.selectFrom('knowledge_sources').select(['id', 'workspace_id', 'generation', 'attempts']).where('status', '=', 'processing').orderBy('created_at').execute(),

    /** Id, scope and metadata of the sources a search may see, for metadata filters. */
    sourcesForFilter(workspaceId: string, personaId: string | undefined) {
      let q = k.selectFrom('knowledge_sources').select(['id', 'metadata']).where('workspace_id', '=', workspaceId);
      if (personaId !== undefined) q = q.where((eb) => eb.or([eb('persona_id', 'is', null), eb('persona_id', '=', personaId)]));
      return q.execute();
    },

    async chunks(sourceId: string, page: PageRequest): Promise<Page<ChunkListRow>> {
      let q = k
        .selectFrom('knowledge_chunks')
        .select(['id', 'position', 'text', 'heading_path', 'tokens'])
        .where('source_id', '=', sourceId);
      if (page.cursor !== undefined) q = q.where('position', '>', decodePositionCursor(page.cursor));
      const rows = await q.orderBy('position').limit(page.limit + 1).execute();
      const more = rows.length > page.limit;
      const data = more ? rows.slice(0, page.limit) : rows;
      const last = data[data.length - 1];
      return { data, nextCursor: more && last ? Buffer.from(String(last.position)).toString('base64url') : null };
    },

    /** Chunk rows of search hits with their source's name and metadata, only from this workspace. */
    hits: (workspaceId: string, rowids: number[]) => hitRows.all(JSON.stringify(rowids), workspaceId) as ChunkHitRow[],

    writeSources,

    /**
     * Marks a source failed, unless it changed since `generation`, and drops its chunks: a failed
     * source is not searchable, not even with the text of an earlier version.
     */
    markFailed(id: string, generation: number, error: string, now: string): boolean {
      return sqlite.transaction(() => {
        if (generationOf.get(id) !== generation) return false;
        deleteChunks.run(id);
        markFailedStmt.run({ id, error, now });
        return true;
      })();
    },
  };
}

export type KnowledgeStore = ReturnType<typeof createKnowledgeStore>;
