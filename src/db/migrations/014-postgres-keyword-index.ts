import { type Kysely, sql } from 'kysely';
import type { MigrationDialect } from '../dialect.js';

/**
 * PostgreSQL's keyword index (SQLite's is FTS5, migration 002): BM25 needs, per chunk, how often
 * each term occurs in its title and body and how many tokens it has, and over the whole index the
 * rows and tokens, as FTS5 keeps them. Terms come from FTS5's own tokenizer ported to JavaScript
 * (src/core/knowledge/fts-tokenizer.ts), so both backends index and rank the same terms.
 *
 *  - `knowledge_postings`: one row per (term, chunk); the primary key answers "which chunks hold
 *    this term" and, by an index-only scan, how many (BM25's hits).
 *  - `knowledge_documents`: a chunk's token count, and its indexed title (a phrase query re-reads
 *    it: the source may have been renamed since).
 *  - `knowledge_keyword_totals`: one row, the index's rows and tokens.
 * Deleting chunks removes all of it in one statement-level trigger.
 */
export async function up(db: Kysely<unknown>, d: MigrationDialect): Promise<void> {
  if (d.kind !== 'postgres') return;
  await sql`
    CREATE TABLE knowledge_postings (
      term ${d.text} NOT NULL,
      rowid BIGINT NOT NULL,
      title_freq INTEGER NOT NULL,
      body_freq INTEGER NOT NULL,
      -- The frequencies ride in the index: a query's postings are read from it alone.
      PRIMARY KEY (term, rowid) INCLUDE (title_freq, body_freq)
    )`.execute(db);
  await sql`CREATE INDEX knowledge_postings_rowid ON knowledge_postings (rowid)`.execute(db);
  await sql`
    CREATE TABLE knowledge_documents (
      rowid BIGINT PRIMARY KEY,
      tokens INTEGER NOT NULL,
      title ${d.text} NOT NULL
    )`.execute(db);
  await sql`
    CREATE TABLE knowledge_keyword_totals (
      id INTEGER PRIMARY KEY CHECK (id = 1),
      rows BIGINT NOT NULL,
      tokens BIGINT NOT NULL
    )`.execute(db);
  await sql`INSERT INTO knowledge_keyword_totals (id, rows, tokens) VALUES (1, 0, 0)`.execute(db);
  await sql`
    CREATE FUNCTION knowledge_chunks_unindex() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      DELETE FROM knowledge_postings p USING gone g WHERE p.rowid = g.rowid;
      WITH removed AS (DELETE FROM knowledge_documents k USING gone g WHERE k.rowid = g.rowid RETURNING k.tokens)
      UPDATE knowledge_keyword_totals
        SET rows = rows - (SELECT count(*) FROM removed), tokens = tokens - (SELECT coalesce(sum(tokens), 0) FROM removed)
        WHERE id = 1;
      RETURN NULL;
    END $$`.execute(db);
  await sql`
    CREATE TRIGGER knowledge_chunks_unindex AFTER DELETE ON knowledge_chunks
      REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION knowledge_chunks_unindex()`.execute(db);
}
