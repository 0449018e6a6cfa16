import { type Kysely, sql } from 'kysely';
import type { MigrationDialect } from '../dialect.js';

/**
 * Knowledge sources, their chunks and the keyword index. The vector table depends on the
 * embedder's dimension, so the search index creates it at start-up (and `reindex` rebuilds it).
 */
export async function up(db: Kysely<unknown>, d: MigrationDialect): Promise<void> {
  await sql`
    CREATE TABLE knowledge_sources (
      id ${d.text} PRIMARY KEY,
      workspace_id ${d.text} NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
      persona_id ${d.text} REFERENCES personas(id) ON DELETE CASCADE,
      name ${d.text} NOT NULL,
      kind ${d.text} NOT NULL CHECK (kind IN ('text', 'markdown', 'html', 'url', 'pdf', 'docx', 'csv', 'json')),
      status ${d.text} NOT NULL CHECK (status IN ('processing', 'ready', 'failed')),
      error ${d.text},
      bytes ${d.int} NOT NULL,
      chunk_count ${d.int} NOT NULL DEFAULT 0,
      metadata ${d.text} NOT NULL,
      url ${d.text},
      filename ${d.text},
      media_type ${d.text},
      content ${d.blob},
      generation ${d.int} NOT NULL DEFAULT 0,
      attempts ${d.int} NOT NULL DEFAULT 0,
      created_at ${d.text} NOT NULL,
      updated_at ${d.text} NOT NULL
    ) ${d.strict}`.execute(db);
  await sql`CREATE INDEX knowledge_sources_workspace ON knowledge_sources (workspace_id, created_at, id)`.execute(db);
  await sql`CREATE INDEX knowledge_sources_processing ON knowledge_sources (status) WHERE status = 'processing'`.execute(db);
  await sql`CREATE INDEX knowledge_sources_persona ON knowledge_sources (persona_id) WHERE persona_id IS NOT NULL`.execute(db);

  // rowid is the key shared with the keyword and vector indexes; scope is the persona id or 'shared'.
  await sql`
    CREATE TABLE knowledge_chunks (
      rowid ${d.serialKey},
      id ${d.text} NOT NULL UNIQUE,
      workspace_id ${d.text} NOT NULL,
      source_id ${d.text} NOT NULL REFERENCES knowledge_sources(id) ON DELETE CASCADE,
      scope ${d.text} NOT NULL,
      position ${d.int} NOT NULL,
      text ${d.text} NOT NULL,
      heading_path ${d.text} NOT NULL,
      tokens ${d.int} NOT NULL,
      embedding ${d.blob} NOT NULL
    ) ${d.strict}`.execute(db);
  await sql`CREATE INDEX knowledge_chunks_source ON knowledge_chunks (source_id, position)`.execute(db);

  // SQLite's keyword index is FTS5; PostgreSQL keeps BM25 postings in plain tables (migration 014).
  if (d.kind === 'sqlite') {
    // Contentless: the text lives in knowledge_chunks; the index keeps only what BM25 needs.
    await sql`
      CREATE VIRTUAL TABLE knowledge_fts USING fts5(
        title, body, content='', contentless_delete=1, tokenize='porter unicode61 remove_diacritics 2'
      )`.execute(db);
    // However a chunk goes (its source deleted or re-processed, its persona deleted), its index rows go too.
    await sql`
      CREATE TRIGGER knowledge_chunks_unindex AFTER DELETE ON knowledge_chunks BEGIN
        DELETE FROM knowledge_fts WHERE rowid = old.rowid;
      END`.execute(db);
  }

  await sql`CREATE TABLE settings (key ${d.text} PRIMARY KEY, value ${d.text} NOT NULL) ${d.strict}`.execute(db);
}
