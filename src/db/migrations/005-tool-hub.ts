import { type Kysely, sql } from 'kysely';

/**
 * MCP tool servers and tool executions (API.md §7). A server's credentials and header values are
 * one AES-256-GCM sealed JSON value (`secrets`); only their names are stored in the clear.
 * Executions keep the server's name, not a reference: the record outlives the server.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE mcp_servers (
      id TEXT PRIMARY KEY,
      workspace_id TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
      name TEXT NOT NULL,
      transport TEXT NOT NULL CHECK (transport IN ('stdio', 'http')),
      command TEXT,
      args TEXT NOT NULL,
      url TEXT,
      secrets TEXT NOT NULL,
      credential_names TEXT NOT NULL,
      header_names TEXT NOT NULL,
      origin TEXT NOT NULL CHECK (origin IN ('api', 'config')),
      created_at TEXT NOT NULL,
      updated_at TEXT NOT NULL,
      UNIQUE (workspace_id, name)
    ) STRICT`.execute(db);
  await sql`CREATE INDEX mcp_servers_workspace ON mcp_servers (workspace_id, created_at, id)`.execute(db);

  await sql`
    CREATE TABLE tool_executions (
      id TEXT PRIMARY KEY,
      workspace_id TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
      tool_name TEXT NOT NULL,
      action TEXT NOT NULL,
      status TEXT NOT NULL CHECK (status IN ('succeeded', 'failed')),
      result TEXT,
      error TEXT,
      duration_ms INTEGER NOT NULL,
      started_at TEXT NOT NULL,
      finished_at TEXT NOT NULL,
      monitored INTEGER NOT NULL,
      parameters TEXT,
      events TEXT,
      created_at TEXT NOT NULL
    ) STRICT`.execute(db);
  await sql`CREATE INDEX tool_executions_workspace ON tool_executions (workspace_id, created_at, id)`.execute(db);
}
