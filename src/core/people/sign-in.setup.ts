/**
 * The first owner (API.md §14 "First start"): while no user exists, every start makes a one-time
 * setup link (24 h; the unused links of earlier starts stop working), and `POST /auth/setup` with
 * its token makes the owner of the default workspace and signs them in, once.
 */
import crypto from 'node:crypto';
import { ConflictError, UnauthorizedError } from '../../errors.js';
import type { Clock } from '../../lib/clock.js';
import { type IdGenerator, randomBase62 } from '../../lib/ids.js';
import { auditRow, insertAudit } from '../audit/audit.js';
import type { ActorOrigin } from '../auth/actor.js';
import type { LoginSessions } from './login-sessions.js';
import { hashPassword, type ScryptParams } from './passwords.js';
import { emailKey, type PeopleStore, type UserRow } from './people.store.js';
import type { SignedIn } from './sign-in.service.js';
import { personActor } from './sign-in.service.js';
import type { SignInStore } from './sign-in.store.js';

/** A setup link lasts this long. */
export const SETUP_LINK_MS = 24 * 3_600_000;
const TOKEN = /^sbi_[0-9A-Za-z]{43}$/;
const sha256 = (value: string) => crypto.hash('sha256', value, 'hex');

export interface SetupDeps {
  people: PeopleStore;
  store: SignInStore;
  loginSessions: LoginSessions;
  clock: Clock;
  ids: IdGenerator;
  scrypt?: ScryptParams | undefined;
}

const USED = 'This setup link is unknown, used, replaced by a newer one or expired; restart the server for a new one.';

export function createSetup({ people, store, loginSessions, clock, ids, scrypt }: SetupDeps) {
  return {
    /**
     * At start: while no user exists, a new setup link's token (for `<public URL>/console/setup#<token>`),
     * the earlier unused ones revoked; null once someone exists (or there is no workspace yet).
     */
    async newLink(): Promise<{ token: string; expiresAt: string } | null> {
      if ((await people.countUsers()) > 0) return null;
      const workspace = await store.setupWorkspace();
      if (!workspace) return null;
      const token = `sbi_${randomBase62(43)}`;
      const now = clock.now();
      const expiresAt = new Date(now.getTime() + SETUP_LINK_MS).toISOString();
      await store.replaceSetupInvitation({
        id: ids('inv'),
        workspace_id: workspace.id,
        purpose: 'setup',
        email: null,
        role: 'owner',
        token_hash: sha256(token),
        created_by: null,
        created_at: now.toISOString(),
        expires_at: expiresAt,
        used_at: null,
        revoked_at: null,
      });
      return { token, expiresAt };
    },

    /**
     * The first owner, from a setup link: the user, their owner membership, the link used, their
     * first session and the `member.setup` event, in one transaction. Someone exists already → 409
     * (also for the loser of two setups at once); a bad, used, revoked or expired token → 401.
     */
    async complete(input: { token: string; email: string; name: string; password: string }, origin: ActorOrigin): Promise<SignedIn> {
      const already = () => new ConflictError('Switchboard is set up already: sign in, or ask an admin for an invitation.');
      if ((await people.countUsers()) > 0) throw already();
      const invitation = TOKEN.test(input.token) ? await store.findInvitationByHash(sha256(input.token)) : undefined;
      if (!invitation || invitation.purpose !== 'setup') throw new UnauthorizedError(USED);
      // Hashed before the transaction: it takes a while, and SQLite has one writer.
      const password = await hashPassword(input.password, scrypt);
      return store.db.transaction().execute(async (trx) => {
        await store.lockWorkspace(trx, invitation.workspace_id);
        if ((await people.countUsers(trx)) > 0) throw already();
        const now = clock.now().toISOString();
        if (!(await store.useInvitation(trx, invitation.id, now))) throw new UnauthorizedError(USED);
        const user: UserRow = {
          id: ids('usr'),
          email: input.email.trim(),
          email_key: emailKey(input.email),
          name: input.name.trim(),
          status: 'active',
          password,
          created_at: now,
          last_seen_at: now,
        };
        await people.insertUser(user, trx);
        await people.insertMembership({ workspace_id: invitation.workspace_id, user_id: user.id, role: 'owner', joined_at: now }, trx);
        const started = await loginSessions.start(user.id, invitation.workspace_id, 'setup', origin, trx);
        await insertAudit(trx, auditRow(ids, clock, personActor(user, invitation.workspace_id, 'owner', origin), { action: 'member.setup', target: { type: 'member', id: user.id } }));
        return { user, started };
      });
    },
  };
}

export type Setup = ReturnType<typeof createSetup>;
