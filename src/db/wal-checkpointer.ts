/**
 * WAL checkpoints on a thread of their own. By default SQLite checkpoints inside a committing
 * write: every ~4 MB of log, that commit copies the log into the database file and syncs it. For
 * chat answers that cost ~70 µs each on the main thread (issue 18), time no request can use. While
 * the checkpoint thread runs, the main connection's own checkpoints are only a backstop (at ~40 MB
 * of log, should the thread fall behind); when it stops, they are SQLite's default again.
 *
 * The thread starts at the first write that asks for it (`start()`), so a process that never
 * answers a question never starts it. A thread that dies is logged and may start again a second later.
 */
import { Worker } from 'node:worker_threads';
import type { Logger } from 'pino';
import { workerScript } from '../lib/worker-script.js';
import type { Db, OpenDatabaseOptions } from './database.js';

/** SQLite's default auto-checkpoint, in pages of log (~4 MB), and the backstop while the thread runs (~40 MB). */
export const DEFAULT_CHECKPOINT_PAGES = 1_000;
export const BACKSTOP_CHECKPOINT_PAGES = 10_000;
const RESTART_AFTER_MS = 1_000;
/**
 * `close()` lets a thread still loading better-sqlite3 finish first (at most this long): stopping
 * a thread mid-load aborts the process (lib/worker-pool.ts, LOAD_WAIT_MS).
 */
const LOAD_WAIT_MS = 10_000;

export interface WalCheckpointer {
  /** Starts the thread if it is not running (cheap to call on every write). */
  start(): void;
  readonly running: boolean;
  close(): Promise<void>;
}

export function createWalCheckpointer(
  db: Db,
  options: OpenDatabaseOptions & { intervalMs: number },
  logger: Logger,
): WalCheckpointer | null {
  const script = workerScript(import.meta.url, 'checkpoint-worker.js');
  if (script === null || options.filename === ':memory:') return null;
  let worker: Worker | null = null;
  let loaded: Promise<void> = Promise.resolve();
  let stoppedAt = -Infinity;
  let closed = false;
  const autocheckpoint = (pages: number) => {
    if (db.sqlite.open) db.sqlite.pragma(`wal_autocheckpoint = ${pages}`);
  };

  return {
    start() {
      if (worker !== null || closed || performance.now() - stoppedAt < RESTART_AFTER_MS) return;
      const w = new Worker(script, { workerData: { filename: options.filename, intervalMs: options.intervalMs, durability: options.durability } });
      w.unref();
      worker = w;
      loaded = new Promise<void>((resolve) => {
        w.once('message', () => resolve());
        w.once('exit', () => resolve());
      });
      autocheckpoint(BACKSTOP_CHECKPOINT_PAGES);
      const stopped = (err: Error) => {
        if (worker !== w) return;
        worker = null;
        stoppedAt = performance.now();
        autocheckpoint(DEFAULT_CHECKPOINT_PAGES);
        if (!closed) logger.error({ err: err.message }, 'the WAL checkpoint thread stopped; checkpoints are back on the main connection');
      };
      w.on('error', stopped);
      w.on('exit', (code) => stopped(new Error(`exited with code ${code}`)));
    },
    get running() {
      return worker !== null;
    },
    async close() {
      closed = true;
      const w = worker;
      worker = null;
      autocheckpoint(DEFAULT_CHECKPOINT_PAGES);
      if (!w) return;
      w.ref();
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([loaded, new Promise<void>((resolve) => (timer = setTimeout(resolve, LOAD_WAIT_MS)))]);
      clearTimeout(timer);
      await w.terminate();
    },
  };
}
