import { ConfigError } from '../../config.js';
import type { Actor } from '../auth/actor.js';
import { auditRow } from '../audit/audit.js';
import type { McpServerRow, ToolExecutionRow } from '../../db/schema.js';
import { AppError, ConflictError, ForbiddenError, NotFoundError, ValidationError, UpstreamError, UpstreamTimeoutError } from '../../errors.js';
import { type AddressGuardOptions, assertPublicUrl } from '../../lib/address-guard.js';
import type { Clock } from '../../lib/clock.js';
import type { IdGenerator } from '../../lib/ids.js';
import { mapPage, type Page, type PageRequest } from '../../lib/pagination.js';
import { readMcpConfig } from './mcp-config.js';
import type { ToolEvent } from './mcp-clients.js';
import type { McpToolHub, ToolDescriptor } from './tool-hub.js';
import { type CreateServerInput, type Execution, type ExecuteToolInput, type McpServer, missingReferences } from './tools.schemas.js';
import type { ToolsStore } from './tools.store.js';
import { redactParameters, scrub, scrubText, type ServerSecrets, type Vault } from './vault.js';
import type { ChangeSignals } from '../../db/change-signals.js';
import type { ToolOAuth, ToolOAuthView } from './tool-oauth.js';

export interface ToolsServiceDeps {
  store: ToolsStore;
  hub: McpToolHub;
  vault: Vault;
  clock: Clock;
  ids: IdGenerator;
  guard: AddressGuardOptions;
  /** SWITCHBOARD_MCP_STDIO. */
  allowStdio: boolean;
  /** Tells the other instances on the database that a server changed (change-signals.ts). */
  signals?: ChangeSignals;
  /** Tool servers that sign in with OAuth (tool-oauth.ts). */
  oauth: ToolOAuth;
}

/** A server as the config file or the API declares it, before it is stored. */
export interface ServerDefinition {
  name: string;
  transport: 'stdio' | 'http';
  command?: string | undefined;
  args?: string[] | undefined;
  url?: string | undefined;
  headers?: Record<string, string> | undefined;
  credentials?: Record<string, string> | undefined;
}

const MAX_EVENTS = 200;

const names = (record: Record<string, string>) => Object.keys(record).sort();

function toExecution(row: ToolExecutionRow): Execution {
  const execution: Execution = {
    id: row.id,
    toolName: row.tool_name,
    action: row.action,
    status: row.status,
    result: row.result === null ? null : JSON.parse(row.result),
    error: row.error,
    durationMs: row.duration_ms,
    startedAt: row.started_at,
    finishedAt: row.finished_at,
    monitored: row.monitored === 1,
  };
  if (row.parameters !== null) execution.parameters = JSON.parse(row.parameters) as Record<string, unknown>;
  if (row.events !== null) execution.events = JSON.parse(row.events) as Execution['events'];
  return execution;
}

export function createToolsService({ store, hub, vault, clock, ids, guard, allowStdio, signals, oauth }: ToolsServiceDeps) {
  /** The other instances reconnect or close what they hold of a changed server. */
  const changed = () => signals?.changed('tool-servers');
  /** The address guard of a server's outbound requests: the operator's config file may name private addresses. */
  const guardOf = (row: McpServerRow): AddressGuardOptions => (row.origin === 'config' ? { ...guard, allowPrivate: true } : guard);

  function toServer(row: McpServerRow, view: ToolOAuthView | undefined, state = hub.state(row)): McpServer {
    // Another instance may hold the connection; the stored sign-in speaks for every instance.
    const status = view?.status === 'needs_consent' && state.status !== 'connected' ? 'needs_consent' : state.status;
    return {
      id: row.id,
      name: row.name,
      transport: row.transport,
      command: row.command,
      args: JSON.parse(row.args) as string[],
      url: row.url,
      status,
      error: status === 'needs_consent' && view?.error ? view.error : state.error,
      credentialNames: JSON.parse(row.credential_names) as string[],
      headerNames: JSON.parse(row.header_names) as string[],
      tools: state.tools,
      oauth: view ?? null,
      createdAt: row.created_at,
    };
  }

  const viewOf = async (row: McpServerRow) => (await oauth.views(row.workspace_id, [row.id])).get(row.id);

  /** A server's sign-in changed: its connections (here and on the other instances) start again with it. */
  async function signInChanged(row: McpServerRow): Promise<McpServer> {
    // Later than the row's own time even when the clock is not (the hub reconnects when it changes).
    const updated = { ...row, updated_at: new Date(Math.max(clock.now().getTime(), Date.parse(row.updated_at) + 1)).toISOString() };
    await store.updateServer(row.workspace_id, row.id, { updated_at: updated.updated_at });
    const state = await hub.restart(updated);
    await changed();
    return toServer(updated, await viewOf(updated), state);
  }

  async function findServer(workspaceId: string, id: string): Promise<McpServerRow> {
    const row = await store.findServer(workspaceId, id);
    if (!row) throw new NotFoundError('MCP server', id);
    return row;
  }

  /** The stored columns of a definition, its secrets sealed under its id. */
  function columns(id: string, def: ServerDefinition) {
    const secrets: ServerSecrets = { credentials: def.credentials ?? {}, headers: def.headers ?? {} };
    return {
      name: def.name,
      transport: def.transport,
      command: def.transport === 'stdio' ? (def.command ?? null) : null,
      args: JSON.stringify(def.transport === 'stdio' ? (def.args ?? []) : []),
      url: def.transport === 'http' ? (def.url ?? null) : null,
      secrets: vault.seal(id, secrets),
      credential_names: JSON.stringify(names(secrets.credentials)),
      header_names: JSON.stringify(names(secrets.headers)),
    };
  }

  async function record(row: ToolExecutionRow, actor: Actor | undefined): Promise<Execution> {
    await store.insertExecution(row, actor && auditRow(ids, clock, actor, { action: 'tool.execute', target: { type: 'tool', id: row.tool_name } }));
    return toExecution(row);
  }

  return {
    /** Registers a server; answers with whatever status it reached within the short initial wait. */
    async createServer(actor: Actor, input: CreateServerInput): Promise<McpServer> {
      const workspaceId = actor.workspaceId;
      if (input.transport === 'stdio' && !allowStdio) {
        throw new ForbiddenError('Registering a stdio server runs a command on this host: the operator must set SWITCHBOARD_MCP_STDIO=1 (or declare it in SWITCHBOARD_MCP_CONFIG).');
      }
      if (input.transport === 'http') await assertPublicUrl(input.url ?? '', guard, 'url');
      if (await store.findServerByName(workspaceId, input.name)) throw new ConflictError(`An MCP server named "${input.name}" already exists.`);
      const id = ids('mcs');
      const now = clock.now().toISOString();
      const row: McpServerRow = { id, workspace_id: workspaceId, ...columns(id, input), origin: 'api', created_at: now, updated_at: now };
      try {
        // The event names the server, never its credentials.
        await store.insertServer(row, auditRow(ids, clock, actor, { action: 'tool_server.create', target: { type: 'tool_server', id } }));
      } catch (err) {
        if (/UNIQUE/.test(String(err))) throw new ConflictError(`An MCP server named "${input.name}" already exists.`);
        throw err;
      }
      if (input.oauth) await oauth.preregister(row, input.oauth.clientId, input.oauth.clientSecret);
      const state = await hub.restart(row);
      await changed();
      return toServer(row, await viewOf(row), state);
    },

    async listServers(workspaceId: string, page: PageRequest): Promise<Page<McpServer>> {
      const rows = await store.listServers(workspaceId, page);
      const views = await oauth.views(workspaceId, rows.data.map((r) => r.id));
      return mapPage(rows, (row) => toServer(row, views.get(row.id)));
    },

    async getServer(workspaceId: string, id: string): Promise<McpServer> {
      const row = await findServer(workspaceId, id);
      return toServer(row, await viewOf(row));
    },

    /** Starts an OAuth sign-in of an http server: the URL to send the admin to (tool-oauth.ts). */
    async authorize(actor: Actor, id: string, base: string): Promise<{ authorizationUrl: string; expiresAt: string }> {
      const row = await findServer(actor.workspaceId, id);
      return oauth.begin(row, base, guardOf(row), auditRow(ids, clock, actor, { action: 'tool_server.signin', target: { type: 'tool_server', id } }));
    },

    /** The authorization server's answer at the callback: the tokens are stored and the server reconnects. */
    async completeAuthorization(query: Parameters<ToolOAuth['complete']>[0]): Promise<McpServer> {
      const row = await oauth.complete(query, (workspaceId, serverId) => store.findServer(workspaceId, serverId), guardOf);
      return signInChanged(row);
    },

    /** Signs a server out (revoking its tokens where the authorization server allows); it then waits for consent. */
    async revokeAuthorization(actor: Actor, id: string): Promise<McpServer> {
      const row = await findServer(actor.workspaceId, id);
      await oauth.revoke(row, guardOf(row), auditRow(ids, clock, actor, { action: 'tool_server.signout', target: { type: 'tool_server', id } }));
      return signInChanged(row);
    },

    /** Replaces every credential (headers stay) and reconnects with them. */
    async replaceCredentials(actor: Actor, id: string, credentials: Record<string, string>): Promise<McpServer> {
      const workspaceId = actor.workspaceId;
      const row = await findServer(workspaceId, id);
      const secrets = vault.open(row.id, row.secrets);
      const missing = missingReferences(secrets.headers, credentials, (h) => [h]);
      if (missing[0]) throw ValidationError.field('credentials', `header ${String(missing[0].path[0])} ${missing[0].message}`);
      const updated: McpServerRow = {
        ...row,
        secrets: vault.seal(row.id, { credentials, headers: secrets.headers }),
        credential_names: JSON.stringify(names(credentials)),
        updated_at: clock.now().toISOString(),
      };
      // `changes` says the credentials were set, never their names' values.
      const event = auditRow(ids, clock, actor, { action: 'tool_server.credentials', target: { type: 'tool_server', id }, changes: ['credentials'] });
      await store.updateServer(workspaceId, id, { secrets: updated.secrets, credential_names: updated.credential_names, updated_at: updated.updated_at }, event);
      const state = await hub.restart(updated);
      await changed();
      return toServer(updated, await viewOf(updated), state);
    },

    async deleteServer(actor: Actor, id: string): Promise<void> {
      if (!(await store.deleteServer(actor.workspaceId, id, auditRow(ids, clock, actor, { action: 'tool_server.delete', target: { type: 'tool_server', id } })))) throw new NotFoundError('MCP server', id);
      await hub.drop(id);
      await changed();
    },

    /**
     * SWITCHBOARD_MCP_CONFIG: upserts each declared server by name in the workspace (the file is the
     * operator's, so stdio is allowed and it takes over an API server of the same name) and removes
     * the servers an earlier version of the file declared that it no longer does.
     */
    async syncConfigServers(workspaceId: string, defs: ServerDefinition[]): Promise<void> {
      const now = clock.now().toISOString();
      const declared = new Set(defs.map((d) => d.name));
      for (const existing of await store.allServers(workspaceId)) {
        if (existing.origin === 'config' && !declared.has(existing.name)) {
          await store.deleteServer(workspaceId, existing.id);
          await hub.drop(existing.id);
        }
      }
      for (const def of defs) {
        const existing = await store.findServerByName(workspaceId, def.name);
        if (existing) {
          await store.updateServer(workspaceId, existing.id, { ...columns(existing.id, def), origin: 'config', updated_at: now });
        } else {
          const id = ids('mcs');
          await store.insertServer({ id, workspace_id: workspaceId, ...columns(id, def), origin: 'config', created_at: now, updated_at: now });
        }
      }
      await changed();
    },

    /** Start-up: the servers of SWITCHBOARD_MCP_CONFIG join the `default` workspace. Returns how many. */
    async loadConfigFile(file: string, workspaceName = 'default'): Promise<number> {
      const defs = readMcpConfig(file);
      const workspaceId = await store.workspaceIdByName(workspaceName);
      if (!workspaceId) throw new ConfigError([{ variable: 'SWITCHBOARD_MCP_CONFIG', message: `${file}: there is no "${workspaceName}" workspace to add its servers to` }]);
      await this.syncConfigServers(workspaceId, defs);
      return defs.length;
    },

    listTools: (workspaceId: string): Promise<ToolDescriptor[]> => hub.list(workspaceId),

    /**
     * Runs one action and records it: succeeded, failed (the tool said isError), and unreachable
     * (502) or timed out (504), which are recorded and then thrown. Unknown tools and invalid
     * parameters throw before anything runs (404, 400) and leave no record.
     */
    /** `actor`: who ran it through the API, recorded as `tool.execute` with its execution record (never its parameters). */
    async execute(workspaceId: string, input: ExecuteToolInput, signal?: AbortSignal, actor?: Actor): Promise<Execution> {
      const { toolName, action, parameters, monitorExecution } = input;
      const secrets = await hub.secretsFor(workspaceId, toolName);
      const events: ToolEvent[] = [];
      const started = clock.now();
      const t0 = performance.now();
      const base = () => {
        const finished = clock.now();
        return {
          id: ids('exe'),
          workspace_id: workspaceId,
          tool_name: toolName,
          action,
          duration_ms: Math.round(performance.now() - t0),
          started_at: started.toISOString(),
          finished_at: finished.toISOString(),
          monitored: monitorExecution ? 1 : 0,
          parameters: monitorExecution ? JSON.stringify(redactParameters(parameters, secrets)) : null,
          events: monitorExecution ? JSON.stringify(scrub(events, secrets)) : null,
          created_at: started.toISOString(),
        };
      };
      try {
        const output = await hub.call(workspaceId, toolName, action, parameters, {
          signal,
          onEvent: monitorExecution ? (e) => void (events.length < MAX_EVENTS && events.push(e)) : undefined,
        });
        const result = JSON.stringify(scrub(output.result ?? null, secrets));
        const error = output.isError ? scrubText(errorText(output.result), secrets) : null;
        return await record({ ...base(), status: output.isError ? 'failed' : 'succeeded', result, error }, actor);
      } catch (err) {
        if (!(err instanceof UpstreamError || err instanceof UpstreamTimeoutError)) throw err;
        const execution = await record({ ...base(), status: 'failed', result: null, error: scrubText(err.message, secrets) }, actor);
        throw withExecution(err, execution.id);
      }
    },

    async listExecutions(workspaceId: string, page: PageRequest, toolName?: string): Promise<Page<Execution>> {
      return mapPage(await store.listExecutions(workspaceId, page, toolName), toExecution);
    },

    async getExecution(workspaceId: string, id: string): Promise<Execution> {
      const row = await store.findExecution(workspaceId, id);
      if (!row) throw new NotFoundError('Execution', id);
      return toExecution(row);
    },
  };
}

/** The text of a failed tool result, for the execution's `error`. */
function errorText(result: unknown): string {
  const content = (result as { content?: Array<{ type?: string; text?: string }> } | null)?.content;
  const text = Array.isArray(content) ? content.filter((c) => c.type === 'text' && typeof c.text === 'string').map((c) => c.text).join('\n') : '';
  return (text || 'The tool reported an error.').slice(0, 2000);
}

/** The same error, its detail naming the execution that recorded it (a sentence after the error's, which is ended first). */
function withExecution(err: AppError, executionId: string): AppError {
  const reason = err.message.trimEnd();
  const detail = `${/[.!?]$/.test(reason) ? reason : `${reason}.`} Recorded as execution ${executionId}.`;
  return err instanceof UpstreamTimeoutError ? new UpstreamTimeoutError(detail) : new UpstreamError(detail);
}

export type ToolsService = ReturnType<typeof createToolsService>;
