import type { Actor } from '../core/auth/actor.js';
import type { Scope } from '../core/auth/keys.js';
import type { Role } from '../core/auth/roles.js';
import type { IdempotencyScope } from '../core/idempotency/idempotency.service.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** The caller, resolved from the bearer key; null on public routes and before authentication. */
    actor: Actor | null;
    idempotency: IdempotencyScope | null;
  }
  interface FastifyContextConfig {
    /** No bearer key needed (health, docs, signed inbound channel routes). */
    public?: boolean;
    /** Scope required; defaults to `read` for GET/HEAD and `write` otherwise. */
    scope?: Scope;
    /** Role required instead of a scope (API.md §14), e.g. `agent` for asking personas and working handoffs. */
    role?: Role;
    /** A creating POST that honours `Idempotency-Key`. */
    idempotent?: boolean;
    /** A GET whose answer depends only on stored rows: served from the response cache while they are unchanged. */
    cache?: boolean;
    /** Also accepts OAuth access tokens for this route's resource (only `/mcp`); a 401 points to its metadata. A sign-in cookie is not read there. */
    oauth?: boolean;
  }
}
