/**
 * The one tool registry for MCP (DESIGN.md): each feature exports plain definitions from its
 * `<feature>.tools.ts` — name, zod input and output, annotations, scope, and a handler that calls
 * the feature's service with the caller's workspace. `src/mcp/server.ts` only serves them.
 */
import type { z } from 'zod';
import type { AppContext } from '../context.js';
import type { Actor } from '../core/auth/actor.js';
import type { Requirement } from '../core/auth/roles.js';


/** What a handler gets besides its arguments. */
export interface ToolInvocation {
  ctx: AppContext;
  /** Who is calling: the actor the session (HTTP) or process (stdio) authenticated as. */
  caller: Actor;
  /**
   * The base URL clients reach this server at (SWITCHBOARD_PUBLIC_URL, else the HTTP listen address),
   * for links a tool hands out; undefined over stdio without SWITCHBOARD_PUBLIC_URL.
   */
  publicBase?: string | undefined;
  /** Aborted when the client cancels the request or goes away. */
  signal: AbortSignal;
  /**
   * Reports progress (MCP `notifications/progress`) when the client sent a progress token; a no-op
   * otherwise. `message` carries a piece of streamed text.
   */
  progress(message: string): Promise<void>;
  /**
   * True when the call runs as a task of MCP's tasks extension (tasks.ts): nobody waits on the
   * request, so the tool may finish its work before answering (a URL source until it is processed).
   */
  asTask?: boolean;
}

export interface ToolAnnotations {
  readOnlyHint: boolean;
  destructiveHint: boolean;
  idempotentHint: boolean;
  /** True for tools that reach beyond Switchboard's own data (a model, external tools). */
  openWorldHint?: boolean;
}

export interface McpToolDefinition<I extends z.ZodObject = z.ZodObject, O extends z.ZodObject = z.ZodObject> {
  /** snake_case verb (`create_persona`). */
  name: string;
  title: string;
  /** What a model needs to choose and call the tool well. */
  description: string;
  input: I;
  /** The result's shape; results are returned as `structuredContent` and as JSON text. */
  output: O;
  annotations: ToolAnnotations;
  /**
   * What the caller needs, as the HTTP route of the same operation (the permission table,
   * core/auth/roles.ts): a scope (`read` for tools that only look, `write` for those that change
   * data, `admin`) or a role (`agent` for asking a persona and working a handoff, `admin` for
   * members and the audit log). Checked against the caller's role, so a person's key or grant is
   * capped by that person's role.
   */
  scope: Requirement;
  /**
   * For a tool that cannot be undone: the question a client that can ask its user puts before the
   * call runs (an elicitation; a NotFoundError when there is nothing to ask about). See server-modern.ts.
   */
  confirm?(invocation: ToolInvocation, args: z.output<I>): Promise<string>;
  /**
   * Long work (a model's answer, a web page fetched and indexed): a 2026-07-28 client that declares
   * the tasks extension gets a task handle at once and polls for the result (tasks.ts).
   */
  task?: true;
  run(invocation: ToolInvocation, args: z.output<I>): Promise<z.input<O>>;
}

/** Identity function that keeps the input and output types of one definition tied together. */
export function defineTool<I extends z.ZodObject, O extends z.ZodObject>(definition: McpToolDefinition<I, O>): McpToolDefinition {
  return definition as unknown as McpToolDefinition;
}

/** Annotations of a tool that only reads. */
export const READ_ONLY: ToolAnnotations = { readOnlyHint: true, destructiveHint: false, idempotentHint: true };

/** A resource template under `switchboard://` whose ids the client can list and complete. */
export interface McpResourceDefinition {
  /** Registered name, e.g. `persona`. */
  name: string;
  /** RFC 6570 template, e.g. `switchboard://personas/{id}`. */
  uriTemplate: string;
  title: string;
  description: string;
  /** Every resource the caller can see (name and id), newest first, at most `limit`. */
  list(invocation: Omit<ToolInvocation, 'progress'>, limit: number): Promise<Array<{ id: string; name: string }>>;
  /** The object behind one id, as JSON; throws NotFoundError for an id the caller cannot see. */
  read(invocation: Omit<ToolInvocation, 'progress'>, id: string): Promise<unknown>;
}

/** Prompts whose names and content come from data (each persona is a prompt). */
export interface McpPromptProvider {
  list(invocation: Omit<ToolInvocation, 'progress'>): Promise<Array<{ name: string; title: string; description: string }>>;
  /** The prompt's messages; throws NotFoundError for an unknown name. */
  get(invocation: Omit<ToolInvocation, 'progress'>, name: string, args: Record<string, string>): Promise<{
    description: string;
    messages: Array<{ role: 'user' | 'assistant'; text: string }>;
  }>;
  /** Declared arguments, all optional strings. */
  arguments: Array<{ name: string; description: string }>;
}

/** What one feature contributes to the MCP server. */
export interface McpFeature {
  tools: McpToolDefinition[];
  resources?: McpResourceDefinition[];
  prompts?: McpPromptProvider;
}
