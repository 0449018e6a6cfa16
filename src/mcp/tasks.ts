/**
 * MCP's tasks extension (`io.modelcontextprotocol/tasks`, revision 2026-07-28; issue 27): a long
 * tool call (a tool whose definition has `task`) from a client that declares the extension is
 * answered at once with a task handle (`resultType: "task"`), runs on this instance, and is read
 * with `tasks/get` through any instance, from the `mcp_tasks` table. `tasks/cancel` marks the row;
 * the instance running it stops the work when it sees the mark (at once here, through the change
 * signals elsewhere). A task belongs to the key that started it; any other key is told it does not
 * exist. A task whose instance stopped fails, on that instance's next start or when its time runs out.
 */
import type { Logger } from 'pino';
import type { ChangeSignals } from '../db/change-signals.js';
import type { McpTaskRow } from '../db/schema.js';
import type { Clock } from '../lib/clock.js';
import type { IdGenerator } from '../lib/ids.js';
import type { McpTaskStore } from './tasks.store.js';

export const TASKS_EXTENSION = 'io.modelcontextprotocol/tasks';
/** How long a task is kept (and may run) after it starts. */
export const TASK_TTL_MS = 60 * 60_000;
/** How often a client is asked to poll. */
export const TASK_POLL_MS = 500;

const SIGNAL = 'mcp-tasks';

/** What a tool call's work ends with: a CallToolResult, or a JSON-RPC error. */
export type TaskOutcome = { result: Record<string, unknown> } | { error: { code: number; message: string } };

/** The extension's `Task`, with the fields of its status inlined (`DetailedTask`). */
export interface DetailedTask {
  taskId: string;
  status: McpTaskRow['status'];
  statusMessage?: string;
  createdAt: string;
  lastUpdatedAt: string;
  ttlMs: number;
  pollIntervalMs: number;
  result?: Record<string, unknown>;
  error?: { code: number; message: string };
}

export interface McpTasksDeps {
  store: McpTaskStore;
  clock: Clock;
  ids: IdGenerator;
  logger: Logger;
  /** This instance among those on the database (context.ts). */
  instance: string;
  signals?: ChangeSignals | undefined;
}

export function createMcpTasks({ store, clock, ids, logger, instance, signals }: McpTasksDeps) {
  /** The tasks this instance runs: aborting one stops its work. */
  const running = new Map<string, AbortController>();
  const nowIso = () => clock.now().toISOString();

  function view(row: McpTaskRow): DetailedTask {
    // A task still working after its time ran out will never finish: its instance stopped.
    const expired = row.status === 'working' && row.expires_ms < clock.now().getTime();
    const status = expired ? 'failed' : row.status;
    const task: DetailedTask = {
      taskId: row.id,
      status,
      createdAt: row.created_at,
      lastUpdatedAt: row.updated_at,
      ttlMs: TASK_TTL_MS,
      pollIntervalMs: TASK_POLL_MS,
    };
    const message = expired ? 'The task ran out of time: the instance running it stopped.' : row.status_message;
    if (message) task.statusMessage = message;
    if (status === 'completed' && row.result) task.result = JSON.parse(row.result) as Record<string, unknown>;
    if (status === 'failed') task.error = row.error ? (JSON.parse(row.error) as { code: number; message: string }) : { code: -32603, message: message ?? 'The task failed.' };
    return task;
  }

  /** Writes how the work ended, unless the task was cancelled (or otherwise ended) meanwhile. */
  async function finish(id: string, outcome: TaskOutcome): Promise<void> {
    const ended =
      'result' in outcome
        ? { status: 'completed' as const, result: JSON.stringify(outcome.result), status_message: outcome.result.isError === true ? 'The tool reported an error.' : 'Done.' }
        : { status: 'failed' as const, error: JSON.stringify(outcome.error), status_message: outcome.error.message };
    await store.end({ ...ended, updated_at: nowIso() }, { ids: [id] });
  }

  /** A failed ending with a JSON-RPC internal error saying why. */
  const failed = (why: string) => ({ status: 'failed' as const, status_message: why, error: JSON.stringify({ code: -32603, message: why }), updated_at: nowIso() });

  /** Stops the work of the tasks this instance runs that were cancelled (through any instance). */
  async function stopCancelled(): Promise<void> {
    for (const id of await store.cancelledAmong([...running.keys()])) running.get(id)?.abort(new Error('The task was cancelled.'));
  }
  signals?.onChange(SIGNAL, () => void stopCancelled().catch((err: unknown) => logger.warn({ err }, 'cancelled MCP tasks could not be read')));

  return {
    /**
     * Starts `work` as a task of `caller` and answers the handle once the task can be read
     * (the spec's "durably created"). `work` gets a signal aborted by tasks/cancel or shutdown.
     */
    async start(caller: { id: string; workspaceId: string }, tool: string, work: (signal: AbortSignal) => Promise<TaskOutcome>): Promise<DetailedTask & { resultType: 'task' }> {
      const now = clock.now();
      const row: McpTaskRow = {
        id: ids('tsk'),
        workspace_id: caller.workspaceId,
        owner: caller.id,
        tool,
        status: 'working',
        status_message: `Running ${tool}.`,
        result: null,
        error: null,
        instance,
        created_at: now.toISOString(),
        updated_at: now.toISOString(),
        expires_ms: now.getTime() + TASK_TTL_MS,
      };
      await store.insert(row);
      await store.deleteExpired(now.getTime());
      const controller = new AbortController();
      running.set(row.id, controller);
      void work(controller.signal)
        .catch((err: unknown): TaskOutcome => ({ error: { code: -32603, message: err instanceof Error ? err.message : String(err) } }))
        .then((outcome) => (controller.signal.aborted ? undefined : finish(row.id, outcome)))
        .catch((err: unknown) => logger.error({ err, task: row.id }, 'an MCP task could not be recorded'))
        .finally(() => running.delete(row.id));
      return { resultType: 'task', ...view(row) };
    },

    /** The task as `tasks/get` answers it; undefined for an id that is not this key's. */
    async get(caller: { id: string; workspaceId: string }, id: string): Promise<DetailedTask | undefined> {
      const row = await store.find(caller.id, caller.workspaceId, id);
      return row && view(row);
    },

    /** `tasks/cancel`: a task still working is cancelled (its work stops); false for an id that is not this key's. */
    async cancel(caller: { id: string; workspaceId: string }, id: string): Promise<boolean> {
      if (!(await store.find(caller.id, caller.workspaceId, id))) return false;
      if (await store.end({ status: 'cancelled', status_message: 'Cancelled by the client.', updated_at: nowIso() }, { ids: [id] })) {
        running.get(id)?.abort(new Error('The task was cancelled.'));
        // Run by another instance: it stops the work when it hears of it.
        if (!running.has(id)) await signals?.changed(SIGNAL);
      }
      return true;
    },

    /** Start-up: tasks this instance was running before it stopped will never finish. */
    async failOrphans(): Promise<void> {
      await store.end(failed('The instance running the task stopped.'), { instance });
    },

    /** Shutdown: the work still running stops, its tasks fail. */
    async close(): Promise<void> {
      const ids = [...running.keys()];
      for (const controller of running.values()) controller.abort(new Error('The server is stopping.'));
      await store.end(failed('The server stopped before the task finished.'), { ids });
    },
  };
}

export type McpTasks = ReturnType<typeof createMcpTasks>;
