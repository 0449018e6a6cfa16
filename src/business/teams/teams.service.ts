import type { TeamRow } from '../../db/schema.js';
import { auditRow } from '../../core/audit/audit.js';
import type { Actor } from '../../core/auth/actor.js';
import { ConflictError, NotFoundError, ValidationError } from '../../errors.js';
import type { Clock } from '../../lib/clock.js';
import type { IdGenerator } from '../../lib/ids.js';
import { mapPage, type Page, type PageRequest } from '../../lib/pagination.js';
import { canonicalTimeZone, isAvailableNow } from './availability.js';
import {
  type AddMemberInput,
  type CreateTeamInput,
  MAX_MEMBERS,
  type Team,
  type TeamWindow,
  type UpdateAvailabilityInput,
} from './teams.schemas.js';
import type { StoredTeam, TeamStore } from './teams.store.js';

/** E-mails are kept as first given and compared lower-cased. */
export const emailKey = (email: string) => email.toLowerCase();
/** How long a handoff offered to a member waits for them, unless the team says otherwise. */
export const DEFAULT_OFFER_SECONDS = 120;

/** Validated by the schema already; canonical form (`america/new_york` → `America/New_York`). */
function timeZoneOf(name: string): string {
  const tz = canonicalTimeZone(name);
  if (!tz) throw ValidationError.field('timezone', 'must be an IANA time zone name');
  return tz;
}

/** Stored rows as the API object; `availableNow` at `now`. */
export function toTeam({ team, members }: StoredTeam, now: Date): Team {
  const availability = { status: team.status, timezone: team.timezone, weekly: JSON.parse(team.weekly) as TeamWindow[] };
  const list = members.map((m) => ({ email: m.email, role: m.role, status: m.status, chatUserId: m.chat_user_id }));
  return {
    id: team.id,
    name: team.name,
    members: list,
    availability,
    availableNow: isAvailableNow(availability, list, now),
    handoff: {
      offerSeconds: team.offer_seconds,
      notifyUrl: team.notify_url,
      desk: team.desk_channel_id !== null && team.desk_conversation !== null ? { channelId: team.desk_channel_id, conversation: team.desk_conversation } : null,
    },
    createdAt: team.created_at,
    updatedAt: team.updated_at,
  };
}

export interface TeamServiceDeps {
  store: TeamStore;
  clock: Clock;
  ids: IdGenerator;
}

export function createTeamService({ store, clock, ids }: TeamServiceDeps) {
  /**
   * Team members are users of the workspace (API.md §14): each of `refs` is a user id or the e-mail
   * of an active member, answered as that user's e-mail (how members are stored); anyone else → 400
   * naming `field(i)`.
   */
  async function usersOf(workspaceId: string, refs: string[], field: (i: number) => string): Promise<Array<{ email: string; email_key: string }>> {
    const found = await store.workspaceUsers(
      workspaceId,
      refs.filter((r) => !r.includes('@')),
      refs.filter((r) => r.includes('@')).map(emailKey),
    );
    const seen = new Map<string, number>();
    return refs.map((ref, i) => {
      const user = found.find((u) => u.id === ref || u.email_key === emailKey(ref));
      if (!user) throw ValidationError.field(field(i), 'is not a member of this workspace: name a user id (usr_…) or the e-mail of one');
      const first = seen.get(user.id);
      if (first !== undefined) throw ValidationError.field(field(i), `names the same person as members.${first}`);
      seen.set(user.id, i);
      return { email: user.email, email_key: user.email_key };
    });
  }

  const audit = (actor: Actor, action: string, teamId: string, changes?: string[]) =>
    auditRow(ids, clock, actor, { action, target: { type: 'team', id: teamId }, ...(changes ? { changes } : {}) });

  async function load(workspaceId: string, id: string): Promise<StoredTeam> {
    const found = await store.find(workspaceId, id);
    if (!found) throw new NotFoundError('Team', id);
    return found;
  }

  const get = async (workspaceId: string, id: string): Promise<Team> => toTeam(await load(workspaceId, id), clock.now());

  return {
    get,

    async create(actor: Actor, input: CreateTeamInput): Promise<Team> {
      const { workspaceId } = actor;
      const users = await usersOf(workspaceId, input.members, (i) => `members.${i}`);
      const now = clock.now().toISOString();
      const team: TeamRow = {
        id: ids('team'),
        workspace_id: workspaceId,
        name: input.name,
        status: 'available',
        timezone: 'UTC',
        weekly: '[]',
        created_at: now,
        updated_at: now,
        offer_seconds: DEFAULT_OFFER_SECONDS,
        notify_url: null,
        notify_secret: null,
        desk_channel_id: null,
        desk_conversation: null,
      };
      const members = users.map((user) => ({
        team_id: team.id,
        workspace_id: workspaceId,
        email: user.email,
        email_key: user.email_key,
        role: 'member' as const,
        status: 'available' as const,
        created_at: now,
      }));
      await store.insert(team, members, audit(actor, 'team.create', team.id, ['name', ...(members.length > 0 ? ['members'] : [])]));
      return get(workspaceId, team.id);
    },

    async list(workspaceId: string, page: PageRequest): Promise<Page<Team>> {
      const now = clock.now();
      return mapPage(await store.list(workspaceId, page), (t) => toTeam(t, now));
    },

    async updateAvailability(actor: Actor, id: string, input: UpdateAvailabilityInput): Promise<Team> {
      const { workspaceId } = actor;
      const { members } = await load(workspaceId, id);
      const known = new Set(members.map((m) => m.email_key));
      const memberStatuses = (input.members ?? []).map((m, i) => {
        const key = emailKey(m.email);
        if (!known.has(key)) throw ValidationError.field(`members.${i}.email`, 'is not a member of this team');
        return { emailKey: key, status: m.status };
      });
      const patch: Parameters<TeamStore['updateAvailability']>[2] = { updated_at: clock.now().toISOString() };
      if (input.status !== undefined) patch.status = input.status;
      if (input.timezone !== undefined) patch.timezone = timeZoneOf(input.timezone);
      if (input.weekly !== undefined) patch.weekly = JSON.stringify(input.weekly);
      const changes = (['status', 'timezone', 'weekly', 'members'] as const).filter((f) => input[f] !== undefined);
      await store.updateAvailability(workspaceId, id, patch, memberStatuses, audit(actor, 'team.availability', id, changes));
      return get(workspaceId, id);
    },

    async addMember(actor: Actor, id: string, input: AddMemberInput): Promise<Team> {
      const { workspaceId } = actor;
      await load(workspaceId, id);
      const [user] = await usersOf(workspaceId, [input.userId ?? input.email ?? ''], () => (input.userId !== undefined ? 'userId' : 'email'));
      const now = clock.now().toISOString();
      const outcome = await store.addMember(
        { team_id: id, workspace_id: workspaceId, email: user!.email, email_key: user!.email_key, role: input.role, status: 'available', created_at: now },
        now,
        MAX_MEMBERS,
        audit(actor, 'team.member_add', id, ['members']),
      );
      if (outcome === 'duplicate') throw new ConflictError(`${user!.email} is already a member of team ${id}.`);
      if (outcome === 'full') throw new ConflictError(`Team ${id} already has ${MAX_MEMBERS} members, the most a team can have.`);
      return get(workspaceId, id);
    },
  };
}

export type TeamService = ReturnType<typeof createTeamService>;
