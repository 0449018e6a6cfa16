import type { FastifyContextConfig, FastifyInstance, FastifyRequest } from 'fastify';
import type { Actor } from '../core/auth/actor.js';
import type { AuthService } from '../core/auth/auth.service.js';
import { describeRequirement, permits, type Requirement } from '../core/auth/roles.js';
import { type LoginSessions, readCookie, SESSION_COOKIE } from '../core/people/login-sessions.js';
import { AppError, ForbiddenError, UnauthorizedError } from '../errors.js';

const BEARER = /^Bearer[ \t]+(\S+)[ \t]*$/i;

/**
 * The route's config: read once per hook, since `request.routeOptions` builds a new object of a
 * dozen fields on every access.
 */
function configOf(request: FastifyRequest): FastifyContextConfig | undefined {
  return request.routeOptions.config;
}

function isPublic(request: FastifyRequest, config: FastifyContextConfig | undefined): boolean {
  // CORS preflights carry no credentials by design.
  return config?.public === true || request.method === 'OPTIONS';
}

/** OAuth access tokens, accepted only on routes whose config says `oauth: true` (the MCP endpoint). */
export interface OAuthBearer {
  /** The actor of an access token for this server's `/mcp`, or null. */
  verify(token: string): Promise<Actor | null>;
  /** The `WWW-Authenticate` value of a 401 there (RFC 9728 `resource_metadata`). */
  challenge(): string;
}

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/** What an operation requires: its route's `role`, else its `scope`, else `read` to read and `write` to change. */
export function requirementOf(method: string, config: FastifyContextConfig | undefined): Requirement {
  return config?.role ?? config?.scope ?? (method === 'GET' || method === 'HEAD' ? 'read' : 'write');
}

/** Called for every refusal by role or CSRF token: the audit log records 403s (API.md §14). */
export type OnDenied = (request: FastifyRequest, reason: 'role' | 'csrf') => Promise<void>;

/**
 * Authentication in two steps, so rate limiting can sit between them and count per caller:
 * `onRequest` resolves the key, or without one the sign-in cookie (never throws); `preParsing`
 * refuses what it must, before any body is read. A key wins over a cookie (API.md §14).
 */
export function registerAuthHooks(app: FastifyInstance, auth: AuthService, sessions: LoginSessions, oauth?: OAuthBearer, onDenied?: OnDenied) {
  app.decorateRequest('actor', null);

  // Callback hooks: a known key is resolved from memory, with no promise (async hooks cost one each).
  app.addHook('onRequest', (request, _reply, done) => {
    const config = configOf(request);
    if (isPublic(request, config)) return done();
    const match = BEARER.exec(request.headers.authorization ?? '');
    const token = match?.[1];
    if (!token) {
      // No key: a person's sign-in cookie, when there is one and the header does not try something else.
      // Never on `/mcp` (the `oauth: true` route): MCP clients are machines with a key or an OAuth
      // token, and a browser's ambient cookie must not drive tools there (it is a 401 with the OAuth challenge).
      const cookie = request.headers.authorization === undefined && config?.oauth !== true ? readCookie(request.headers.cookie, SESSION_COOKIE) : undefined;
      if (cookie === undefined) return done();
      sessions.authenticate(cookie).then((actor) => {
        request.actor = actor;
        done();
      }, done);
      return;
    }
    const viaOAuth = oauth && config?.oauth === true && token.startsWith('sbo_');
    if (!viaOAuth) {
      const cached = auth.authenticateCached(token);
      if (cached !== undefined) {
        request.actor = cached;
        return done();
      }
    }
    const resolve = (actor: Actor | null) => {
      request.actor = actor;
      done();
    };
    (viaOAuth ? oauth.verify(token) : auth.authenticate(token)).then(resolve, done);
  });

  /** A 403, answered once its audit event is written (onDenied never rejects). */
  const deny = (request: FastifyRequest, reason: 'role' | 'csrf', err: Error, done: (err?: Error) => void) => {
    if (!onDenied) return done(err);
    onDenied(request, reason).then(() => done(err), () => done(err));
  };

  app.addHook('preParsing', (request, _reply, _payload, done) => {
    const config = configOf(request);
    if (isPublic(request, config)) return done();
    const actor = request.actor;
    if (!actor) {
      const header = request.headers.authorization;
      const detail =
        header === undefined
          ? readCookie(request.headers.cookie, SESSION_COOKIE) !== undefined && config?.oauth !== true
            ? 'The sign-in session has ended; sign in again (or send "Authorization: Bearer <key>").'
            : 'A valid API key is required: send "Authorization: Bearer <key>".'
          : BEARER.test(header)
            ? 'The API key is unknown, revoked or expired.'
            : 'The Authorization header must be "Bearer <key>".';
      if (oauth && config?.oauth === true) {
        return done(
          new AppError('unauthorized', `${detail} OAuth clients: see the resource metadata in WWW-Authenticate.`, undefined, {
            'www-authenticate': oauth.challenge(),
          }),
        );
      }
      return done(new UnauthorizedError(detail));
    }
    const changes = !SAFE_METHODS.has(request.method);
    if (changes) {
      // Where a change came from, for its audit event.
      const ua = request.headers['user-agent'];
      request.actor = actor.origin ? actor : { ...actor, origin: { requestId: request.id, ip: request.ip, userAgent: typeof ua === 'string' ? ua.slice(0, 300) : null } };
    }
    // A browser's request that changes something must prove it comes from the console, not another site.
    if (changes && actor.loginSessionId !== undefined && !sessions.csrfMatches(actor, headerOf(request, 'x-csrf-token'))) {
      return deny(request, 'csrf', new ForbiddenError('A signed-in request that changes something must send the X-CSRF-Token header its sign-in returned.'), done);
    }
    const needed = requirementOf(request.method, config);
    if (!permits(actor.role, needed)) {
      return deny(request, 'role', new ForbiddenError(`This operation needs ${describeRequirement(needed)}${actor.kind === 'user' ? `; your role is "${actor.role}"` : ''}.`), done);
    }
    done();
  });
}

function headerOf(request: FastifyRequest, name: string): string | undefined {
  const v = request.headers[name];
  return typeof v === 'string' ? v : undefined;
}

/** The authenticated caller of a non-public route (the hooks above guarantee it). */
export function actorOf(request: FastifyRequest): Actor {
  if (!request.actor) throw new UnauthorizedError();
  return request.actor;
}
