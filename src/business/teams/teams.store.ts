import type { Kysely } from 'kysely';
import type { Database, NewTeamMemberRow, TeamMemberRow, TeamRow, TeamStatus } from '../../db/schema.js';
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

    /** The team and its first members, in one transaction. */
    insert: (team: TeamRow, members: NewTeamMemberRow[]) =>
      db.transaction().execute(async (trx) => {
        await trx.insertInto('teams').values(team).execute();
        if (members.length > 0) await trx.insertInto('team_members').values(members).execute();
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
    setOfferSeconds: (workspaceId: string, id: string, offerSeconds: number, now: string) =>
      db.updateTable('teams').set({ offer_seconds: offerSeconds, updated_at: now }).where('workspace_id', '=', workspaceId).where('id', '=', id).execute(),
    addMember: (member: NewTeamMemberRow, updatedAt: string, maxMembers: number) =>
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
        return 'added';
      }).catch((err: unknown) => {
        if (err instanceof TeamFullSignal) return 'full' as const;
        throw err;
      }),

    /** The team's own fields and member statuses (by `email_key`), in one transaction. */
    updateAvailability: (
      workspaceId: string,
      id: string,
      patch: Partial<Pick<TeamRow, 'status' | 'timezone' | 'weekly' | 'updated_at'>>,
      memberStatuses: Array<{ emailKey: string; status: TeamStatus }>,
    ) =>
      db.transaction().execute(async (trx) => {
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
