import crypto from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import Fastify, { type FastifyBaseLogger, type FastifyInstance, type FastifyServerOptions } from 'fastify';
import { jsonSchemaTransformObject, serializerCompiler, validatorCompiler } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { AppContext } from './context.js';
import { VERSION } from './context.js';
import { abTestRoutes } from './business/ab-tests/ab-tests.routes.js';
import { evaluationRoutes } from './business/evaluations/evaluations.routes.js';
import { handoffRoutes } from './business/handoffs/handoffs.routes.js';
import { channelRoutes } from './business/channels/channels.routes.js';
import { analyticsRoutes } from './business/analytics/analytics.routes.js';
import { authRoutes } from './core/auth/auth.routes.js';
import { signInRoutes } from './core/people/sign-in.routes.js';
import { auditRoutes } from './core/audit/audit.routes.js';
import { deniedActor, deniedTarget } from './core/audit/denied.js';
import { chatRoutes } from './core/chat/chat.routes.js';
import { sessionRoutes } from './core/chat/sessions.routes.js';
import { knowledgeRoutes } from './core/knowledge/knowledge.routes.js';
import { openAiRoutes } from './core/openai-compat/openai.routes.js';
import { oauthRoutes, publicBase, resourceMetadataUrlOf, resourceOf } from './core/oauth/oauth.routes.js';
import { membersRoutes } from './core/people/members.routes.js';
import { oidcRoutes } from './core/people/oidc.routes.js';
import { personaRoutes } from './core/personas/personas.routes.js';
import { teamRoutes } from './business/teams/teams.routes.js';
import { toolRoutes } from './core/tools/tools.routes.js';
import { NotFoundError, UnavailableError, UriTooLongError } from './errors.js';
import { registerAuthHooks } from './http/auth-hooks.js';
import { clientErrorHandler, MAX_URL_LENGTH } from './http/client-error.js';
import { errorHandler, frameworkErrorHandler, sendProblem } from './http/error-handler.js';
import { consoleRoutes } from './http/console.routes.js';
import { createApiDocs } from './http/docs.js';
import { healthRoutes, READINESS_PATH } from './http/health.routes.js';
import { registerIdempotencyHooks } from './http/idempotency-hooks.js';
import { registerJsonBodyParser } from './http/json-body.js';
import { registerNulGuard } from './http/nul-guard.js';
import { openApiTransform } from './http/openapi.js';
import { registerRateLimit, registerSharedRateLimit } from './http/rate-limit.js';
import { requestLogger } from './http/request-logger.js';
import { registerResponseCache } from './http/response-cache.js';
import { mcpRoutes } from './mcp/http.js';

export const JSON_BODY_LIMIT = 1024 * 1024;
const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;
/** Paths that exist only with their /api prefix (API.md §1); bare /mcp is the MCP endpoint. */
const API_ONLY = ['/api/mcp/', '/api/ai-sdk/'];

/** `/api/x` is served as `/x`, except the paths that only exist under /api. */
export function rewriteUrl(req: IncomingMessage): string {
  const url = req.url ?? '/';
  if (!url.startsWith('/api')) return url;
  if (API_ONLY.some((p) => url.startsWith(p))) return url;
  const rest = url.slice(4);
  if (rest === '' || rest.startsWith('?')) return `/${rest}`;
  return rest.startsWith('/') ? rest : url;
}

/**
 * Every route validates and serializes with zod. Given as the compilers' factories, Fastify never
 * loads its default Ajv and fast-json-stringify ones (~70 ms of a loaded core at each start; issue 23).
 * Fastify types the factories after Ajv's; any function answering a schema compiler will do.
 */
const ZOD_COMPILERS = { buildValidator: () => validatorCompiler, buildSerializer: () => serializerCompiler } as unknown as NonNullable<
  NonNullable<FastifyServerOptions['schemaController']>['compilersFactory']
>;

/** The query of a route that declares none: no parameter at all. */
const NO_QUERY = z.strictObject({});

/** Builds the HTTP app on a context. Does not listen: `main.ts` does, tests use inject or a port. */
export async function buildApp(ctx: AppContext): Promise<FastifyInstance> {
  const { config, services } = ctx;
  const app = Fastify({
    loggerInstance: ctx.logger as FastifyBaseLogger,
    childLoggerFactory: requestLogger,
    bodyLimit: JSON_BODY_LIMIT,
    genReqId: (req) => {
      const given = req.headers['x-request-id'];
      return typeof given === 'string' && REQUEST_ID.test(given) ? given : crypto.randomUUID();
    },
    rewriteUrl,
    clientErrorHandler,
    frameworkErrors: frameworkErrorHandler,
    // Our own 503 below answers problem+json, unlike Fastify's built-in one.
    return503OnClosing: false,
    forceCloseConnections: 'idle',
    routerOptions: { maxParamLength: 200, ignoreTrailingSlash: true },
    schemaController: { compilersFactory: ZOD_COMPILERS },
  });
  app.setErrorHandler(errorHandler);

  registerJsonBodyParser(app);

  let closing = false;
  app.addHook('preClose', async () => {
    closing = true;
  });
  // Callback hooks where nothing is awaited: an async hook costs a promise and a microtask per request.
  app.addHook('onRequest', (request, reply, done) => {
    reply.header('x-request-id', request.id);
    if (closing) {
      // Not kept alive: the server stops once its connections have ended. Only readiness answers.
      reply.header('connection', 'close');
      if (request.routeOptions.url !== READINESS_PATH) return done(new UnavailableError('The server is shutting down; retry shortly.'));
    }
    if ((request.raw.url?.length ?? 0) > MAX_URL_LENGTH) return done(new UriTooLongError(MAX_URL_LENGTH));
    done();
  });
  // The public base URL: SWITCHBOARD_PUBLIC_URL, else where this app listens (known once it does).
  const base = () => publicBase(config, app.server);
  registerAuthHooks(app, services.auth, services.loginSessions, {
    verify: (token) => services.oauth.verifyAccessToken(token, resourceOf(base())),
    challenge: () => `Bearer realm="switchboard", resource_metadata="${resourceMetadataUrlOf(base())}"`,
  }, (request) => services.audit.denied(deniedActor(request), deniedTarget(request)));
  registerNulGuard(app);
  registerIdempotencyHooks(app, services.idempotency);
  if (ctx.changeCounters) registerResponseCache(app, ctx.changeCounters);

  if (config.rateLimitPerMinute > 0) {
    if (ctx.rateClaims) {
      const logger = ctx.logger;
      registerSharedRateLimit(app, {
        max: config.rateLimitPerMinute,
        claims: ctx.rateClaims,
        onClaimError: (err) => logger.warn({ err: (err as Error).message }, 'rate limit: the shared budget is unreadable; admitting the request'),
      });
    } else registerRateLimit(app, { max: config.rateLimitPerMinute });
  }
  if (config.corsOrigins.length > 0) {
    // Imported only when CORS is configured (it is off by default).
    const { default: cors } = await import('@fastify/cors');
    await app.register(cors, {
      origin: config.corsOrigins.includes('*') ? true : config.corsOrigins,
      methods: ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'],
      // MCP's session and version headers too, so a browser MCP client on an allowed origin can use /mcp.
      allowedHeaders: ['authorization', 'content-type', 'idempotency-key', 'x-request-id', 'last-event-id', 'mcp-session-id', 'mcp-protocol-version'],
      exposedHeaders: ['x-request-id', 'location', 'retry-after', 'ratelimit-limit', 'ratelimit-remaining', 'ratelimit-reset', 'mcp-session-id', 'www-authenticate'],
      maxAge: 600,
    });
  }

  // Unknown query parameters are refused everywhere (API.md §1), also on routes that take none. One
  // schema for them all: a zod object is immutable, and building one per route cost ~20 ms of a start.
  app.addHook('onRoute', (route) => {
    if (route.schema && !route.schema.hide && route.schema.querystring === undefined) {
      route.schema = { ...route.schema, querystring: NO_QUERY };
    }
  });

  // The OpenAPI document and /docs are made at their first request (http/docs.ts); routes are collected from here on.
  const docs = createApiDocs({
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Switchboard API',
        version: VERSION,
        description:
          'Every path is also served under `/api` (e.g. `/api/personas`). Errors are `application/problem+json`, except under `/v1` ' +
          "(OpenAI's error shape) and the MCP transport's own refusals at `/mcp` (JSON-RPC error objects). " +
          'A JSON body nested deeper than 64 levels is a 400 `validation_failed`.',
      },
      components: {
        securitySchemes: {
          bearer: { type: 'http', scheme: 'bearer', description: 'sb_… API key. Each operation lists the role it needs: a key acts with the role of its scopes (read = viewer, write = editor, admin = admin; a service key with admin = owner), capped by its owner\'s role.' },
          cookie: {
            type: 'apiKey',
            in: 'cookie',
            name: 'sb_session',
            description: 'A person\'s sign-in session (POST /auth/sessions). A request that changes something also sends `X-CSRF-Token` as its sign-in returned. A key, when sent too, wins.',
          },
        },
      },
      security: [{ bearer: [] }, { cookie: [] }],
    },
    transform: openApiTransform,
    transformObject: jsonSchemaTransformObject,
  });
  app.addHook('onRoute', docs.collect);
  // The error responses a route lists are for the document only: errors are sent by the one error
  // handler as strings, never serialized. Fastify would still compile a serializer for each (~7 a
  // route, ~1,400 at start; issue 40 item 19), so the live route keeps its success responses only.
  app.addHook('onRoute', (route) => {
    const response = route.schema?.response as Record<string, unknown> | undefined;
    if (!response) return;
    const success = Object.fromEntries(Object.entries(response).filter(([status]) => /^[123]/.test(status)));
    route.schema = { ...route.schema, response: success };
  });
  app.addHook('onClose', async () => docs.close());

  await app.register(async (open) => {
    open.addHook('onRoute', (route) => {
      route.config = { ...(route.config ?? {}), public: true };
    });
    await open.register(docs.routes);
    await open.register(healthRoutes(ctx, () => closing));
    await open.register(consoleRoutes());
  });
  await app.register(authRoutes(ctx));
  await app.register(signInRoutes(ctx));
  await app.register(membersRoutes(ctx, base));
  await app.register(auditRoutes(ctx));
  await app.register(oidcRoutes(ctx, base));
  await app.register(personaRoutes(ctx));
  await app.register(teamRoutes(ctx));
  await app.register(abTestRoutes(ctx));
  await app.register(channelRoutes(ctx));
  await app.register(analyticsRoutes(ctx));
  await app.register(evaluationRoutes(ctx));
  await app.register(handoffRoutes(ctx));
  await app.register(knowledgeRoutes(ctx));
  await app.register(chatRoutes(ctx));
  await app.register(sessionRoutes(ctx));
  await app.register(openAiRoutes(ctx), { prefix: '/v1' });
  await app.register(toolRoutes(ctx, base));
  await app.register(oauthRoutes(ctx, base));
  await app.register(mcpRoutes(ctx, { publicBase: base }));

  app.setNotFoundHandler((request, reply) => sendProblem(reply, new NotFoundError(`Route ${request.method} ${request.url.split('?')[0]}`)));
  return app;
}
