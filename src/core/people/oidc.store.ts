import { type Kysely, sql, type Transaction } from 'kysely';
import type { Database } from '../../db/schema.js';
import { useInvitation } from './people.store.js';

type Executor = Kysely<Database> | Transaction<Database>;
export type OidcPendingRow = Database['oidc_pending'];
export type InvitationRow = Database['invitations'];

/** SQL of OIDC sign-in: sign-ins under way, providers' subjects, and the reads of people it decides with (in its transaction). */
export function createOidcStore(db: Kysely<Database>) {
  return {
    db,
    insertPending: (row: OidcPendingRow) => db.insertInto('oidc_pending').values(row).execute(),
    deleteExpiredPending: (nowMs: number) => db.deleteFrom('oidc_pending').where('expires_ms', '<', nowMs).execute(),
    /** Takes a sign-in under way, once: of two callbacks with the same state, one gets the row (both backends). */
    takePending: (stateHash: string) => db.deleteFrom('oidc_pending').where('state_hash', '=', stateHash).returningAll().executeTakeFirst(),

    identityUser: async (trx: Executor, issuer: string, subject: string) =>
      (await trx.selectFrom('oidc_identities').select('user_id').where('issuer', '=', issuer).where('subject', '=', subject).executeTakeFirst())?.user_id,
    insertIdentity: (trx: Executor, row: Database['oidc_identities']) => trx.insertInto('oidc_identities').values(row).execute(),

    findUser: (trx: Executor, id: string) => trx.selectFrom('users').selectAll().where('id', '=', id).executeTakeFirst(),
    findUserByEmailKey: (trx: Executor, key: string) => trx.selectFrom('users').selectAll().where('email_key', '=', key).executeTakeFirst(),
    memberships: (trx: Executor, userId: string) =>
      trx.selectFrom('memberships').selectAll().where('user_id', '=', userId).orderBy('joined_at').orderBy('workspace_id').execute(),
    workspaceByName: (trx: Executor, name: string) => trx.selectFrom('workspaces').select('id').where('name', '=', name).executeTakeFirst(),

    /** A member's invitation by its token's hash (used, expired or revoked ones too: the caller says which). */
    invitationByHash: (trx: Executor, tokenHash: string) =>
      trx.selectFrom('invitations').selectAll().where('token_hash', '=', tokenHash).where('purpose', '=', 'invite').executeTakeFirst(),
    /** The invitations an e-mail may still use, newest first. */
    openInvitationsFor: (trx: Executor, emailKey: string, nowIso: string) =>
      trx
        .selectFrom('invitations')
        .selectAll()
        .where('purpose', '=', 'invite')
        .where(sql<string>`lower(email)`, '=', emailKey)
        .where('used_at', 'is', null)
        .where('revoked_at', 'is', null)
        .where('expires_at', '>', nowIso)
        .orderBy('created_at', 'desc')
        .orderBy('id', 'desc')
        .execute(),
    useInvitation,
  };
}

export type OidcStore = ReturnType<typeof createOidcStore>;
