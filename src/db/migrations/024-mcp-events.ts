import { type Kysely, sql } from 'kysely';
import type { MigrationDialect } from '../dialect.js';

/**
 * The events of MCP sessions' event streams (issue 27; src/mcp/event-store.ts): every message an
 * older-era session sends on an SSE stream is stored, `n` its place in the stream (the SSE event id
 * is `<n>.<stream>`), so a client that lost the stream resumes it with `Last-Event-ID` on whichever
 * instance it reaches. Kept for the resumption window, and deleted with the session.
 */
export async function up(db: Kysely<unknown>, d: MigrationDialect): Promise<void> {
  await sql`
    CREATE TABLE mcp_events (
      session_id ${d.text} NOT NULL,
      stream_id ${d.text} NOT NULL,
      n ${d.int} NOT NULL,
      message ${d.text} NOT NULL,
      created_ms ${d.int} NOT NULL,
      PRIMARY KEY (session_id, stream_id, n)
    ) ${d.strictWithoutRowid}`.execute(db);
  await sql`CREATE INDEX mcp_events_age ON mcp_events (created_ms)`.execute(db);
}
