import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { AppContext } from '../../context.js';
import { principalOf } from '../../http/auth-hooks.js';
import { idParams, pageOf, withErrors } from '../../http/openapi.js';
import { pageQuerySchema } from '../../lib/pagination.js';
import {
  createServerSchema,
  executeToolSchema,
  executionSchema,
  listExecutionsQuerySchema,
  mcpServerSchema,
  replaceCredentialsSchema,
  toolDescriptorSchema,
} from './tools.schemas.js';

/** API.md §7: MCP tool servers, their tools, and executions. Served only under /api. */
export function toolRoutes(ctx: AppContext): FastifyPluginAsyncZod {
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
        const server = await tools.createServer(principalOf(request).workspaceId, request.body);
        return reply.code(201).header('location', `/api/mcp/servers/${server.id}`).send(server);
      },
    );

    app.get(
      '/api/mcp/servers',
      { schema: { tags, summary: 'List MCP tool servers, newest first', querystring: pageQuerySchema.strict(), response: withErrors({ 200: pageOf(mcpServerSchema) }) } },
      async (request) => tools.listServers(principalOf(request).workspaceId, request.query),
    );

    app.get(
      '/api/mcp/servers/:id',
      { schema: { tags, summary: 'Get an MCP tool server', params: idParams, response: withErrors({ 200: mcpServerSchema }, [404]) } },
      async (request) => tools.getServer(principalOf(request).workspaceId, request.params.id),
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
      async (request) => tools.replaceCredentials(principalOf(request).workspaceId, request.params.id, request.body.credentials),
    );

    app.delete(
      '/api/mcp/servers/:id',
      {
        config: { scope: 'admin' },
        schema: { tags, summary: 'Remove an MCP tool server (its client and process are closed)', params: idParams, response: withErrors({ 204: z.undefined().describe('Deleted') }, [404]) },
      },
      async (request, reply) => {
        await tools.deleteServer(principalOf(request).workspaceId, request.params.id);
        return reply.code(204).send();
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
      async (request) => ({ data: await tools.listTools(principalOf(request).workspaceId) }),
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
      async (request) => tools.execute(principalOf(request).workspaceId, request.body),
    );

    app.get(
      '/api/mcp/executions',
      {
        config: { cache: true },
        schema: { tags, summary: 'List tool executions, newest first', querystring: listExecutionsQuerySchema, response: withErrors({ 200: pageOf(executionSchema) }) },
      },
      async (request) => {
        const { toolName, ...page } = request.query;
        return tools.listExecutions(principalOf(request).workspaceId, page, toolName);
      },
    );

    app.get(
      '/api/mcp/executions/:id',
      { config: { cache: true }, schema: { tags, summary: 'Get a tool execution', params: idParams, response: withErrors({ 200: executionSchema }, [404]) } },
      async (request) => tools.getExecution(principalOf(request).workspaceId, request.params.id),
    );
  };
}
