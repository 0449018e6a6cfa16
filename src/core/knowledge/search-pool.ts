/**
 * Searches run on worker threads (search-worker.ts), so the main thread keeps serving HTTP and
 * driving the model while a second core ranks passages: retrieval is ~40 % of a chat answer's CPU
 * (issue 18). Only for the offline `hashed` embedder, which a thread can run itself; a remote
 * embedder is a network call the main thread makes anyway.
 *
 * Failure is contained: a thread that dies fails the searches it held (the caller runs them on the
 * main thread instead) and is replaced at the next search, at most once per second.
 */
import { Worker } from 'node:worker_threads';
import type { Logger } from 'pino';
import type { OpenDatabaseOptions } from '../../db/database.js';
import { workerScript } from '../../lib/worker-script.js';
import type { FusionOptions } from './fusion.js';
import type { SearchResult } from './knowledge.schemas.js';
import type { SearchFilter, SqliteSearchIndexOptions } from './search-index.js';
import type { ResolvedSearch } from './search-run.js';

export interface SearchThreadOptions {
  filename: string;
  durability: OpenDatabaseOptions['durability'];
  dimension: number;
  index: SqliteSearchIndexOptions;
  fusion: FusionOptions;
}

export interface SearchRequest {
  id: number;
  filter: SearchFilter;
  input: ResolvedSearch;
}

export type SearchReply = { id: number; ok: true; result: SearchResult } | { id: number; ok: false; message: string };

export interface SearchPool {
  /** The search's result from a thread, or null when no thread can take it (the caller searches itself). */
  search(filter: SearchFilter, input: ResolvedSearch): Promise<SearchResult | null>;
  /**
   * Starts the threads now rather than at the first search (a server about to listen): starting
   * one takes ~100 ms, which the first question would otherwise wait.
   */
  start(): void;
  /** Threads running. */
  readonly running: number;
  close(): Promise<void>;
}

interface Pending {
  resolve(result: SearchResult | null): void;
  reject(err: Error): void;
}

interface Thread {
  worker: Worker;
  pending: Map<number, Pending>;
}

const RESPAWN_AFTER_MS = 1_000;

/** Null when there are no threads to start (size 0, or no compiled worker script). */
export function createSearchPool(size: number, options: SearchThreadOptions, logger: Logger): SearchPool | null {
  const script = workerScript(import.meta.url, 'search-worker.js');
  if (size <= 0 || script === null) return null;
  const threads: (Thread | null)[] = Array.from({ length: size }, () => null);
  const diedAt: number[] = Array.from({ length: size }, () => -Infinity);
  let nextId = 1;
  let turn = 0;
  let closed = false;

  function start(slot: number): Thread {
    const worker = new Worker(script!, { workerData: options });
    const thread: Thread = { worker, pending: new Map() };
    // Idle threads never keep the process alive; a search in flight refs it (see `search`).
    worker.unref();
    worker.on('message', (reply: SearchReply) => {
      const p = thread.pending.get(reply.id);
      if (!p) return;
      thread.pending.delete(reply.id);
      if (thread.pending.size === 0) worker.unref();
      if (reply.ok) p.resolve(reply.result);
      else p.reject(new Error(reply.message));
    });
    const fail = (err: Error) => {
      if (threads[slot] !== thread) return;
      threads[slot] = null;
      diedAt[slot] = performance.now();
      if (!closed) logger.error({ err: err.message }, 'a search thread stopped; its searches run on the main thread');
      // Searches it held run on the main thread instead: a result, never a lost request.
      for (const p of thread.pending.values()) p.resolve(null);
      thread.pending.clear();
    };
    worker.on('error', fail);
    worker.on('exit', (code) => fail(new Error(`exited with code ${code}`)));
    threads[slot] = thread;
    return thread;
  }

  function threadFor(): Thread | null {
    for (let i = 0; i < size; i++) {
      const slot = (turn + i) % size;
      const t = threads[slot] ?? (performance.now() - diedAt[slot]! >= RESPAWN_AFTER_MS ? start(slot) : null);
      if (t) {
        turn = slot + 1;
        return t;
      }
    }
    return null;
  }

  return {
    search(filter, input) {
      if (closed) return Promise.resolve(null);
      const thread = threadFor();
      if (!thread) return Promise.resolve(null);
      const id = nextId++;
      return new Promise<SearchResult | null>((resolve, reject) => {
        thread.pending.set(id, { resolve, reject });
        if (thread.pending.size === 1) thread.worker.ref();
        thread.worker.postMessage({ id, filter, input } satisfies SearchRequest);
      });
    },
    start() {
      if (closed) return;
      for (let slot = 0; slot < size; slot++) if (threads[slot] === null) start(slot);
    },
    get running() {
      return threads.filter((t) => t !== null).length;
    },
    async close() {
      closed = true;
      const running = threads.filter((t): t is Thread => t !== null);
      threads.fill(null);
      for (const t of running) for (const p of t.pending.values()) p.resolve(null);
      await Promise.all(running.map((t) => t.worker.terminate()));
    },
  };
}
