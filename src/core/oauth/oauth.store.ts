import type { Kysely } from 'kysely';
import type { Database, OAuthCodesTable, OAuthGrantsTable, OAuthPendingTable, OAuthTokensTable } from '../../db/schema.js';
import { type PageRequest, paginate } from '../../lib/pagination.js';
import { type AuditRow, insertAudit, withAudit } from '../audit/audit.js';

/** SQL for OAuth clients, grants, codes and tokens. Codes and tokens are found by the hash of their value. */
export function createOAuthStore(db: Kysely<Database>) {
  return {
    insertClient: (row: { client_id: string; metadata: string; created_at: string }) =>
      db.insertInto('oauth_clients').values(row).execute(),
    findClient: (clientId: string) =>
      db.selectFrom('oauth_clients').selectAll().where('client_id', '=', clientId).executeTakeFirst(),

    /** Keeps an authorization request waiting for its answer: drops the expired ones, and the oldest beyond `max`. */
    insertPending: async (row: OAuthPendingTable, nowMs: number, max: number) => {
      await db.deleteFrom('oauth_pending').where('expires_ms', '<=', nowMs).execute();
      const { n } = await db.selectFrom('oauth_pending').select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow();
      if (Number(n) >= max) {
        await db
          .deleteFrom('oauth_pending')
          .where('id', 'in', db.selectFrom('oauth_pending').select('id').orderBy('expires_ms').limit(Number(n) - max + 1))
          .execute();
      }
      await db.insertInto('oauth_pending').values(row).execute();
    },
    findPending: (id: string) => db.selectFrom('oauth_pending').selectAll().where('id', '=', id).executeTakeFirst(),
    /** Counts a wrong answer; the attempts made so far, or null when the request is gone. */
    failPending: async (id: string) => {
      const row = await db.updateTable('oauth_pending').set((eb) => ({ attempts: eb('attempts', '+', 1) })).where('id', '=', id).returning('attempts').executeTakeFirst();
      return row ? Number(row.attempts) : null;
    },
    /** Ends a request; false when another answer (on any instance) ended it first. */
    deletePending: async (id: string) => {
      const result = await db.deleteFrom('oauth_pending').where('id', '=', id).executeTakeFirst();
      return result.numDeletedRows === 1n;
    },

    /** A new grant, with its audit event in the same transaction. */
    insertGrant: (row: OAuthGrantsTable, audit?: AuditRow) =>
      withAudit(db, audit, async (trx) => {
        await trx.insertInto('oauth_grants').values(row).execute();
      }),
    findGrant: (id: string) => db.selectFrom('oauth_grants').selectAll().where('id', '=', id).executeTakeFirst(),
    findWorkspaceGrant: (workspaceId: string, id: string) =>
      db
        .selectFrom('oauth_grants')
        .selectAll()
        .where('workspace_id', '=', workspaceId)
        .where('id', '=', id)
        .where('revoked_at', 'is', null)
        .executeTakeFirst(),
    /** The workspace's grants still in force: not revoked, and their key active and not rotated since. */
    listGrants: (workspaceId: string, nowIso: string, page: PageRequest) =>
      paginate(
        db
          .selectFrom('oauth_grants')
          .innerJoin('api_keys', 'api_keys.id', 'oauth_grants.key_id')
          .selectAll('oauth_grants')
          .where('oauth_grants.workspace_id', '=', workspaceId)
          .where('oauth_grants.revoked_at', 'is', null)
          .where('api_keys.revoked_at', 'is', null)
          .where((eb) => eb.or([eb('api_keys.expires_at', 'is', null), eb('api_keys.expires_at', '>', nowIso)]))
          .where((eb) => eb.or([eb('api_keys.rotated_at', 'is', null), eb('api_keys.rotated_at', '<', eb.ref('oauth_grants.created_at'))])),
        page,
        'oauth_grants',
      ),
    touchGrant: (id: string, at: string) =>
      db
        .updateTable('oauth_grants')
        .set({ last_used_at: at })
        .where('id', '=', id)
        .where((eb) => eb.or([eb('last_used_at', 'is', null), eb('last_used_at', '<', at)]))
        .execute(),
    /**
     * Revokes a grant and every token it issued, in one transaction, with `audit` when a person
     * did it; false (and no event) when it was revoked already.
     */
    revokeGrant: (id: string, at: string, audit?: AuditRow) =>
      db.transaction().execute(async (trx) => {
        const r = await trx.updateTable('oauth_grants').set({ revoked_at: at }).where('id', '=', id).where('revoked_at', 'is', null).executeTakeFirst();
        await trx.updateTable('oauth_tokens').set({ revoked_at: at }).where('grant_id', '=', id).where('revoked_at', 'is', null).execute();
        if (Number(r.numUpdatedRows) === 0) return false;
        if (audit) await insertAudit(trx, audit);
        return true;
      }),

    insertCode: (row: OAuthCodesTable) => db.insertInto('oauth_codes').values(row).execute(),
    findCode: (hash: string) => db.selectFrom('oauth_codes').selectAll().where('hash', '=', hash).executeTakeFirst(),
    /** Marks a code used; false when it already was (a concurrent or repeated exchange). */
    useCode: async (hash: string, at: string) => {
      const result = await db.updateTable('oauth_codes').set({ used_at: at }).where('hash', '=', hash).where('used_at', 'is', null).executeTakeFirst();
      return result.numUpdatedRows === 1n;
    },

    insertTokens: (rows: OAuthTokensTable[]) => db.insertInto('oauth_tokens').values(rows).execute(),
    findToken: (hash: string) => db.selectFrom('oauth_tokens').selectAll().where('hash', '=', hash).executeTakeFirst(),
    /** Marks a refresh token used (rotated); false when it already was. */
    useToken: async (hash: string, at: string) => {
      const result = await db
        .updateTable('oauth_tokens')
        .set({ used_at: at })
        .where('hash', '=', hash)
        .where('used_at', 'is', null)
        .where('revoked_at', 'is', null)
        .executeTakeFirst();
      return result.numUpdatedRows === 1n;
    },
    revokeToken: (hash: string, at: string) =>
      db.updateTable('oauth_tokens').set({ revoked_at: at }).where('hash', '=', hash).where('revoked_at', 'is', null).execute(),
    revokeFamily: (familyId: string, at: string) =>
      db.updateTable('oauth_tokens').set({ revoked_at: at }).where('family_id', '=', familyId).where('revoked_at', 'is', null).execute(),
    /** Codes and tokens past their expiry (by `cutoff`), and the grants' revoked rows are kept for the list's history. */
    purgeExpired: async (cutoff: string) => {
      await db.deleteFrom('oauth_codes').where('expires_at', '<', cutoff).execute();
      await db.deleteFrom('oauth_tokens').where('expires_at', '<', cutoff).execute();
    },
  };
}

export type OAuthStore = ReturnType<typeof createOAuthStore>;
