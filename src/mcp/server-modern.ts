/**
 * Switchboard as an MCP server of the 2026-07-28 revision (issue 27): the same tools, resources and
 * prompts as server.ts, through the MCP SDK's v2 server (`@modelcontextprotocol/server`), one server
 * per request (the revision has no session: each request carries its protocol version and the
 * client's capabilities). Only the SDK's surface differs; the tool calls, their scope checks, argument
 * validation and error mapping are server.ts's own.
 */
import { CLIENT_CAPABILITIES_META_KEY, inputRequired, inputResponse, McpServer, MissingRequiredClientCapabilityError, ProtocolError, ProtocolErrorCode, ResourceNotFoundError, ResourceTemplate } from '@modelcontextprotocol/server';
import type { Actor } from '../core/auth/actor.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import type { AppContext } from '../context.js';
import { VERSION } from '../context.js';
import { NotFoundError } from '../errors.js';
import { MCP_FEATURES } from './catalog.js';
import { asAppError, canAsk, type Capabilities, CATALOG, CONFIRM_SCHEMA, confirmed, INSTRUCTIONS, notConfirmed, runToolCall, servingFor, TOOL_LIST } from './server.js';
import { TASKS_EXTENSION } from './tasks.js';
import type { ToolInvocation } from './tool-definition.js';

/**
 * How long a client (or a shared cache) may keep the lists that change only with a new version of
 * Switchboard: the tools, the resource templates and the server's description (the same for every
 * key). The lists drawn from a workspace's data (prompts, resources) and reads keep the revision's
 * default: not cached, private.
 */
const STATIC_LIST = { ttlMs: 10 * 60_000, cacheScope: 'public' } as const;
const CACHE_HINTS = { 'tools/list': STATIC_LIST, 'resources/templates/list': STATIC_LIST, 'server/discover': STATIC_LIST };

/** The key of the confirmation in the request's input responses. */
const CONFIRM = 'confirm';

/** The request's client declares the tasks extension (only then may a call be answered with a task). */
function takesTasks(envelope: unknown): boolean {
  const capabilities = (envelope as Record<string, unknown> | undefined)?.[CLIENT_CAPABILITIES_META_KEY] as { extensions?: Record<string, unknown> } | undefined;
  return capabilities?.extensions?.[TASKS_EXTENSION] !== undefined;
}

/** A NotFoundError as the revision's "resource not found"; other failures as their detail. */
function resourceError(ctx: AppContext, err: unknown): Error {
  const appError = asAppError(ctx, err, 'resource');
  return appError instanceof NotFoundError ? new ResourceNotFoundError(appError.message) : new ProtocolError(ProtocolErrorCode.InternalError, appError.message);
}

/** A new 2026-07-28 server answering one request as `caller`; `publicBase`: where clients reach this server (ToolInvocation's). */
export function createModernMcpServer(ctx: AppContext, caller: Actor, publicBase?: () => string): McpServer {
  const mcp = new McpServer(
    { name: 'switchboard', title: 'Switchboard', version: VERSION },
    {
      instructions: INSTRUCTIONS,
      capabilities: { tools: { listChanged: false }, prompts: { listChanged: false }, extensions: { [TASKS_EXTENSION]: {} } },
      cacheHints: CACHE_HINTS,
    },
  );

  mcp.server.setRequestHandler('tools/list', () => ({ tools: TOOL_LIST }) as never);
  mcp.server.setRequestHandler('tools/call', async (request, c) => {
    const tool = CATALOG.get(request.params.name);
    if (!tool) throw new ProtocolError(ProtocolErrorCode.InvalidParams, `Unknown tool: ${request.params.name}`);
    // A tool that cannot be undone asks first, when the client can put the question to its user: on
    // 2026-07-28 as an `input_required` result the client answers by calling again (nothing is kept
    // here between the two), before it through the SDK's own elicitation/create request.
    const ask =
      tool.confirm && canAsk(((c.mcpReq.envelope as Record<string, unknown> | undefined)?.[CLIENT_CAPABILITIES_META_KEY] as Capabilities) ?? mcp.server.getClientCapabilities())
        ? async (args: unknown, invocation: Omit<ToolInvocation, 'ctx' | 'caller'>) => {
            const answer = inputResponse(c.mcpReq.inputResponses, CONFIRM);
            // (Untrusted like any client input; a client may answer without asking, as it may call without asking.)
            if (answer.kind === 'elicit') return confirmed(answer) ? undefined : notConfirmed(tool.name);
            const message = await tool.confirm!({ ctx, caller, ...invocation }, args as never);
            return inputRequired({ inputRequests: { [CONFIRM]: inputRequired.elicit({ message, requestedSchema: CONFIRM_SCHEMA }) } }) as never;
          }
        : undefined;
    // Long work for a client that takes tasks: a handle now, the result through tasks/get (tasks.ts).
    if (tool.task && takesTasks(c.mcpReq.envelope)) {
      return (await ctx.services.mcpTasks.start(caller, tool.name, async (signal) => ({
        result: (await runToolCall(ctx, caller, tool, request.params, signal, async () => {}, undefined, { asTask: true, publicBase })) as Record<string, unknown>,
      }))) as never;
    }
    return (await runToolCall(ctx, caller, tool, request.params, c.mcpReq.signal, (n) => c.mcpReq.notify(n), ask, { publicBase })) as never;
  });

  // tasks/* only for a client that declares the extension on the request (-32021 otherwise, as the extension says).
  const taskParams = { params: z.looseObject({ taskId: z.string().min(1).max(64) }) };
  const onTask =
    (answer: (taskId: string) => Promise<unknown>) =>
    async ({ taskId }: { taskId: string }, c: { mcpReq: { envelope?: unknown } }) => {
      if (!takesTasks(c.mcpReq.envelope)) throw new MissingRequiredClientCapabilityError({ requiredCapabilities: { extensions: { [TASKS_EXTENSION]: {} } } });
      const result = await answer(taskId);
      if (result === undefined) throw new ProtocolError(ProtocolErrorCode.InvalidParams, `Unknown task: ${taskId}`);
      return result as never;
    };
  const tasks = ctx.services.mcpTasks;
  mcp.server.setRequestHandler('tasks/get', taskParams, onTask((taskId) => tasks.get(caller, taskId)));
  // No task of Switchboard's asks for input, so there is nothing to update: a known task is acknowledged.
  mcp.server.setRequestHandler('tasks/update', taskParams, onTask(async (taskId) => ((await tasks.get(caller, taskId)) ? {} : undefined)));
  mcp.server.setRequestHandler('tasks/cancel', taskParams, onTask(async (taskId) => ((await tasks.cancel(caller, taskId)) ? {} : undefined)));

  const serving = servingFor(ctx, caller, MCP_FEATURES, (err) => resourceError(ctx, err));
  for (const r of serving.resources) {
    const template = new ResourceTemplate(r.uriTemplate, { list: (c) => r.list(c.mcpReq.signal), complete: { id: r.complete } });
    mcp.registerResource(r.name, template, r.metadata, (uri, variables, c) => r.read(uri.href, variables.id, c.mcpReq.signal));
  }
  mcp.server.setRequestHandler('prompts/list', (_request, c) => serving.listPrompts(c.mcpReq.signal));
  mcp.server.setRequestHandler('prompts/get', async (request, c) => {
    const prompt = await serving.getPrompt(request.params.name, request.params.arguments ?? {}, c.mcpReq.signal);
    if (!prompt) throw new ProtocolError(ProtocolErrorCode.InvalidParams, `Unknown prompt: ${request.params.name}`);
    return prompt;
  });
  return mcp;
}
