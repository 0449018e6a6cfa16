import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { AppContext } from '../../context.js';
import { AppError } from '../../errors.js';
import { actorOf } from '../../http/auth-hooks.js';
import { idParams, pageOf, withErrors } from '../../http/openapi.js';
import { pageQuerySchema } from '../../lib/pagination.js';
import { errorPage, pageHeaders } from '../oauth/consent-page.js';
import { CALLBACK_PATH, CLIENT_DOCUMENT_PATH, clientMetadataDocument } from './tool-oauth.js';
import {
  authorizationSchema,
  createServerSchema,
  executeToolSchema,
  executionSchema,
  listExecutionsQuerySchema,
  mcpServerSchema,
  replaceCredentialsSchema,
  toolDescriptorSchema,
} from './tools.schemas.js';

const callbackQuerySchema = z.object({
  state: z.string().max(2048).optional(),
  code: z.string().max(4096).optional(),
  iss: z.string().max(2048).optional(),
  error: z.string().max(256).optional(),
  error_description: z.string().max(2048).optional(),
});

/**
 * API.md §7: MCP tool servers, their tools, and executions, under /api; and, at the public URL, what
 * tool servers that sign in with OAuth need of Switchboard: its Client ID Metadata Document and the
 * callback their authorization servers send the admin's browser back to (docs/tools.md#tool-servers-that-sign-in-with-oauth).
 */
export function toolRoutes(ctx: AppContext, base: () => string): FastifyPluginAsyncZod {
  const tools = ctx.services.tools;
  const tags = ['tools'];
  return async (app) => {
    app.post(
      '/api/mcp/servers',
      {
        config: { scope: 'admin', idempotent: true },
        schema: {
          tags,
          summary: 'Register an MCP tool server',
          description:
            'Answers 201 once the first connection attempt settles (at most a few seconds): an unreachable server is still registered, with `status: "error"` and the reason. ' +
            '`stdio` needs the operator’s SWITCHBOARD_MCP_STDIO=1 (else 403); an `http` URL passes the address guard (a private address → 400 unless SWITCHBOARD_ALLOW_PRIVATE_URLS=1). ' +
            'Credentials and header values are write-only.',
          body: createServerSchema,
          response: withErrors({ 201: mcpServerSchema }, [409]),
        },
      },
      async (request, reply) => {
        const server = await tools.createServer(actorOf(request), request.body);
        return reply.code(201).header('location', `/api/mcp/servers/${server.id}`).send(server);
      },
    );

    app.get(
      '/api/mcp/servers',
      { schema: { tags, summary: 'List MCP tool servers, newest first', querystring: pageQuerySchema.strict(), response: withErrors({ 200: pageOf(mcpServerSchema) }) } },
      async (request) => tools.listServers(actorOf(request).workspaceId, request.query),
    );

    app.get(
      '/api/mcp/servers/:id',
      { schema: { tags, summary: 'Get an MCP tool server', params: idParams, response: withErrors({ 200: mcpServerSchema }, [404]) } },
      async (request) => tools.getServer(actorOf(request).workspaceId, request.params.id),
    );

    app.put(
      '/api/mcp/servers/:id/credentials',
      {
        config: { scope: 'admin' },
        schema: {
          tags,
          summary: 'Replace a server’s credentials and reconnect with them',
          params: idParams,
          body: replaceCredentialsSchema,
          response: withErrors({ 200: mcpServerSchema }, [404]),
        },
      },
      async (request) => tools.replaceCredentials(actorOf(request), request.params.id, request.body.credentials),
    );

    app.delete(
      '/api/mcp/servers/:id',
      {
        config: { scope: 'admin' },
        schema: { tags, summary: 'Remove an MCP tool server (its client and process are closed)', params: idParams, response: withErrors({ 204: z.undefined().describe('Deleted') }, [404]) },
      },
      async (request, reply) => {
        await tools.deleteServer(actorOf(request), request.params.id);
        return reply.code(204).send();
      },
    );

    app.post(
      '/api/mcp/servers/:id/oauth/authorize',
      {
        config: { scope: 'admin' },
        schema: {
          tags,
          summary: 'Start connecting a tool server that signs in with OAuth',
          description:
            'Discovers the server’s authorization server (RFC 9728, RFC 8414), identifies Switchboard (its Client ID Metadata Document, else dynamic registration, once per authorization server, or the pre-registered client), and answers the authorization URL (PKCE S256, `state`, `resource`). ' +
            'Open it in the admin’s browser; after consent the authorization server sends the browser to `/oauth/callback`, which stores the tokens and returns to the console. ' +
            'Not an http server → 409; discovery or registration failing → 502; an authorization server with neither client metadata documents nor registration → 400 (register the server again with `oauth.clientId`).',
          params: idParams,
          response: withErrors({ 200: authorizationSchema }, [404, 409, 502]),
        },
      },
      async (request) => tools.authorize(actorOf(request), request.params.id, base()),
    );

    app.delete(
      '/api/mcp/servers/:id/oauth',
      {
        config: { scope: 'admin' },
        schema: {
          tags,
          summary: 'Sign a tool server out: revoke its OAuth tokens and forget them',
          description:
            'Revokes the refresh and access tokens at the authorization server’s revocation endpoint (RFC 7009) when it has one, drops them here either way, and answers the server, now `needs_consent` (`oauth.error` null, or why revocation failed). Not signed in (never, or signed out already) → 409.',
          params: idParams,
          response: withErrors({ 200: mcpServerSchema }, [404, 409]),
        },
      },
      async (request) => tools.revokeAuthorization(actorOf(request), request.params.id),
    );

    app.get(
      CLIENT_DOCUMENT_PATH,
      {
        config: { public: true },
        schema: {
          tags,
          security: [],
          summary: 'Switchboard’s OAuth Client ID Metadata Document, for the authorization servers of tool servers',
          response: withErrors({ 200: z.looseObject({ client_id: z.string() }) }, [], { public: true }),
        },
      },
      async (_request, reply) => reply.header('cache-control', 'public, max-age=3600').send(clientMetadataDocument(base())),
    );

    app.get(
      CALLBACK_PATH,
      {
        config: { public: true },
        schema: {
          tags,
          security: [],
          summary: 'Where a tool server’s authorization server sends the admin’s browser back to',
          description: 'Checks `state` (once, 10 minutes) and `iss` (RFC 9207), exchanges the code, and redirects to the console’s Tools page; an HTML page says what went wrong otherwise.',
          querystring: callbackQuerySchema,
          response: withErrors({ 303: z.undefined().describe('Signed in: back to the console'), 400: z.string().describe('What went wrong (HTML)') }, [], { public: true }),
        },
      },
      async (request, reply) => {
        try {
          const server = await tools.completeAuthorization(request.query);
          return reply.headers(pageHeaders()).redirect(`/console/tools?connected=${encodeURIComponent(server.name)}`, 303);
        } catch (err) {
          if (!(err instanceof AppError) || err.status >= 500 || err.status === 404) throw err;
          return reply.code(400).headers(pageHeaders()).send(errorPage('The tool server was not connected', err.message));
        }
      },
    );

    app.get(
      '/api/mcp/tools',
      {
        schema: {
          tags,
          summary: 'Every tool: built-in ones and those of connected servers',
          response: withErrors({ 200: z.object({ data: z.array(toolDescriptorSchema) }) }),
        },
      },
      async (request) => ({ data: await tools.listTools(actorOf(request).workspaceId) }),
    );

    app.post(
      '/api/mcp/tools/execute',
      {
        config: { idempotent: true },
        schema: {
          tags,
          summary: 'Run one tool action',
          description:
            'Unknown tool or action → 404; parameters failing the tool’s input schema → 400 (`parameters.<field>`); the tool reporting an error → 200 with `status: "failed"`; ' +
            'server unreachable → 502, time-out → 504 (both recorded as executions); too many calls waiting for the server → 503.',
          body: executeToolSchema,
          response: withErrors({ 200: executionSchema }, [404, 502, 503, 504]),
        },
      },
      async (request) => tools.execute(actorOf(request).workspaceId, request.body, undefined, actorOf(request)),
    );

    app.get(
      '/api/mcp/executions',
      {
        config: { cache: true },
        schema: { tags, summary: 'List tool executions, newest first', querystring: listExecutionsQuerySchema, response: withErrors({ 200: pageOf(executionSchema) }) },
      },
      async (request) => {
        const { toolName, ...page } = request.query;
        return tools.listExecutions(actorOf(request).workspaceId, page, toolName);
      },
    );

    app.get(
      '/api/mcp/executions/:id',
      { config: { cache: true }, schema: { tags, summary: 'Get a tool execution', params: idParams, response: withErrors({ 200: executionSchema }, [404]) } },
      async (request) => tools.getExecution(actorOf(request).workspaceId, request.params.id),
    );
  };
}
