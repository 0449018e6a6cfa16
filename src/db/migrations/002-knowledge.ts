import { type Kysely, sql } from 'kysely';

/**
 * Knowledge sources, their chunks and the keyword index. The vector table depends on the
 * embedder's dimension, so the search index creates it at start-up (and `reindex` rebuilds it).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE knowledge_sources (
      id TEXT PRIMARY KEY,
      workspace_id TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
      persona_id TEXT REFERENCES personas(id) ON DELETE CASCADE,
      name TEXT NOT NULL,
      kind TEXT NOT NULL CHECK (kind IN ('text', 'markdown', 'html', 'url', 'pdf', 'docx', 'csv', 'json')),
      status TEXT NOT NULL CHECK (status IN ('processing', 'ready', 'failed')),
      error TEXT,
      bytes INTEGER NOT NULL,
      chunk_count INTEGER NOT NULL DEFAULT 0,
      metadata TEXT NOT NULL,
      url TEXT,
      filename TEXT,
      media_type TEXT,
      content BLOB,
      generation INTEGER NOT NULL DEFAULT 0,
      attempts INTEGER NOT NULL DEFAULT 0,
      created_at TEXT NOT NULL,
      updated_at TEXT NOT NULL
    ) STRICT`.execute(db);
  await sql`CREATE INDEX knowledge_sources_workspace ON knowledge_sources (workspace_id, created_at, id)`.execute(db);
  await sql`CREATE INDEX knowledge_sources_processing ON knowledge_sources (status) WHERE status = 'processing'`.execute(db);
  await sql`CREATE INDEX knowledge_sources_persona ON knowledge_sources (persona_id) WHERE persona_id IS NOT NULL`.execute(db);

  // rowid is the key shared with the keyword and vector indexes; scope is the persona id or 'shared'.
  await sql`
    CREATE TABLE knowledge_chunks (
      rowid INTEGER PRIMARY KEY,
      id TEXT NOT NULL UNIQUE,
      workspace_id TEXT NOT NULL,
      source_id TEXT NOT NULL REFERENCES knowledge_sources(id) ON DELETE CASCADE,
      scope TEXT NOT NULL,
      position INTEGER NOT NULL,
      text TEXT NOT NULL,
      heading_path TEXT NOT NULL,
      tokens INTEGER NOT NULL,
      embedding BLOB NOT NULL
    ) STRICT`.execute(db);
  await sql`CREATE INDEX knowledge_chunks_source ON knowledge_chunks (source_id, position)`.execute(db);

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

  await sql`CREATE TABLE settings (key TEXT PRIMARY KEY, value TEXT NOT NULL) STRICT`.execute(db);
}
