/**
 * Switchboard as an MCP server of the 2026-07-28 revision (issue 27): the same tools, resources and
 * prompts as server.ts, through the MCP SDK's v2 server (`@modelcontextprotocol/server`), one server
 * per request (the revision has no session: each request carries its protocol version and the
 * client's capabilities). Only the SDK's surface differs; the tool calls, their scope checks, argument
 * validation and error mapping are server.ts's own.
 */
import { CLIENT_CAPABILITIES_META_KEY, inputRequired, inputResponse, McpServer, ProtocolError, ProtocolErrorCode, ResourceNotFoundError, ResourceTemplate } from '@modelcontextprotocol/server';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { AppContext } from '../context.js';
import { VERSION } from '../context.js';
import { NotFoundError } from '../errors.js';
import { traceFields, withLogContext } from '../lib/log-context.js';
import { MCP_FEATURES } from './catalog.js';
import { asAppError, CATALOG, callTool, INSTRUCTIONS, RESOURCE_LIST_LIMIT, TOOL_LIST } from './server.js';
import type { McpCaller } from './tool-definition.js';

/**
 * How long a client (or a shared cache) may keep the lists that change only with a new version of
 * Switchboard: the tools, the resource templates and the server's description (the same for every
 * key). The lists drawn from a workspace's data (prompts, resources) and reads keep the revision's
 * default: not cached, private.
 */
const STATIC_LIST = { ttlMs: 10 * 60_000, cacheScope: 'public' } as const;
const CACHE_HINTS = { 'tools/list': STATIC_LIST, 'resources/templates/list': STATIC_LIST, 'server/discover': STATIC_LIST };

/** The key of the confirmation a tool that cannot be undone asks for, and its form: one box to tick. */
const CONFIRM = 'confirm';
const CONFIRM_SCHEMA = {
  type: 'object' as const,
  properties: { confirm: { type: 'boolean' as const, title: 'Yes, do it', description: 'It cannot be undone.', default: false } },
  required: ['confirm'],
};

/** The client can ask its user through a form (an empty elicitation capability means forms, MCP 2025-11-25). */
type Capabilities = { elicitation?: { form?: unknown; url?: unknown } } | undefined;
function canAsk(capabilities: Capabilities): boolean {
  const elicitation = capabilities?.elicitation;
  return elicitation !== undefined && (elicitation.form !== undefined || elicitation.url === undefined);
}

/** The user declined or dismissed the question: nothing was done, said as a tool error the model reads. */
function notConfirmed(name: string): CallToolResult {
  return { content: [{ type: 'text', text: `Not done: the user did not confirm ${name}.` }], isError: true };
}

/** A NotFoundError as the revision's "resource not found"; other failures as their detail. */
function resourceError(ctx: AppContext, err: unknown): Error {
  const appError = asAppError(ctx, err, 'resource');
  return appError instanceof NotFoundError ? new ResourceNotFoundError(appError.message) : new ProtocolError(ProtocolErrorCode.InternalError, appError.message);
}

/** A new 2026-07-28 server answering one request as `caller`. */
export function createModernMcpServer(ctx: AppContext, caller: McpCaller): McpServer {
  const mcp = new McpServer(
    { name: 'switchboard', title: 'Switchboard', version: VERSION },
    { instructions: INSTRUCTIONS, capabilities: { tools: { listChanged: false }, prompts: { listChanged: false } }, cacheHints: CACHE_HINTS },
  );
  const base = { ctx, caller };

  mcp.server.setRequestHandler('tools/list', () => ({ tools: TOOL_LIST }) as never);
  mcp.server.setRequestHandler('tools/call', async (request, c) => {
    const tool = CATALOG.get(request.params.name);
    if (!tool) throw new ProtocolError(ProtocolErrorCode.InvalidParams, `Unknown tool: ${request.params.name}`);
    const token = request.params._meta?.progressToken;
    let step = 0;
    const progress =
      token === undefined
        ? async () => {}
        : (message: string) => c.mcpReq.notify({ method: 'notifications/progress', params: { progressToken: token, progress: ++step, message } });
    const invocation = { signal: c.mcpReq.signal, progress };
    // A tool that cannot be undone asks first, when the client can put the question to its user: on
    // 2026-07-28 as an `input_required` result the client answers by calling again (nothing is kept
    // here between the two), before it through the SDK's own elicitation/create request.
    const ask =
      tool.confirm && canAsk(((c.mcpReq.envelope as Record<string, unknown> | undefined)?.[CLIENT_CAPABILITIES_META_KEY] as Capabilities) ?? mcp.server.getClientCapabilities())
        ? async (args: unknown) => {
            const answer = inputResponse(c.mcpReq.inputResponses, CONFIRM);
            // (Untrusted like any client input; a client may answer without asking, as it may call without asking.)
            if (answer.kind === 'elicit') return answer.action === 'accept' && answer.content?.confirm === true ? undefined : notConfirmed(tool.name);
            const message = await tool.confirm!({ ctx, caller, ...invocation }, args as never);
            return inputRequired({ inputRequests: { [CONFIRM]: inputRequired.elicit({ message, requestedSchema: CONFIRM_SCHEMA }) } }) as never;
          }
        : undefined;
    const call = () => callTool(ctx, caller, tool, request.params.arguments, invocation, ask);
    const trace = traceFields(request.params._meta?.traceparent);
    return (await (trace ? withLogContext(trace, call) : call())) as never;
  });

  for (const resource of MCP_FEATURES.flatMap((f) => f.resources ?? [])) {
    const uriOf = (id: string) => resource.uriTemplate.replace('{id}', encodeURIComponent(id));
    const template = new ResourceTemplate(resource.uriTemplate, {
      list: async (c) => {
        try {
          const items = await resource.list({ ...base, signal: c.mcpReq.signal }, RESOURCE_LIST_LIMIT);
          return { resources: items.map((i) => ({ uri: uriOf(i.id), name: i.name, title: i.name, mimeType: 'application/json' })) };
        } catch (err) {
          throw resourceError(ctx, err);
        }
      },
      complete: {
        id: async (value) => {
          const items = await resource.list({ ...base, signal: AbortSignal.timeout(10_000) }, RESOURCE_LIST_LIMIT);
          return items.map((i) => i.id).filter((id) => id.startsWith(value));
        },
      },
    });
    mcp.registerResource(resource.name, template, { title: resource.title, description: resource.description, mimeType: 'application/json' }, async (uri, variables, c) => {
      const id = decodeURIComponent(String(variables.id ?? ''));
      try {
        const value = await resource.read({ ...base, signal: c.mcpReq.signal }, id);
        return { contents: [{ uri: uri.href, mimeType: 'application/json', text: JSON.stringify(value, null, 2) }] };
      } catch (err) {
        throw resourceError(ctx, err);
      }
    });
  }

  const prompts = MCP_FEATURES.flatMap((f) => (f.prompts ? [f.prompts] : []));
  mcp.server.setRequestHandler('prompts/list', async (_request, c) => {
    const lists = await Promise.all(prompts.map((p) => p.list({ ...base, signal: c.mcpReq.signal })));
    return {
      prompts: lists.flatMap((list, i) => list.map((p) => ({ ...p, arguments: prompts[i]!.arguments.map((a) => ({ ...a, required: false })) }))),
    };
  });
  mcp.server.setRequestHandler('prompts/get', async (request, c) => {
    for (const provider of prompts) {
      try {
        const prompt = await provider.get({ ...base, signal: c.mcpReq.signal }, request.params.name, request.params.arguments ?? {});
        return {
          description: prompt.description,
          messages: prompt.messages.map((m) => ({ role: m.role, content: { type: 'text' as const, text: m.text } })),
        };
      } catch (err) {
        if (!(err instanceof NotFoundError)) throw resourceError(ctx, err);
      }
    }
    throw new ProtocolError(ProtocolErrorCode.InvalidParams, `Unknown prompt: ${request.params.name}`);
  });
  return mcp;
}
