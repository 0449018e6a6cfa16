/**
 * Searches run on worker threads (search-worker.ts), so the main thread keeps serving HTTP and
 * driving the model while a second core ranks passages: retrieval is ~40 % of a chat answer's CPU
 * (issue 18). Only for the offline `hashed` embedder, which a thread can run itself; a remote
 * embedder is a network call the main thread makes anyway.
 *
 * The threads start at the first search, not with the server: each costs ~30 MB and a core's
 * ~0.1 s to load (issue 23). Until one has loaded, searches run on the main thread, so no answer
 * waits for a thread to start.
 *
 * Failure is contained: a thread that dies hands the searches it held back (the caller runs them on
 * the main thread instead) and is replaced at the next search, at most once per second
 * (lib/worker-pool.ts).
 */
import type { Logger } from 'pino';
import type { OpenDatabaseOptions } from '../../db/database.js';
import { createWorkerPool, WorkerStoppedError } from '../../lib/worker-pool.js';
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
  filter: SearchFilter;
  input: ResolvedSearch;
}

export interface SearchPool {
  /** The search's result from a thread, or null when no thread can take it (the caller searches itself). */
  search(filter: SearchFilter, input: ResolvedSearch): Promise<SearchResult | null>;
  /** Starts the threads now rather than at the first search. */
  start(): void;
  /** Threads running. */
  readonly running: number;
  /** A thread has loaded: searches go to the threads rather than the main thread. */
  readonly ready: boolean;
  close(): Promise<void>;
}

const RESTART_AFTER_MS = 1_000;

/** Null when there are no threads to start (size 0, or no compiled worker script). */
export function createSearchPool(size: number, options: SearchThreadOptions, logger: Logger): SearchPool | null {
  const script = workerScript(import.meta.url, 'search-worker.js');
  if (size <= 0 || script === null) return null;
  const pool = createWorkerPool<SearchRequest, SearchResult>({
    script,
    workerData: options,
    size,
    restartAfterMs: RESTART_AFTER_MS,
    onStopped: (err) => logger.error({ err: err.message }, 'a search thread stopped; its searches run on the main thread'),
  });

  return {
    async search(filter, input) {
      if (!pool.ready()) {
        pool.start();
        return null;
      }
      if (!pool.available()) return null;
      try {
        return await pool.run({ filter, input });
      } catch (err) {
        // Its thread stopped, or the pool closed: the main thread answers instead, never a lost search.
        if (err instanceof WorkerStoppedError) return null;
        throw err;
      }
    },
    start: () => pool.start(),
    get running() {
      return pool.running;
    },
    get ready() {
      return pool.ready();
    },
    close: () => pool.close(),
  };
}
