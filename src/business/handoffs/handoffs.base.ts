/**
 * What every part of the handoff service shares (DESIGN.md "Factories stay small"): its
 * dependencies, the API object of a row, and the reads of a handoff and its team.
 */
import type { Logger } from 'pino';
import type { HandoffRow } from '../../db/schema.js';
import { NotFoundError, ValidationError } from '../../errors.js';
import type { Clock } from '../../lib/clock.js';
import type { IdGenerator } from '../../lib/ids.js';
import type { Cipher } from '../../lib/cipher.js';
import type { WriteGate } from '../../lib/write-gate.js';
import type { AddressGuardOptions } from '../../lib/address-guard.js';
import type { FetchLike } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { PersonaService } from '../../core/personas/personas.service.js';
import { nextOpening, type Schedule } from '../teams/availability.js';
import { emailKey } from '../teams/teams.service.js';
import type { TeamStore } from '../teams/teams.store.js';
import type { Handoff } from './handoffs.schemas.js';
import type { HandoffStore } from './handoffs.store.js';

export interface HandoffServiceDeps {
  store: HandoffStore;
  teams: TeamStore;
  personas: PersonaService;
  clock: Clock;
  ids: IdGenerator;
  /** This instance, as it claims deliveries. */
  owner?: string;
  logger?: Logger;
  /** Teams' webhooks: secrets are sealed with `cipher`; URLs and posts pass the address guard. */
  webhooks?: { cipher: Cipher; fetch: FetchLike; guard: AddressGuardOptions };
  /** Where a move waits between reading the handoff and writing over it (tests of races). */
  writeGate?: WriteGate | undefined;
}

export function toHandoff(row: HandoffRow, nextAvailableAt: string | null = null): Handoff {
  return {
    id: row.id,
    sessionId: row.session_id,
    personaId: row.persona_id,
    teamId: row.team_id,
    status: row.status,
    trigger: row.trigger,
    reason: row.reason,
    member: row.member,
    offerUntil: row.status === 'offered' ? row.offer_until : null,
    offers: row.offers,
    nextAvailableAt,
    createdAt: row.created_at,
    acceptedAt: row.accepted_at,
    firstReplyAt: row.first_reply_at,
    endedAt: row.ended_at,
    endedBy: row.ended_by,
  };
}

/** The reads every part makes: a handoff (404), its team with its schedule (404), a member of it (400). */
export function createHandoffBase(deps: HandoffServiceDeps) {
  const { store, teams, clock } = deps;
  const now = () => clock.now().toISOString();

  async function find(workspaceId: string, id: string): Promise<HandoffRow> {
    const row = await store.find(workspaceId, id);
    if (!row) throw new NotFoundError('Handoff', id);
    return row;
  }

  async function teamOf(workspaceId: string, teamId: string) {
    const team = await teams.find(workspaceId, teamId);
    if (!team) throw new NotFoundError('Team', teamId);
    const schedule: Schedule = { status: team.team.status, timezone: team.team.timezone, weekly: JSON.parse(team.team.weekly) as Schedule['weekly'] };
    return { ...team, schedule };
  }

  /** When the team can next take the conversation: now, a window's start, or null (nobody is available). */
  function nextAvailable(team: Awaited<ReturnType<typeof teamOf>>): string | null {
    if (team.schedule.status !== 'available' || !team.members.some((m) => m.status === 'available')) return null;
    return nextOpening(team.schedule, clock.now())?.toISOString() ?? null;
  }

  /** The member of the team with this e-mail (case ignored), or a 400 naming `member`. */
  async function memberOf(row: HandoffRow, email: string) {
    const team = await teamOf(row.workspace_id, row.team_id);
    const member = team.members.find((m) => m.email_key === emailKey(email));
    if (!member) throw ValidationError.field('member', `is not a member of team ${row.team_id}`);
    return { member, team };
  }

  return { ...deps, now, find, teamOf, nextAvailable, memberOf };
}

export type HandoffBase = ReturnType<typeof createHandoffBase>;
export type LoadedTeam = Awaited<ReturnType<HandoffBase['teamOf']>>;
