/**
 * Sign-in sessions (API.md §14): the cookie `sb_session` holds a random secret; the database holds
 * its SHA-256 only, with the session's CSRF token's hash, so any instance behind a round-robin
 * balancer authenticates it. Idle and absolute lifetimes are checked at every use; a removed or
 * disabled person's sessions end at once because each use reads their membership.
 */
import crypto from 'node:crypto';
import type { Clock } from '../../lib/clock.js';
import type { IdGenerator } from '../../lib/ids.js';
import { randomBase62 } from '../../lib/ids.js';
import type { Actor, ActorOrigin } from '../auth/actor.js';
import { scopesOfRole } from '../auth/roles.js';
import type { LoginSessionRow, PeopleStore, UserRow } from './people.store.js';
import { toUser } from './people.http.js';
import type { Role } from '../auth/roles.js';

export const SESSION_COOKIE = 'sb_session';
const TOKEN = /^sbs_[0-9A-Za-z]{43}$/;
/** A session's last use is written at most this often. */
const TOUCH_MS = 60_000;

const sha256 = (value: string) => crypto.hash('sha256', value, 'hex');

export interface LoginSessionOptions {
  /**
   * The installation's secret (SWITCHBOARD_SECRET or the key file): a session's CSRF token is an
   * HMAC of its id under a key derived from it, so every instance can give it again (`GET /auth/me`)
   * to a page that lost it, as after the OIDC redirect, which has no body to carry it.
   */
  secret: Buffer;
  store: PeopleStore;
  clock: Clock;
  ids: IdGenerator;
  idleMs: number;
  maxMs: number;
}

export interface StartedSession {
  session: LoginSessionRow;
  /** The cookie's value: shown to the browser once, in Set-Cookie. */
  token: string;
  csrfToken: string;
}

export function createLoginSessions({ secret, store, clock, ids, idleMs, maxMs }: LoginSessionOptions) {
  const csrfKey = crypto.createHmac('sha256', secret).update('switchboard sign-in csrf v1').digest();
  const csrfOf = (sessionId: string) => crypto.createHmac('sha256', csrfKey).update(sessionId).digest('base64url');
  return {
    idleMs,
    maxMs,
    /** A new session for a member of `workspaceId` (the caller has checked the membership). */
    async start(userId: string, workspaceId: string, method: LoginSessionRow['method'], origin: ActorOrigin | undefined, trx?: Parameters<PeopleStore['insertLoginSession']>[1]): Promise<StartedSession> {
      const token = `sbs_${randomBase62(43)}`;
      const id = ids('lgn');
      const csrfToken = csrfOf(id);
      const now = clock.now();
      const session: LoginSessionRow = {
        id,
        token_hash: sha256(token),
        csrf_hash: sha256(csrfToken),
        user_id: userId,
        workspace_id: workspaceId,
        method,
        ip: origin?.ip ?? null,
        user_agent: origin?.userAgent?.slice(0, 300) ?? null,
        created_at: now.toISOString(),
        last_seen_at: now.toISOString(),
        expires_at: new Date(now.getTime() + maxMs).toISOString(),
        ended_at: null,
      };
      await store.insertLoginSession(session, trx);
      return { session, token, csrfToken };
    },

    /** The actor of a cookie's secret, or null: unknown, ended, idle too long, past its end, or its person no longer an active member. */
    async authenticate(token: string): Promise<Actor | null> {
      if (!TOKEN.test(token)) return null;
      const row = await store.findLoginSessionByHash(sha256(token));
      if (!row || row.ended_at !== null || row.member_role === null || row.user_status !== 'active') return null;
      const nowMs = clock.now().getTime();
      if (Date.parse(row.expires_at) <= nowMs || Date.parse(row.last_seen_at) + idleMs <= nowMs) return null;
      if (Date.parse(row.last_seen_at) + TOUCH_MS <= nowMs) {
        await store.touchLoginSession(row.id, new Date(nowMs).toISOString(), new Date(nowMs - TOUCH_MS).toISOString());
      }
      return {
        kind: 'user',
        id: row.user_id,
        name: row.user_name,
        workspaceId: row.workspace_id,
        role: row.member_role,
        scopes: scopesOfRole(row.member_role),
        userId: row.user_id,
        loginSessionId: row.id,
        csrfHash: row.csrf_hash,
      };
    },

    /** What every way of signing in answers (`SignedIn`): the user, their workspaces with their role in each, the CSRF token. */
    async signedInBody(user: UserRow, csrfToken: string) {
      const memberships = (await store.membershipsOf(user.id)).map((m) => ({ workspace: { id: m.workspace_id, name: m.workspace_name }, role: m.role as Role }));
      return { user: toUser(user), memberships, csrfToken };
    },

    /** The CSRF token of the caller's sign-in session; undefined for a key or grant. */
    csrfTokenOf(actor: Actor): string | undefined {
      return actor.loginSessionId === undefined ? undefined : csrfOf(actor.loginSessionId);
    },

    /** Whether a request's `X-CSRF-Token` is the session's (compared by hash, in constant time). */
    csrfMatches(actor: Actor, header: string | undefined): boolean {
      if (actor.csrfHash === undefined || header === undefined || header.length > 200) return false;
      return crypto.timingSafeEqual(Buffer.from(sha256(header), 'hex'), Buffer.from(actor.csrfHash, 'hex'));
    },
  };
}

export type LoginSessions = ReturnType<typeof createLoginSessions>;

/** The value of cookie `name` in a Cookie header, or undefined. */
export function readCookie(header: string | undefined, name: string): string | undefined {
  if (!header) return undefined;
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq < 0) continue;
    if (part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
  }
  return undefined;
}

/** The Set-Cookie value of a session (HttpOnly, SameSite=Lax, Secure on https), lasting until its absolute end. */
export function sessionCookie(token: string, secure: boolean, maxAgeSeconds: number): string {
  return `${SESSION_COOKIE}=${token}; Path=/; HttpOnly; SameSite=Lax; Max-Age=${Math.floor(maxAgeSeconds)}${secure ? '; Secure' : ''}`;
}

/** The Set-Cookie value that removes the session cookie. */
export function clearedSessionCookie(secure: boolean): string {
  return `${SESSION_COOKIE}=; Path=/; HttpOnly; SameSite=Lax; Max-Age=0${secure ? '; Secure' : ''}`;
}
