import { type Kysely, sql } from 'kysely';
import type { MigrationDialect } from '../dialect.js';

/**
 * MCP tool servers and tool executions (API.md §7). A server's credentials and header values are
 * one AES-256-GCM sealed JSON value (`secrets`); only their names are stored in the clear.
 * Executions keep the server's name, not a reference: the record outlives the server.
 */
export async function up(db: Kysely<unknown>, d: MigrationDialect): Promise<void> {
  await sql`
    CREATE TABLE mcp_servers (
      id ${d.text} PRIMARY KEY,
      workspace_id ${d.text} NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
      name ${d.text} NOT NULL,
      transport ${d.text} NOT NULL CHECK (transport IN ('stdio', 'http')),
      command ${d.text},
      args ${d.text} NOT NULL,
      url ${d.text},
      secrets ${d.text} NOT NULL,
      credential_names ${d.text} NOT NULL,
      header_names ${d.text} NOT NULL,
      origin ${d.text} NOT NULL CHECK (origin IN ('api', 'config')),
      created_at ${d.text} NOT NULL,
      updated_at ${d.text} NOT NULL,
      UNIQUE (workspace_id, name)
    ) ${d.strict}`.execute(db);
  await sql`CREATE INDEX mcp_servers_workspace ON mcp_servers (workspace_id, created_at, id)`.execute(db);

  await sql`
    CREATE TABLE tool_executions (
      id ${d.text} PRIMARY KEY,
      workspace_id ${d.text} NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
      tool_name ${d.text} NOT NULL,
      action ${d.text} NOT NULL,
      status ${d.text} NOT NULL CHECK (status IN ('succeeded', 'failed')),
      result ${d.text},
      error ${d.text},
      duration_ms ${d.int} NOT NULL,
      started_at ${d.text} NOT NULL,
      finished_at ${d.text} NOT NULL,
      monitored ${d.int} NOT NULL,
      parameters ${d.text},
      events ${d.text},
      created_at ${d.text} NOT NULL
    ) ${d.strict}`.execute(db);
  await sql`CREATE INDEX tool_executions_workspace ON tool_executions (workspace_id, created_at, id)`.execute(db);
}
