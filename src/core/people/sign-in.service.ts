/**
 * Signing in with an e-mail and a password (API.md §14): the same 401 whether the e-mail is unknown
 * or the password wrong (a hash is computed either way), failed attempts limited per e-mail and per
 * client address in the database (so every instance counts them), and the audit events of both
 * outcomes written with what they record.
 */
import { AppError, NotFoundError, UnauthorizedError } from '../../errors.js';
import type { Clock } from '../../lib/clock.js';
import type { IdGenerator } from '../../lib/ids.js';
import { type AuditRow, auditRow, insertAudit } from '../audit/audit.js';
import type { Actor, ActorOrigin } from '../auth/actor.js';
import { type Role, scopesOfRole } from '../auth/roles.js';
import type { LoginSessions, StartedSession } from './login-sessions.js';
import { type ScryptParams, verifyPassword } from './passwords.js';
import { emailKey, type PeopleStore, type UserRow } from './people.store.js';
import type { SignInStore } from './sign-in.store.js';

/** Failed sign-ins are counted over this window (API.md §14: 15 minutes). */
export const FAILURE_WINDOW_MS = 15 * 60_000;
/** Failures of one e-mail within the window before its sign-ins are refused with 429. */
export const FAILURES_PER_EMAIL = 10;
/** Failures from one client address within the window before its sign-ins are refused with 429. */
export const FAILURES_PER_ADDRESS = 50;

const WRONG = 'The e-mail address or the password is wrong.';

export interface SignInDeps {
  people: PeopleStore;
  store: SignInStore;
  loginSessions: LoginSessions;
  clock: Clock;
  ids: IdGenerator;
  scrypt?: ScryptParams | undefined;
}

export interface SignedIn {
  user: UserRow;
  started: StartedSession;
}

/** The actor an event of `user` in `workspaceId` is recorded under (a person, not yet signed in). */
export function personActor(user: Pick<UserRow, 'id' | 'name'>, workspaceId: string, role: Role, origin: ActorOrigin): Actor {
  return { kind: 'user', id: user.id, name: user.name, workspaceId, role, scopes: scopesOfRole(role), userId: user.id, origin };
}

export function createSignInService({ people, store, loginSessions, clock, ids, scrypt }: SignInDeps) {
  /** 429 when this e-mail or this address has failed too often lately; `Retry-After` is when the attempt that blocks leaves the window. */
  async function refuseWhenLimited(key: string, ip: string, nowMs: number): Promise<void> {
    const since = nowMs - FAILURE_WINDOW_MS;
    const [byEmail, byAddress] = await Promise.all([
      store.recentFailures('email_key', key, since, FAILURES_PER_EMAIL),
      store.recentFailures('ip', ip, since, FAILURES_PER_ADDRESS),
    ]);
    const waits: number[] = [];
    if (byEmail.length >= FAILURES_PER_EMAIL) waits.push(byEmail[byEmail.length - 1]! + FAILURE_WINDOW_MS - nowMs);
    if (byAddress.length >= FAILURES_PER_ADDRESS) waits.push(byAddress[byAddress.length - 1]! + FAILURE_WINDOW_MS - nowMs);
    if (waits.length === 0) return;
    const seconds = Math.max(1, Math.ceil(Math.max(...waits) / 1000));
    throw new AppError('rate_limited', `Too many failed sign-ins for this e-mail address or from this address; retry in ${seconds} s.`, undefined, {
      'retry-after': String(seconds),
    });
  }

  /** A failure counted, and for a known e-mail one `session.signin` denied event in each of its user's workspaces. */
  async function recordFailure(key: string, ip: string, nowMs: number, user: UserRow | undefined, origin: ActorOrigin): Promise<void> {
    await store.db.transaction().execute(async (trx) => {
      await store.recordFailure(key, ip, nowMs, nowMs - FAILURE_WINDOW_MS, trx);
      if (!user) return;
      const memberships = await store.membershipsOf(user.id, trx);
      const rows: AuditRow[] = memberships.map((m) =>
        auditRow(ids, clock, personActor(user, m.workspace_id, m.role, origin), { action: 'session.signin', target: { type: 'session', id: null }, outcome: 'denied' }),
      );
      await insertAudit(trx, rows);
    });
  }

  return {
    /**
     * Signs a person in with their password, in `workspace` (an id or a name) or else their first
     * workspace (`default` when they are a member of it). Unknown e-mail, wrong password, disabled
     * user or one without a workspace: the same 401. Not a member of the workspace asked for (with
     * the right password): 404.
     */
    async withPassword(input: { email: string; password: string; workspace?: string | undefined }, origin: ActorOrigin): Promise<SignedIn> {
      const key = emailKey(input.email);
      const ip = origin.ip ?? 'unknown';
      await refuseWhenLimited(key, ip, clock.now().getTime());
      const user = await people.findUserByEmail(input.email);
      // Unknown e-mail: a hash is still computed, so the answer takes as long as for a wrong password.
      const matches = await verifyPassword(input.password, user?.password ?? null, scrypt);
      const memberships = user && matches && user.status === 'active' ? await people.membershipsOf(user.id) : [];
      if (!user || memberships.length === 0) {
        await recordFailure(key, ip, clock.now().getTime(), user, origin);
        throw new UnauthorizedError(WRONG);
      }
      const chosen =
        input.workspace !== undefined
          ? memberships.find((m) => m.workspace_id === input.workspace || m.workspace_name === input.workspace)
          : (memberships.find((m) => m.workspace_name === 'default') ?? memberships[0]);
      if (!chosen) throw new NotFoundError('Workspace', input.workspace);
      const started = await store.db.transaction().execute(async (trx) => {
        const s = await loginSessions.start(user.id, chosen.workspace_id, 'password', origin, trx);
        await people.updateUser(user.id, { last_seen_at: s.session.created_at }, trx);
        await store.forgetFailuresOf(key, trx);
        await insertAudit(
          trx,
          auditRow(ids, clock, personActor(user, chosen.workspace_id, chosen.role, origin), { action: 'session.signin', target: { type: 'session', id: s.session.id } }),
        );
        return s;
      });
      return { user: { ...user, last_seen_at: started.session.created_at }, started };
    },
  };
}

export type SignInService = ReturnType<typeof createSignInService>;
