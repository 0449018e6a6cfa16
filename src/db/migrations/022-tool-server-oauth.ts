import { type Kysely, sql } from 'kysely';
import type { MigrationDialect } from '../dialect.js';

/**
 * Tool servers that sign in with OAuth (issue 27, docs/tools.md#tool-servers-that-sign-in-with-oauth):
 * - `mcp_server_oauth`: one row per http tool server that asked for OAuth. `client` (how Switchboard
 *   identifies itself to the authorization server) is sealed under the server id, `tokens` under the
 *   server id and the issuer, so a token is never presented to another authorization server.
 *   `version` grows with every token change; `refreshing_until_ms` is the claim of the one instance
 *   refreshing them (a conditional UPDATE, on both backends).
 * - `mcp_server_oauth_pending`: an authorization request waiting for the admin's consent, found by
 *   the hash of its `state`, so the callback may reach any instance. Its PKCE verifier is sealed.
 */
export async function up(db: Kysely<unknown>, d: MigrationDialect): Promise<void> {
  await sql`
    CREATE TABLE mcp_server_oauth (
      server_id ${d.text} PRIMARY KEY REFERENCES mcp_servers(id) ON DELETE CASCADE,
      workspace_id ${d.text} NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
      status ${d.text} NOT NULL CHECK (status IN ('needs_consent', 'connected', 'error')),
      error ${d.text},
      resource_metadata_url ${d.text},
      challenge_scope ${d.text},
      issuer ${d.text},
      client_method ${d.text} CHECK (client_method IN ('metadata_document', 'dynamic', 'preregistered')),
      client ${d.text},
      tokens ${d.text},
      scope ${d.text},
      expires_ms ${d.int},
      refresh_at_ms ${d.int},
      version ${d.int} NOT NULL,
      refreshing_until_ms ${d.int},
      updated_at ${d.text} NOT NULL
    ) ${d.strictWithoutRowid}`.execute(db);
  await sql`
    CREATE TABLE mcp_server_oauth_pending (
      state_hash ${d.text} PRIMARY KEY,
      workspace_id ${d.text} NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
      server_id ${d.text} NOT NULL REFERENCES mcp_servers(id) ON DELETE CASCADE,
      request ${d.text} NOT NULL,
      expires_ms ${d.int} NOT NULL
    ) ${d.strictWithoutRowid}`.execute(db);
  await sql`CREATE INDEX mcp_server_oauth_pending_expiry ON mcp_server_oauth_pending (expires_ms)`.execute(db);
}
