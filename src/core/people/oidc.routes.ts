/**
 * `GET /auth/oidc/start` and `GET /auth/oidc/callback` (API.md §14, docs/people.md#oidc): browser
 * navigations, so the callback answers a redirect or an HTML page saying why, never JSON. The
 * sign-in under way is bound to the browser by the `sb_oidc` cookie (its state) and kept in the
 * database, so any instance behind a balancer finishes it.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { FastifyPluginAsyncZod, ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { AppContext } from '../../context.js';
import { NotFoundError, ValidationError } from '../../errors.js';
import { withErrors } from '../../http/openapi.js';
import type { ActorOrigin } from '../auth/actor.js';
import { errorPage, pageHeaders } from '../oauth/consent-page.js';
import { readCookie } from './login-sessions.js';
import { OIDC_PENDING_MS, OidcRefusal } from './oidc.service.js';
import { secureCookies, setSessionCookie } from './people.http.js';

export const OIDC_COOKIE = 'sb_oidc';
const COOKIE_PATH = '/auth/oidc';
const DEFAULT_RETURN = '/console/';
const RETURN_TO_MAX = 2_000;

/**
 * Where a sign-in may send the browser back to: a path on this server (one leading "/", not "//"
 * nor "/\", which browsers read as another host), or an absolute URL on the public URL's origin.
 * Returns it as given, or null for anywhere else.
 */
export function sameOriginReturn(returnTo: string, publicBase: string): string | null {
  if (returnTo.length > RETURN_TO_MAX || /[\u0000-\u001f\u007f\\]/.test(returnTo)) return null;
  if (returnTo.startsWith('/')) return returnTo.startsWith('//') ? null : returnTo;
  if (!URL.canParse(returnTo)) return null;
  return new URL(returnTo).origin === new URL(publicBase).origin ? returnTo : null;
}

const startQuerySchema = z.strictObject({
  returnTo: z.string().max(RETURN_TO_MAX).optional().describe(`Where to go once signed in: a path here or a URL on the public URL's origin (default \`${DEFAULT_RETURN}\`).`),
  invitation: z.string().min(1).max(200).optional().describe("An invitation's token (from its link): a first sign-in joins its workspace; the provider's e-mail must be the invited one."),
});

/** What the provider sends back (OpenID Connect Core §3.1.2.5–6, RFC 9207); anything else it adds is ignored. */
const callbackParam = (description: string) => z.union([z.string(), z.array(z.string())]).optional().describe(description);
const callbackQuerySchema = z.looseObject({
  code: callbackParam('The authorization code.'),
  state: callbackParam('The state the sign-in was started with (also in the `sb_oidc` cookie).'),
  iss: callbackParam("The provider's issuer (RFC 9207)."),
  error: callbackParam('The provider did not sign the person in.'),
  error_description: callbackParam("The provider's explanation."),
});

/** `GET /auth/methods`: what a sign-in page may offer. */
const signInMethodsSchema = z
  .object({
    password: z.literal(true).describe('E-mail and password (`POST /auth/sessions`) always work for people with a password.'),
    oidc: z
      .object({
        name: z.string().describe("The provider's name to show: its issuer's host (e.g. `login.example.com`)."),
        startUrl: z.string().describe('Open it (with `returnTo`, and `invitation` on an invitation page) to sign in with the provider.'),
      })
      .nullable()
      .describe('null: OIDC sign-in is not configured.'),
  })
  .meta({ id: 'SignInMethods' });

const htmlPage = (description: string) => z.string().describe(`${description} (an HTML page saying why)`);

export function oidcRoutes(ctx: AppContext, base: () => string): FastifyPluginAsyncZod {
  const config = ctx.config.oidc;
  const oidc = ctx.services.oidc;
  const tags = ['auth'];
  const redirectUri = () => `${base()}${COOKIE_PATH}/callback`;
  const cookie = (value: string, maxAgeSeconds: number) =>
    `${OIDC_COOKIE}=${value}; Path=${COOKIE_PATH}; HttpOnly; SameSite=Lax; Max-Age=${maxAgeSeconds}${secureCookies(ctx.config) ? '; Secure' : ''}`;
  const originOf = (request: FastifyRequest): ActorOrigin => {
    const ua = request.headers['user-agent'];
    return { requestId: request.id, ip: request.ip, userAgent: typeof ua === 'string' ? ua.slice(0, 300) : null };
  };
  const refusalPage = (reply: FastifyReply, refusal: OidcRefusal) =>
    reply.code(refusal.status).headers(pageHeaders()).header('set-cookie', cookie('', 0)).send(errorPage(refusal.title, refusal.message));
  const notConfigured = () =>
    new NotFoundError('OIDC sign-in is not configured on this server: set SWITCHBOARD_OIDC_ISSUER, SWITCHBOARD_OIDC_CLIENT_ID and SWITCHBOARD_OIDC_CLIENT_SECRET (docs/people.md#oidc).');

  return async (app) => {
    await app.register(async (plugin) => {
      const open = plugin.withTypeProvider<ZodTypeProvider>();
      open.addHook('onRoute', (route) => {
        route.config = { ...(route.config ?? {}), public: true };
      });

      open.get(
        '/auth/methods',
        {
          schema: {
            tags,
            security: [],
            summary: 'How people sign in here: a password, and the OIDC provider when one is configured',
            description:
              'Public, for a sign-in page that has no credential yet (the console asks before showing "Sign in with …"). `oidc` is null unless SWITCHBOARD_OIDC_* is set; ' +
              'its `name` is the issuer\'s host, `startUrl` the path that begins the sign-in (`GET /auth/oidc/start`). Nothing secret: no client id, no issuer path.',
            response: withErrors({ 200: signInMethodsSchema }, [], { public: true }),
          },
        },
        async () => ({ password: true as const, oidc: config ? { name: new URL(config.issuer).host, startUrl: `${COOKIE_PATH}/start` } : null }),
      );

      open.get(
        '/auth/oidc/start',
        {
          // Fastify's request lines print the URL: here it carries an invitation's token (at the callback, the code and state).
          logLevel: 'warn',
          schema: {
            tags,
            security: [],
            summary: 'Sign in with the OIDC provider: redirects to it',
            description:
              'Authorization code flow with PKCE (S256), `state` and `nonce`. Sets the `sb_oidc` cookie (HttpOnly, SameSite=Lax, Path=/auth/oidc, 10 minutes) that binds the sign-in to this browser. ' +
              '`returnTo` on another origin → 400; OIDC not configured → 404; the provider unreachable or not the configured issuer → 502 (an HTML page).',
            querystring: startQuerySchema,
            response: withErrors({ 302: z.undefined().describe("To the provider's authorization endpoint"), 502: htmlPage('The provider could not be used') }, [400, 404], { public: true }),
          },
        },
        async (request, reply) => {
          if (!oidc) throw notConfigured();
          const returnTo = request.query.returnTo === undefined ? DEFAULT_RETURN : sameOriginReturn(request.query.returnTo, base());
          if (returnTo === null) throw ValidationError.field('returnTo', `must be a path on this server or a URL on ${new URL(base()).origin}`);
          try {
            const { url, state } = await oidc.start(redirectUri(), returnTo, request.query.invitation);
            return reply.code(302).header('set-cookie', cookie(state, OIDC_PENDING_MS / 1000)).header('cache-control', 'no-store').header('referrer-policy', 'no-referrer').redirect(url, 302);
          } catch (error) {
            if (error instanceof OidcRefusal) return refusalPage(reply, error);
            throw error;
          }
        },
      );

      open.get(
        '/auth/oidc/callback',
        {
          logLevel: 'warn',
          schema: {
            tags,
            security: [],
            summary: 'Where the OIDC provider sends the browser back: signs the person in',
            description:
              'Checks the state against the `sb_oidc` cookie and takes the sign-in (once), exchanges the code (PKCE), checks the ID token and that the e-mail is verified, then signs in a known person, or a first one by an invitation or the default role. ' +
              'Signed in: 302 to `returnTo` with the `sb_session` cookie. Refused: an HTML page saying why: 400 (not this browser\'s sign-in, used or expired), 403 (e-mail not verified, no invitation, address not allowed, account disabled, cancelled at the provider), 502 (the provider\'s answer failed its checks).',
            querystring: callbackQuerySchema,
            response: withErrors(
              {
                302: z.undefined().describe('Signed in: to `returnTo`, with the session cookie'),
                400: htmlPage('Not a sign-in of this browser, or used or expired'),
                403: htmlPage('Refused'),
                502: htmlPage("The provider's answer failed its checks"),
              },
              [404],
              { public: true },
            ),
          },
        },
        async (request, reply) => {
          if (!oidc) throw notConfigured();
          const query = request.url.includes('?') ? request.url.slice(request.url.indexOf('?')) : '';
          try {
            const { started, returnTo } = await oidc.finish(new URL(`${redirectUri()}${query}`), readCookie(request.headers.cookie, OIDC_COOKIE), originOf(request));
            setSessionCookie(reply, ctx.config, started);
            return reply.header('set-cookie', cookie('', 0)).header('referrer-policy', 'no-referrer').redirect(returnTo, 302);
          } catch (error) {
            if (error instanceof OidcRefusal) return refusalPage(reply, error);
            throw error;
          }
        },
      );
    });
  };
}
