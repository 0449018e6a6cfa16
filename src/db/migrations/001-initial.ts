import { type Kysely, sql } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE workspaces (
      id TEXT PRIMARY KEY,
      name TEXT NOT NULL UNIQUE,
      created_at TEXT NOT NULL
    ) STRICT`.execute(db);

  await sql`
    CREATE TABLE api_keys (
      id TEXT PRIMARY KEY,
      workspace_id TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
      name TEXT NOT NULL,
      prefix TEXT NOT NULL,
      hash TEXT NOT NULL UNIQUE,
      scopes TEXT NOT NULL,
      created_at TEXT NOT NULL,
      expires_at TEXT,
      revoked_at TEXT,
      rotated_at TEXT,
      last_used_at TEXT,
      previous_hash TEXT,
      previous_valid_until TEXT
    ) STRICT`.execute(db);
  await sql`CREATE INDEX api_keys_workspace ON api_keys (workspace_id, created_at, id)`.execute(db);
  await sql`CREATE INDEX api_keys_previous_hash ON api_keys (previous_hash) WHERE previous_hash IS NOT NULL`.execute(
    db,
  );

  await sql`
    CREATE TABLE personas (
      id TEXT PRIMARY KEY,
      workspace_id TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
      name TEXT NOT NULL,
      instructions TEXT NOT NULL,
      traits TEXT NOT NULL,
      model TEXT,
      temperature REAL,
      max_tokens INTEGER,
      tools TEXT NOT NULL,
      created_at TEXT NOT NULL,
      updated_at TEXT NOT NULL
    ) STRICT`.execute(db);
  await sql`CREATE INDEX personas_workspace ON personas (workspace_id, created_at, id)`.execute(db);

  await sql`
    CREATE TABLE idempotency_keys (
      seq INTEGER PRIMARY KEY,
      workspace_id TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
      method TEXT NOT NULL,
      path TEXT NOT NULL,
      key TEXT NOT NULL,
      request_hash TEXT NOT NULL,
      state TEXT NOT NULL CHECK (state IN ('running', 'done')),
      status_code INTEGER,
      response TEXT,
      created_at TEXT NOT NULL,
      UNIQUE (workspace_id, method, path, key)
    ) STRICT`.execute(db);
  await sql`CREATE INDEX idempotency_keys_created ON idempotency_keys (created_at)`.execute(db);
}
