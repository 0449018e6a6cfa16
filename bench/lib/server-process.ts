import path from 'node:path';
import { type ChildProcess, fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { pinToCpu, unpinnedLauncher } from './affinity.js';
import type { ChildMessage, ParentMessage, ServerKind } from './server-protocol.js';

const CHILD_ENTRY = fileURLToPath(new URL('./servers.js', import.meta.url));
const START_TIMEOUT_MS = 30_000;
const STOP_TIMEOUT_MS = 10_000;
const CPU_TIMEOUT_MS = 5_000;
/** A full GC with thousands of open streams takes a while on a slow core. */
const MEMORY_TIMEOUT_MS = 30_000;

/** A server under test, running in its own process on 127.0.0.1. */
export interface ServerProcess {
  kind: ServerKind;
  /** `http://127.0.0.1:<port>` */
  origin: string;
  /** The admin API key of a switchboard server; null for the bare one. */
  key: string | null;
  /** The chat persona of a `switchboard-chat` server; null for the others. */
  personaId: string | null;
  /** The core it is pinned to, or null. */
  pinnedCpu: number | null;
  /** The child's own `process.cpuUsage()`. */
  cpuUsage(): Promise<NodeJS.CpuUsage>;
  /** The child's `process.memoryUsage()`, after a full GC when it was started with `exposeGc`. */
  memoryUsage(): Promise<{ usage: NodeJS.MemoryUsage; gc: boolean }>;
  /** Asks the child to close and exit; kills it when it does not within 10 s. Safe to call twice. */
  stop(): Promise<void>;
}

/** Running children and how to stop each gracefully. */
const live = new Map<ChildProcess, () => Promise<void>>();

/** On Ctrl-C or SIGTERM: every child closes its server and deletes its data directory (or is killed after 10 s). */
export async function stopAllServers(): Promise<void> {
  await Promise.all([...live.values()].map((stop) => stop()));
}

/** Last resort when the bench itself exits: no server outlives it. */
export function killAllServers(): void {
  for (const child of live.keys()) child.kill('SIGKILL');
  live.clear();
}

function exited(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => child.once('exit', () => resolve()));
}

export interface StartOptions {
  /** Run the child with `--cpu-prof`, writing a `<kind>-<time>/` directory of profiles (one per thread) here when it exits. */
  cpuProfileDir?: string | undefined;
  /**
   * Pin the child (every thread) to this core once it is up; 'any': let it run on every core (a
   * child inherits the pinned load generator's core otherwise).
   */
  cpu?: number | 'any' | undefined;
  /** Variables added to the child's environment. */
  env?: Record<string, string> | undefined;
  /** Run the child with `--expose-gc`, so `memoryUsage()` measures after a full GC. */
  exposeGc?: boolean | undefined;
}

/** A forked child speaking the bench's IPC protocol: `ready` first, then answers to requests by type. */
export interface ChildHandle<C extends { type: string }, P> {
  ready: Extract<C, { type: 'ready' }>;
  pinnedCpu: number | null;
  /** Sends `message` and resolves with the next message of type `reply` (rejects on `failed`, exit or time-out). */
  ask<T extends C['type']>(message: P, reply: T, timeoutMs: number): Promise<Extract<C, { type: T }>>;
  stop(): Promise<void>;
}

/**
 * Forks `entry` with `args`, waits for its `{ type: 'ready' }` and pins it. The child is stopped
 * with `{ type: 'stop' }` (killed after 10 s) and is killed with the bench at the latest.
 */
export async function forkChild<C extends { type: string; message?: unknown }, P extends { type: string }>(
  entry: string,
  args: string[],
  label: string,
  options: StartOptions = {},
): Promise<ChildHandle<C, P>> {
  const execArgv = [
    ...(options.exposeGc ? ['--expose-gc'] : []),
    ...(options.cpuProfileDir
      ? // A directory per child: each of its threads (the search thread too) writes its own CPU.<date>.<pid>.<thread>.cpuprofile there.
        ['--cpu-prof', `--cpu-prof-dir=${path.join(options.cpuProfileDir, `${label.replace(/\s+server$/, '').replace(/\s+/g, '-')}-${Date.now()}`)}`]
      : []),
  ];
  const env = options.env ? { ...process.env, ...options.env } : process.env;
  // 'any': started through `taskset` on every core, not on the pinned load generator's it would
  // inherit, so the server sees the machine's cores from its first line (its thread counts follow them).
  const everyCore = options.cpu === 'any' ? unpinnedLauncher() : null;
  const child = fork(entry, args, {
    execArgv: everyCore ? [...everyCore.args, process.execPath, ...execArgv] : execArgv,
    ...(everyCore ? { execPath: everyCore.command } : {}),
    env,
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  child.once('exit', () => live.delete(child));
  // A failed spawn or a send on a closed channel: reported by the waits below, never an uncaught 'error'.
  let spawnError: Error | undefined;
  child.on('error', (err) => {
    spawnError ??= err;
  });

  const send = (message: P | { type: 'stop' }) => child.send(message);
  const nextMessage = <T extends C['type']>(type: T, timeoutMs: number) =>
    new Promise<Extract<C, { type: T }>>((resolve, reject) => {
      if (spawnError) return reject(spawnError);
      const timer = setTimeout(() => finish(new Error(`${label}: no "${type}" message within ${timeoutMs} ms`)), timeoutMs);
      const onMessage = (raw: unknown) => {
        const message = raw as C;
        if (message.type === type) finish(undefined, message as Extract<C, { type: T }>);
        else if (message.type === 'failed') finish(new Error(`${label} failed:\n${String(message.message)}`));
      };
      const onExit = (code: number | null, signal: string | null) =>
        finish(new Error(`${label} exited (code ${code}, signal ${signal}) before "${type}"`));
      const onError = (err: Error) => finish(new Error(`${label}: ${err.message}`));
      function finish(err: Error | undefined, message?: Extract<C, { type: T }>) {
        clearTimeout(timer);
        child.off('message', onMessage);
        child.off('exit', onExit);
        child.off('error', onError);
        if (err || !message) reject(err);
        else resolve(message);
      }
      child.on('message', onMessage);
      child.on('exit', onExit);
      child.on('error', onError);
    });

  let stopping: Promise<void> | undefined;
  const stop = () => {
    stopping ??= (async () => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      if (child.connected) send({ type: 'stop' });
      const timer = setTimeout(() => child.kill('SIGKILL'), STOP_TIMEOUT_MS);
      await exited(child);
      clearTimeout(timer);
    })();
    return stopping;
  };
  live.set(child, stop);

  try {
    const ready = await nextMessage('ready' as C['type'], START_TIMEOUT_MS);
    const core = typeof options.cpu === 'number' ? options.cpu : undefined;
    const pinned = core !== undefined && child.pid !== undefined && pinToCpu(child.pid, core);
    return {
      ready: ready as Extract<C, { type: 'ready' }>,
      pinnedCpu: pinned ? (core ?? null) : null,
      async ask(message, reply, timeoutMs) {
        const answer = nextMessage(reply, timeoutMs);
        send(message);
        return answer;
      },
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}

export async function startServerProcess(kind: ServerKind, options: StartOptions = {}): Promise<ServerProcess> {
  const child = await forkChild<ChildMessage, ParentMessage>(CHILD_ENTRY, [kind], `${kind} server`, options);
  return {
    kind,
    pinnedCpu: child.pinnedCpu,
    origin: `http://127.0.0.1:${child.ready.port}`,
    key: child.ready.key,
    personaId: child.ready.personaId,
    async cpuUsage() {
      return (await child.ask({ type: 'cpu' }, 'cpu', CPU_TIMEOUT_MS)).usage;
    },
    async memoryUsage() {
      const { usage, gc } = await child.ask({ type: 'memory' }, 'memory', MEMORY_TIMEOUT_MS);
      return { usage, gc };
    },
    stop: child.stop,
  };
}
