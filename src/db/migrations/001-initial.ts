import { type Kysely, sql } from 'kysely';
import type { MigrationDialect } from '../dialect.js';

export async function up(db: Kysely<unknown>, d: MigrationDialect): Promise<void> {
  await sql`
    CREATE TABLE workspaces (
      id ${d.text} PRIMARY KEY,
      name ${d.text} NOT NULL UNIQUE,
      created_at ${d.text} NOT NULL
    ) ${d.strict}`.execute(db);

  await sql`
    CREATE TABLE api_keys (
      id ${d.text} PRIMARY KEY,
      workspace_id ${d.text} NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
      name ${d.text} NOT NULL,
      prefix ${d.text} NOT NULL,
      hash ${d.text} NOT NULL UNIQUE,
      scopes ${d.text} NOT NULL,
      created_at ${d.text} NOT NULL,
      expires_at ${d.text},
      revoked_at ${d.text},
      rotated_at ${d.text},
      last_used_at ${d.text},
      previous_hash ${d.text},
      previous_valid_until ${d.text}
    ) ${d.strict}`.execute(db);
  await sql`CREATE INDEX api_keys_workspace ON api_keys (workspace_id, created_at, id)`.execute(db);
  await sql`CREATE INDEX api_keys_previous_hash ON api_keys (previous_hash) WHERE previous_hash IS NOT NULL`.execute(
    db,
  );

  await sql`
    CREATE TABLE personas (
      id ${d.text} PRIMARY KEY,
      workspace_id ${d.text} NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
      name ${d.text} NOT NULL,
      instructions ${d.text} NOT NULL,
      traits ${d.text} NOT NULL,
      model ${d.text},
      temperature ${d.real},
      max_tokens ${d.int},
      tools ${d.text} NOT NULL,
      created_at ${d.text} NOT NULL,
      updated_at ${d.text} NOT NULL
    ) ${d.strict}`.execute(db);
  await sql`CREATE INDEX personas_workspace ON personas (workspace_id, created_at, id)`.execute(db);

  await sql`
    CREATE TABLE idempotency_keys (
      seq ${d.serialKey},
      workspace_id ${d.text} NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
      method ${d.text} NOT NULL,
      path ${d.text} NOT NULL,
      key ${d.text} NOT NULL,
      request_hash ${d.text} NOT NULL,
      state ${d.text} NOT NULL CHECK (state IN ('running', 'done')),
      status_code ${d.int},
      response ${d.text},
      created_at ${d.text} NOT NULL,
      UNIQUE (workspace_id, method, path, key)
    ) ${d.strict}`.execute(db);
  await sql`CREATE INDEX idempotency_keys_created ON idempotency_keys (created_at)`.execute(db);
}
