/**
 * Invitations (API.md §14): a one-use link, lasting 7 days, that makes its holder a member with a
 * role. Only the token's SHA-256 is stored; the link (`<public URL>/console/invite#<token>`) is
 * shown once, to whoever invited. Accepting creates the user when the e-mail is new, or checks the
 * existing user's password, and signs them in; of two accepts of one token exactly one succeeds.
 */
import crypto from 'node:crypto';
import { ConflictError, ForbiddenError, GoneError, NotFoundError, UnauthorizedError } from '../../errors.js';
import type { Clock } from '../../lib/clock.js';
import { type IdGenerator, randomBase62 } from '../../lib/ids.js';
import { mapPage, type Page, type PageRequest } from '../../lib/pagination.js';
import type { WriteGate } from '../../lib/write-gate.js';
import { createAuditRows, insertAudit } from '../audit/audit.js';
import type { Actor, ActorOrigin } from '../auth/actor.js';
import { atLeast, type Role, scopesOfRole } from '../auth/roles.js';
import type { LoginSessions, StartedSession } from './login-sessions.js';
import type { InvitationRow, MembersStore } from './members.store.js';
import { hashPassword, type ScryptParams, verifyPassword } from './passwords.js';
import { emailKey, type PeopleStore, type UserRow } from './people.store.js';

export const INVITATION_TTL_MS = 7 * 24 * 3600 * 1000;
const TOKEN = /^sbi_[0-9A-Za-z]{43}$/;
const sha256 = (value: string) => crypto.hash('sha256', value, 'hex');

export interface Invitation {
  id: string;
  email: string;
  role: Role;
  expiresAt: string;
}

function toInvitation(row: InvitationRow): Invitation {
  return { id: row.id, email: row.email ?? '', role: row.role, expiresAt: row.expires_at };
}

/** The console page that accepts a link: the token travels in the fragment, never to a server's logs. */
export function invitationUrl(publicBase: string, token: string): string {
  return `${publicBase.replace(/\/+$/, '')}/console/invite#${token}`;
}

export interface InvitationsServiceDeps {
  store: MembersStore;
  people: PeopleStore;
  loginSessions: LoginSessions;
  clock: Clock;
  ids: IdGenerator;
  scrypt?: ScryptParams | undefined;
  writeGate?: WriteGate | undefined;
}

export function createInvitationsService({ store, people, loginSessions, clock, ids, scrypt, writeGate }: InvitationsServiceDeps) {
  const audit = createAuditRows(ids, clock);
  const nowIso = () => clock.now().toISOString();

  return {
    /**
     * A new invitation by `caller` (an admin invites up to admin; only an owner invites an owner).
     * Returns it with the one-use token, which nothing stores.
     */
    async invite(caller: Actor, input: { email: string; role: Role }): Promise<{ invitation: Invitation; token: string }> {
      if (!atLeast(caller.role, 'admin')) throw new ForbiddenError(`Inviting needs the "admin" role; your role is "${caller.role}".`);
      if (input.role === 'owner' && !atLeast(caller.role, 'owner')) throw new ForbiddenError(`Only an owner may invite an owner; your role is "${caller.role}".`);
      const email = input.email.trim();
      if (await store.findMemberByEmail(caller.workspaceId, emailKey(email))) throw new ConflictError(`${email} is already a member of this workspace.`);
      const token = `sbi_${randomBase62(43)}`;
      const now = clock.now();
      const row: InvitationRow = {
        id: ids('inv'),
        workspace_id: caller.workspaceId,
        purpose: 'invite',
        email,
        role: input.role,
        token_hash: sha256(token),
        // System actors (the CLI) are nobody in particular.
        created_by: caller.kind === 'system' ? null : caller.id,
        created_at: now.toISOString(),
        expires_at: new Date(now.getTime() + INVITATION_TTL_MS).toISOString(),
        used_at: null,
        revoked_at: null,
      };
      await store.transaction(async (trx) => {
        await store.insertInvitation(trx, row);
        // The target is the invitation; the e-mail is in its row, not in the event.
        await insertAudit(trx, audit(caller, { action: 'member.invite', target: { type: 'invitation', id: row.id } }));
      });
      return { invitation: toInvitation(row), token };
    },

    /** Pending invitations (not used, revoked or expired), newest first; never a token. */
    async listPending(caller: Actor, page: PageRequest): Promise<Page<Invitation>> {
      return mapPage(await store.pendingInvitations(caller.workspaceId, nowIso(), page), toInvitation);
    },

    /** Revokes a pending invitation; one used or revoked already → 409 (an expired one is revoked too: nothing is lost). */
    async revoke(caller: Actor, id: string): Promise<void> {
      const row = await store.findInvitation(caller.workspaceId, id);
      if (!row) throw new NotFoundError('Invitation', id);
      if (row.role === 'owner' && !atLeast(caller.role, 'owner')) throw new ForbiddenError(`Only an owner may revoke an owner's invitation; your role is "${caller.role}".`);
      await store.transaction(async (trx) => {
        if (!(await store.revokeInvitation(trx, caller.workspaceId, id, nowIso()))) {
          throw new ConflictError(`Invitation ${id} was ${row.used_at ? 'used' : 'revoked'} already.`);
        }
        await insertAudit(trx, audit(caller, { action: 'invitation.revoke', target: { type: 'invitation', id } }));
      });
    },

    /**
     * `POST /auth/invitations/accept`: the invited person joins and is signed in. A new e-mail
     * becomes a user with `password`; an existing user proves it is them with theirs (else 401).
     * A used, expired, revoked or unknown token → 410.
     */
    async accept(input: { token: string; name: string; password: string }, origin: ActorOrigin | undefined): Promise<{ user: UserRow; started: StartedSession }> {
      const gone = () => new GoneError('This invitation link was used, has expired or was revoked; ask for a new one.');
      if (!TOKEN.test(input.token)) throw gone();
      const inv = await store.findInvitationByTokenHash(sha256(input.token));
      const now = nowIso();
      if (!inv || inv.used_at !== null || inv.revoked_at !== null || inv.expires_at <= now || inv.email === null) throw gone();
      const existing = await people.findUserByEmail(inv.email);
      let user: UserRow;
      if (existing) {
        // The same check (and time) as signing in: a wrong password and a disabled user look alike.
        const ok = await verifyPassword(input.password, existing.password, scrypt);
        if (!ok || existing.status !== 'active') throw new UnauthorizedError('The e-mail of this invitation has an account: give its password.');
        user = existing;
      } else {
        user = {
          id: ids('usr'),
          email: inv.email,
          email_key: emailKey(inv.email),
          name: input.name.trim(),
          status: 'active',
          password: await hashPassword(input.password, scrypt),
          created_at: now,
          last_seen_at: now,
        };
      }
      await writeGate?.('invitation.accept', inv.id);
      const started = await store.transaction(async (trx) => {
        const at = nowIso();
        if (!(await store.useInvitation(trx, inv.id, at))) throw gone();
        if (!existing && !(await store.insertUser(trx, user))) {
          throw new ConflictError(`${inv.email} signed up a moment ago; accept again with that account's password.`);
        }
        if (!(await store.insertMembership(trx, { workspace_id: inv.workspace_id, user_id: user.id, role: inv.role, joined_at: at }))) {
          throw new ConflictError(`${inv.email} is already a member of this workspace.`);
        }
        const session = await loginSessions.start(user.id, inv.workspace_id, 'invitation', origin, trx);
        const actor: Actor = {
          kind: 'user',
          id: user.id,
          name: user.name,
          workspaceId: inv.workspace_id,
          role: inv.role,
          scopes: scopesOfRole(inv.role),
          userId: user.id,
          ...(origin ? { origin } : {}),
        };
        await insertAudit(trx, audit(actor, { action: 'member.join', target: { type: 'member', id: user.id } }));
        return session;
      });
      return { user, started };
    },
  };
}

export type InvitationsService = ReturnType<typeof createInvitationsService>;
