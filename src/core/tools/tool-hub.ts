/**
 * The tool port (DESIGN.md "ToolHub"): what the agent loop and `POST /api/mcp/tools/execute` call.
 * It merges the built-in tools with every registered MCP server of the workspace, one
 * `ServerConnection` per server, created on first use and replaced when the server changes.
 */
import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import type { Logger } from 'pino';
import type { McpServerRow } from '../../db/schema.js';
import { NotFoundError, validationErrorOf, zodFieldErrors } from '../../errors.js';
import type { AddressGuardOptions } from '../../lib/address-guard.js';
import type { KnowledgeService } from '../knowledge/knowledge.service.js';
import { type BuiltinTool, builtinTools } from './builtin-tools.js';
import { checkParameters } from './json-schema.js';
import { type HubLimits, ServerConnection, type ServerStatus, type ToolEvent } from './mcp-clients.js';
import type { ToolsStore } from './tools.store.js';
import type { Vault } from './vault.js';

export interface ToolDescriptor {
  toolName: string;
  action: string;
  description: string;
  /** JSON Schema of the parameters object. */
  inputSchema: Record<string, unknown>;
}

export interface ToolCallOptions {
  signal?: AbortSignal | undefined;
  /** The persona calling, when a chat calls: `knowledge.search` then searches what it may see. */
  personaId?: string | undefined;
  /** Progress and log notifications of an external tool's call, secrets scrubbed. */
  onEvent?: ((event: ToolEvent) => void) | undefined;
}

/** A tool's answer; `isError` when the tool itself reported a failure. */
export interface ToolOutput {
  result: unknown;
  isError: boolean;
}

export interface ToolHub {
  list(workspaceId: string): Promise<ToolDescriptor[]>;
  /**
   * Runs one action. Throws NotFoundError for an unknown tool or action, ValidationError when the
   * parameters fail its schema, UpstreamError/UpstreamTimeoutError when its server fails,
   * UnavailableError when too many calls wait for its server.
   */
  call(workspaceId: string, toolName: string, action: string, parameters: Record<string, unknown>, options?: ToolCallOptions): Promise<ToolOutput>;
}

export interface ServerState {
  status: ServerStatus;
  error: string | null;
  tools: string[];
}

/** The hub with what the tools service manages: server lifecycles and the values to redact. */
export interface McpToolHub extends ToolHub {
  /** The server's live state; starts its connection when it has none yet (without waiting). */
  state(row: McpServerRow): ServerState;
  /** (Re)connects a new or changed server and waits up to `initialWaitMs` for its first status. */
  restart(row: McpServerRow): Promise<ServerState>;
  /** Closes a removed server's client (and its child process). */
  drop(serverId: string): Promise<void>;
  /** Secret values of a tool's server (for redacting records); empty for built-ins and unknown names. */
  secretsFor(workspaceId: string, toolName: string): Promise<string[]>;
  /** A built-in tool of a feature built after the hub (the channels' `<type>.send_message`). */
  addBuiltin(tool: BuiltinTool): void;
  /** Closes every client and child process. */
  close(): Promise<void>;
}

export interface ToolHubDeps {
  knowledge: KnowledgeService;
  store: ToolsStore;
  vault: Vault;
  logger: Logger;
  guard: AddressGuardOptions;
  limits: HubLimits;
  /** SWITCHBOARD_MCP_STDIO: API-registered stdio servers may run. */
  allowStdio: boolean;
}

const STDIO_REFUSED = 'stdio servers registered through the API run only when the operator sets SWITCHBOARD_MCP_STDIO=1.';

function describeTool(server: string, tool: Tool): ToolDescriptor {
  return {
    toolName: server,
    action: tool.name,
    description: tool.description ?? tool.title ?? '',
    inputSchema: tool.inputSchema as Record<string, unknown>,
  };
}

export function createToolHub(deps: ToolHubDeps): McpToolHub {
  const builtins = builtinTools(deps.knowledge);
  const describe = (t: BuiltinTool): ToolDescriptor => ({
    toolName: t.toolName,
    action: t.action,
    description: t.description,
    inputSchema: z.toJSONSchema(t.schema, { io: 'input' }) as Record<string, unknown>,
  });
  const builtinDescriptors = new Map(builtins.map((t) => [t, describe(t)]));
  /** The built-ins this workspace has now (a channel tool only while a channel of its type exists). */
  const availableBuiltins = async (workspaceId: string) =>
    (await Promise.all(builtins.map(async (t) => ((await t.available?.(workspaceId)) ?? true ? [t] : [])))).flat();
  /** By server id; `version` changes with every update (the sealed secrets too), so a changed server gets a new connection. */
  const connections = new Map<string, { version: string; connection: ServerConnection }>();
  let closed = false;

  function connectionFor(row: McpServerRow): ServerConnection {
    const current = connections.get(row.id);
    const version = `${row.updated_at}|${row.secrets}`;
    if (current && current.version === version) return current.connection;
    if (current) void current.connection.close();
    const secrets = deps.vault.open(row.id, row.secrets);
    const connection = new ServerConnection(
      {
        id: row.id,
        name: row.name,
        transport: row.transport,
        command: row.command,
        args: JSON.parse(row.args) as string[],
        url: row.url,
        secrets,
        refused: row.transport === 'stdio' && row.origin === 'api' && !deps.allowStdio ? STDIO_REFUSED : null,
      },
      deps.limits,
      // The operator's own file may name servers on private addresses; API registrations may not.
      row.origin === 'config' ? { ...deps.guard, allowPrivate: true } : deps.guard,
      deps.logger,
    );
    connections.set(row.id, { version, connection });
    return connection;
  }

  const stateOf = (c: ServerConnection): ServerState => ({
    status: c.status,
    error: c.error,
    tools: c.status === 'connected' ? c.tools.map((t) => t.name) : [],
  });

  return {
    async list(workspaceId) {
      const rows = await deps.store.allServers(workspaceId);
      const live = rows.map((row) => ({ row, connection: connectionFor(row) }));
      // A server never tried yet (after a restart) gets the registration's short wait; others answer at once.
      await Promise.all(live.map(({ connection }) => connection.settle(closed || connection.started ? 0 : deps.limits.initialWaitMs)));
      const external = live.flatMap(({ row, connection }) =>
        connection.status === 'connected' ? connection.tools.map((t) => describeTool(row.name, t)) : [],
      );
      return [...(await availableBuiltins(workspaceId)).map((t) => builtinDescriptors.get(t)!), ...external];
    },

    async call(workspaceId, toolName, action, parameters, options = {}) {
      const own = await availableBuiltins(workspaceId);
      if (own.some((t) => t.toolName === toolName)) {
        const tool = own.find((t) => t.toolName === toolName && t.action === action);
        if (!tool) throw new NotFoundError('Tool', `${toolName}.${action}`);
        const parsed = tool.schema.safeParse(parameters);
        if (!parsed.success) throw validationErrorOf(`parameters for ${toolName}.${action}`, zodFieldErrors(parsed.error.issues, 'parameters'));
        return { result: await tool.run(workspaceId, parsed.data, options), isError: false };
      }
      const row = await deps.store.findServerByName(workspaceId, toolName);
      if (!row) throw new NotFoundError('Tool', toolName);
      const connection = connectionFor(row);
      const tools = await connection.toolList(options.signal);
      const tool = tools.find((t) => t.name === action);
      if (!tool) throw new NotFoundError('Tool', `${toolName}.${action}`);
      const errors = checkParameters(tool.inputSchema as Record<string, unknown>, parameters);
      if (errors.length > 0) throw validationErrorOf(`parameters for ${toolName}.${action}`, errors);
      const { isError, _meta: _ignored, ...result } = await connection.call(action, parameters, { signal: options.signal, onEvent: options.onEvent });
      return { result, isError: isError === true };
    },

    state(row) {
      const connection = connectionFor(row);
      if (!closed) void connection.settle(0);
      return stateOf(connection);
    },

    async restart(row) {
      const connection = connectionFor(row);
      await connection.settle(deps.limits.initialWaitMs);
      return stateOf(connection);
    },

    async drop(serverId) {
      const current = connections.get(serverId);
      connections.delete(serverId);
      await current?.connection.close();
    },

    async secretsFor(workspaceId, toolName) {
      if (builtins.some((t) => t.toolName === toolName)) return [];
      const row = await deps.store.findServerByName(workspaceId, toolName);
      return row ? connectionFor(row).secrets : [];
    },

    addBuiltin(tool) {
      builtins.push(tool);
      builtinDescriptors.set(tool, describe(tool));
    },

    async close() {
      closed = true;
      const all = [...connections.values()];
      connections.clear();
      await Promise.all(all.map(({ connection }) => connection.close()));
    },
  };
}
