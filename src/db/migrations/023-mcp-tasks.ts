import { type Kysely, sql } from 'kysely';
import type { MigrationDialect } from '../dialect.js';

/**
 * Tasks of MCP's tasks extension (`io.modelcontextprotocol/tasks`, 2026-07-28; src/mcp/tasks.ts): a
 * long tool call answered with a task handle, run by `instance`, polled with `tasks/get` on any
 * instance. `result` holds the CallToolResult, `error` the JSON-RPC error, as JSON. A task belongs
 * to the key (`owner`) that started it and is kept until `expires_ms`.
 */
export async function up(db: Kysely<unknown>, d: MigrationDialect): Promise<void> {
  await sql`
    CREATE TABLE mcp_tasks (
      id ${d.text} PRIMARY KEY,
      workspace_id ${d.text} NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
      owner ${d.text} NOT NULL,
      tool ${d.text} NOT NULL,
      status ${d.text} NOT NULL CHECK (status IN ('working', 'completed', 'failed', 'cancelled')),
      status_message ${d.text},
      result ${d.text},
      error ${d.text},
      instance ${d.text} NOT NULL,
      created_at ${d.text} NOT NULL,
      updated_at ${d.text} NOT NULL,
      expires_ms ${d.int} NOT NULL
    ) ${d.strictWithoutRowid}`.execute(db);
  await sql`CREATE INDEX mcp_tasks_instance ON mcp_tasks (instance, status)`.execute(db);
  await sql`CREATE INDEX mcp_tasks_expiry ON mcp_tasks (expires_ms)`.execute(db);
}
