import type { SqlBackend } from '../../db/backend.js';
import { nameContains } from '../../db/name-filter.js';
import type { PersonaRow, PersonaVersionRow } from '../../db/schema.js';
import { ValidationError } from '../../errors.js';
import { type Page, type PageRequest, paginate } from '../../lib/pagination.js';
import { type AuditRow, insertAudit, withAudit } from '../audit/audit.js';


/** A page of versions ends at a version number: the cursor holds the last one shown. */
const versionCursor = (version: number) => Buffer.from(`v${version}`).toString('base64url');
function versionBefore(cursor: string): number {
  const match = /^v([1-9]\d{0,15})$/.exec(Buffer.from(cursor, 'base64url').toString('utf8'));
  if (!match) throw ValidationError.field('cursor', 'is not a cursor this list returned');
  return Number(match[1]);
}

/** The fields a version keeps, from a persona row. */
export function versionOf(row: PersonaRow, createdBy: string | null): PersonaVersionRow {
  return {
    workspace_id: row.workspace_id,
    persona_id: row.id,
    version: row.version,
    name: row.name,
    instructions: row.instructions,
    traits: row.traits,
    model: row.model,
    temperature: row.temperature,
    max_tokens: row.max_tokens,
    tools: row.tools,
    created_at: row.updated_at,
    created_by: createdBy,
  };
}

/** A persona's team and handoff rules: routing, changed without a version. */
export type RoutingPatch = { team_id?: string | null; handoff?: string };

export function createPersonaStore({ kysely: db, prepare }: SqlBackend) {
  // Every answer reads its persona: one prepared statement instead of building and compiling the query each time.
  const findRow = prepare<PersonaRow>('SELECT * FROM personas WHERE workspace_id = ? AND id = ?');
  const findVersionRow = prepare<PersonaVersionRow>('SELECT * FROM persona_versions WHERE workspace_id = ? AND persona_id = ? AND version = ?');
  return {
    /** The persona and its version 1, together. */
    insert: (row: PersonaRow, createdBy: string | null, audit?: AuditRow) =>
      db.transaction().execute(async (trx) => {
        await trx.insertInto('personas').values(row).execute();
        await trx.insertInto('persona_versions').values(versionOf(row, createdBy)).execute();
        if (audit) await insertAudit(trx, audit);
      }),
    find: (workspaceId: string, id: string): Promise<PersonaRow | undefined> => findRow.first(workspaceId, id),
    list: (workspaceId: string, page: PageRequest, text?: string) => {
      let q = db.selectFrom('personas').selectAll().where('workspace_id', '=', workspaceId);
      if (text) q = q.where(nameContains(text));
      return paginate(q, page);
    },
    /**
     * Makes `next` current and keeps it as its version, only if the persona is still at the version
     * the change was made from (`next.version − 1`): false when another change came first, or the
     * persona is gone, so two edits at once never share a number or overwrite each other unseen.
     */
    replace: (next: PersonaRow, createdBy: string | null, routing?: RoutingPatch, audit?: AuditRow): Promise<boolean> =>
      db.transaction().execute(async (trx) => {
        // The team and handoff rules are left as they are: they change apart from versions (setRouting).
        const { version: _, id, workspace_id, created_at, team_id: _team, handoff: _handoff, ...fields } = next;
        const r = await trx
          .updateTable('personas')
          .set({ ...fields, version: next.version })
          .where('workspace_id', '=', workspace_id)
          .where('id', '=', id)
          .where('version', '=', next.version - 1)
          .executeTakeFirst();
        if (Number(r.numUpdatedRows) === 0) return false;
        await trx.insertInto('persona_versions').values(versionOf(next, createdBy)).execute();
        if (routing) await trx.updateTable('personas').set(routing).where('workspace_id', '=', workspace_id).where('id', '=', id).execute();
        if (audit) await insertAudit(trx, audit);
        return true;
      }),
    /** The team and handoff rules: routing, changed without a version. False when the persona is gone. */
    setRouting: (workspaceId: string, id: string, patch: RoutingPatch, audit?: AuditRow) =>
      withAudit(db, audit, async (trx) => {
        const r = await trx.updateTable('personas').set(patch).where('workspace_id', '=', workspaceId).where('id', '=', id).executeTakeFirst();
        return Number(r.numUpdatedRows) > 0;
      }),
    findVersion: (workspaceId: string, personaId: string, version: number): Promise<PersonaVersionRow | undefined> =>
      findVersionRow.first(workspaceId, personaId, version),
    async listVersions(workspaceId: string, personaId: string, page: PageRequest): Promise<Page<PersonaVersionRow>> {
      let q = db.selectFrom('persona_versions').selectAll().where('workspace_id', '=', workspaceId).where('persona_id', '=', personaId);
      if (page.cursor !== undefined) q = q.where('version', '<', versionBefore(page.cursor));
      const rows = await q.orderBy('version', 'desc').limit(page.limit + 1).execute();
      const data = rows.slice(0, page.limit);
      const last = data[data.length - 1];
      return { data, nextCursor: rows.length > page.limit && last ? versionCursor(last.version) : null };
    },
    delete: (workspaceId: string, id: string, audit?: AuditRow) =>
      withAudit(db, audit, async (trx) => {
        const r = await trx.deleteFrom('personas').where('workspace_id', '=', workspaceId).where('id', '=', id).executeTakeFirst();
        return Number(r.numDeletedRows) > 0;
      }),
  };
}

export type PersonaStore = ReturnType<typeof createPersonaStore>;
