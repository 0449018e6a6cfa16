/**
 * The one permission table (DESIGN.md "Who is acting", API.md §14). Roles include the one before:
 * viewer < agent < editor < admin < owner. Key scopes map onto them, so every route keeps its
 * meaning: `read` = viewer, `write` = editor, `admin` = admin. Routes, MCP tools, the console's
 * disabled controls and the role × operation test all ask `permits` here.
 */
import { hasScope, type Scope, SCOPES } from './keys.js';

export const ROLES = ['viewer', 'agent', 'editor', 'admin', 'owner'] as const;
export type Role = (typeof ROLES)[number];

const RANK: Record<Role, number> = { viewer: 1, agent: 2, editor: 3, admin: 4, owner: 5 };

/** Whether `role` includes `needed`. */
export function atLeast(role: Role, needed: Role): boolean {
  return RANK[role] >= RANK[needed];
}

/** The lower of two roles. */
export function lowerRole(a: Role, b: Role): Role {
  return RANK[a] <= RANK[b] ? a : b;
}

/** The role a scope requires of a person. */
export const ROLE_OF_SCOPE: Record<Scope, Role> = { read: 'viewer', write: 'editor', admin: 'admin' };

/**
 * What a set of key scopes amounts to. A service key (no user: the bootstrap key,
 * `SWITCHBOARD_ADMIN_KEY`, CLI keys) with `admin` is the installation's own and acts as `owner`, as
 * it did before there were people; a person's key is then capped by its owner's role.
 */
export function roleOfScopes(scopes: readonly Scope[]): Role {
  if (hasScope(scopes, 'admin')) return 'owner';
  if (hasScope(scopes, 'write')) return 'editor';
  return 'viewer';
}

/**
 * The lowest role that may hold a scope. Not ROLE_OF_SCOPE: an `agent` may hold `write`, because a
 * person's key (and an OAuth grant on it) acts with its owner's role at every use, never above it:
 * an agent's `write` key asks personas and works handoffs (the `agent` role, which a read-only key
 * lacks), and is refused what needs `write` (`editor`). Without it an agent could not act as one
 * through a key or over MCP.
 */
const HOLDER_OF_SCOPE: Record<Scope, Role> = { read: 'viewer', write: 'agent', admin: 'admin' };

/** The scopes a role may hold (and so may give a key or an OAuth grant): viewer read; agent, editor read and write; admin, owner all three. */
export function scopesOfRole(role: Role): Scope[] {
  return SCOPES.filter((s) => atLeast(role, HOLDER_OF_SCOPE[s]));
}

/** `scopes` without those `role` may not hold. */
export function capScopes(scopes: readonly Scope[], role: Role): Scope[] {
  return scopes.filter((s) => atLeast(role, HOLDER_OF_SCOPE[s]));
}

/** What an operation requires: a scope (keys' vocabulary, mapped onto its role) or a role. */
export type Requirement = Scope | Role;

/** The role an operation requires. */
export function requiredRole(needed: Requirement): Role {
  return (ROLES as readonly string[]).includes(needed) ? (needed as Role) : ROLE_OF_SCOPE[needed as Scope];
}

/**
 * The lowest key or OAuth scope whose role satisfies `needed`: a scope is itself; a role is the first
 * scope that includes it (`viewer` → `read`, `agent` and `editor` → `write`, `admin` and `owner` →
 * `admin`: a service key with `admin` acts as owner). What a scope challenge names, since a client
 * can ask for scopes, not roles.
 */
export function lowestScopeFor(needed: Requirement): Scope {
  const role = requiredRole(needed);
  return SCOPES.find((s) => atLeast(ROLE_OF_SCOPE[s], role)) ?? 'admin';
}

/** Whether an actor of `role` may perform an operation requiring `needed`. */
export function permits(role: Role, needed: Requirement): boolean {
  return atLeast(role, requiredRole(needed));
}

/** The refusal's wording: "the "write" scope" for a scope, "the "agent" role" for a role. */
export function describeRequirement(needed: Requirement): string {
  return (ROLES as readonly string[]).includes(needed) ? `the "${needed}" role` : `the "${needed}" scope`;
}
