/**
 * SQL for members and invitations (API.md §14). Every query names its workspace, except the lookup
 * of an invitation by its token's hash. Changes run in one transaction with their audit events:
 * the service composes them through `transaction` and the executor-taking methods below.
 */
import { type Kysely, sql, type Transaction } from 'kysely';
import type { Database } from '../../db/schema.js';
import { type Page, type PageRequest, paginate } from '../../lib/pagination.js';
import { useInvitation } from './people.store.js';

type Executor = Kysely<Database> | Transaction<Database>;
export type InvitationRow = Database['invitations'];

/** A membership with its user, as `Member` shows it. */
export interface MemberRow {
  user_id: string;
  email: string;
  name: string;
  role: Database['memberships']['role'];
  status: Database['users']['status'];
  joined_at: string;
  last_seen_at: string | null;
}

/** `onPostgres`: lock rows where PostgreSQL needs it (SQLite runs one transaction at a time on its one connection). */
export function createMembersStore(db: Kysely<Database>, onPostgres: boolean) {
  const members = (ex: Executor) =>
    ex
      .selectFrom('memberships')
      .innerJoin('users', 'users.id', 'memberships.user_id')
      .select([
        'memberships.user_id',
        'users.email',
        'users.name',
        'memberships.role',
        'users.status',
        'memberships.joined_at',
        'users.last_seen_at',
      ]);
  return {
    db,
    transaction: <T>(work: (trx: Transaction<Database>) => Promise<T>) => db.transaction().execute(work),

    /** Members of a workspace, newest first (keyset pages over `joined_at, user_id`). */
    listMembers: async (workspaceId: string, page: PageRequest): Promise<Page<MemberRow>> => {
      const rows = await paginate(
        db
          .selectFrom(
            members(db)
              .select(['memberships.joined_at as created_at', 'memberships.user_id as id'])
              .where('memberships.workspace_id', '=', workspaceId)
              .as('m'),
          )
          .selectAll(),
        page,
      );
      return { data: rows.data, nextCursor: rows.nextCursor };
    },
    findMember: (workspaceId: string, userId: string, ex: Executor = db): Promise<MemberRow | undefined> =>
      members(ex).where('memberships.workspace_id', '=', workspaceId).where('memberships.user_id', '=', userId).executeTakeFirst(),
    findMemberByEmail: (workspaceId: string, emailKey: string): Promise<MemberRow | undefined> =>
      members(db).where('memberships.workspace_id', '=', workspaceId).where('users.email_key', '=', emailKey).executeTakeFirst(),

    /**
     * The workspace's owners, in a change's transaction. On PostgreSQL their rows are locked (in one
     * order, so two changes cannot deadlock): a concurrent demotion or removal of an owner waits for
     * this transaction, then sees what it did. That is what keeps the last owner.
     */
    lockOwners: async (trx: Transaction<Database>, workspaceId: string): Promise<string[]> => {
      let q = trx.selectFrom('memberships').select('user_id').where('workspace_id', '=', workspaceId).where('role', '=', 'owner').orderBy('user_id');
      if (onPostgres) q = q.forUpdate();
      return (await q.execute()).map((r) => r.user_id);
    },
    setRole: (trx: Transaction<Database>, workspaceId: string, userId: string, role: Database['memberships']['role']) =>
      trx.updateTable('memberships').set({ role }).where('workspace_id', '=', workspaceId).where('user_id', '=', userId).execute(),
    deleteMembership: (trx: Transaction<Database>, workspaceId: string, userId: string) =>
      trx.deleteFrom('memberships').where('workspace_id', '=', workspaceId).where('user_id', '=', userId).execute(),
    /** False when the user is a member already (the primary key decides; no failed statement aborts a PostgreSQL transaction). */
    insertMembership: async (trx: Transaction<Database>, row: Database['memberships']) =>
      Number((await trx.insertInto('memberships').values(row).onConflict((oc) => oc.columns(['workspace_id', 'user_id']).doNothing()).executeTakeFirst()).numInsertedOrUpdatedRows ?? 0) > 0,

    /** A person's keys in a workspace that are not revoked (expired ones too: they could not come back, but are harmless to end). */
    unrevokedKeysOf: (trx: Transaction<Database>, workspaceId: string, userId: string) =>
      trx
        .selectFrom('api_keys')
        .select(['id', 'name', 'scopes'])
        .where('workspace_id', '=', workspaceId)
        .where('user_id', '=', userId)
        .where('revoked_at', 'is', null)
        .orderBy('id')
        .execute(),
    revokeKeys: async (trx: Transaction<Database>, workspaceId: string, keyIds: string[], atIso: string) => {
      if (keyIds.length === 0) return;
      await trx.updateTable('api_keys').set({ revoked_at: atIso, previous_hash: null }).where('workspace_id', '=', workspaceId).where('id', 'in', keyIds).where('revoked_at', 'is', null).execute();
    },
    /** Ends the OAuth grants resting on these keys, and their tokens (a revoked key already refuses them; this says so in the rows). */
    /** How many grants it ended. */
    revokeGrantsOfKeys: async (trx: Transaction<Database>, workspaceId: string, keyIds: string[], atIso: string): Promise<number> => {
      if (keyIds.length === 0) return 0;
      const grants = await trx.selectFrom('oauth_grants').select('id').where('workspace_id', '=', workspaceId).where('key_id', 'in', keyIds).where('revoked_at', 'is', null).execute();
      if (grants.length === 0) return 0;
      const ids = grants.map((g) => g.id);
      await trx.updateTable('oauth_grants').set({ revoked_at: atIso }).where('id', 'in', ids).execute();
      await trx.updateTable('oauth_tokens').set({ revoked_at: atIso }).where('grant_id', 'in', ids).where('revoked_at', 'is', null).execute();
      return ids.length;
    },

    insertInvitation: (trx: Executor, row: InvitationRow) => trx.insertInto('invitations').values(row).execute(),
    /** Invitations not used, revoked or expired, newest first. */
    pendingInvitations: (workspaceId: string, nowIso: string, page: PageRequest) =>
      paginate(
        db
          .selectFrom('invitations')
          .selectAll()
          .where('workspace_id', '=', workspaceId)
          .where('purpose', '=', 'invite')
          .where('used_at', 'is', null)
          .where('revoked_at', 'is', null)
          .where('expires_at', '>', nowIso),
        page,
      ),
    findInvitation: (workspaceId: string, id: string) =>
      db.selectFrom('invitations').selectAll().where('workspace_id', '=', workspaceId).where('id', '=', id).where('purpose', '=', 'invite').executeTakeFirst(),
    findInvitationByTokenHash: (tokenHash: string) =>
      db.selectFrom('invitations').selectAll().where('token_hash', '=', tokenHash).where('purpose', '=', 'invite').executeTakeFirst(),
    /** Revokes a pending invitation; false when it was used or revoked already. */
    revokeInvitation: async (trx: Transaction<Database>, workspaceId: string, id: string, atIso: string) =>
      Number(
        (await trx.updateTable('invitations').set({ revoked_at: atIso }).where('workspace_id', '=', workspaceId).where('id', '=', id).where('used_at', 'is', null).where('revoked_at', 'is', null).executeTakeFirst())
          .numUpdatedRows,
      ) > 0,
    useInvitation,
    /** Inserts a user unless one has the e-mail already (an accept of another invitation at the same moment). */
    insertUser: async (trx: Transaction<Database>, row: Database['users']) =>
      Number((await trx.insertInto('users').values(row).onConflict((oc) => oc.column('email_key').doNothing()).executeTakeFirst()).numInsertedOrUpdatedRows ?? 0) > 0,
    workspaceByName: (name: string) => db.selectFrom('workspaces').select(['id', 'name']).where('name', '=', name).executeTakeFirst(),
  };
}

export type MembersStore = ReturnType<typeof createMembersStore>;
