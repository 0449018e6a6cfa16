import { type Kysely, sql } from 'kysely';
import type { MigrationDialect } from '../dialect.js';

/**
 * Persona versions (API.md §3): every change to a persona's fields is kept as an immutable,
 * numbered row with who made it, so a bad edit can be undone and an answer traced to the text that
 * produced it. Existing personas become version 1 of themselves (their creation, by nobody known).
 * Interactions record the version that answered, so analytics can break figures down by version.
 */
export async function up(db: Kysely<unknown>, d: MigrationDialect): Promise<void> {
  await sql`ALTER TABLE personas ADD COLUMN version ${d.int} NOT NULL DEFAULT 1`.execute(db);
  await sql`
    CREATE TABLE persona_versions (
      workspace_id ${d.text} NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
      persona_id ${d.text} NOT NULL REFERENCES personas(id) ON DELETE CASCADE,
      version ${d.int} NOT NULL CHECK (version >= 1),
      name ${d.text} NOT NULL,
      instructions ${d.text} NOT NULL,
      traits ${d.text} NOT NULL,
      model ${d.text},
      temperature ${d.real},
      max_tokens ${d.int},
      tools ${d.text} NOT NULL,
      created_at ${d.text} NOT NULL,
      created_by ${d.text},
      PRIMARY KEY (persona_id, version)
    ) ${d.strictWithoutRowid}`.execute(db);
  await sql`
    INSERT INTO persona_versions (workspace_id, persona_id, version, name, instructions, traits, model, temperature, max_tokens, tools, created_at, created_by)
    SELECT workspace_id, id, 1, name, instructions, traits, model, temperature, max_tokens, tools, updated_at, NULL FROM personas`.execute(db);
  await sql`ALTER TABLE interactions ADD COLUMN persona_version ${d.int}`.execute(db);
}
