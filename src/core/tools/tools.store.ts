import type { Kysely } from 'kysely';
import { type AuditRow, withAudit } from '../audit/audit.js';
import type { Database, McpServerRow, ToolExecutionRow } from '../../db/schema.js';
import { type PageRequest, paginate } from '../../lib/pagination.js';

/** MCP servers and tool executions (API.md §7); every query filters by workspace. */
export function createToolsStore(db: Kysely<Database>) {
  return {
    insertServer: (row: McpServerRow, audit?: AuditRow) =>
      withAudit(db, audit, async (trx) => {
        await trx.insertInto('mcp_servers').values(row).execute();
      }),
    findServer: (workspaceId: string, id: string) =>
      db.selectFrom('mcp_servers').selectAll().where('workspace_id', '=', workspaceId).where('id', '=', id).executeTakeFirst(),
    findServerByName: (workspaceId: string, name: string) =>
      db.selectFrom('mcp_servers').selectAll().where('workspace_id', '=', workspaceId).where('name', '=', name).executeTakeFirst(),
    /** Every server of a workspace, oldest first (the order tools are listed in). */
    allServers: (workspaceId: string) =>
      db.selectFrom('mcp_servers').selectAll().where('workspace_id', '=', workspaceId).orderBy('created_at').orderBy('id').execute(),
    listServers: (workspaceId: string, page: PageRequest) =>
      paginate(db.selectFrom('mcp_servers').selectAll().where('workspace_id', '=', workspaceId), page),
    updateServer: (workspaceId: string, id: string, patch: Partial<McpServerRow>, audit?: AuditRow) =>
      withAudit(db, audit, async (trx) => {
        await trx.updateTable('mcp_servers').set(patch).where('workspace_id', '=', workspaceId).where('id', '=', id).execute();
      }),
    deleteServer: (workspaceId: string, id: string, audit?: AuditRow) =>
      withAudit(db, audit, async (trx) => {
        const r = await trx.deleteFrom('mcp_servers').where('workspace_id', '=', workspaceId).where('id', '=', id).executeTakeFirst();
        return Number(r.numDeletedRows) > 0;
      }),
    workspaceIdByName: async (name: string) =>
      (await db.selectFrom('workspaces').select('id').where('name', '=', name).executeTakeFirst())?.id,

    insertExecution: (row: ToolExecutionRow, audit?: AuditRow) =>
      withAudit(db, audit, async (trx) => {
        await trx.insertInto('tool_executions').values(row).execute();
      }),
    findExecution: (workspaceId: string, id: string) =>
      db.selectFrom('tool_executions').selectAll().where('workspace_id', '=', workspaceId).where('id', '=', id).executeTakeFirst(),
    listExecutions: (workspaceId: string, page: PageRequest, toolName?: string) => {
      let q = db.selectFrom('tool_executions').selectAll().where('workspace_id', '=', workspaceId);
      if (toolName !== undefined) q = q.where('tool_name', '=', toolName);
      return paginate(q, page);
    },
  };
}

export type ToolsStore = ReturnType<typeof createToolsStore>;
