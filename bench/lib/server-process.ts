import { type ChildProcess, fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { pinToCpu } from './affinity.js';
import type { ChildMessage, ParentMessage, ServerKind } from './server-protocol.js';

const CHILD_ENTRY = fileURLToPath(new URL('./servers.js', import.meta.url));
const START_TIMEOUT_MS = 30_000;
const STOP_TIMEOUT_MS = 10_000;
const CPU_TIMEOUT_MS = 5_000;

/** A server under test, running in its own process on 127.0.0.1. */
export interface ServerProcess {
  kind: ServerKind;
  /** `http://127.0.0.1:<port>` */
  origin: string;
  /** The admin API key of a switchboard server; null for the bare one. */
  key: string | null;
  /** The core it is pinned to, or null. */
  pinnedCpu: number | null;
  /** The child's own `process.cpuUsage()`. */
  cpuUsage(): Promise<NodeJS.CpuUsage>;
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
  /** Run the child with `--cpu-prof`, writing `<kind>-<time>.cpuprofile` here when it exits. */
  cpuProfileDir?: string | undefined;
  /** Pin the child (every thread) to this core once it is up. */
  cpu?: number | undefined;
}

export async function startServerProcess(kind: ServerKind, options: StartOptions = {}): Promise<ServerProcess> {
  const execArgv = options.cpuProfileDir
    ? ['--cpu-prof', `--cpu-prof-dir=${options.cpuProfileDir}`, `--cpu-prof-name=${kind}-${Date.now()}.cpuprofile`]
    : [];
  const child = fork(CHILD_ENTRY, [kind], { execArgv, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  child.once('exit', () => live.delete(child));
  // A failed spawn or a send on a closed channel: reported by the waits below, never an uncaught 'error'.
  let spawnError: Error | undefined;
  child.on('error', (err) => {
    spawnError ??= err;
  });

  const send = (message: ParentMessage) => child.send(message);
  const nextMessage = <T extends ChildMessage['type']>(type: T, timeoutMs: number) =>
    new Promise<Extract<ChildMessage, { type: T }>>((resolve, reject) => {
      if (spawnError) return reject(spawnError);
      const timer = setTimeout(() => finish(new Error(`${kind} server: no "${type}" message within ${timeoutMs} ms`)), timeoutMs);
      const onMessage = (raw: unknown) => {
        const message = raw as ChildMessage;
        if (message.type === type) finish(undefined, message as Extract<ChildMessage, { type: T }>);
        else if (message.type === 'failed') finish(new Error(`${kind} server failed:\n${message.message}`));
      };
      const onExit = (code: number | null, signal: string | null) =>
        finish(new Error(`${kind} server exited (code ${code}, signal ${signal}) before "${type}"`));
      const onError = (err: Error) => finish(new Error(`${kind} server: ${err.message}`));
      function finish(err: Error | undefined, message?: Extract<ChildMessage, { type: T }>) {
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
    const ready = await nextMessage('ready', START_TIMEOUT_MS);
    const pinned = options.cpu !== undefined && child.pid !== undefined && pinToCpu(child.pid, options.cpu);
    return {
      kind,
      pinnedCpu: pinned ? (options.cpu ?? null) : null,
      origin: `http://127.0.0.1:${ready.port}`,
      key: ready.key,
      async cpuUsage() {
        const reply = nextMessage('cpu', CPU_TIMEOUT_MS);
        send({ type: 'cpu' });
        return (await reply).usage;
      },
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}
