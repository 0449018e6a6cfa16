import type { Kysely } from 'kysely';
import type { Database, NewTeamMemberRow, TeamMemberRow, TeamRow, TeamStatus } from '../../db/schema.js';
import { type AuditRow, insertAudit } from '../../core/audit/audit.js';
import { type Page, type PageRequest, paginate } from '../../lib/pagination.js';

export interface StoredTeam {
  team: TeamRow;
  members: TeamMemberRow[];
}

export function createTeamStore(db: Kysely<Database>) {
  const membersOf = async (workspaceId: string, teamIds: string[]): Promise<Map<string, TeamMemberRow[]>> => {
    const byTeam = new Map<string, TeamMemberRow[]>(teamIds.map((id) => [id, []]));
    if (teamIds.length === 0) return byTeam;
    const rows = await db
      .selectFrom('team_members')
      .selectAll()
      .where('workspace_id', '=', workspaceId)
      .where('team_id', 'in', teamIds)
      .orderBy('seq')
      .execute();
    for (const row of rows) byTeam.get(row.team_id)?.push(row);
    return byTeam;
  };

  async function find(workspaceId: string, id: string): Promise<StoredTeam | undefined> {
    const team = await db.selectFrom('teams').selectAll().where('workspace_id', '=', workspaceId).where('id', '=', id).executeTakeFirst();
    if (!team) return undefined;
    return { team, members: (await membersOf(workspaceId, [id])).get(id) ?? [] };
  }

  return {
    find,

    /**
     * The active users of the workspace among `ids` (user ids) and `emailKeys` (lower-cased e-mails):
     * who may be a team's member (API.md §14).
     */
    workspaceUsers: async (workspaceId: string, ids: string[], emailKeys: string[]) => {
      if (ids.length === 0 && emailKeys.length === 0) return [];
      return db
        .selectFrom('users')
        .innerJoin('memberships', 'memberships.user_id', 'users.id')
        .select(['users.id', 'users.email', 'users.email_key'])
        .where('memberships.workspace_id', '=', workspaceId)
        .where('users.status', '=', 'active')
        .where((eb) => eb.or([...(ids.length > 0 ? [eb('users.id', 'in', ids)] : []), ...(emailKeys.length > 0 ? [eb('users.email_key', 'in', emailKeys)] : [])]))
        .execute();
    },

    /** The e-mail of a user of the workspace (null when they are none): their identity as a team member. */
    memberEmail: async (workspaceId: string, userId: string): Promise<{ email: string; email_key: string } | null> =>
      (await db
        .selectFrom('users')
        .innerJoin('memberships', 'memberships.user_id', 'users.id')
        .select(['users.email', 'users.email_key'])
        .where('memberships.workspace_id', '=', workspaceId)
        .where('users.id', '=', userId)
        .executeTakeFirst()) ?? null,

    /** The ids of the workspace's teams a member (lower-cased e-mail) belongs to. */
    teamIdsOf: async (workspaceId: string, emailKey: string): Promise<string[]> =>
      (await db.selectFrom('team_members').select('team_id').where('workspace_id', '=', workspaceId).where('email_key', '=', emailKey).execute()).map((r) => r.team_id),

    /** The team and its first members, with its audit event, in one transaction. */
    insert: (team: TeamRow, members: NewTeamMemberRow[], audit: AuditRow) =>
      db.transaction().execute(async (trx) => {
        await trx.insertInto('teams').values(team).execute();
        if (members.length > 0) await trx.insertInto('team_members').values(members).execute();
        await insertAudit(trx, audit);
      }),

    list: async (workspaceId: string, page: PageRequest): Promise<Page<StoredTeam>> => {
      const teams = await paginate(db.selectFrom('teams').selectAll().where('workspace_id', '=', workspaceId), page);
      const members = await membersOf(
        workspaceId,
        teams.data.map((t) => t.id),
      );
      return { data: teams.data.map((team) => ({ team, members: members.get(team.id) ?? [] })), nextCursor: teams.nextCursor };
    },

    /**
     * Adds a member unless the team already has `maxMembers`. Returns `duplicate` when the e-mail is
     * already a member (the UNIQUE constraint decides, so two concurrent adds cannot both succeed).
     */
    addMember: (member: NewTeamMemberRow, updatedAt: string, maxMembers: number, audit: AuditRow) =>
      db.transaction().execute(async (trx): Promise<'added' | 'duplicate' | 'full'> => {
        const { n } = await trx
          .selectFrom('team_members')
          .select((eb) => eb.fn.countAll<number>().as('n'))
          .where('workspace_id', '=', member.workspace_id)
          .where('team_id', '=', member.team_id)
          .executeTakeFirstOrThrow();
        // ON CONFLICT rather than catching the violation: on PostgreSQL a failed statement aborts the whole transaction.
        const inserted = await trx.insertInto('team_members').values(member).onConflict((oc) => oc.columns(['team_id', 'email_key']).doNothing()).executeTakeFirst();
        if (Number(inserted.numInsertedOrUpdatedRows ?? 0) === 0) return 'duplicate';
        if (Number(n) >= maxMembers) throw new TeamFullSignal();
        await trx.updateTable('teams').set({ updated_at: updatedAt }).where('workspace_id', '=', member.workspace_id).where('id', '=', member.team_id).execute();
        await insertAudit(trx, audit);
        return 'added';
      }).catch((err: unknown) => {
        if (err instanceof TeamFullSignal) return 'full' as const;
        throw err;
      }),

    /** The team's own fields and member statuses (by `email_key`), with its audit event, in one transaction. */
    updateAvailability: (
      workspaceId: string,
      id: string,
      patch: Partial<Pick<TeamRow, 'status' | 'timezone' | 'weekly' | 'updated_at'>>,
      memberStatuses: Array<{ emailKey: string; status: TeamStatus }>,
      audit: AuditRow,
    ) =>
      db.transaction().execute(async (trx) => {
        await insertAudit(trx, audit);
        await trx.updateTable('teams').set(patch).where('workspace_id', '=', workspaceId).where('id', '=', id).execute();
        for (const m of memberStatuses) {
          await trx
            .updateTable('team_members')
            .set({ status: m.status })
            .where('workspace_id', '=', workspaceId)
            .where('team_id', '=', id)
            .where('email_key', '=', m.emailKey)
            .execute();
        }
      }),
  };
}

/** Rolls the add-member transaction back when the team is full (the insert came first, to detect a duplicate). */
class TeamFullSignal extends Error {}

export type TeamStore = ReturnType<typeof createTeamStore>;
