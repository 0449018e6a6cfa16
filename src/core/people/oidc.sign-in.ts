/**
 * Who an OIDC sign-in is here, decided in the sign-in's transaction (API.md §14,
 * docs/people.md#oidc): a known subject, else a user with that verified e-mail, else a first
 * sign-in by an invitation or the default role; then the role claim, the session and the audit
 * events. A refusal throws, so the transaction keeps nothing.
 */
import type { Transaction } from 'kysely';
import type { OidcConfig, OidcRole } from '../../config.js';
import type { Database } from '../../db/schema.js';
import type { Clock } from '../../lib/clock.js';
import type { IdGenerator } from '../../lib/ids.js';
import { auditRow, insertAudit, type AuditEntry } from '../audit/audit.js';
import type { Actor, ActorOrigin } from '../auth/actor.js';
import { DEFAULT_WORKSPACE } from '../auth/auth.service.js';
import { atLeast, type Role, scopesOfRole } from '../auth/roles.js';
import type { LoginSessions } from './login-sessions.js';
import type { OidcStore } from './oidc.store.js';
import { emailKey, type PeopleStore, type UserRow } from './people.store.js';
import { setRoleAndRevokeAbove } from './members.service.js';
import type { MembersStore } from './members.store.js';

/** Why a sign-in was refused, for the page the browser is shown; `userId` when the person is known (their workspaces get a `denied` event). */
export class OidcRefusal extends Error {
  constructor(
    readonly status: 400 | 403 | 502,
    readonly title: string,
    detail: string,
    readonly userId?: string,
  ) {
    super(detail);
    this.name = 'OidcRefusal';
  }
}

/**
 * The role a claim's values give: the highest of those `map` names (without a map, of those that
 * are a role's name), or null when none does. A string is one value; an array's strings are values.
 */
export function roleFromClaim(value: unknown, map: Readonly<Record<string, OidcRole>> | undefined): OidcRole | null {
  const values = typeof value === 'string' ? [value] : Array.isArray(value) ? value.filter((v): v is string => typeof v === 'string') : [];
  const own: Readonly<Record<string, OidcRole>> = map ?? { viewer: 'viewer', agent: 'agent', editor: 'editor', admin: 'admin' };
  let best: OidcRole | null = null;
  for (const v of values) {
    const role = Object.hasOwn(own, v) ? own[v]! : null;
    if (role && (best === null || atLeast(role, best))) best = role;
  }
  return best;
}

export interface OidcSignInDeps {
  config: OidcConfig;
  store: OidcStore;
  /** A role the claim lowers revokes the keys above it, as an admin's change does (members.service.ts). */
  members: MembersStore;
  people: PeopleStore;
  loginSessions: LoginSessions;
  clock: Clock;
  ids: IdGenerator;
}

interface Join {
  workspaceId: string;
  role: Role;
  invitationId: string | null;
}

export function createOidcSignIn({ config, store, members, people, loginSessions, clock, ids }: OidcSignInDeps) {
  function actorFor(user: Pick<UserRow, 'id' | 'name'>, workspaceId: string, role: Role, origin: ActorOrigin | undefined): Actor {
    return { kind: 'user', id: user.id, name: user.name, workspaceId, role, scopes: scopesOfRole(role), userId: user.id, ...(origin ? { origin } : {}) };
  }

  /** The role the claim gives in the default workspace: the highest mapped value, else the default role, else viewer. */
  function claimedRole(claims: Record<string, unknown>): Role {
    return roleFromClaim(claims[config.roleClaim!], config.roleMap) ?? config.defaultRole ?? 'viewer';
  }

  /** `denied` sign-in events in each workspace of a known person (none for someone unknown). */
  async function auditDenied(userId: string, origin: ActorOrigin | undefined) {
    const user = await people.findUser(userId);
    if (!user) return;
    const rows = (await people.membershipsOf(userId)).map((m) =>
      auditRow(ids, clock, actorFor(user, m.workspace_id, m.role, origin), { action: 'session.signin', target: { type: 'session', id: null }, outcome: 'denied' }),
    );
    await insertAudit(store.db, rows);
  }

  /** Everything a verified person's sign-in changes, in `trx`. Throws OidcRefusal (nothing is kept then). */
  async function signIn(trx: Transaction<Database>, issuer: string, subject: string, claims: Record<string, unknown>, email: string, invitationHash: string | null, origin: ActorOrigin | undefined) {
    const now = clock.now().toISOString();
    const key = emailKey(email);
    const knownId = await store.identityUser(trx, issuer, subject);
    let user = knownId ? await store.findUser(trx, knownId) : await store.findUserByEmailKey(trx, key);
    if (user?.status === 'disabled') throw new OidcRefusal(403, 'Account disabled', 'This account is disabled. Ask an administrator of your workspace.', user.id);
    const memberships = user ? await store.memberships(trx, user.id) : [];
    const memberOf = new Set(memberships.map((m) => m.workspace_id));
    const defaultWorkspace = (await store.workspaceByName(trx, DEFAULT_WORKSPACE))?.id;

    const joins: Join[] = [];
    let invitedWorkspace: string | undefined;
    if (invitationHash !== null) {
      const invitation = await store.invitationByHash(trx, invitationHash);
      if (!invitation || invitation.used_at !== null || invitation.revoked_at !== null || invitation.expires_at <= now) {
        throw new OidcRefusal(403, 'Invitation no longer valid', 'This invitation was already used, has expired or was revoked. Ask for a new one.', user?.id);
      }
      if (invitation.email === null || emailKey(invitation.email) !== key) {
        throw new OidcRefusal(403, 'Invitation for another address', `This invitation was sent to another e-mail address than ${email}. Sign in at your provider with the invited address.`, user?.id);
      }
      invitedWorkspace = invitation.workspace_id;
      if (!memberOf.has(invitation.workspace_id)) joins.push({ workspaceId: invitation.workspace_id, role: invitation.role, invitationId: invitation.id });
    }
    if (memberships.length === 0 && joins.length === 0) {
      // A first sign-in: the invitations waiting for this e-mail (one per workspace, the newest), else the default role.
      for (const invitation of await store.openInvitationsFor(trx, key, now)) {
        if (!joins.some((j) => j.workspaceId === invitation.workspace_id)) joins.push({ workspaceId: invitation.workspace_id, role: invitation.role, invitationId: invitation.id });
      }
      if (joins.length === 0) {
        const domain = key.slice(key.lastIndexOf('@') + 1);
        if (config.defaultRole === undefined || defaultWorkspace === undefined) {
          throw new OidcRefusal(403, 'No invitation', `Switchboard has no account or invitation for ${email}. Ask an administrator of your workspace to invite you.`, user?.id);
        }
        if (config.allowedDomains.length > 0 && !config.allowedDomains.includes(domain)) {
          throw new OidcRefusal(403, 'Address not allowed', `Addresses at ${domain} cannot join this Switchboard by themselves. Ask an administrator of your workspace to invite you.`, user?.id);
        }
        joins.push({ workspaceId: defaultWorkspace, role: config.defaultRole, invitationId: null });
      }
    }

    if (!user) {
      const name = [claims.name, claims.preferred_username].find((v): v is string => typeof v === 'string' && v.trim() !== '')?.trim().slice(0, 200) ?? email.slice(0, email.indexOf('@'));
      user = { id: ids('usr'), email, email_key: key, name, status: 'active', password: null, created_at: now, last_seen_at: now };
      await people.insertUser(user, trx);
    } else {
      await people.updateUser(user.id, { last_seen_at: now }, trx);
    }
    if (!knownId) await store.insertIdentity(trx, { issuer, subject, user_id: user.id, created_at: now });

    const audit: ReturnType<typeof auditRow>[] = [];
    const event = (workspaceId: string, role: Role, entry: AuditEntry) => audit.push(auditRow(ids, clock, actorFor(user!, workspaceId, role, origin), entry));
    const roles = new Map(memberships.map((m) => [m.workspace_id, m.role as Role]));
    for (const join of joins) {
      // The claim decides the default workspace's role from the first sign-in on (an owner's excepted).
      const role = config.roleClaim && join.workspaceId === defaultWorkspace && join.role !== 'owner' ? claimedRole(claims) : join.role;
      if (join.invitationId !== null && !(await store.useInvitation(trx, join.invitationId, now))) {
        throw new OidcRefusal(403, 'Invitation no longer valid', 'This invitation was used or revoked a moment ago. Ask for a new one.', user.id);
      }
      await people.insertMembership({ workspace_id: join.workspaceId, user_id: user.id, role, joined_at: now }, trx);
      roles.set(join.workspaceId, role);
      event(join.workspaceId, role, { action: 'member.join', target: { type: 'member', id: user.id } });
    }
    if (config.roleClaim && defaultWorkspace !== undefined && memberOf.has(defaultWorkspace)) {
      const current = roles.get(defaultWorkspace)!;
      const role = claimedRole(claims);
      if (current !== 'owner' && role !== current) {
        const { ended } = await setRoleAndRevokeAbove(members, trx, defaultWorkspace, user.id, role, now);
        roles.set(defaultWorkspace, role);
        event(defaultWorkspace, role, { action: 'member.role', target: { type: 'member', id: user.id }, changes: ['role', ...ended] });
      }
    }

    const workspaceId = invitedWorkspace ?? (defaultWorkspace !== undefined && roles.has(defaultWorkspace) ? defaultWorkspace : [...roles.keys()][0]!);
    const started = await loginSessions.start(user.id, workspaceId, 'oidc', origin, trx);
    for (const [ws, role] of roles) event(ws, role, { action: 'session.signin', target: { type: 'session', id: ws === workspaceId ? started.session.id : null } });
    await insertAudit(trx, audit);
    return { started, changedRole: audit.some((a) => a.action === 'member.role') };
  }

  return { signIn, auditDenied };
}
