import type { FastifyContextConfig, FastifyInstance, FastifyRequest } from 'fastify';
import type { AuthService, Principal } from '../core/auth/auth.service.js';
import { hasScope } from '../core/auth/keys.js';
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

  // Callback hooks: a known key is resolved from memory, with no promise (async hooks cost one each).
  app.addHook('onRequest', (request, _reply, done) => {
    const config = configOf(request);
    if (isPublic(request, config)) return done();
    const match = BEARER.exec(request.headers.authorization ?? '');
    const token = match?.[1];
    if (!token) return done();
    const viaOAuth = oauth && config?.oauth === true && token.startsWith('sbo_');
    if (!viaOAuth) {
      const cached = auth.authenticateCached(token);
      if (cached !== undefined) {
        request.principal = cached;
        return done();
      }
    }
    const resolve = (principal: Principal | null) => {
      request.principal = principal;
      done();
    };
    (viaOAuth ? oauth.verify(token) : auth.authenticate(token)).then(resolve, done);
  });

  app.addHook('preParsing', (request, _reply, _payload, done) => {
    const config = configOf(request);
    if (isPublic(request, config)) return done();
    const principal = request.principal;
    if (!principal) {
      const header = request.headers.authorization;
      const detail =
        header === undefined
          ? 'A valid API key is required: send "Authorization: Bearer <key>".'
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
    const needed = config?.scope ?? (request.method === 'GET' || request.method === 'HEAD' ? 'read' : 'write');
    if (!hasScope(principal.scopes, needed)) return done(new ForbiddenError(`This operation needs the "${needed}" scope.`));
    done();
  });
}

/** The authenticated caller of a non-public route (the hooks above guarantee it). */
export function principalOf(request: FastifyRequest): Principal {
  if (!request.principal) throw new UnauthorizedError();
  return request.principal;
}
