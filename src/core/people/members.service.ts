/**
 * Members of a workspace (API.md §14): list, change a role, remove. Admins manage members below
 * owner; only an owner grants, changes or removes `owner`; a workspace always keeps one owner.
 * A role that drops revokes at once the person's keys above it; a removal ends all their keys,
 * sign-in sessions and OAuth grants in the workspace. One change, one audit event (API.md §14), in
 * the change's transaction: what the change ended with it is named in the event's `changes`
 * (`keys`, `sessions`, `oauthGrants`), not written as events of its own. The key caches of every
 * instance are cleared after it commits.
 */
import type { Transaction } from 'kysely';
import type { Database } from '../../db/schema.js';
import { ConflictError, ForbiddenError, NotFoundError } from '../../errors.js';
import type { Clock } from '../../lib/clock.js';
import type { IdGenerator } from '../../lib/ids.js';
import { mapPage, type Page, type PageRequest } from '../../lib/pagination.js';
import type { WriteGate } from '../../lib/write-gate.js';
import { createAuditRows, insertAudit } from '../audit/audit.js';
import type { Actor } from '../auth/actor.js';
import type { Scope } from '../auth/keys.js';
import { atLeast, capScopes, type Role } from '../auth/roles.js';
import type { MemberRow, MembersStore } from './members.store.js';
import type { PeopleStore } from './people.store.js';

export interface Member {
  userId: string;
  email: string;
  name: string;
  role: Role;
  status: 'active' | 'disabled';
  joinedAt: string;
  lastSeenAt: string | null;
}

export function toMember(row: MemberRow): Member {
  return { userId: row.user_id, email: row.email, name: row.name, role: row.role, status: row.status, joinedAt: row.joined_at, lastSeenAt: row.last_seen_at };
}

export interface MembersServiceDeps {
  store: MembersStore;
  people: PeopleStore;
  clock: Clock;
  ids: IdGenerator;
  /** Clears every instance's key cache after keys were revoked (auth.service.ts). */
  forgetKeys: (keyIds: string[]) => Promise<void>;
  writeGate?: WriteGate | undefined;
}

/** Only an owner touches `owner`: granting it, or changing or removing someone who has it. */
export function requireOwnerFor(caller: Actor, what: string): void {
  if (!atLeast(caller.role, 'owner')) throw new ForbiddenError(`Only an owner may ${what}; your role is "${caller.role}".`);
}

/**
 * Revokes `keys` and the OAuth grants resting on them in `trx`; no event of their own: the names of
 * what ended (`keys`, `oauthGrants`) go into the event of the change that caused it.
 */
async function revokeKeysAndGrants(store: MembersStore, trx: Transaction<Database>, workspaceId: string, keys: { id: string }[], at: string): Promise<{ keyIds: string[]; ended: string[] }> {
  const keyIds = keys.map((k) => k.id);
  await store.revokeKeys(trx, workspaceId, keyIds, at);
  const grants = await store.revokeGrantsOfKeys(trx, workspaceId, keyIds, at);
  return { keyIds, ended: [...(keyIds.length > 0 ? ['keys'] : []), ...(grants > 0 ? ['oauthGrants'] : [])] };
}

/**
 * A person's new role in a workspace, in `trx`, by whatever changed it (an admin, an OIDC role claim):
 * their keys holding a scope the new role does not are revoked at once (401 from the next request),
 * with the grants on them. Returns every key of theirs (the caller clears them from every instance's
 * cache after the commit: those kept are capped by the new role) and the names of what ended.
 */
export async function setRoleAndRevokeAbove(store: MembersStore, trx: Transaction<Database>, workspaceId: string, userId: string, role: Role, at: string): Promise<{ keyIds: string[]; ended: string[] }> {
  await store.setRole(trx, workspaceId, userId, role);
  const keys = await store.unrevokedKeysOf(trx, workspaceId, userId);
  const above = keys.filter((k) => {
    const scopes = JSON.parse(k.scopes) as Scope[];
    return capScopes(scopes, role).length < scopes.length;
  });
  const { ended } = await revokeKeysAndGrants(store, trx, workspaceId, above, at);
  return { keyIds: keys.map((k) => k.id), ended };
}

export function createMembersService({ store, people, clock, ids, forgetKeys, writeGate }: MembersServiceDeps) {
  const audit = createAuditRows(ids, clock);
  const nowIso = () => clock.now().toISOString();

  async function requireMember(workspaceId: string, userId: string): Promise<MemberRow> {
    const row = await store.findMember(workspaceId, userId);
    if (!row) throw new NotFoundError('Member', userId);
    return row;
  }

  /**
   * In the change's transaction: the owners (locked on PostgreSQL), and a refusal when `userId` is
   * the last of them. Counted here, not before the transaction, so two changes at once cannot both
   * see two owners and leave none.
   */
  async function keepAnOwner(trx: Transaction<Database>, workspaceId: string, userId: string): Promise<void> {
    const owners = await store.lockOwners(trx, workspaceId);
    if (owners.includes(userId) && owners.length <= 1) {
      throw new ConflictError('This is the last owner of the workspace; make another member owner first.');
    }
  }

  async function revokeInTransaction(trx: Transaction<Database>, caller: Actor, keys: { id: string }[], at: string): Promise<{ keyIds: string[]; ended: string[] }> {
    return revokeKeysAndGrants(store, trx, caller.workspaceId, keys, at);
  }

  return {
    async list(caller: Actor, page: PageRequest): Promise<Page<Member>> {
      return mapPage(await store.listMembers(caller.workspaceId, page), toMember);
    },

    /** `PUT /members/:userId`: a new role; keys above a lower one are revoked in the same transaction. */
    async changeRole(caller: Actor, userId: string, role: Role): Promise<Member> {
      const before = await requireMember(caller.workspaceId, userId);
      if (role === 'owner' || before.role === 'owner') requireOwnerFor(caller, 'grant or change the "owner" role');
      await writeGate?.('member.owners', userId);
      const at = nowIso();
      const keysOfTheirs = await store.transaction(async (trx) => {
        const current = await store.findMember(caller.workspaceId, userId, trx);
        if (!current) throw new NotFoundError('Member', userId);
        if (current.role === 'owner' && role !== 'owner') {
          requireOwnerFor(caller, 'change the "owner" role');
          await keepAnOwner(trx, caller.workspaceId, userId);
        }
        if (current.role === role) return [];
        const { keyIds, ended } = await setRoleAndRevokeAbove(store, trx, caller.workspaceId, userId, role, at);
        await insertAudit(trx, audit(caller, { action: 'member.role', target: { type: 'member', id: userId }, changes: ['role', ...ended] }));
        return keyIds;
      });
      // Every key of theirs: those kept are capped by the new role, which a cached actor does not know yet.
      if (keysOfTheirs.length > 0) await forgetKeys(keysOfTheirs);
      return toMember(await requireMember(caller.workspaceId, userId));
    },

    /** `DELETE /members/:userId`: the membership, and with it every key, sign-in session and OAuth grant of theirs here. */
    async remove(caller: Actor, userId: string): Promise<void> {
      const before = await requireMember(caller.workspaceId, userId);
      if (before.role === 'owner') requireOwnerFor(caller, 'remove an owner');
      await writeGate?.('member.owners', userId);
      const at = nowIso();
      const revoked = await store.transaction(async (trx) => {
        const current = await store.findMember(caller.workspaceId, userId, trx);
        if (!current) throw new NotFoundError('Member', userId);
        if (current.role === 'owner') {
          requireOwnerFor(caller, 'remove an owner');
          await keepAnOwner(trx, caller.workspaceId, userId);
        }
        await store.deleteMembership(trx, caller.workspaceId, userId);
        const sessions = await people.endLoginSessionsOf(userId, caller.workspaceId, at, trx);
        const { keyIds, ended } = await revokeInTransaction(trx, caller, await store.unrevokedKeysOf(trx, caller.workspaceId, userId), at);
        // One event: the membership, and what ended with it.
        await insertAudit(trx, audit(caller, { action: 'member.remove', target: { type: 'member', id: userId }, changes: [...(sessions > 0 ? ['sessions'] : []), ...ended] }));
        return keyIds;
      });
      if (revoked.length > 0) await forgetKeys(revoked);
    },
  };
}

export type MembersService = ReturnType<typeof createMembersService>;
