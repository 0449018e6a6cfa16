import { type Kysely, sql } from 'kysely';

/**
 * Narrow companions of `knowledge_chunks` for search (its rows carry the text and a float32 vector,
 * ~3 KB, which made every keyword match's workspace check a wide row read):
 *  - `knowledge_chunk_keys`: who may see each chunk (workspace, scope, source), kept by triggers;
 *  - `knowledge_codes`: each chunk's binary code for the vector first stage, written by the index;
 *  - `knowledge_vector_epochs`: bumped for a workspace whenever one of its chunks is deleted, so an
 *    in-memory copy of its codes knows to reload.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE knowledge_chunk_keys (
      rowid INTEGER PRIMARY KEY,
      workspace_id TEXT NOT NULL,
      scope TEXT NOT NULL,
      source_id TEXT NOT NULL
    ) STRICT`.execute(db);
  await sql`CREATE INDEX knowledge_chunk_keys_workspace ON knowledge_chunk_keys (workspace_id)`.execute(db);
  await sql`
    INSERT INTO knowledge_chunk_keys (rowid, workspace_id, scope, source_id)
    SELECT rowid, workspace_id, scope, source_id FROM knowledge_chunks`.execute(db);
  await sql`CREATE TABLE knowledge_codes (rowid INTEGER PRIMARY KEY, code BLOB NOT NULL) STRICT`.execute(db);
  await sql`CREATE TABLE knowledge_vector_epochs (workspace_id TEXT PRIMARY KEY, epoch INTEGER NOT NULL) STRICT`.execute(db);

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
}
