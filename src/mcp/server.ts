/**
 * Switchboard as an MCP server (API.md §10): one `McpServer` per connection, bound to the caller's
 * key, serving the tools, resources and prompts the feature folders define. It adds no rule of its
 * own: validation, workspace scoping and errors come from the services and `src/errors.ts`.
 */
import { McpServer, ResourceTemplate } from '@modelcontextprotocol/sdk/server/mcp.js';
import {
  CallToolRequestSchema,
  type CallToolResult,
  ElicitResultSchema,
  ErrorCode,
  GetPromptRequestSchema,
  ListPromptsRequestSchema,
  ListToolsRequestSchema,
  McpError,
  type Tool,
} from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import type { Actor } from '../core/auth/actor.js';
import type { AppContext } from '../context.js';
import { VERSION } from '../context.js';
import { describeRequirement, permits } from '../core/auth/roles.js';
import { AppError, ForbiddenError, InternalError, NotFoundError, toToolErrorResult, validationErrorOf, zodFieldErrors } from '../errors.js';
import { refuseNul, refuseNulId } from '../lib/nul.js';
import { jsonDepthIssue } from '../lib/json-depth.js';
import { traceFields, withLogContext } from '../lib/log-context.js';
import { MCP_FEATURES } from './catalog.js';
import type { McpFeature, McpToolDefinition, ToolInvocation } from './tool-definition.js';

export const INSTRUCTIONS =
  'Switchboard hosts personas: agents with instructions, traits and a knowledge base they answer from. ' +
  'Find one with list_personas, then ask_persona (keep the returned sessionId to continue the conversation). ' +
  'add_knowledge and search_knowledge manage what personas know. Every id has a type prefix (per_, src_, ses_).';

/** Resources listed per template; completion offers the ids among them. */
const RESOURCE_LIST_LIMIT = 100;

/** Every tool of every feature, by name; a name defined twice is a programming error caught at start. */
export function toolCatalog(features: McpFeature[] = MCP_FEATURES): Map<string, McpToolDefinition> {
  const tools = new Map<string, McpToolDefinition>();
  for (const tool of features.flatMap((f) => f.tools)) {
    if (tools.has(tool.name)) throw new Error(`MCP tool ${tool.name} is defined twice`);
    tools.set(tool.name, tool);
  }
  return tools;
}

export const CATALOG = toolCatalog();

/**
 * A tool's JSON Schema. MCP wants `type: "object"` at the root, so a schema registered under an id
 * (which zod emits as a root `$ref`) is inlined; its other definitions stay in `$defs`.
 */
function objectJsonSchema(schema: z.ZodObject, io: 'input' | 'output'): Record<string, unknown> {
  const json = z.toJSONSchema(schema, { io, target: 'draft-2020-12' }) as Record<string, any>;
  const ref = typeof json.$ref === 'string' ? /^#\/\$defs\/(.+)$/.exec(json.$ref)?.[1] : undefined;
  if (ref === undefined) return json;
  const { [ref]: root, ...defs } = json.$defs as Record<string, Record<string, unknown>>;
  return { $schema: json.$schema, ...root, ...(Object.keys(defs).length > 0 ? { $defs: defs } : {}) };
}

/** The `tools/list` entries: JSON Schemas are derived once per process, not per session. */
export const TOOL_LIST: Tool[] = [...CATALOG.values()].map((t) => ({
  name: t.name,
  title: t.title,
  description: t.description,
  inputSchema: objectJsonSchema(t.input, 'input') as Tool['inputSchema'],
  outputSchema: objectJsonSchema(t.output, 'output') as Tool['outputSchema'],
  annotations: { title: t.title, ...t.annotations },
}));

/** What a tool needs (a scope or a role), for transports that refuse before calling (`/mcp` answers 403); undefined for an unknown tool. */
export function toolScope(name: string) {
  return CATALOG.get(name)?.scope;
}

/** Anything a handler threw, as an AppError; unexpected ones are logged and become `internal`. */
export function asAppError(ctx: AppContext, err: unknown, what: string): AppError {
  if (err instanceof AppError) return err;
  ctx.logger.error({ err, what }, 'MCP request failed');
  return new InternalError();
}

/** The refusal of a tool the caller may not call, the same words over every transport. */
export function toolRefusal(name: string, needed: McpToolDefinition['scope']): string {
  return `${name} needs ${describeRequirement(needed)}.`;
}

/** Runs one tool call for a caller: its requirement (scope or role), argument validation, the handler, the one error mapping. */
async function callTool(
  ctx: AppContext,
  caller: Actor,
  tool: McpToolDefinition,
  args: unknown,
  invocation: Omit<ToolInvocation, 'ctx' | 'caller'>,
  /** Runs once the call is allowed and its arguments valid; a result it answers is the call's, and the tool does not run. */
  before?: (args: unknown) => Promise<CallToolResult | undefined>,
): Promise<CallToolResult> {
  try {
    if (!permits(caller.role, tool.scope)) {
      await ctx.services.audit.denied(caller, { type: 'mcp_tool', id: tool.name });
      throw new ForbiddenError(toolRefusal(tool.name, tool.scope));
    }
    // Over stdio nothing parsed the arguments with a depth limit yet (over /mcp the JSON body parser did).
    const tooDeep = jsonDepthIssue(args);
    if (tooDeep) throw validationErrorOf('arguments', [tooDeep]);
    // Over stdio nothing refused the NUL character either (PostgreSQL text cannot hold it; lib/nul.ts).
    refuseNul(args, 'arguments');
    const parsed = tool.input.safeParse(args ?? {});
    if (!parsed.success) throw validationErrorOf('arguments', zodFieldErrors(parsed.error.issues));
    const early = await before?.(parsed.data);
    if (early) return early;
    const result = tool.output.parse(await tool.run({ ctx, caller, ...invocation }, parsed.data)) as Record<string, unknown>;
    return { content: [{ type: 'text', text: JSON.stringify(result) }], structuredContent: result };
  } catch (err) {
    if (invocation.signal.aborted) throw err;
    return toToolErrorResult(asAppError(ctx, err, tool.name));
  }
}

/** What a tools/call carries, whichever SDK parsed it. */
interface ToolCallParams {
  arguments?: unknown;
  _meta?: { progressToken?: string | number; traceparent?: unknown; [key: string]: unknown };
}

/**
 * A tools/call of either server (this file's, server-modern.ts's): progress sent through `notify`
 * when the client gave a progress token, and the call run in the W3C trace context the client sent
 * (every log line the call writes joins the client's trace).
 */
export function runToolCall(
  ctx: AppContext,
  caller: Actor,
  tool: McpToolDefinition,
  params: ToolCallParams,
  signal: AbortSignal,
  notify: (notification: { method: 'notifications/progress'; params: { progressToken: string | number; progress: number; message: string } }) => Promise<void>,
  before?: (args: unknown, invocation: Omit<ToolInvocation, 'ctx' | 'caller'>) => Promise<CallToolResult | undefined>,
  options: {
    /** The call runs as a task (tasks.ts): no progress is sent, and the tool may finish its work first. */
    asTask?: boolean;
    /** Where clients reach this server, for links a tool hands out (ToolInvocation.publicBase). */
    publicBase?: (() => string) | undefined;
  } = {},
): Promise<CallToolResult> {
  const asTask = options.asTask ?? false;
  const token = asTask ? undefined : params._meta?.progressToken;
  let step = 0;
  const progress = token === undefined ? async () => {} : (message: string) => notify({ method: 'notifications/progress', params: { progressToken: token, progress: ++step, message } });
  const invocation = { signal, progress, asTask, publicBase: options.publicBase?.() };
  const call = () => callTool(ctx, caller, tool, params.arguments, invocation, before && ((args) => before(args, invocation)));
  const trace = traceFields(params._meta?.traceparent);
  return trace ? withLogContext(trace, call) : call();
}

/** A NotFoundError as MCP's "resource not found"; other failures as their detail. */
function resourceError(ctx: AppContext, err: unknown): McpError {
  const appError = asAppError(ctx, err, 'resource');
  return new McpError(appError instanceof NotFoundError ? -32002 : ErrorCode.InternalError, appError.message);
}

/**
 * The resources and prompts a server serves for `caller`, free of either SDK: this file's server
 * (the older era) and server-modern.ts's (2026-07-28) wrap them in their own classes; `fail` turns a
 * failure into the SDK's error.
 */
export function servingFor(ctx: AppContext, caller: Actor, features: McpFeature[], fail: (err: unknown) => Error) {
  const base = { ctx, caller };
  const prompts = features.flatMap((f) => (f.prompts ? [f.prompts] : []));
  return {
    resources: features
      .flatMap((f) => f.resources ?? [])
      .map((resource) => {
        const uriOf = (id: string) => resource.uriTemplate.replace('{id}', encodeURIComponent(id));
        return {
          name: resource.name,
          uriTemplate: resource.uriTemplate,
          metadata: { title: resource.title, description: resource.description, mimeType: 'application/json' },
          async list(signal: AbortSignal) {
            try {
              const items = await resource.list({ ...base, signal }, RESOURCE_LIST_LIMIT);
              return { resources: items.map((i) => ({ uri: uriOf(i.id), name: i.name, title: i.name, mimeType: 'application/json' })) };
            } catch (err) {
              throw fail(err);
            }
          },
          async complete(value: string) {
            const items = await resource.list({ ...base, signal: AbortSignal.timeout(10_000) }, RESOURCE_LIST_LIMIT);
            return items.map((i) => i.id).filter((id) => id.startsWith(value));
          },
          async read(href: string, id: unknown, signal: AbortSignal) {
            try {
              const key = decodeURIComponent(String(id ?? ''));
              // No object has an id holding a NUL (lib/nul.ts): not found, without asking the database.
              refuseNulId(key, resource.title);
              const value = await resource.read({ ...base, signal }, key);
              return { contents: [{ uri: href, mimeType: 'application/json', text: JSON.stringify(value, null, 2) }] };
            } catch (err) {
              throw fail(err);
            }
          },
        };
      }),
    async listPrompts(signal: AbortSignal) {
      const lists = await Promise.all(prompts.map((p) => p.list({ ...base, signal })));
      return { prompts: lists.flatMap((list, i) => list.map((p) => ({ ...p, arguments: prompts[i]!.arguments.map((a) => ({ ...a, required: false })) }))) };
    },
    /** The prompt `name` of the first provider that has it; undefined when none has. */
    async getPrompt(name: string, args: Record<string, string>, signal: AbortSignal) {
      // Prompt names are ids (a persona's): none holds a NUL (lib/nul.ts).
      if (name.includes('\0')) return undefined;
      for (const provider of prompts) {
        try {
          const prompt = await provider.get({ ...base, signal }, name, args);
          return {
            description: prompt.description,
            messages: prompt.messages.map((m) => ({ role: m.role, content: { type: 'text' as const, text: m.text } })),
          };
        } catch (err) {
          if (!(err instanceof NotFoundError)) throw fail(err);
        }
      }
      return undefined;
    },
  };
}

/** The form a tool that cannot be undone asks its user to fill in before it runs: one box to tick. */
export const CONFIRM_SCHEMA = {
  type: 'object' as const,
  properties: { confirm: { type: 'boolean' as const, title: 'Yes, do it', description: 'It cannot be undone.', default: false } },
  required: ['confirm'],
};

/** How long the older era's server waits for the user's answer to a confirmation. */
const CONFIRM_WAIT_MS = 10 * 60_000;

/** What a client declares of elicitation. */
export type Capabilities = { elicitation?: { form?: unknown; url?: unknown } } | undefined;

/** The client can ask its user through a form (an empty elicitation capability means forms, MCP 2025-11-25). */
export function canAsk(capabilities: Capabilities): boolean {
  const elicitation = capabilities?.elicitation;
  return elicitation !== undefined && (elicitation.form !== undefined || elicitation.url === undefined);
}

/** The user accepted and ticked the box (a client may answer anything: untrusted, like any client input). */
export const confirmed = (answer: { action?: string; content?: Record<string, unknown> | undefined }) => answer.action === 'accept' && answer.content?.confirm === true;

/** The user declined or dismissed the question: nothing was done, said as a tool error the model reads. */
export function notConfirmed(name: string): CallToolResult {
  return { content: [{ type: 'text', text: `Not done: the user did not confirm ${name}.` }], isError: true };
}

/** A new MCP server for one connection, acting as `caller`. Never share one across sessions. `publicBase`: ToolInvocation's. */
export function createMcpServer(ctx: AppContext, caller: Actor, features: McpFeature[] = MCP_FEATURES, publicBase?: () => string): McpServer {
  const mcp = new McpServer(
    { name: 'switchboard', title: 'Switchboard', version: VERSION },
    { instructions: INSTRUCTIONS, capabilities: { tools: { listChanged: false }, prompts: { listChanged: false } } },
  );
  const tools = features === MCP_FEATURES ? CATALOG : toolCatalog(features);
  const listed = features === MCP_FEATURES ? TOOL_LIST : TOOL_LIST.filter((t) => tools.has(t.name));

  // Tools are served by hand rather than through registerTool, so arguments are checked by the
  // services' own zod rules and refusals read exactly like the HTTP API's (see callTool).
  mcp.server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: listed }));
  mcp.server.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
    const tool = tools.get(request.params.name);
    if (!tool) throw new McpError(ErrorCode.InvalidParams, `Unknown tool: ${request.params.name}`);
    // A tool that cannot be undone asks first (elicitation/create on the call's own stream), when the client can ask its user.
    const ask =
      tool.confirm && canAsk(mcp.server.getClientCapabilities() as Capabilities)
        ? async (args: unknown, invocation: Omit<ToolInvocation, 'ctx' | 'caller'>) => {
            const message = await tool.confirm!({ ctx, caller, ...invocation }, args as never);
            const answer = await extra.sendRequest({ method: 'elicitation/create', params: { message, requestedSchema: CONFIRM_SCHEMA } }, ElicitResultSchema, {
              signal: extra.signal,
              timeout: CONFIRM_WAIT_MS,
            });
            return confirmed(answer) ? undefined : notConfirmed(tool.name);
          }
        : undefined;
    return runToolCall(ctx, caller, tool, request.params, extra.signal, (n) => extra.sendNotification(n), ask, { publicBase });
  });

  const serving = servingFor(ctx, caller, features, (err) => resourceError(ctx, err));
  for (const r of serving.resources) {
    const template = new ResourceTemplate(r.uriTemplate, { list: (extra) => r.list(extra.signal), complete: { id: r.complete } });
    mcp.registerResource(r.name, template, r.metadata, (uri, variables, extra) => r.read(uri.href, variables.id, extra.signal));
  }
  mcp.server.setRequestHandler(ListPromptsRequestSchema, (_request, extra) => serving.listPrompts(extra.signal));
  mcp.server.setRequestHandler(GetPromptRequestSchema, async (request, extra) => {
    const prompt = await serving.getPrompt(request.params.name, request.params.arguments ?? {}, extra.signal);
    if (!prompt) throw new McpError(ErrorCode.InvalidParams, `Unknown prompt: ${request.params.name}`);
    return prompt;
  });
  return mcp;
}
