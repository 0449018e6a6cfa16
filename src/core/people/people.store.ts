import type { Kysely, Transaction } from 'kysely';
import type { Database } from '../../db/schema.js';

type Executor = Kysely<Database> | Transaction<Database>;
export type UserRow = Database['users'];
export type MembershipRow = Database['memberships'];
export type LoginSessionRow = Database['login_sessions'];

/** A sign-in session with what authenticating it needs: its user, and their role in its workspace (null when no longer a member). */
export type LoginSessionWithUser = LoginSessionRow & {
  user_name: string;
  user_email: string;
  user_status: UserRow['status'];
  member_role: MembershipRow['role'] | null;
};

/** An e-mail as users are found by: unique across the installation, case-insensitively (API.md §14). */
export function emailKey(email: string): string {
  return email.trim().toLowerCase();
}

/**
 * Uses an invitation or setup link, once: one conditional UPDATE, so of two uses at once exactly one
 * finds it unused (on PostgreSQL the second waits for the first's row lock, then sees `used_at`
 * set). False when it was used, revoked or expired meanwhile. Every way of joining calls this one.
 */
export async function useInvitation(trx: Executor, id: string, nowIso: string): Promise<boolean> {
  const res = await trx
    .updateTable('invitations')
    .set({ used_at: nowIso })
    .where('id', '=', id)
    .where('used_at', 'is', null)
    .where('revoked_at', 'is', null)
    .where('expires_at', '>', nowIso)
    .executeTakeFirst();
  return Number(res.numUpdatedRows) > 0;
}

/** SQL for users, memberships and sign-in sessions. Membership reads name their workspace; users are installation-wide. */
export function createPeopleStore(db: Kysely<Database>) {
  return {
    db,
    countUsers: async (trx: Executor = db) => Number((await trx.selectFrom('users').select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow()).n),
    findUser: (id: string) => db.selectFrom('users').selectAll().where('id', '=', id).executeTakeFirst(),
    findUserByEmail: (email: string) => db.selectFrom('users').selectAll().where('email_key', '=', emailKey(email)).executeTakeFirst(),
    insertUser: (row: UserRow, trx: Executor = db) => trx.insertInto('users').values(row).execute(),
    updateUser: (id: string, patch: Partial<UserRow>, trx: Executor = db) => trx.updateTable('users').set(patch).where('id', '=', id).execute(),

    membership: (workspaceId: string, userId: string, trx: Executor = db) =>
      trx.selectFrom('memberships').selectAll().where('workspace_id', '=', workspaceId).where('user_id', '=', userId).executeTakeFirst(),
    /** A user's workspaces, oldest membership first, with the workspace's name. */
    membershipsOf: (userId: string) =>
      db
        .selectFrom('memberships')
        .innerJoin('workspaces', 'workspaces.id', 'memberships.workspace_id')
        .select(['memberships.workspace_id', 'workspaces.name as workspace_name', 'memberships.role', 'memberships.joined_at'])
        .where('memberships.user_id', '=', userId)
        .orderBy('memberships.joined_at')
        .orderBy('memberships.workspace_id')
        .execute(),
    insertMembership: (row: MembershipRow, trx: Executor = db) => trx.insertInto('memberships').values(row).execute(),

    insertLoginSession: (row: LoginSessionRow, trx: Executor = db) => trx.insertInto('login_sessions').values(row).execute(),
    /** The session whose cookie secret has this hash, with its user and their role in its workspace. */
    findLoginSessionByHash: (tokenHash: string): Promise<LoginSessionWithUser | undefined> =>
      db
        .selectFrom('login_sessions')
        .innerJoin('users', 'users.id', 'login_sessions.user_id')
        .leftJoin('memberships', (j) => j.onRef('memberships.user_id', '=', 'login_sessions.user_id').onRef('memberships.workspace_id', '=', 'login_sessions.workspace_id'))
        .selectAll('login_sessions')
        .select(['users.name as user_name', 'users.email as user_email', 'users.status as user_status', 'memberships.role as member_role'])
        .where('login_sessions.token_hash', '=', tokenHash)
        .executeTakeFirst(),
    /** Marks a session seen, no more than once per `sinceIso` (a write per request would be a write per console click). */
    touchLoginSession: (id: string, atIso: string, sinceIso: string) =>
      db.updateTable('login_sessions').set({ last_seen_at: atIso }).where('id', '=', id).where('last_seen_at', '<', sinceIso).execute(),
    /** A user's sessions that have not ended, newest first. */
    openLoginSessionsOf: (userId: string, nowIso: string) =>
      db
        .selectFrom('login_sessions')
        .selectAll()
        .where('user_id', '=', userId)
        .where('ended_at', 'is', null)
        .where('expires_at', '>', nowIso)
        .orderBy('created_at', 'desc')
        .orderBy('id', 'desc')
        .execute(),
    /** Ends one of a user's sessions; false when it is not theirs or already ended. */
    endLoginSession: async (userId: string, id: string, atIso: string, trx: Executor = db) =>
      Number(
        (
          await trx
            .updateTable('login_sessions')
            .set({ ended_at: atIso })
            .where('id', '=', id)
            .where('user_id', '=', userId)
            .where('ended_at', 'is', null)
            .executeTakeFirst()
        ).numUpdatedRows,
      ) > 0,
    /** Ends a user's sessions: in one workspace, or everywhere when `workspaceId` is null. */
    endLoginSessionsOf: async (userId: string, workspaceId: string | null, atIso: string, trx: Executor = db) => {
      let q = trx.updateTable('login_sessions').set({ ended_at: atIso }).where('user_id', '=', userId).where('ended_at', 'is', null);
      if (workspaceId !== null) q = q.where('workspace_id', '=', workspaceId);
      return Number((await q.executeTakeFirst()).numUpdatedRows);
    },
  };
}

export type PeopleStore = ReturnType<typeof createPeopleStore>;
