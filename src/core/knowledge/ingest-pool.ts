import os from 'node:os';
import type { Logger } from 'pino';
import { createWorkerPool, WorkerRequestError } from '../../lib/worker-pool.js';
import { workerScript } from '../../lib/worker-script.js';
import { ExtractionError } from './extract.js';
import type { PrepareInput, PreparedSource } from './prepare.js';

/** A document for a thread; `data` is transferred, not copied. */
export interface IngestRequest {
  input: PrepareInput;
  dimension: number;
}

/** Threads that leave a core to the main thread (HTTP, the single writer): one on 2 cores, at most 2. */
export function defaultPoolSize(): number {
  return Math.min(2, Math.max(1, os.availableParallelism() - 1));
}

/** The compiled worker script (under dist/ when run from the sources), or null. */
export const ingestWorkerScript = (): URL | null => workerScript(import.meta.url, 'ingest-worker.js');

/**
 * Documents handed to a thread at once: the next one is already in its message queue when it
 * finishes one, so it never idles waiting for a busy main thread to send more (measured: with one
 * at a time, main thread and worker each ran ~50 % of the time, taking turns). Eight: with 16
 * uploaders at once, 2 → 8 raised ingestion from ~4,200 to ~4,900 chunks/s (with a 1 ms linger of
 * the writer). Large queued sources are fewer still: the job queue runs a few at a time.
 */
const PER_THREAD = 8;

/**
 * Queued sources (larger than a request processes inline, or URLs) the job queue runs at once with
 * `threads` ingestion threads. More than the threads, so a thread never waits for its next
 * document; and enough more that when the main thread falls behind, the sources finished meanwhile
 * wait for the writer together and share one transaction (one commit and one FTS5 segment for
 * several). Writing SciFact's abstracts, 100 a document, cost the main thread 117–146 µs a chunk
 * one source a transaction and 95–110 at four or more. With 3 in flight (threads + 2) a batch held
 * 1.3 sources on average, with 7 about 2.5: their upload over HTTP on 2 cores went from 5,300–5,900
 * to 7,000–7,200 chunks/s, the main thread from 133–146 to 116–121 µs a chunk.
 */
export function sourcesInFlight(threads: number): number {
  return threads + 6;
}

export interface IngestPoolOptions {
  size: number;
  /** Vector length of the offline embedder the workers run. */
  dimension: number;
  logger: Logger;
  script: URL;
}

/**
 * Worker threads (lib/worker-pool.ts) that turn documents into chunks, hashed vectors and binary
 * codes (prepare.ts), each thread one document at a time, first come first served. A thread that
 * dies fails the documents it held and another starts for the next one.
 */
export function createIngestPool(options: IngestPoolOptions) {
  const { size, dimension, logger, script } = options;
  const pool = createWorkerPool<IngestRequest, PreparedSource>({
    script,
    size,
    perThread: PER_THREAD,
    onStopped: (err) => logger.error({ err: err.message }, 'an ingestion thread stopped; the documents it held failed'),
  });

  return {
    size,
    /** Documents queued or being prepared. */
    get pending() {
      return pool.pending;
    },
    /** Chunks, vectors and codes of a document. Rejects with `ExtractionError` for an unreadable one, or the signal's reason. */
    async prepare(input: PrepareInput, signal?: AbortSignal): Promise<PreparedSource> {
      // A private copy, transferred: the caller's buffer may be a view into a larger one.
      const data = new Uint8Array(input.data);
      try {
        return await pool.run({ input: { ...input, data }, dimension }, { transfer: [data.buffer], signal });
      } catch (err) {
        throw err instanceof WorkerRequestError && err.known ? new ExtractionError(err.message) : err;
      }
    },
    /** Fails what is queued or running and stops every thread. */
    close: () => pool.close(),
  };
}

export type IngestPool = ReturnType<typeof createIngestPool>;
