/**
 * Who is acting (DESIGN.md "Who is acting"): built once at the edge from whatever authenticated the
 * request (a sign-in cookie, a key, an OAuth token, a signed channel event, the CLI, a timer) and
 * passed down as the workspace is. Services decide with it and never ask how it signed in.
 */
import type { Scope } from './keys.js';
import type { Role } from './roles.js';

export type ActorKind = 'user' | 'key' | 'oauth' | 'channel' | 'system';

export interface Actor {
  kind: ActorKind;
  /**
   * The credential: the key's id (`key`; for `oauth` the key behind the grant, so MCP sessions and
   * tasks keep their owner), the user's id for a sign-in session (`user`).
   */
  id: string;
  /** For the audit log: the key's name, or the person's name. */
  name: string;
  workspaceId: string;
  /** The effective role: the person's, capped by the key's or grant's scopes; a service key's follows its scopes. */
  role: Role;
  /** The effective scopes (those of `role`, for a person signed in). */
  scopes: Scope[];
  /** The person acting, or behind the key or grant; null for a service key. */
  userId: string | null;
  /** Set when an OAuth client acts through a grant (only at `/mcp`). */
  grantId?: string;
  /** A sign-in session (the cookie): a change needs its CSRF token. */
  loginSessionId?: string;
  /** SHA-256 (hex) of that session's CSRF token. */
  csrfHash?: string;
  /** Where a change came from, for its audit event: set at the edge for requests that may change something. */
  origin?: ActorOrigin;
}

export interface ActorOrigin {
  requestId: string | null;
  ip: string | null;
  userAgent: string | null;
}

/** The system itself (timers, start-up): for audit events of what nobody asked for at that moment. */
export function systemActor(workspaceId: string, name = 'switchboard'): Actor {
  return { kind: 'system', id: 'system', name, workspaceId, role: 'owner', scopes: ['read', 'write', 'admin'], userId: null };
}
