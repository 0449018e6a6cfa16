import { sql } from 'kysely';
import type { Db } from '../../db/database.js';
import type { PersonaRow } from '../../db/schema.js';
import { type PageRequest, paginate } from '../../lib/pagination.js';

/** Escapes LIKE wildcards so a search for "50%" means the text "50%". */
function likeContains(text: string): string {
  return `%${text.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
}

export function createPersonaStore({ kysely: db, sqlite }: Db) {
  // Every answer reads its persona: one prepared statement instead of building and compiling the query each time.
  const findRow = sqlite.prepare('SELECT * FROM personas WHERE workspace_id = ? AND id = ?');
  return {
    insert: (row: PersonaRow) => db.insertInto('personas').values(row).execute(),
    find: async (workspaceId: string, id: string): Promise<PersonaRow | undefined> => findRow.get(workspaceId, id) as PersonaRow | undefined,
    list: (workspaceId: string, page: PageRequest, nameContains?: string) => {
      let q = db.selectFrom('personas').selectAll().where('workspace_id', '=', workspaceId);
      if (nameContains) q = q.where(sql<boolean>`name LIKE ${likeContains(nameContains)} ESCAPE '\\'`);
      return paginate(q, page);
    },
    update: (workspaceId: string, id: string, patch: Partial<PersonaRow>) =>
      db.updateTable('personas').set(patch).where('workspace_id', '=', workspaceId).where('id', '=', id).execute(),
    delete: async (workspaceId: string, id: string) => {
      const r = await db.deleteFrom('personas').where('workspace_id', '=', workspaceId).where('id', '=', id).executeTakeFirst();
      return Number(r.numDeletedRows) > 0;
    },
  };
}

export type PersonaStore = ReturnType<typeof createPersonaStore>;
