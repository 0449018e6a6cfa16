import { type Kysely, sql } from 'kysely';

/**
 * OAuth 2.1 for `/mcp` (issue 15): dynamically registered clients, grants (a client acting for an
 * API key's workspace with at most its scope), authorization codes and tokens. Codes and tokens are
 * stored as SHA-256 hashes only. Client ID Metadata Documents are cached in memory, not here.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE oauth_clients (
      client_id TEXT PRIMARY KEY,
      metadata TEXT NOT NULL,
      created_at TEXT NOT NULL
    ) STRICT`.execute(db);

  await sql`
    CREATE TABLE oauth_grants (
      id TEXT PRIMARY KEY,
      workspace_id TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
      key_id TEXT NOT NULL REFERENCES api_keys(id) ON DELETE CASCADE,
      client_id TEXT NOT NULL,
      client_name TEXT NOT NULL,
      scope TEXT NOT NULL,
      resource TEXT NOT NULL,
      created_at TEXT NOT NULL,
      last_used_at TEXT,
      revoked_at TEXT
    ) STRICT`.execute(db);
  await sql`CREATE INDEX oauth_grants_workspace ON oauth_grants (workspace_id, created_at, id)`.execute(db);
  await sql`CREATE INDEX oauth_grants_key ON oauth_grants (key_id)`.execute(db);

  await sql`
    CREATE TABLE oauth_codes (
      hash TEXT PRIMARY KEY,
      grant_id TEXT NOT NULL REFERENCES oauth_grants(id) ON DELETE CASCADE,
      client_id TEXT NOT NULL,
      redirect_uri TEXT NOT NULL,
      code_challenge TEXT NOT NULL,
      resource TEXT NOT NULL,
      scope TEXT NOT NULL,
      expires_at TEXT NOT NULL,
      used_at TEXT
    ) STRICT, WITHOUT ROWID`.execute(db);
  await sql`CREATE INDEX oauth_codes_grant ON oauth_codes (grant_id)`.execute(db);

  await sql`
    CREATE TABLE oauth_tokens (
      hash TEXT PRIMARY KEY,
      kind TEXT NOT NULL CHECK (kind IN ('access', 'refresh')),
      grant_id TEXT NOT NULL REFERENCES oauth_grants(id) ON DELETE CASCADE,
      family_id TEXT NOT NULL,
      resource TEXT NOT NULL,
      scope TEXT NOT NULL,
      created_at TEXT NOT NULL,
      expires_at TEXT NOT NULL,
      revoked_at TEXT,
      used_at TEXT
    ) STRICT, WITHOUT ROWID`.execute(db);
  await sql`CREATE INDEX oauth_tokens_grant ON oauth_tokens (grant_id)`.execute(db);
  await sql`CREATE INDEX oauth_tokens_family ON oauth_tokens (family_id)`.execute(db);
}
