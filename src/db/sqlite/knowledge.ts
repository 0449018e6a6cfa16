/**
 * Knowledge on SQLite (knowledge-dialect.ts): the FTS5 and sqlite-vec index of search-index.ts, and
 * the writes that must share its transaction, as better-sqlite3 prepared statements. Every upload
 * inserts its source and every processed batch swaps chunks: prepared once (Kysely built each per
 * call; issue 18, ingestion throughput).
 */
import type { KnowledgeDialect, LapsedSource, ReembeddedChunk } from '../../core/knowledge/knowledge-dialect.js';
import type { ChunkHitRow, SourceWrite } from '../../core/knowledge/knowledge.store.js';
import {
  blobFromVector,
  bumpVectorEpochs,
  type IndexedChunk,
  openSqliteSearchIndex,
  resetVectorTable,
  type SearchIndex,
  type SqliteSearchIndex,
  type SqliteSearchIndexOptions,
} from '../../core/knowledge/search-index.js';
import type { KnowledgeSourceRow } from '../schema.js';
import type { Db } from '../database.js';

export function createSqliteKnowledge({ sqlite }: Db, options: SqliteSearchIndexOptions = {}): KnowledgeDialect {
  const opened = new WeakSet<SqliteSearchIndex>();
  const own = (index: SearchIndex): SqliteSearchIndex => {
    if (!opened.has(index as SqliteSearchIndex)) throw new Error('a search index of another backend');
    return index as SqliteSearchIndex;
  };
  const open = (dimension: number) => {
    const index = openSqliteSearchIndex(sqlite, dimension, options);
    opened.add(index);
    return index;
  };

  const insertChunk = sqlite.prepare(`
    INSERT INTO knowledge_chunks (id, workspace_id, source_id, scope, position, text, heading_path, tokens, embedding)
    VALUES (@id, @workspaceId, @sourceId, @scope, @position, @text, @headingPath, @tokens, @embedding)`);
  const deleteChunks = sqlite.prepare('DELETE FROM knowledge_chunks WHERE source_id = ?');
  const insertSource = sqlite.prepare(`
    INSERT INTO knowledge_sources (id, workspace_id, persona_id, name, kind, status, error, bytes, chunk_count, metadata, url, filename, media_type, content, generation, attempts, lease_owner, lease_until, created_at, updated_at)
    VALUES (@id, @workspace_id, @persona_id, @name, @kind, @status, @error, @bytes, @chunk_count, @metadata, @url, @filename, @media_type, @content, @generation, @attempts, @lease_owner, @lease_until, @created_at, @updated_at)`);
  const claimLapsed = sqlite.prepare(`
    UPDATE knowledge_sources SET lease_owner = @owner, lease_until = @until, attempts = attempts + 1
    WHERE id IN (SELECT id FROM knowledge_sources WHERE status = 'processing' AND (lease_until IS NULL OR lease_until < @now OR (lease_owner = @mine AND lease_until < @until)) ORDER BY created_at LIMIT @limit)
    RETURNING id, workspace_id, generation, attempts`);
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
  const setEmbedding = sqlite.prepare('UPDATE knowledge_chunks SET embedding = ? WHERE rowid = ?');

  /**
   * Writes go in phases (sources and old chunks, chunk rows, then the index: codes, and FTS5 last,
   * see `SqliteSearchIndex.add`) so no other statement runs between FTS5 inserts; one commit, and
   * one FTS5 segment, for the whole batch.
   */
  const writeSources = sqlite.transaction((index: SqliteSearchIndex, writes: SourceWrite[]): boolean[] => {
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
  });

  const markFailed = sqlite.transaction((id: string, generation: number, error: string, now: string): boolean => {
    if (generationOf.get(id) !== generation) return false;
    deleteChunks.run(id);
    markFailedStmt.run({ id, error, now });
    return true;
  });

  const reembed = sqlite.transaction((index: SqliteSearchIndex, chunks: ReembeddedChunk[]) => {
    for (const c of chunks) setEmbedding.run(blobFromVector(c.vector), c.rowid);
    index.add(chunks);
  });

  return {
    openIndex: async (dimension) => open(dimension),
    async resetIndex(dimension) {
      sqlite.transaction(() => {
        sqlite.exec(`INSERT INTO knowledge_fts (knowledge_fts) VALUES ('delete-all')`);
        resetVectorTable(sqlite, dimension);
      })();
      return open(dimension);
    },
    insertSource: async (row: KnowledgeSourceRow) => void insertSource.run(row),
    claimLapsed: async (owner, now, until, limit, mine = false) => claimLapsed.all({ owner, now, until, limit, mine: mine ? owner : null }) as LapsedSource[],
    writeSources: async (index, writes) => writeSources(own(index), writes),
    markFailed: async (id, generation, error, now) => markFailed(id, generation, error, now),
    dropChunks: async (sourceId) => void deleteChunks.run(sourceId),
    hits: async (workspaceId, rowids) => hitRows.all(JSON.stringify(rowids), workspaceId) as ChunkHitRow[],
    reembed: async (index, chunks) => reembed(own(index), chunks),
    bumpVectorEpochs: async () => bumpVectorEpochs(sqlite),
  };
}
