/**
 * Handoffs are people's work (API.md §14 "Teams and handoffs are people"): accepting, answering,
 * handing back and resolving act as the user behind the cookie or key, whose identity as a team
 * member is their e-mail (as team members are stored). Naming another `member` is an admin's act
 * (anyone else → 403), recorded in the audit event as `onBehalfOf`; a service key (no user) names
 * the member it acts as, as it always did. A person below `editor` (an `agent`, a `viewer`) sees and
 * works only the handoffs of teams they belong to: another team's is a 404, as if it did not exist.
 */
import type { Actor } from '../../core/auth/actor.js';
import { atLeast } from '../../core/auth/roles.js';
import type { HandoffRow } from '../../db/schema.js';
import { ForbiddenError, NotFoundError, ValidationError } from '../../errors.js';
import { mapPage, type Page, type PageRequest } from '../../lib/pagination.js';
import { emailKey } from '../teams/teams.service.js';
import { toHandoff, type HandoffBase } from './handoffs.base.js';
import type { Handoff, HandoffMessage } from './handoffs.schemas.js';
import type { HandoffStore } from './handoffs.store.js';
import type { Acting, Work } from './handoffs.work.js';

/** Messages of the conversation shown with a handoff (the console's Inbox, MCP). */
const CONVERSATION_MESSAGES = 50;

export function createPeopleWork(base: HandoffBase, work: Work) {
  const { store, teams, teamOf, nextAvailable, find } = base;

  /** The actor's own identity as a team member (their e-mail), or null for a key that belongs to nobody. */
  async function selfOf(actor: Actor): Promise<{ email: string; email_key: string } | null> {
    if (actor.userId === null) return null;
    const self = await teams.memberEmail(actor.workspaceId, actor.userId);
    // Authenticated as a member a moment ago: gone since, they are nobody here.
    if (!self) throw new ForbiddenError('You are no longer a member of this workspace.');
    return self;
  }

  /** The teams whose handoffs the actor may see: all (undefined) from `editor` up and for keys that belong to nobody. */
  async function visibleTeams(actor: Actor): Promise<string[] | undefined> {
    if (actor.userId === null || atLeast(actor.role, 'editor')) return undefined;
    const self = await selfOf(actor);
    return teams.teamIdsOf(actor.workspaceId, self!.email_key);
  }

  /** The handoff, or 404 when it is not the workspace's or not one the actor may see. */
  async function visible(actor: Actor, id: string): Promise<HandoffRow> {
    const row = await find(actor.workspaceId, id);
    const allowed = await visibleTeams(actor);
    if (allowed !== undefined && !allowed.includes(row.team_id)) throw new NotFoundError('Handoff', id);
    return row;
  }

  /**
   * Who acts: the actor's own member identity, unless `named` (an e-mail or a user id) is someone
   * else, which needs `admin` (or a service key). `required`: a member must be known (accept, reply);
   * otherwise a service key naming nobody acts as the API.
   */
  async function actingOf(actor: Actor, named: string | undefined, required: boolean): Promise<Acting> {
    const self = await selfOf(actor);
    if (named === undefined) {
      if (self) return { actor, email: self.email };
      if (required) throw ValidationError.field('member', 'is required: a key that belongs to no person names the member it acts as');
      return { actor, email: undefined };
    }
    const isSelf = self !== null && (named === actor.userId || emailKey(named) === self.email_key);
    if (isSelf) return { actor, email: self.email };
    if (self !== null && !atLeast(actor.role, 'admin')) {
      throw new ForbiddenError(`Acting as another member needs the "admin" role; your role is "${actor.role}". Leave out \`member\` to act as yourself.`);
    }
    const email = named.includes('@') ? named : (await teams.memberEmail(actor.workspaceId, named))?.email;
    if (email === undefined) throw ValidationError.field('member', 'is not a member of this workspace: name an e-mail or a user id (usr_…)');
    return { actor, email, onBehalfOf: email };
  }

  return {
    async get(actor: Actor, id: string): Promise<Handoff & { messages: HandoffMessage[] }> {
      const row = await visible(actor, id);
      const nextAt = row.status === 'queued' ? nextAvailable(await teamOf(actor.workspaceId, row.team_id)) : null;
      const messages = row.session_id === null ? [] : await store.conversation(row.session_id, CONVERSATION_MESSAGES);
      return {
        ...toHandoff(row, nextAt),
        messages: messages.map((m) => ({ id: m.id, role: m.role as 'user' | 'assistant', content: m.content, author: m.author, createdAt: m.created_at })),
      };
    },

    async list(actor: Actor, page: PageRequest, filter: Omit<Parameters<HandoffStore['list']>[2], 'teamIds'>): Promise<Page<Handoff>> {
      const { workspaceId } = actor;
      const rows = await store.list(workspaceId, page, { ...filter, teamIds: await visibleTeams(actor) });
      // Queued ones say when their team is next available: each team read once.
      const nextOf = new Map<string, string | null>();
      for (const row of rows.data) {
        if (row.status === 'queued' && !nextOf.has(row.team_id)) nextOf.set(row.team_id, nextAvailable(await teamOf(workspaceId, row.team_id)));
      }
      return mapPage(rows, (row) => toHandoff(row, row.status === 'queued' ? (nextOf.get(row.team_id) ?? null) : null));
    },

    /** Takes the conversation as the actor (or, for an admin, the member named). */
    async accept(actor: Actor, id: string, member?: string): Promise<Handoff> {
      await visible(actor, id);
      const acting = await actingOf(actor, member, true);
      return work.accept(actor.workspaceId, id, { ...acting, email: acting.email! });
    },

    /** Replies as the actor (or, for an admin, the member named), who must have accepted it. */
    async reply(actor: Actor, id: string, member: string | undefined, text: string): Promise<HandoffMessage> {
      await visible(actor, id);
      const acting = await actingOf(actor, member, true);
      return work.reply(actor.workspaceId, id, { ...acting, email: acting.email! }, text);
    },

    /** Hands back or resolves as the actor (or the member named; a service key naming nobody: `api`). */
    async end(actor: Actor, id: string, to: 'returned' | 'resolved', member: string | undefined): Promise<Handoff> {
      await visible(actor, id);
      return work.end(actor.workspaceId, id, to, await actingOf(actor, member, false));
    },
  };
}
