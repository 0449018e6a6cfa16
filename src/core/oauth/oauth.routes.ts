/**
 * OAuth 2.1 for `/mcp` over HTTP (issue 15): RFC 9728 protected resource metadata, RFC 8414
 * authorization server metadata, the authorization endpoint and its consent form, the token,
 * registration (RFC 7591) and revocation (RFC 7009) endpoints, and the grants API for people.
 * The OAuth endpoints are public and answer OAuth's error JSON, not problem+json.
 */
import type { Server } from 'node:http';
import { OAuthError, InvalidRequestError, ServerError, UnsupportedGrantTypeError } from '@modelcontextprotocol/sdk/server/auth/errors.js';
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import type { FastifyPluginAsyncZod, ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { Config } from '../../config.js';
import type { AppContext } from '../../context.js';
import { actorOf } from '../../http/auth-hooks.js';
import { errorHandler } from '../../http/error-handler.js';
import { idParams, pageOf, withErrors } from '../../http/openapi.js';
import { NUL_MESSAGE } from '../../lib/nul.js';
import { ClientMetadataError, type ClientInfo, redirectUriMatches } from './client-metadata.js';
import { consentPage, errorPage, formTargetOf, pageHeaders } from './consent-page.js';
import { isCodeChallenge, OAUTH_SCOPES, type OAuthScope, parseScope, type PendingAuthorization, PENDING_TTL_MS } from './oauth.service.js';
import { authorizeQuerySchema, formBodySchema, grantSchema, listGrantsQuerySchema, oauthErrorSchema, tokenResponseSchema } from './oauth.schemas.js';

const FORM_LIMIT = 64 * 1024;
const STATE_MAX = 2_048;

/**
 * The base URL clients reach this server at: SWITCHBOARD_PUBLIC_URL, else the address it listens on
 * (a wildcard host reads as `localhost`). Never the request's Host header: a client could forge it.
 */
export function publicBase(config: Config, server: Server | undefined): string {
  if (config.publicUrl) return config.publicUrl;
  const address = server?.address();
  const port = address && typeof address === 'object' ? address.port : config.server.port;
  let host = config.server.host;
  if (host === '0.0.0.0' || host === '::' || host === '[::]') host = 'localhost';
  if (host.includes(':') && !host.startsWith('[')) host = `[${host}]`;
  return `http://${host}:${port}`;
}

export const resourceOf = (base: string) => `${base}/mcp`;
export const resourceMetadataUrlOf = (base: string) => `${base}/.well-known/oauth-protected-resource/mcp`;

export function protectedResourceMetadata(base: string) {
  return {
    resource: resourceOf(base),
    authorization_servers: [base],
    scopes_supported: [...OAUTH_SCOPES],
    bearer_methods_supported: ['header'],
    resource_name: 'Switchboard',
  };
}

export function authorizationServerMetadata(base: string) {
  return {
    issuer: base,
    authorization_endpoint: `${base}/oauth/authorize`,
    token_endpoint: `${base}/oauth/token`,
    registration_endpoint: `${base}/oauth/register`,
    revocation_endpoint: `${base}/oauth/revoke`,
    scopes_supported: [...OAUTH_SCOPES],
    response_types_supported: ['code'],
    response_modes_supported: ['query'],
    grant_types_supported: ['authorization_code', 'refresh_token'],
    code_challenge_methods_supported: ['S256'],
    token_endpoint_auth_methods_supported: ['none'],
    revocation_endpoint_auth_methods_supported: ['none'],
    client_id_metadata_document_supported: true,
    authorization_response_iss_parameter_supported: true,
  };
}

/** Parses `application/x-www-form-urlencoded`; a parameter sent twice is refused (RFC 6749 §3.1). */
export function parseForm(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of new URLSearchParams(text)) {
    if (Object.hasOwn(out, name)) throw new InvalidRequestError(`The parameter ${name.slice(0, 50)} was sent more than once.`);
    // PostgreSQL text cannot hold a NUL (lib/nul.ts): refused here, as in any query parameter.
    if (name.includes('\0') || value.includes('\0')) throw new InvalidRequestError(`The parameter ${name.slice(0, 50)} ${NUL_MESSAGE}.`);
    out[name] = value;
  }
  return out;
}

function cookieValue(header: string | undefined, name: string): string | undefined {
  for (const part of (header ?? '').split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
  }
  return undefined;
}

/** OAuth errors as RFC 6749 §5.2 JSON; anything else as the app's problem+json. */
function oauthErrorHandler(err: FastifyError | OAuthError, request: FastifyRequest, reply: FastifyReply) {
  if (err instanceof OAuthError) {
    const status = err.errorCode === 'invalid_client' ? 401 : err instanceof ServerError ? 500 : 400;
    return reply.code(status).header('cache-control', 'no-store').type('application/json').send(JSON.stringify(err.toResponseObject()));
  }
  return errorHandler(err as FastifyError, request, reply);
}

export function oauthRoutes(ctx: AppContext, base: () => string): FastifyPluginAsyncZod {
  const oauth = ctx.services.oauth;
  const tags = ['oauth'];
  const secureCookies = () => base().startsWith('https:');
  const cookieName = (id: string) => `${secureCookies() ? '__Host-' : ''}sb_oauth_${id}`;

  function sendPage(reply: FastifyReply, status: number, html: string, formTarget?: string) {
    return reply.code(status).headers(pageHeaders(formTarget)).send(html);
  }

  /** Back to the client with the answer (RFC 6749 §4.1.2, RFC 9207 `iss`). */
  function redirectBack(reply: FastifyReply, status: 302 | 303, redirectUri: string, params: Record<string, string | undefined>) {
    const url = new URL(redirectUri);
    for (const [name, value] of Object.entries(params)) if (value !== undefined) url.searchParams.set(name, value);
    url.searchParams.set('iss', base());
    return reply.code(status).header('cache-control', 'no-store').header('referrer-policy', 'no-referrer').redirect(url.href, status);
  }

  function renderConsent(reply: FastifyReply, status: number, entry: PendingAuthorization, error?: string) {
    return sendPage(
      reply,
      status,
      consentPage({
        pendingId: entry.id,
        csrf: entry.csrf,
        clientName: entry.client.name,
        clientId: entry.client.clientId,
        clientKind: entry.client.kind,
        redirectUri: entry.redirectUri,
        scopes: entry.scopes,
        ...(error ? { error } : {}),
      }),
      formTargetOf(entry.redirectUri),
    );
  }

  const publicSchema = { tags, security: [] };

  return async (app) => {
    // Everything here is public: OAuth endpoints authenticate their own way (or not at all).
    await app.register(async (plugin) => {
      const open = plugin.withTypeProvider<ZodTypeProvider>();
      open.addHook('onRoute', (route) => {
        route.config = { ...(route.config ?? {}), public: true };
      });
      open.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string', bodyLimit: FORM_LIMIT }, (_request, body, done) => {
        try {
          done(null, parseForm(body as string));
        } catch (error) {
          done(error as Error, undefined);
        }
      });
      open.setErrorHandler(oauthErrorHandler);

      const prm = async () => protectedResourceMetadata(base());
      const prmSchema = { ...publicSchema, summary: 'OAuth protected resource metadata of /mcp (RFC 9728)', response: withErrors({ 200: z.looseObject({ resource: z.string() }) }, [], { public: true }) };
      open.get('/.well-known/oauth-protected-resource/mcp', { schema: prmSchema }, prm);
      open.get('/.well-known/oauth-protected-resource', { schema: { ...prmSchema, summary: 'OAuth protected resource metadata (RFC 9728), same as …/mcp' } }, prm);
      open.get(
        '/.well-known/oauth-authorization-server',
        { schema: { ...publicSchema, summary: 'OAuth authorization server metadata (RFC 8414)', response: withErrors({ 200: z.looseObject({ issuer: z.string() }) }, [], { public: true }) } },
        async () => authorizationServerMetadata(base()),
      );

      open.get(
        '/oauth/authorize',
        {
          schema: {
            ...publicSchema,
            summary: 'OAuth authorization endpoint: shows the consent page',
            description:
              'Authorization code flow with PKCE (S256 only) and a `resource` of `<base>/mcp`. An unknown client or an unregistered `redirect_uri` → an HTML error page (400), never a redirect; other errors redirect back with `error`, `state` and `iss`.',
            querystring: authorizeQuerySchema,
            response: withErrors({ 200: z.string().describe('The consent page (HTML)') }, [400], { public: true }),
          },
        },
        async (request, reply) => {
          const query = request.query;
          const repeated = Object.keys(query).find((k) => Array.isArray(query[k]));
          const param = (name: string) => {
            const v = query[name];
            return typeof v === 'string' ? v : undefined;
          };
          const clientId = param('client_id');
          const redirectUri = param('redirect_uri');
          if (repeated === 'client_id' || repeated === 'redirect_uri' || !clientId) {
            return sendPage(reply, 400, errorPage('Invalid authorization request', 'The request must name exactly one client_id and redirect_uri.'));
          }
          let client: ClientInfo;
          try {
            client = await oauth.findClient(clientId);
          } catch (error) {
            if (!(error instanceof ClientMetadataError)) throw error;
            return sendPage(reply, 400, errorPage('Unknown application', error.message));
          }
          if (!redirectUri || !client.redirectUris.some((r) => redirectUriMatches(r, redirectUri))) {
            return sendPage(
              reply,
              400,
              errorPage('Unregistered redirect URI', `${client.name} did not register the redirect URI it asked to be sent back to, so this request was stopped.`),
            );
          }
          // From here the redirect URI is trusted: errors go back to the client.
          const state = param('state');
          const fail = (error: string, description: string) =>
            redirectBack(reply, 302, redirectUri, { error, error_description: description, state: state && state.length <= STATE_MAX ? state : undefined });
          if (repeated) return fail('invalid_request', `The parameter ${repeated.slice(0, 50)} was sent more than once.`);
          if (state !== undefined && state.length > STATE_MAX) return fail('invalid_request', `state may be at most ${STATE_MAX} characters.`);
          if (param('response_type') !== 'code') return fail('unsupported_response_type', 'response_type must be "code".');
          const challenge = param('code_challenge');
          if (!challenge) return fail('invalid_request', 'code_challenge is required (PKCE).');
          if (param('code_challenge_method') !== 'S256') return fail('invalid_request', 'code_challenge_method must be "S256".');
          if (!isCodeChallenge(challenge)) return fail('invalid_request', 'code_challenge must be 43 base64url characters.');
          const resource = param('resource');
          if (resource !== resourceOf(base())) return fail('invalid_target', `resource must be ${resourceOf(base())}.`);
          const asked = param('scope');
          const scopes: OAuthScope[] | null = asked === undefined ? (parseScope(client.scope) ?? ['read', 'write']) : parseScope(asked);
          if (!scopes || !scopes.includes('read')) return fail('invalid_scope', 'scope must be "read" or "read write".');
          if (param('request') !== undefined || param('request_uri') !== undefined) return fail('request_not_supported', 'Request objects are not supported.');

          const entry = await oauth.startPending({ client, redirectUri, state, codeChallenge: challenge, resource, scopes });
          const cookie = [`${cookieName(entry.id)}=${entry.csrf}`, 'Path=/', 'HttpOnly', 'SameSite=Strict', `Max-Age=${PENDING_TTL_MS / 1000}`];
          if (secureCookies()) cookie.push('Secure');
          reply.header('set-cookie', cookie.join('; '));
          return renderConsent(reply, 200, entry);
        },
      );

      open.post(
        '/oauth/authorize/consent',
        {
          schema: {
            ...publicSchema,
            summary: 'The consent form: Allow (with an API key) or Deny',
            description: 'Form fields `request_id`, `csrf_token` (also required as the cookie the page set), `api_key`, `scope`, `decision` (`allow` | `deny`). Answers 303 to the client, or the page again (400) for a wrong key, or 403 without the CSRF token.',
            body: formBodySchema,
            response: withErrors({ 200: z.string() }, [400, 403], { public: true }),
          },
        },
        async (request, reply) => {
          const body = request.body;
          const id = body.request_id ?? '';
          const csrf = body.csrf_token ?? '';
          const entry = /^[0-9A-Za-z]{32}$/.test(id) ? await oauth.findPending(id, csrf) : null;
          const cookie = entry ? cookieValue(request.headers.cookie, cookieName(entry.id)) : undefined;
          const unusable = () =>
            sendPage(reply, 403, errorPage('This form cannot be used', 'It expired, was already answered, or was not sent from the page this server showed. Start connecting again from your application.'));
          if (!entry || cookie !== csrf) return unusable();
          const clear = `${cookieName(entry.id)}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0${secureCookies() ? '; Secure' : ''}`;
          if (body.decision === 'deny') {
            await oauth.deny(entry);
            reply.header('set-cookie', clear);
            return redirectBack(reply, 303, entry.redirectUri, { error: 'access_denied', error_description: 'The request was denied.', state: entry.state });
          }
          if (body.decision !== 'allow') return renderConsent(reply, 400, entry, 'Choose Allow or Deny.');
          const chosen = parseScope(body.scope) ?? ['read'];
          const ua = request.headers['user-agent'];
          const origin = { requestId: request.id, ip: request.ip, userAgent: typeof ua === 'string' ? ua.slice(0, 300) : null };
          const result = await oauth.approve(entry, body.api_key ?? '', chosen, origin);
          if ('answered' in result) return unusable();
          if ('code' in result) {
            reply.header('set-cookie', clear);
            return redirectBack(reply, 303, entry.redirectUri, { code: result.code, state: entry.state });
          }
          if (!result.retry) {
            reply.header('set-cookie', clear);
            return redirectBack(reply, 303, entry.redirectUri, { error: 'access_denied', error_description: 'Too many wrong API keys.', state: entry.state });
          }
          const message = result.keyScopes
            ? 'This API key cannot grant the access chosen; it needs at least the read scope.'
            : 'That API key is not valid: it is unknown, revoked, expired or rotated out. Paste an active key of your workspace.';
          return renderConsent(reply, 400, entry, message);
        },
      );

      open.post(
        '/oauth/token',
        {
          schema: {
            ...publicSchema,
            summary: 'OAuth token endpoint: authorization_code (PKCE) and refresh_token grants',
            body: formBodySchema,
            response: withErrors({ 200: tokenResponseSchema, 400: oauthErrorSchema, 401: oauthErrorSchema }, [], { public: true }),
          },
        },
        async (request, reply) => {
          const body = { ...request.body };
          // A public client may still send its id as HTTP Basic user name.
          const basic = /^Basic\s+(\S+)$/i.exec(request.headers.authorization ?? '');
          if (!body.client_id && basic?.[1]) {
            const decoded = Buffer.from(basic[1], 'base64').toString('utf8');
            body.client_id = decodeURIComponent(decoded.slice(0, Math.max(0, decoded.indexOf(':'))));
          }
          reply.header('cache-control', 'no-store').header('pragma', 'no-cache');
          if (body.grant_type === 'authorization_code') return oauth.exchangeCode(body);
          if (body.grant_type === 'refresh_token') return oauth.refresh(body);
          if (!body.grant_type) throw new InvalidRequestError('grant_type is required.');
          throw new UnsupportedGrantTypeError('grant_type must be authorization_code or refresh_token.');
        },
      );

      open.post(
        '/oauth/register',
        {
          schema: {
            ...publicSchema,
            summary: 'OAuth dynamic client registration (RFC 7591), public clients only',
            body: z.unknown().describe('Client metadata (JSON)'),
            response: withErrors({ 201: z.looseObject({ client_id: z.string() }), 400: oauthErrorSchema }, [], { public: true }),
          },
        },
        async (request, reply) => {
          const result = await oauth.registerClient(request.body);
          reply.header('cache-control', 'no-store');
          if ('error' in result) return reply.code(400).send({ error: 'invalid_client_metadata', error_description: result.error });
          return reply.code(201).send(result.client);
        },
      );

      open.post(
        '/oauth/revoke',
        {
          schema: {
            ...publicSchema,
            summary: 'OAuth token revocation (RFC 7009); a refresh token takes its whole family',
            body: formBodySchema,
            response: withErrors({ 200: z.object({}), 400: oauthErrorSchema }, [], { public: true }),
          },
        },
        async (request) => {
          await oauth.revoke(request.body);
          return {};
        },
      );
    });

    app.get(
      '/auth/oauth/grants',
      {
        config: { scope: 'admin' },
        schema: {
          tags: ['auth'],
          summary: 'List the OAuth clients connected to this workspace',
          querystring: listGrantsQuerySchema,
          response: withErrors({ 200: pageOf(grantSchema) }),
        },
      },
      async (request) => oauth.listGrants(actorOf(request), request.query),
    );

    app.delete(
      '/auth/oauth/grants/:id',
      {
        config: { scope: 'admin' },
        schema: {
          tags: ['auth'],
          summary: 'Disconnect an OAuth client: its tokens stop working at once',
          params: idParams,
          response: withErrors({ 204: z.undefined().describe('Disconnected') }, [404]),
        },
      },
      async (request, reply) => {
        await oauth.deleteGrant(actorOf(request), request.params.id);
        return reply.code(204).send();
      },
    );
  };
}
