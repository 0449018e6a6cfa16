import type { Kysely } from 'kysely';
import type { Database, McpTaskRow } from '../db/schema.js';

type Ended = Pick<McpTaskRow, 'status' | 'status_message' | 'updated_at'> & Partial<Pick<McpTaskRow, 'result' | 'error'>>;

/** Tasks of MCP's tasks extension (migration 023); a task is read only with its owner and workspace. */
export function createMcpTaskStore(db: Kysely<Database>) {
  return {
    insert: (row: McpTaskRow) => db.insertInto('mcp_tasks').values(row).execute(),

    find: (owner: string, workspaceId: string, id: string) =>
      db.selectFrom('mcp_tasks').selectAll().where('id', '=', id).where('owner', '=', owner).where('workspace_id', '=', workspaceId).executeTakeFirst(),

    /** Ends tasks still working (those of `ids`, or every one `instance` runs); true when one was. */
    async end(ended: Ended, which: { ids: string[] } | { instance: string }): Promise<boolean> {
      let q = db.updateTable('mcp_tasks').set(ended).where('status', '=', 'working');
      if ('ids' in which) {
        if (which.ids.length === 0) return false;
        q = q.where('id', 'in', which.ids);
      } else {
        q = q.where('instance', '=', which.instance);
      }
      return Number((await q.executeTakeFirst()).numUpdatedRows) > 0;
    },

    /** Of these tasks, those cancelled. */
    cancelledAmong: async (ids: string[]) =>
      ids.length === 0 ? [] : (await db.selectFrom('mcp_tasks').select('id').where('id', 'in', ids).where('status', '=', 'cancelled').execute()).map((r) => r.id),

    deleteExpired: (nowMs: number) => db.deleteFrom('mcp_tasks').where('expires_ms', '<', nowMs).execute(),
  };
}

export type McpTaskStore = ReturnType<typeof createMcpTaskStore>;
