import type { Kysely, SelectQueryBuilder } from 'kysely';
import type { ApiKeyRow, Database, NewApiKeyRow } from '../../db/schema.js';
import { type PageRequest, paginate } from '../../lib/pagination.js';
import { type AuditRow, insertAudit } from '../audit/audit.js';

/** A key with its owner's role in the key's workspace and their status (nulls for a service key, or an owner no longer a member). */
export type KeyWithOwner = ApiKeyRow & { member_role: Database['memberships']['role'] | null; user_status: Database['users']['status'] | null };

/** SQL for workspaces and API keys. Every key query names its workspace, except the lookup by hash. */
export function createAuthStore(db: Kysely<Database>) {
  /** Keys with what authenticating them needs of their owner, in the same read. */
  const keysWithOwner = (): SelectQueryBuilder<any, any, KeyWithOwner> =>
    db
      .selectFrom('api_keys')
      .leftJoin('memberships', (j) => j.onRef('memberships.user_id', '=', 'api_keys.user_id').onRef('memberships.workspace_id', '=', 'api_keys.workspace_id'))
      .leftJoin('users', 'users.id', 'api_keys.user_id')
      .selectAll('api_keys')
      .select(['memberships.role as member_role', 'users.status as user_status']) as unknown as SelectQueryBuilder<any, any, KeyWithOwner>;
  return {
    findWorkspaceByName: (name: string) =>
      db.selectFrom('workspaces').selectAll().where('name', '=', name).executeTakeFirst(),
    findWorkspace: (id: string) => db.selectFrom('workspaces').selectAll().where('id', '=', id).executeTakeFirst(),
    firstWorkspace: () => db.selectFrom('workspaces').select('id').limit(1).executeTakeFirst(),
    insertWorkspace: (row: { id: string; name: string; created_at: string }) =>
      db.insertInto('workspaces').values(row).execute(),

    /** The key whose current or previous (grace period) secret has this hash. */
    findKeyBySecretHash: (hash: string): Promise<KeyWithOwner | undefined> =>
      keysWithOwner()
        .where((eb) => eb.or([eb('api_keys.hash', '=', hash), eb('api_keys.previous_hash', '=', hash)]))
        .executeTakeFirst(),
    findKey: (workspaceId: string, id: string) =>
      db
        .selectFrom('api_keys')
        .selectAll()
        .where('workspace_id', '=', workspaceId)
        .where('id', '=', id)
        .executeTakeFirst(),
    /** By id alone: only for checking the key behind an OAuth grant, whose row already names the workspace. */
    findKeyById: (id: string): Promise<KeyWithOwner | undefined> => keysWithOwner().where('api_keys.id', '=', id).executeTakeFirst(),
    /** The workspace's keys, or with `userId` only that person's. */
    listKeys: (workspaceId: string, page: PageRequest, userId?: string) => {
      let q = db.selectFrom('api_keys').selectAll().where('workspace_id', '=', workspaceId);
      if (userId !== undefined) q = q.where('user_id', '=', userId);
      return paginate(q, page);
    },
    /** Active keys of the workspace holding `admin`, other than `exceptId`. */
    countOtherActiveAdminKeys: async (workspaceId: string, exceptId: string, nowIso: string) => {
      const rows = await db
        .selectFrom('api_keys')
        .select('scopes')
        .where('workspace_id', '=', workspaceId)
        .where('id', '!=', exceptId)
        .where('revoked_at', 'is', null)
        .where((eb) => eb.or([eb('expires_at', 'is', null), eb('expires_at', '>', nowIso)]))
        .execute();
      return rows.filter((r) => (JSON.parse(r.scopes) as string[]).includes('admin')).length;
    },
    /** A new key, with its audit event in the same transaction when there is one. */
    insertKey: (row: NewApiKeyRow, audit?: AuditRow) =>
      db.transaction().execute(async (trx) => {
        await trx.insertInto('api_keys').values(row).execute();
        if (audit) await insertAudit(trx, audit);
      }),
    updateKey: (workspaceId: string, id: string, patch: Partial<NewApiKeyRow>, audit?: AuditRow) =>
      db.transaction().execute(async (trx) => {
        await trx.updateTable('api_keys').set(patch).where('workspace_id', '=', workspaceId).where('id', '=', id).execute();
        if (audit) await insertAudit(trx, audit);
      }),
    /** One statement per key: `lastUsedAt` is flushed in batches, never on the request path. */
    recordLastUsed: (entries: [string, string][]) =>
      db.transaction().execute(async (trx) => {
        for (const [id, at] of entries) {
          await trx
            .updateTable('api_keys')
            .set({ last_used_at: at })
            .where('id', '=', id)
            .where((eb) => eb.or([eb('last_used_at', 'is', null), eb('last_used_at', '<', at)]))
            .execute();
        }
      }),
  };
}

export type AuthStore = ReturnType<typeof createAuthStore>;
