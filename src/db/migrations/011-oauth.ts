import { type Kysely, sql } from 'kysely';
import type { MigrationDialect } from '../dialect.js';

/**
 * OAuth 2.1 for `/mcp` (issue 15): dynamically registered clients, grants (a client acting for an
 * API key's workspace with at most its scope), authorization codes and tokens. Codes and tokens are
 * stored as SHA-256 hashes only. Client ID Metadata Documents are cached in memory, not here.
 */
export async function up(db: Kysely<unknown>, d: MigrationDialect): Promise<void> {
  await sql`
    CREATE TABLE oauth_clients (
      client_id ${d.text} PRIMARY KEY,
      metadata ${d.text} NOT NULL,
      created_at ${d.text} NOT NULL
    ) ${d.strict}`.execute(db);

  await sql`
    CREATE TABLE oauth_grants (
      id ${d.text} PRIMARY KEY,
      workspace_id ${d.text} NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
      key_id ${d.text} NOT NULL REFERENCES api_keys(id) ON DELETE CASCADE,
      client_id ${d.text} NOT NULL,
      client_name ${d.text} NOT NULL,
      scope ${d.text} NOT NULL,
      resource ${d.text} NOT NULL,
      created_at ${d.text} NOT NULL,
      last_used_at ${d.text},
      revoked_at ${d.text}
    ) ${d.strict}`.execute(db);
  await sql`CREATE INDEX oauth_grants_workspace ON oauth_grants (workspace_id, created_at, id)`.execute(db);
  await sql`CREATE INDEX oauth_grants_key ON oauth_grants (key_id)`.execute(db);

  await sql`
    CREATE TABLE oauth_codes (
      hash ${d.text} PRIMARY KEY,
      grant_id ${d.text} NOT NULL REFERENCES oauth_grants(id) ON DELETE CASCADE,
      client_id ${d.text} NOT NULL,
      redirect_uri ${d.text} NOT NULL,
      code_challenge ${d.text} NOT NULL,
      resource ${d.text} NOT NULL,
      scope ${d.text} NOT NULL,
      expires_at ${d.text} NOT NULL,
      used_at ${d.text}
    ) ${d.strictWithoutRowid}`.execute(db);
  await sql`CREATE INDEX oauth_codes_grant ON oauth_codes (grant_id)`.execute(db);

  await sql`
    CREATE TABLE oauth_tokens (
      hash ${d.text} PRIMARY KEY,
      kind ${d.text} NOT NULL CHECK (kind IN ('access', 'refresh')),
      grant_id ${d.text} NOT NULL REFERENCES oauth_grants(id) ON DELETE CASCADE,
      family_id ${d.text} NOT NULL,
      resource ${d.text} NOT NULL,
      scope ${d.text} NOT NULL,
      created_at ${d.text} NOT NULL,
      expires_at ${d.text} NOT NULL,
      revoked_at ${d.text},
      used_at ${d.text}
    ) ${d.strictWithoutRowid}`.execute(db);
  await sql`CREATE INDEX oauth_tokens_grant ON oauth_tokens (grant_id)`.execute(db);
  await sql`CREATE INDEX oauth_tokens_family ON oauth_tokens (family_id)`.execute(db);
}
