import { type Kysely, sql } from 'kysely';
import type { MigrationDialect } from '../dialect.js';

/**
 * Narrow companions of `knowledge_chunks` for search (its rows carry the text and a float32 vector,
 * ~3 KB, which made every keyword match's workspace check a wide row read):
 *  - `knowledge_chunk_keys`: who may see each chunk (workspace, scope, source), kept by triggers;
 *  - `knowledge_codes`: each chunk's binary code for the vector first stage, written by the index;
 *  - `knowledge_vector_epochs`: bumped for a workspace whenever one of its chunks is deleted, so an
 *    in-memory copy of its codes knows to reload.
 */
export async function up(db: Kysely<unknown>, d: MigrationDialect): Promise<void> {
  await sql`
    CREATE TABLE knowledge_chunk_keys (
      rowid ${d.int} PRIMARY KEY,
      workspace_id ${d.text} NOT NULL,
      scope ${d.text} NOT NULL,
      source_id ${d.text} NOT NULL
    ) ${d.strict}`.execute(db);
  await sql`CREATE INDEX knowledge_chunk_keys_workspace ON knowledge_chunk_keys (workspace_id)`.execute(db);
  await sql`
    INSERT INTO knowledge_chunk_keys (rowid, workspace_id, scope, source_id)
    SELECT rowid, workspace_id, scope, source_id FROM knowledge_chunks`.execute(db);
  await sql`CREATE TABLE knowledge_codes (rowid ${d.int} PRIMARY KEY, code ${d.blob} NOT NULL) ${d.strict}`.execute(db);
  await sql`CREATE TABLE knowledge_vector_epochs (workspace_id ${d.text} PRIMARY KEY, epoch ${d.int} NOT NULL) ${d.strict}`.execute(db);

  if (d.kind === 'sqlite') {
    await sql`
      CREATE TRIGGER knowledge_chunks_keys AFTER INSERT ON knowledge_chunks BEGIN
        INSERT INTO knowledge_chunk_keys (rowid, workspace_id, scope, source_id)
        VALUES (new.rowid, new.workspace_id, new.scope, new.source_id);
      END`.execute(db);
    await sql`
      CREATE TRIGGER knowledge_chunks_unkey AFTER DELETE ON knowledge_chunks BEGIN
        DELETE FROM knowledge_chunk_keys WHERE rowid = old.rowid;
        DELETE FROM knowledge_codes WHERE rowid = old.rowid;
        INSERT INTO knowledge_vector_epochs (workspace_id, epoch) VALUES (old.workspace_id, 1)
          ON CONFLICT (workspace_id) DO UPDATE SET epoch = epoch + 1;
      END`.execute(db);
    return;
  }
  // The same two triggers in PL/pgSQL. The epoch is qualified: in PostgreSQL's ON CONFLICT an
  // unqualified column is ambiguous between the row and EXCLUDED.
  await sql`
    CREATE FUNCTION knowledge_chunks_key() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      INSERT INTO knowledge_chunk_keys (rowid, workspace_id, scope, source_id)
      VALUES (NEW.rowid, NEW.workspace_id, NEW.scope, NEW.source_id);
      RETURN NULL;
    END $$`.execute(db);
  await sql`
    CREATE TRIGGER knowledge_chunks_keys AFTER INSERT ON knowledge_chunks
      FOR EACH ROW EXECUTE FUNCTION knowledge_chunks_key()`.execute(db);
  await sql`
    CREATE FUNCTION knowledge_chunks_unkey() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      DELETE FROM knowledge_chunk_keys WHERE rowid = OLD.rowid;
      DELETE FROM knowledge_codes WHERE rowid = OLD.rowid;
      INSERT INTO knowledge_vector_epochs (workspace_id, epoch) VALUES (OLD.workspace_id, 1)
        ON CONFLICT (workspace_id) DO UPDATE SET epoch = knowledge_vector_epochs.epoch + 1;
      RETURN NULL;
    END $$`.execute(db);
  await sql`
    CREATE TRIGGER knowledge_chunks_unkey AFTER DELETE ON knowledge_chunks
      FOR EACH ROW EXECUTE FUNCTION knowledge_chunks_unkey()`.execute(db);
}
