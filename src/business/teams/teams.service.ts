import type { TeamRow } from '../../db/schema.js';
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
  async function load(workspaceId: string, id: string): Promise<StoredTeam> {
    const found = await store.find(workspaceId, id);
    if (!found) throw new NotFoundError('Team', id);
    return found;
  }

  const get = async (workspaceId: string, id: string): Promise<Team> => toTeam(await load(workspaceId, id), clock.now());

  return {
    get,

    async create(workspaceId: string, input: CreateTeamInput): Promise<Team> {
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
      const members = input.members.map((email) => ({
        team_id: team.id,
        workspace_id: workspaceId,
        email,
        email_key: emailKey(email),
        role: 'member' as const,
        status: 'available' as const,
        created_at: now,
      }));
      await store.insert(team, members);
      return get(workspaceId, team.id);
    },

    async list(workspaceId: string, page: PageRequest): Promise<Page<Team>> {
      const now = clock.now();
      return mapPage(await store.list(workspaceId, page), (t) => toTeam(t, now));
    },

    async updateAvailability(workspaceId: string, id: string, input: UpdateAvailabilityInput): Promise<Team> {
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
      await store.updateAvailability(workspaceId, id, patch, memberStatuses);
      return get(workspaceId, id);
    },

    async setOfferSeconds(workspaceId: string, id: string, offerSeconds: number): Promise<void> {
      await load(workspaceId, id);
      await store.setOfferSeconds(workspaceId, id, offerSeconds, clock.now().toISOString());
    },

    async addMember(workspaceId: string, id: string, input: AddMemberInput): Promise<Team> {
      await load(workspaceId, id);
      const now = clock.now().toISOString();
      const outcome = await store.addMember(
        { team_id: id, workspace_id: workspaceId, email: input.email, email_key: emailKey(input.email), role: input.role, status: 'available', created_at: now },
        now,
        MAX_MEMBERS,
      );
      if (outcome === 'duplicate') throw new ConflictError(`${input.email} is already a member of team ${id}.`);
      if (outcome === 'full') throw new ConflictError(`Team ${id} already has ${MAX_MEMBERS} members, the most a team can have.`);
      return get(workspaceId, id);
    },
  };
}

export type TeamService = ReturnType<typeof createTeamService>;
