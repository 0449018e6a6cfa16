import { sql } from 'kysely';
import type { SqlBackend } from '../../db/backend.js';
import type { PersonaRow } from '../../db/schema.js';
import { type PageRequest, paginate } from '../../lib/pagination.js';

/** Escapes LIKE wildcards so a search for "50%" means the text "50%". */
function likeContains(text: string): string {
  return `%${text.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
}

const asciiLower = (text: string) => text.replace(/[A-Z]/g, (c) => c.toLowerCase());

export function createPersonaStore({ kysely: db, prepare }: SqlBackend) {
  // Every answer reads its persona: one prepared statement instead of building and compiling the query each time.
  const findRow = prepare<PersonaRow>('SELECT * FROM personas WHERE workspace_id = ? AND id = ?');
  return {
    insert: (row: PersonaRow) => db.insertInto('personas').values(row).execute(),
    find: (workspaceId: string, id: string): Promise<PersonaRow | undefined> => findRow.first(workspaceId, id),
    list: (workspaceId: string, page: PageRequest, nameContains?: string) => {
      let q = db.selectFrom('personas').selectAll().where('workspace_id', '=', workspaceId);
      // ASCII case ignored on both backends, as SQLite's LIKE does: PostgreSQL's LIKE does not, and
      // its lower() of a "C"-collated column (dialect.ts) folds ASCII only, like the pattern here.
      if (nameContains) q = q.where(sql<boolean>`lower(name) LIKE ${likeContains(asciiLower(nameContains))} ESCAPE '\\'`);
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
