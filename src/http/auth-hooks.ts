import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { AuthService, Principal } from '../core/auth/auth.service.js';
import { hasScope } from '../core/auth/keys.js';
import { ForbiddenError, UnauthorizedError } from '../errors.js';

const BEARER = /^Bearer[ \t]+(\S+)[ \t]*$/i;

function isPublic(request: FastifyRequest): boolean {
  // CORS preflights carry no credentials by design.
  return request.routeOptions.config?.public === true || request.method === 'OPTIONS';
}

/**
 * Authentication in two steps, so rate limiting can sit between them and count per key:
 * `onRequest` resolves the key (never throws), `preParsing` refuses what it must, before any body is read.
 */
export function registerAuthHooks(app: FastifyInstance, auth: AuthService) {
  app.decorateRequest('principal', null);

  app.addHook('onRequest', async (request) => {
    if (isPublic(request)) return;
    const match = BEARER.exec(request.headers.authorization ?? '');
    if (match?.[1]) request.principal = await auth.authenticate(match[1]);
  });

  app.addHook('preParsing', async (request) => {
    if (isPublic(request)) return;
    const principal = request.principal;
    if (!principal) {
      const header = request.headers.authorization;
      throw new UnauthorizedError(
        header === undefined
          ? 'A valid API key is required: send "Authorization: Bearer <key>".'
          : BEARER.test(header)
            ? 'The API key is unknown, revoked or expired.'
            : 'The Authorization header must be "Bearer <key>".',
      );
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
