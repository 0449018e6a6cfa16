import { type Kysely, sql } from 'kysely';
import type { MigrationDialect } from '../dialect.js';

/**
 * What a client continues on whichever instance it reaches next (API.md §13):
 * - `mcp_sessions`: a Streamable HTTP session opened on one instance is taken up by any other (its
 *   owner, the protocol version and the client's initialize parameters); the per-key session cap
 *   counts these rows, so it holds across instances.
 * - `oauth_pending`: an authorization request waiting for the person's answer, so the consent page
 *   served by one instance can be answered through another. Its CSRF token is kept as a hash.
 * Both were held in each process's memory before.
 */
export async function up(db: Kysely<unknown>, d: MigrationDialect): Promise<void> {
  await sql`
    CREATE TABLE mcp_sessions (
      id ${d.text} PRIMARY KEY,
      owner ${d.text} NOT NULL,
      protocol_version ${d.text} NOT NULL,
      client ${d.text} NOT NULL,
      created_at ${d.text} NOT NULL,
      last_seen_ms ${d.int} NOT NULL
    ) ${d.strictWithoutRowid}`.execute(db);
  await sql`CREATE INDEX mcp_sessions_owner ON mcp_sessions (owner, last_seen_ms)`.execute(db);
  await sql`CREATE INDEX mcp_sessions_seen ON mcp_sessions (last_seen_ms)`.execute(db);

  await sql`
    CREATE TABLE oauth_pending (
      id ${d.text} PRIMARY KEY,
      csrf_hash ${d.text} NOT NULL,
      request ${d.text} NOT NULL,
      expires_ms ${d.int} NOT NULL,
      attempts ${d.int} NOT NULL
    ) ${d.strictWithoutRowid}`.execute(db);
  await sql`CREATE INDEX oauth_pending_expiry ON oauth_pending (expires_ms)`.execute(db);
}
