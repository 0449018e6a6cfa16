import { type Kysely, sql } from 'kysely';
import type { MigrationDialect } from '../dialect.js';

/**
 * A client's answers to requests an older-era MCP session's server sent it (a confirmation's
 * elicitation/create; src/mcp/http.ts), received by an instance that did not send the request: kept
 * for a minute so the instance that did takes them up, whichever instance the balancer chose.
 */
export async function up(db: Kysely<unknown>, d: MigrationDialect): Promise<void> {
  await sql`
    CREATE TABLE mcp_replies (
      seq ${d.serialKey},
      session_id ${d.text} NOT NULL,
      message ${d.text} NOT NULL,
      created_ms ${d.int} NOT NULL
    ) ${d.strict}`.execute(db);
  await sql`CREATE INDEX mcp_replies_age ON mcp_replies (created_ms)`.execute(db);
}
