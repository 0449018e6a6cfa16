import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { AuthService, Principal } from '../core/auth/auth.service.js';
import { hasScope } from '../core/auth/keys.js';
import { AppError, ForbiddenError, UnauthorizedError } from '../errors.js';

const BEARER = /^Bearer[ \t]+(\S+)[ \t]*$/i;

function isPublic(request: FastifyRequest): boolean {
  // CORS preflights carry no credentials by design.
  return request.routeOptions.config?.public === true || request.method === 'OPTIONS';
}

/** OAuth access tokens, accepted only on routes whose config says `oauth: true` (the MCP endpoint). */
export interface OAuthBearer {
  /** The principal of an access token for this server's `/mcp`, or null. */
  verify(token: string): Promise<Principal | null>;
  /** The `WWW-Authenticate` value of a 401 there (RFC 9728 `resource_metadata`). */
  challenge(): string;
}

/**
 * Authentication in two steps, so rate limiting can sit between them and count per key:
 * `onRequest` resolves the key (never throws), `preParsing` refuses what it must, before any body is read.
 */
export function registerAuthHooks(app: FastifyInstance, auth: AuthService, oauth?: OAuthBearer) {
  app.decorateRequest('principal', null);

  app.addHook('onRequest', async (request) => {
    if (isPublic(request)) return;
    const match = BEARER.exec(request.headers.authorization ?? '');
    const token = match?.[1];
    if (!token) return;
    if (oauth && request.routeOptions.config?.oauth === true && token.startsWith('sbo_')) request.principal = await oauth.verify(token);
    else request.principal = await auth.authenticate(token);
  });

  app.addHook('preParsing', async (request) => {
    if (isPublic(request)) return;
    const principal = request.principal;
    if (!principal) {
      const header = request.headers.authorization;
      const detail =
        header === undefined
          ? 'A valid API key is required: send "Authorization: Bearer <key>".'
          : BEARER.test(header)
            ? 'The API key is unknown, revoked or expired.'
            : 'The Authorization header must be "Bearer <key>".';
      if (oauth && request.routeOptions.config?.oauth === true) {
        throw new AppError('unauthorized', `${detail} OAuth clients: see the resource metadata in WWW-Authenticate.`, undefined, {
          'www-authenticate': oauth.challenge(),
        });
      }
      throw new UnauthorizedError(detail);
    }
    const needed = request.routeOptions.config?.scope ?? (request.method === 'GET' || request.method === 'HEAD' ? 'read' : 'write');
    if (!hasScope(principal.scopes, needed)) throw new ForbiddenError(`This operation needs the "${needed}" scope.`);
  });
}

/** The authenticated caller of a non-public route (the hooks above guarantee it). */
export function principalOf(request: FastifyRequest): Principal {
  if (!request.principal) throw new UnauthorizedError();
  return request.principal;
}
