/**
 * A person's own sign-in sessions (API.md §14): "my sessions", signing out of one, of the current
 * one, or everywhere, and `GET /auth/me`. Each sign-out writes its `session.signout` event in the
 * same transaction, in the workspace of the session it ended.
 */
import { AppError, NotFoundError } from '../../errors.js';
import type { Clock } from '../../lib/clock.js';
import type { IdGenerator } from '../../lib/ids.js';
import type { Page, PageRequest } from '../../lib/pagination.js';
import { auditRow, insertAudit } from '../audit/audit.js';
import type { Actor } from '../auth/actor.js';
import type { AuthService } from '../auth/auth.service.js';
import type { LoginSessions } from './login-sessions.js';
import { toUser } from './people.http.js';
import type { LoginSessionRow, PeopleStore } from './people.store.js';
import type { SignInStore } from './sign-in.store.js';

export interface LoginSessionView {
  id: string;
  workspaceId: string;
  method: LoginSessionRow['method'];
  ip: string | null;
  userAgent: string | null;
  createdAt: string;
  lastSeenAt: string;
  expiresAt: string;
  /** The session this request was made with. */
  current: boolean;
}

export interface MySessionsDeps {
  people: PeopleStore;
  store: SignInStore;
  loginSessions: LoginSessions;
  auth: AuthService;
  clock: Clock;
  ids: IdGenerator;
}

export function createMySessions({ people, store, loginSessions, auth, clock, ids }: MySessionsDeps) {
  const view = (caller: Actor) => (row: LoginSessionRow): LoginSessionView => ({
    id: row.id,
    workspaceId: row.workspace_id,
    method: row.method,
    ip: row.ip,
    userAgent: row.user_agent,
    createdAt: row.created_at,
    lastSeenAt: row.last_seen_at,
    expiresAt: row.expires_at,
    current: row.id === caller.loginSessionId,
  });
  const signOutEvent = (caller: Actor, workspaceId: string, sessionId: string | null) =>
    auditRow(ids, clock, { ...caller, workspaceId }, { action: 'session.signout', target: { type: 'session', id: sessionId } });

  /** Ends one of the caller's sessions; another person's, or one already ended, is not found. */
  async function end(caller: Actor, id: string): Promise<void> {
    const userId = caller.userId;
    if (userId === null) throw new NotFoundError('Sign-in session', id);
    const ended = await store.db.transaction().execute(async (trx) => {
      const row = await store.findSessionOf(trx, userId, id);
      if (!row || !(await people.endLoginSession(userId, id, clock.now().toISOString(), trx))) return false;
      await insertAudit(trx, signOutEvent(caller, row.workspace_id, id));
      return true;
    });
    if (!ended) throw new NotFoundError('Sign-in session', id);
  }

  return {
    /** The caller's sessions in every workspace: a signed-in person's, or those of the person a key belongs to; a service key has none. */
    async list(caller: Actor, page: PageRequest): Promise<Page<LoginSessionView>> {
      if (caller.userId === null) return { data: [], nextCursor: null };
      const now = clock.now();
      const found = await store.openSessionsOf(caller.userId, now.toISOString(), new Date(now.getTime() - loginSessions.idleMs).toISOString(), page);
      return { data: found.data.map(view(caller)), nextCursor: found.nextCursor };
    },

    /** Ends one of the caller's sessions; another person's, or one already ended, is not found. */
    end,

    /** Signs out of the session the request was made with; a request with a key has none (404). */
    async endCurrent(caller: Actor): Promise<void> {
      if (caller.loginSessionId === undefined) {
        throw new AppError('not_found', 'This request is authenticated by an API key: it has no current sign-in session to end.');
      }
      await end(caller, caller.loginSessionId);
    },

    /** "Sign out everywhere": every session of the caller's person ends, one event in each workspace that had one. */
    async endAll(caller: Actor): Promise<number> {
      const userId = caller.userId;
      if (userId === null) return 0;
      return store.db.transaction().execute(async (trx) => {
        const now = clock.now().toISOString();
        const workspaces = await store.workspacesWithOpenSessions(trx, userId, now);
        const n = await people.endLoginSessionsOf(userId, null, now, trx);
        if (n > 0) await insertAudit(trx, workspaces.map((w) => signOutEvent(caller, w, null)));
        return n;
      });
    },

    /** `GET /auth/me`: the key (for a key), the person (signed in, or owning the key), the workspace and the effective role. */
    async me(caller: Actor) {
      const user = caller.userId !== null ? await people.findUser(caller.userId) : undefined;
      const workspace = await store.workspaceById(caller.workspaceId);
      if (!workspace) throw new NotFoundError('Workspace', caller.workspaceId);
      const key = caller.kind === 'key' ? (await auth.me(caller)).key : undefined;
      const csrfToken = loginSessions.csrfTokenOf(caller);
      return {
        ...(key ? { key } : {}),
        ...(user ? { user: toUser(user) } : {}),
        workspace: { id: workspace.id, name: workspace.name },
        role: caller.role,
        ...(csrfToken !== undefined ? { csrfToken } : {}),
      };
    },
  };
}

export type MySessions = ReturnType<typeof createMySessions>;
