import { type Kysely, sql } from 'kysely';
import type { MigrationDialect } from '../dialect.js';

/**
 * The events of MCP sessions' event streams (issue 27; src/mcp/event-store.ts): every message an
 * older-era session sends on an SSE stream is stored first, its `seq` the SSE event id, so a client
 * that lost the stream resumes it with `Last-Event-ID` on whichever instance it reaches. Kept for the
 * resumption window, and deleted with the session.
 */
export async function up(db: Kysely<unknown>, d: MigrationDialect): Promise<void> {
  await sql`
    CREATE TABLE mcp_events (
      seq ${d.serialKey},
      session_id ${d.text} NOT NULL,
      stream_id ${d.text} NOT NULL,
      message ${d.text} NOT NULL,
      created_ms ${d.int} NOT NULL
    ) ${d.strict}`.execute(db);
  await sql`CREATE INDEX mcp_events_stream ON mcp_events (session_id, stream_id, seq)`.execute(db);
  await sql`CREATE INDEX mcp_events_age ON mcp_events (created_ms)`.execute(db);
}
