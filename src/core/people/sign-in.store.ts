import { type Kysely, sql, type Transaction } from 'kysely';
import type { Database } from '../../db/schema.js';
import { type Page, type PageRequest, paginate } from '../../lib/pagination.js';
import { useInvitation } from './people.store.js';

type Executor = Kysely<Database> | Transaction<Database>;
export type InvitationRow = Database['invitations'];
export type SigninFailureColumn = 'email_key' | 'ip';

/**
 * SQL of signing in beyond what people.store.ts has: failed attempts (shared by every instance on
 * the database), setup links, and a person's own sessions.
 */
export function createSignInStore(db: Kysely<Database>) {
  return {
    db,
    /**
     * The times (epoch ms) of the newest `limit` failures with this e-mail or address after
     * `sinceMs`, newest first: when there are `limit` of them, the last is the one whose leaving the
     * window lets the next attempt through.
     */
    recentFailures: async (column: SigninFailureColumn, value: string, sinceMs: number, limit: number): Promise<number[]> =>
      (
        await db
          .selectFrom('signin_failures')
          .select('at_ms')
          .where(column, '=', value)
          .where('at_ms', '>', sinceMs)
          .orderBy('at_ms', 'desc')
          .limit(limit)
          .execute()
      ).map((r) => Number(r.at_ms)),
    /** Counts a failed attempt, and drops those past every window (so the table holds minutes, not history). */
    recordFailure: async (emailKey: string, ip: string, atMs: number, forgetBeforeMs: number, trx: Executor = db) => {
      await trx.insertInto('signin_failures').values({ email_key: emailKey, ip, at_ms: atMs }).execute();
      await trx.deleteFrom('signin_failures').where('at_ms', '<=', forgetBeforeMs).execute();
    },
    /** A success ends the count of its e-mail (not of its address: another e-mail's failures there still count). */
    forgetFailuresOf: (emailKey: string, trx: Executor = db) => trx.deleteFrom('signin_failures').where('email_key', '=', emailKey).execute(),

    /** A user's workspaces with their role, for the audit events of a refused sign-in. */
    membershipsOf: (userId: string, trx: Executor = db) => trx.selectFrom('memberships').select(['workspace_id', 'role']).where('user_id', '=', userId).orderBy('workspace_id').execute(),
    workspaceById: (id: string) => db.selectFrom('workspaces').select(['id', 'name']).where('id', '=', id).executeTakeFirst(),
    /** The workspace a first owner joins: `default`, else the oldest. */
    setupWorkspace: async () =>
      (await db.selectFrom('workspaces').select(['id', 'name']).where('name', '=', 'default').executeTakeFirst()) ??
      (await db.selectFrom('workspaces').select(['id', 'name']).orderBy('created_at').orderBy('id').limit(1).executeTakeFirst()),

    /** A new setup link; the unused ones before it stop working. */
    replaceSetupInvitation: (row: InvitationRow) =>
      db.transaction().execute(async (trx) => {
        await trx
          .updateTable('invitations')
          .set({ revoked_at: row.created_at })
          .where('purpose', '=', 'setup')
          .where('used_at', 'is', null)
          .where('revoked_at', 'is', null)
          .execute();
        await trx.insertInto('invitations').values(row).execute();
      }),
    findInvitationByHash: (tokenHash: string) => db.selectFrom('invitations').selectAll().where('token_hash', '=', tokenHash).executeTakeFirst(),
    /**
     * Serializes first-owner setups: on PostgreSQL the row lock of the workspace makes a second setup
     * wait for the first to commit, and then see its user; SQLite runs one transaction at a time.
     */
    lockWorkspace: (trx: Transaction<Database>, workspaceId: string) =>
      trx.updateTable('workspaces').set({ name: sql`name` }).where('id', '=', workspaceId).execute(),
    useInvitation,

    /** A user's sessions still in use (not ended, neither idle too long nor past their end), newest first. */
    openSessionsOf: (userId: string, nowIso: string, idleSinceIso: string, page: PageRequest): Promise<Page<Database['login_sessions']>> =>
      paginate(
        db
          .selectFrom('login_sessions')
          .selectAll()
          .where('user_id', '=', userId)
          .where('ended_at', 'is', null)
          .where('expires_at', '>', nowIso)
          .where('last_seen_at', '>', idleSinceIso),
        page,
      ),
    /** The workspaces where a user has sessions not yet ended. */
    workspacesWithOpenSessions: async (trx: Executor, userId: string, nowIso: string) =>
      (
        await trx
          .selectFrom('login_sessions')
          .select('workspace_id')
          .distinct()
          .where('user_id', '=', userId)
          .where('ended_at', 'is', null)
          .where('expires_at', '>', nowIso)
          .orderBy('workspace_id')
          .execute()
      ).map((r) => r.workspace_id),
    findSessionOf: (trx: Executor, userId: string, id: string) =>
      trx.selectFrom('login_sessions').selectAll().where('id', '=', id).where('user_id', '=', userId).where('ended_at', 'is', null).executeTakeFirst(),
  };
}

export type SignInStore = ReturnType<typeof createSignInStore>;
