import os from 'node:os';
import { Worker } from 'node:worker_threads';
import type { Logger } from 'pino';
import { workerScript } from '../../lib/worker-script.js';
import { ExtractionError } from './extract.js';
import type { PrepareInput, PreparedSource } from './prepare.js';

/** A document for a worker; `data` is transferred, not copied. */
export interface WorkerRequest {
  id: number;
  input: PrepareInput;
  dimension: number;
}

export type WorkerReply =
  | { id: number; ok: true; prepared: PreparedSource }
  | { id: number; ok: false; readable: boolean; message: string; stack?: string | undefined };

/** Threads that leave a core to the main thread (HTTP, the single writer): one on 2 cores, at most 2. */
export function defaultPoolSize(): number {
  return Math.min(2, Math.max(1, os.availableParallelism() - 1));
}

/** The compiled worker script (under dist/ when run from the sources), or null. */
export const ingestWorkerScript = (): URL | null => workerScript(import.meta.url, 'ingest-worker.js');

interface Job {
  id: number;
  input: PrepareInput;
  resolve(prepared: PreparedSource): void;
  reject(err: unknown): void;
  signal?: AbortSignal | undefined;
  onAbort?: (() => void) | undefined;
  done: boolean;
}

interface Slot {
  worker: Worker;
  /** Sent to the thread, oldest first; it works through them in order. */
  jobs: Job[];
}

/**
 * Documents handed to a thread at once: the next one is already in its message queue when it
 * finishes one, so it never idles waiting for a busy main thread to send more (measured: with one
 * at a time, main thread and worker each ran ~50 % of the time, taking turns). Eight: with 16
 * uploaders at once, 2 → 8 raised ingestion from ~4,200 to ~4,900 chunks/s (with a 1 ms linger of
 * the writer). Large queued sources are fewer still: the job queue runs a few at a time.
 */
const PER_THREAD = 8;

export interface IngestPoolOptions {
  size: number;
  /** Vector length of the offline embedder the workers run. */
  dimension: number;
  logger: Logger;
  script: URL;
}

/**
 * Worker threads that turn documents into chunks, hashed vectors and binary codes (prepare.ts), one
 * document per thread at a time, first come first served. Threads start on first use; a thread
 * that dies fails its document and is replaced on the next one. Idle threads do not keep the
 * process alive.
 */
export function createIngestPool(options: IngestPoolOptions) {
  const { size, dimension, logger, script } = options;
  const slots: Slot[] = [];
  const waiting: Job[] = [];
  let nextId = 1;
  let closed = false;

  function settle(job: Job, outcome: { value: PreparedSource } | { error: unknown }) {
    if (job.done) return;
    job.done = true;
    if (job.onAbort) job.signal?.removeEventListener('abort', job.onAbort);
    if ('value' in outcome) job.resolve(outcome.value);
    else job.reject(outcome.error);
  }

  function spawn(): Slot {
    const worker = new Worker(script);
    const slot: Slot = { worker, jobs: [] };
    worker.on('message', (reply: WorkerReply) => {
      const at = slot.jobs.findIndex((j) => j.id === reply.id);
      if (at < 0) return;
      const [job] = slot.jobs.splice(at, 1) as [Job];
      if (slot.jobs.length === 0) worker.unref();
      if (reply.ok) settle(job, { value: reply.prepared });
      else if (reply.readable) settle(job, { error: new ExtractionError(reply.message) });
      else settle(job, { error: Object.assign(new Error(reply.message), { stack: reply.stack }) });
      dispatch();
    });
    worker.on('error', (err) => logger.error({ err }, 'ingestion worker failed'));
    worker.on('exit', (code) => {
      const at = slots.indexOf(slot);
      if (at >= 0) slots.splice(at, 1);
      const error = new Error(`The ingestion worker stopped (exit code ${code}) while processing the document.`);
      for (const job of slot.jobs.splice(0)) settle(job, { error });
      if (!closed) dispatch();
    });
    slots.push(slot);
    return slot;
  }

  function dispatch() {
    while (!closed && waiting.length > 0) {
      // The least loaded thread; a new one while there is room and every thread has work.
      const least = slots.reduce<Slot | null>((best, s) => (best === null || s.jobs.length < best.jobs.length ? s : best), null);
      const slot = least !== null && (least.jobs.length === 0 || slots.length >= size) ? least : slots.length < size ? spawn() : least;
      if (!slot || slot.jobs.length >= PER_THREAD) return;
      const job = waiting.shift()!;
      if (job.done) continue;
      slot.jobs.push(job);
      slot.worker.ref();
      // A private copy, transferred: the caller's buffer may be a view into a larger one.
      const data = new Uint8Array(job.input.data);
      const request: WorkerRequest = { id: job.id, input: { ...job.input, data }, dimension };
      slot.worker.postMessage(request, [data.buffer]);
    }
  }

  return {
    size,
    /** Documents queued or being prepared. */
    get pending() {
      return waiting.length + slots.reduce((n, s) => n + s.jobs.length, 0);
    },
    /** Chunks, vectors and codes of a document. Rejects with `ExtractionError` for an unreadable one, or the signal's reason. */
    prepare(input: PrepareInput, signal?: AbortSignal): Promise<PreparedSource> {
      return new Promise<PreparedSource>((resolve, reject) => {
        if (closed) return reject(new Error('The ingestion pool is closed.'));
        if (signal?.aborted) return reject(signal.reason);
        const job: Job = { id: nextId++, input, resolve, reject, signal, done: false };
        if (signal) {
          // The thread finishes the document anyway; its answer is dropped.
          job.onAbort = () => settle(job, { error: signal.reason });
          signal.addEventListener('abort', job.onAbort, { once: true });
        }
        waiting.push(job);
        dispatch();
      });
    },
    /** Fails what is queued or running and stops every thread. */
    async close() {
      closed = true;
      const stopped = new Error('The ingestion pool is closed.');
      for (const job of waiting.splice(0)) settle(job, { error: stopped });
      await Promise.all(slots.map((s) => s.worker.terminate()));
    },
  };
}

export type IngestPool = ReturnType<typeof createIngestPool>;
