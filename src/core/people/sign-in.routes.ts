import type { FastifyRequest } from 'fastify';
import type { FastifyPluginAsyncZod, ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { AppContext } from '../../context.js';
import { actorOf } from '../../http/auth-hooks.js';
import { idParams, pageOf, withErrors } from '../../http/openapi.js';
import type { ActorOrigin } from '../auth/actor.js';
import { clearSessionCookie, setSessionCookie } from './people.http.js';
import { signedInSchema } from './people.schemas.js';
import { listSessionsQuerySchema, loginSessionSchema, meSchema, setupBodySchema, signInBodySchema } from './sign-in.schemas.js';

/** Where a public request came from (the auth hook sets this only for authenticated ones). */
function originOf(request: FastifyRequest): ActorOrigin {
  const ua = request.headers['user-agent'];
  return { requestId: request.id, ip: request.ip, userAgent: typeof ua === 'string' ? ua.slice(0, 300) : null };
}

/**
 * API.md §14: signing in with a password, the first owner's setup, a person's own sessions, and
 * `GET /auth/me`. Signing in and setup are public; the rest takes a cookie or a key (any role), and
 * a cookie request that changes something needs `X-CSRF-Token` (the auth hook checks it).
 */
export function signInRoutes(ctx: AppContext): FastifyPluginAsyncZod {
  const { password, setup, mine } = ctx.services.signIn;
  const tags = ['auth'];
  const sessionTags = ['sign-in'];
  return async (app) => {
    await app.register(async (plugin) => {
      const open = plugin.withTypeProvider<ZodTypeProvider>();
      open.addHook('onRoute', (route) => {
        route.config = { ...(route.config ?? {}), public: true };
      });

      open.post(
        '/auth/sessions',
        {
          schema: {
            tags: sessionTags,
            security: [],
            summary: 'Sign in with an e-mail address and a password (sets the session cookie)',
            description:
              'The same 401 for an unknown e-mail address as for a wrong password. After 10 failures of one e-mail address, or 50 from one client ' +
              'address, within 15 minutes: 429 with Retry-After, whatever the rate limit. A workspace asked for that the person is not a member of: 404.',
            body: signInBodySchema,
            response: withErrors({ 201: signedInSchema }, [400, 401, 404], { public: true }),
          },
        },
        async (request, reply) => {
          const { user, started } = await password.withPassword(request.body, originOf(request));
          setSessionCookie(reply, ctx.config, started);
          return reply.code(201).send(await ctx.services.loginSessions.signedInBody(user, started.csrfToken));
        },
      );

      open.post(
        '/auth/setup',
        {
          schema: {
            tags: sessionTags,
            security: [],
            summary: "The first owner: an account from the start banner's one-time setup link (sets the session cookie)",
            description: 'Makes the owner of the default workspace, once: when someone exists already → 409; a bad, used, replaced or expired token → 401.',
            body: setupBodySchema,
            response: withErrors({ 201: signedInSchema }, [400, 401, 409], { public: true }),
          },
        },
        async (request, reply) => {
          const { user, started } = await setup.complete(request.body, originOf(request));
          setSessionCookie(reply, ctx.config, started);
          return reply.code(201).send(await ctx.services.loginSessions.signedInBody(user, started.csrfToken));
        },
      );
    });

    app.get(
      '/auth/sessions',
      {
        config: { role: 'viewer' },
        schema: {
          tags: sessionTags,
          summary: "The caller's own sign-in sessions, in every workspace (a service key has none)",
          querystring: listSessionsQuerySchema,
          response: withErrors({ 200: pageOf(loginSessionSchema) }),
        },
      },
      async (request) => mine.list(actorOf(request), request.query),
    );

    app.delete(
      '/auth/sessions',
      {
        config: { role: 'viewer' },
        schema: {
          tags: sessionTags,
          summary: "Sign out everywhere: every sign-in session of the caller's person ends (clears the cookie)",
          response: withErrors({ 204: z.undefined().describe('Signed out everywhere') }),
        },
      },
      async (request, reply) => {
        const actor = actorOf(request);
        await mine.endAll(actor);
        if (actor.loginSessionId !== undefined) clearSessionCookie(reply, ctx.config);
        return reply.code(204).send();
      },
    );

    app.delete(
      '/auth/sessions/current',
      {
        config: { role: 'viewer' },
        schema: {
          tags: sessionTags,
          summary: 'Sign out: the session of the cookie ends and the cookie is cleared (a key has none: 404)',
          response: withErrors({ 204: z.undefined().describe('Signed out') }, [404]),
        },
      },
      async (request, reply) => {
        await mine.endCurrent(actorOf(request));
        clearSessionCookie(reply, ctx.config);
        return reply.code(204).send();
      },
    );

    app.delete(
      '/auth/sessions/:id',
      {
        config: { role: 'viewer' },
        schema: {
          tags: sessionTags,
          summary: "End one of the caller's own sign-in sessions (another person's: 404)",
          params: idParams,
          response: withErrors({ 204: z.undefined().describe('Ended') }, [404]),
        },
      },
      async (request, reply) => {
        const actor = actorOf(request);
        await mine.end(actor, request.params.id);
        if (request.params.id === actor.loginSessionId) clearSessionCookie(reply, ctx.config);
        return reply.code(204).send();
      },
    );

    app.get(
      '/auth/me',
      {
        config: { role: 'viewer' },
        schema: {
          tags,
          summary: 'Who is calling: the key (key callers), the person (signed in, or owning the key), the workspace and the role',
          response: withErrors({ 200: meSchema }),
        },
      },
      async (request) => mine.me(actorOf(request)),
    );
  };
}
