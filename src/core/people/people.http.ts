/**
 * What every way of signing in shares at the HTTP edge (password, setup, invitation, OIDC, passkey):
 * the session cookie and the `SignedIn` body (API.md §14).
 */
import type { FastifyReply } from 'fastify';
import type { Config } from '../../config.js';
import { clearedSessionCookie, sessionCookie, type StartedSession } from './login-sessions.js';
import type { UserRow } from './people.store.js';

export interface User {
  id: string;
  email: string;
  name: string;
  status: 'active' | 'disabled';
  createdAt: string;
  lastSeenAt: string | null;
}

export function toUser(row: UserRow): User {
  return { id: row.id, email: row.email, name: row.name, status: row.status, createdAt: row.created_at, lastSeenAt: row.last_seen_at };
}

/** Cookies are `Secure` when the public URL is https. */
export function secureCookies(config: Config): boolean {
  return config.publicUrl?.startsWith('https:') ?? false;
}

/** Sets the session cookie on `reply` (it lasts until the session's absolute end). */
export function setSessionCookie(reply: FastifyReply, config: Config, started: StartedSession): void {
  reply.header('set-cookie', sessionCookie(started.token, secureCookies(config), config.signIn.maxMs / 1000));
  // The cookie is the credential: no cache keeps a response that sets it.
  reply.header('cache-control', 'no-store');
}

/** Removes the session cookie (signed out). */
export function clearSessionCookie(reply: FastifyReply, config: Config): void {
  reply.header('set-cookie', clearedSessionCookie(secureCookies(config)));
}
