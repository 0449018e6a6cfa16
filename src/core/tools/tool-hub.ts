/**
 * The tool port (DESIGN.md "ToolHub"): what the agent loop and `POST /api/mcp/tools/execute` call.
 * It merges the built-in tools with every registered MCP server of the workspace, one
 * `ServerConnection` per server, created on first use and replaced when the server changes.
 *
 * The registry installs only rows it read from the store itself, one read at a time per server: a
 * row a request read earlier may be older than the connection in use, so a difference sends the
 * hub back to the store rather than to that row, and concurrent changes settle to the last one
 * written. A replaced connection is retired (its calls in flight finish on it, the rest move to the
 * new one); only a removed server's connections are closed under their calls.
 */
import type { Tool } from '@modelcontextprotocol/client';
import { z } from 'zod';
import type { Logger } from 'pino';
import type { McpServerRow } from '../../db/schema.js';
import { NotFoundError, UpstreamError, validationErrorOf, zodFieldErrors } from '../../errors.js';
import type { AddressGuardOptions } from '../../lib/address-guard.js';
import type { KnowledgeService } from '../knowledge/knowledge.service.js';
import { type BuiltinTool, builtinTools } from './builtin-tools.js';
import { checkParameters } from './json-schema.js';
import { callDeadline, ConnectionSuperseded, type HubLimits, ServerConnection, type ServerStatus, type ToolEvent } from './mcp-clients.js';
import type { ToolsStore } from './tools.store.js';
import type { ToolOAuth } from './tool-oauth.js';
import { resolveHeaders, type Vault } from './vault.js';

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
  /**
   * Reads every server it holds a connection to again: one another instance removed is closed here
   * (a stdio child ends), one it changed reconnects with the new row (API.md §13).
   */
  refresh(): Promise<void>;
  /** The server's live state; starts its connection when it has none yet (without waiting). */
  state(row: McpServerRow): ServerState;
  /**
   * (Re)connects a new or changed server with what the store holds now, retiring the connection it
   * replaces, and waits up to `initialWaitMs` for the first status.
   */
  restart(row: McpServerRow): Promise<ServerState>;
  /** Closes a removed server's connections (and child processes), failing their calls in flight. */
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
  /** The sign-in of http servers that ask for OAuth (tool-oauth.ts). */
  oauth?: ToolOAuth;
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
  // Described (each input schema made JSON Schema) when first listed, not at every start (~20 ms).
  const builtinDescriptors = new Map<BuiltinTool, ToolDescriptor>();
  const descriptorOf = (t: BuiltinTool): ToolDescriptor => {
    let descriptor = builtinDescriptors.get(t);
    if (descriptor === undefined) builtinDescriptors.set(t, (descriptor = describe(t)));
    return descriptor;
  };
  /** The built-ins this workspace has now (a channel tool only while a channel of its type exists). */
  const availableBuiltins = async (workspaceId: string) =>
    (await Promise.all(builtins.map(async (t) => ((await t.available?.(workspaceId)) ?? true ? [t] : [])))).flat();
  /**
   * By server id: the connection new calls use, built from the row of `version` (which changes with
   * every update, the sealed secrets too), and the connections it replaced that still finish calls.
   */
  const entries = new Map<string, { workspaceId: string; version: string; connection: ServerConnection; retiring: Set<ServerConnection> }>();
  /** By server id: the registry's last change under way; the next one starts after it. */
  const queues = new Map<string, Promise<unknown>>();
  let closed = false;

  const versionOf = (row: McpServerRow) => `${row.updated_at}|${row.secrets}`;

  /** Runs registry changes of one server one after another, so a later store read is installed later. */
  function serially<T>(serverId: string, change: () => Promise<T>): Promise<T> {
    const run = (queues.get(serverId) ?? Promise.resolve()).then(change);
    const tail = run.then(
      () => {},
      () => {},
    );
    queues.set(serverId, tail);
    void tail.then(() => {
      if (queues.get(serverId) === tail) queues.delete(serverId);
    });
    return run;
  }

  function build(row: McpServerRow): ServerConnection {
    const secrets = deps.vault.open(row.id, row.secrets);
    // The operator's own file may name servers on private addresses; API registrations may not.
    const guard = row.origin === 'config' ? { ...deps.guard, allowPrivate: true } : deps.guard;
    // A server given its own Authorization header signs in that way, not with OAuth.
    const ownAuthorization = Object.keys(resolveHeaders(secrets)).some((h) => h.toLowerCase() === 'authorization');
    return new ServerConnection(
      {
        id: row.id,
        name: row.name,
        transport: row.transport,
        command: row.command,
        args: JSON.parse(row.args) as string[],
        url: row.url,
        secrets,
        refused: row.transport === 'stdio' && row.origin === 'api' && !deps.allowStdio ? STDIO_REFUSED : null,
        bearer: row.transport === 'http' && !ownAuthorization && deps.oauth ? deps.oauth.bearerFor(row, guard) : undefined,
      },
      deps.limits,
      guard,
      deps.logger,
    );
  }

  /** Closes every connection of a server that is gone; calls on them fail as removed. */
  async function forget(serverId: string): Promise<void> {
    const entry = entries.get(serverId);
    entries.delete(serverId);
    if (entry) await Promise.all([entry.connection, ...entry.retiring].map((c) => c.close()));
  }

  /**
   * Reads the server from the store and makes that row's connection the one new calls use (the
   * connection it replaces is retired); forgets a server the store no longer has. Run `serially`.
   */
  async function reload(workspaceId: string, serverId: string): Promise<ServerConnection | undefined> {
    const row = await deps.store.findServer(workspaceId, serverId);
    if (!row || closed) {
      await forget(serverId);
      return undefined;
    }
    const current = entries.get(serverId);
    const version = versionOf(row);
    if (current?.version === version) return current.connection;
    const retiring = current?.retiring ?? new Set<ServerConnection>();
    const connection = build(row);
    entries.set(serverId, { workspaceId, version, connection, retiring });
    if (current) {
      const old = current.connection;
      retiring.add(old);
      void old.retire().finally(() => retiring.delete(old));
    }
    return connection;
  }

  /** The connection for a row a request read: the installed one when it matches, else what the store holds now. */
  async function connectionFor(row: McpServerRow): Promise<ServerConnection | undefined> {
    const current = entries.get(row.id);
    if (current?.version === versionOf(row)) return current.connection;
    return serially(row.id, () => reload(row.workspace_id, row.id));
  }

  const stateOf = (c: ServerConnection): ServerState => ({
    status: c.status,
    error: c.error,
    tools: c.status === 'connected' ? c.tools.map((t) => t.name) : [],
  });

  return {
    async list(workspaceId) {
      const rows = await deps.store.allServers(workspaceId);
      const live = await Promise.all(rows.map(async (row) => ({ row, connection: await connectionFor(row) })));
      // A server never tried yet (after a restart) gets the registration's short wait; others answer at once.
      await Promise.all(live.map(({ connection }) => connection?.settle(closed || connection.started ? 0 : deps.limits.initialWaitMs)));
      const external = live.flatMap(({ row, connection }) =>
        connection?.status === 'connected' ? connection.tools.map((t) => describeTool(row.name, t)) : [],
      );
      return [...(await availableBuiltins(workspaceId)).map(descriptorOf), ...external];
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
      const removed = () => new UpstreamError(`${toolName} was removed.`);
      // One time-out for the whole call, however many connections it waits for.
      const deadline = callDeadline(toolName, action, deps.limits);
      const signal = options.signal ? AbortSignal.any([options.signal, deadline.signal]) : deadline.signal;
      try {
        let connection = await connectionFor(row);
        for (;;) {
          if (!connection) throw removed();
          try {
            const tools = await connection.toolList(signal);
            const tool = tools.find((t) => t.name === action);
            if (!tool) throw new NotFoundError('Tool', `${toolName}.${action}`);
            const errors = checkParameters(tool.inputSchema as Record<string, unknown>, parameters);
            if (errors.length > 0) throw validationErrorOf(`parameters for ${toolName}.${action}`, errors);
            const answer = await connection.call(action, parameters, { signal: options.signal, deadline: deadline.signal, onEvent: options.onEvent });
            const { isError, _meta: _ignored, ...result } = answer;
            return { result, isError: isError === true };
          } catch (err) {
            // Replaced before this call was sent: it runs on the connection that replaced it.
            if (!(err instanceof ConnectionSuperseded)) throw err;
            const next = entries.get(row.id)?.connection;
            if (next === connection) throw err;
            connection = next;
          }
        }
      } finally {
        deadline.clear();
      }
    },

    state(row) {
      const current = entries.get(row.id);
      if (!closed) {
        if (current?.version === versionOf(row)) void current.connection.settle(0);
        else void connectionFor(row).then((c) => c?.settle(0), (err: unknown) => deps.logger.warn({ server: row.name, err }, 'tool server reload failed'));
      }
      return current ? stateOf(current.connection) : { status: 'connecting', error: null, tools: [] };
    },

    async restart(row) {
      // What the store holds now, not `row`: a change written after it must not be undone by it.
      const deadline = Date.now() + deps.limits.initialWaitMs;
      let connection = await serially(row.id, () => reload(row.workspace_id, row.id));
      for (;;) {
        if (!connection) return { status: 'error', error: 'The server was removed.', tools: [] };
        await connection.settle(Math.max(0, deadline - Date.now()));
        // A newer change replaced it meanwhile: answer with the state of the one in use.
        const next = entries.get(row.id)?.connection;
        if (next === connection || Date.now() >= deadline) return stateOf(next ?? connection);
        connection = next;
      }
    },

    async drop(serverId) {
      await serially(serverId, () => forget(serverId));
    },

    async refresh() {
      await Promise.all([...entries].map(([id, entry]) => serially(id, () => reload(entry.workspaceId, id))));
    },

    async secretsFor(workspaceId, toolName) {
      if (builtins.some((t) => t.toolName === toolName)) return [];
      const row = await deps.store.findServerByName(workspaceId, toolName);
      return row ? ((await connectionFor(row))?.secrets ?? []) : [];
    },

    addBuiltin(tool) {
      builtins.push(tool);
    },

    async close() {
      closed = true;
      await Promise.all([...entries.keys()].map((id) => forget(id)));
    },
  };
}
