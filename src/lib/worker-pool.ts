/**
 * Worker threads that answer requests by id: the ingestion threads (knowledge/ingest-pool.ts) and
 * the search threads (knowledge/search-pool.ts) are two of these, with their own limits.
 *
 * A request goes to the least loaded thread; a new thread starts while there is a free slot and
 * every running thread has work. A thread holds at most `perThread` requests (handing it several
 * keeps it busy while the main thread is); the rest wait here, first come first served. Threads
 * start on first use or at `start()`, say when they have loaded (`ready()`), and hold the process
 * open only while they have work.
 *
 * A thread that stops (crash, `process.exit`, out of memory) fails the requests it held with
 * `WorkerStoppedError`, and its slot starts a new thread no sooner than `restartAfterMs` later, so
 * a thread that dies at once does not spin. The thread side is `serveRequests`.
 */
import { parentPort, type TransferListItem, Worker } from 'node:worker_threads';

/** The request's thread stopped (or the pool closed) before it answered. */
export class WorkerStoppedError extends Error {
  override name = 'WorkerStoppedError';
}

/** What a thread's handler threw, as the main thread sees it. */
export class WorkerRequestError extends Error {
  constructor(
    message: string,
    /** The handler marked it `known` (e.g. an unreadable document): the caller's to show, not a crash. */
    readonly known: boolean,
    stack: string | undefined,
  ) {
    super(message);
    this.name = 'WorkerRequestError';
    if (stack !== undefined) this.stack = stack;
  }
}

interface Envelope<Req> {
  id: number;
  request: Req;
}

type Reply<Res> = { id: number; ok: true; value: Res } | { id: number; ok: false; known: boolean; message: string; stack?: string | undefined };

/** The id of the message a thread sends once its script has loaded and serves requests (requests count from 1). */
const READY_ID = 0;

export interface WorkerPoolOptions {
  script: URL;
  workerData?: unknown;
  /** Threads at most. */
  size: number;
  /** Requests one thread holds at once (default: no limit). */
  perThread?: number;
  /** A slot whose thread stopped starts another no sooner than this (ms, default 0). */
  restartAfterMs?: number;
  /** A thread stopped while the pool was open (its requests have failed with WorkerStoppedError). */
  onStopped?: (err: Error) => void;
}

export interface WorkerPool<Req, Res> {
  /**
   * The thread's answer. Rejects with WorkerRequestError when its handler threw, WorkerStoppedError
   * when its thread stopped or the pool closed first, or the signal's reason (a thread already
   * working on it finishes; the answer is dropped).
   */
  run(request: Req, options?: { transfer?: TransferListItem[]; signal?: AbortSignal }): Promise<Res>;
  /** Whether a thread can take a request now (one running, or a slot free to start one). */
  available(): boolean;
  /** Whether a running thread has loaded its script and serves requests (one sent now is not held up by a start). */
  ready(): boolean;
  /** Starts every slot's thread now rather than at first use. */
  start(): void;
  /** Threads running. */
  readonly running: number;
  /** Requests waiting (aborted ones until their turn comes) or on a thread. */
  readonly pending: number;
  /** Fails what waits or runs with WorkerStoppedError and stops every thread. */
  close(): Promise<void>;
}

interface Job<Res> {
  id: number;
  message: Envelope<unknown>;
  transfer: TransferListItem[];
  resolve(value: Res): void;
  reject(err: unknown): void;
  signal?: AbortSignal | undefined;
  onAbort?: (() => void) | undefined;
  done: boolean;
}

interface Thread<Res> {
  worker: Worker;
  jobs: Map<number, Job<Res>>;
  /** It said READY_ID: its script has loaded. */
  loaded: boolean;
  /** Settles once it has loaded or stopped. */
  settled: Promise<void>;
}

/**
 * How long `close()` lets a thread that is still loading finish before stopping it anyway. Stopping
 * a thread while it loads a native addon (better-sqlite3 in the search thread) aborts the whole
 * process: the addon's start-up calls into a Node environment already being torn down
 * (`FATAL ERROR: Error::New napi_get_last_error_info`, seen in a loaded test run).
 */
const LOAD_WAIT_MS = 10_000;

export function createWorkerPool<Req, Res>(options: WorkerPoolOptions): WorkerPool<Req, Res> {
  const { size } = options;
  const perThread = options.perThread ?? Number.POSITIVE_INFINITY;
  const restartAfterMs = options.restartAfterMs ?? 0;
  const threads: Array<Thread<Res> | null> = Array.from({ length: size }, () => null);
  const stoppedAt: number[] = Array.from({ length: size }, () => Number.NEGATIVE_INFINITY);
  const waiting: Job<Res>[] = [];
  let retry: NodeJS.Timeout | undefined;
  let nextId = 1;
  let closed = false;

  function settle(job: Job<Res>, outcome: { value: Res } | { error: unknown }): void {
    if (job.done) return;
    job.done = true;
    if (job.onAbort) job.signal?.removeEventListener('abort', job.onAbort);
    if ('value' in outcome) job.resolve(outcome.value);
    else job.reject(outcome.error);
  }

  const startable = (slot: number) => threads[slot] === null && performance.now() - stoppedAt[slot]! >= restartAfterMs;

  function startThread(slot: number): Thread<Res> {
    const worker = new Worker(options.script, options.workerData === undefined ? {} : { workerData: options.workerData });
    let loadedOrStopped!: () => void;
    const thread: Thread<Res> = { worker, jobs: new Map(), loaded: false, settled: new Promise<void>((resolve) => (loadedOrStopped = resolve)) };
    worker.unref();
    worker.on('message', (reply: Reply<Res>) => {
      if (reply.id === READY_ID) {
        thread.loaded = true;
        loadedOrStopped();
        return;
      }
      const job = thread.jobs.get(reply.id);
      if (!job) return;
      thread.jobs.delete(reply.id);
      if (thread.jobs.size === 0) worker.unref();
      if (reply.ok) settle(job, { value: reply.value });
      else settle(job, { error: new WorkerRequestError(reply.message, reply.known, reply.stack) });
      dispatch();
    });
    let stopped = false;
    const stop = (err: Error) => {
      if (stopped) return;
      stopped = true;
      loadedOrStopped();
      if (threads[slot] === thread) {
        threads[slot] = null;
        stoppedAt[slot] = performance.now();
      }
      const error = new WorkerStoppedError(closed ? 'The worker pool is closed.' : `A worker thread stopped (${err.message}) before it answered.`);
      for (const job of thread.jobs.values()) settle(job, { error });
      thread.jobs.clear();
      if (closed) return;
      options.onStopped?.(err);
      dispatch();
    };
    worker.on('error', stop);
    worker.on('exit', (code) => stop(new Error(`exit code ${code}`)));
    threads[slot] = thread;
    return thread;
  }

  /** The least loaded running thread with room, unless all have work and a slot can start another. */
  function threadFor(): Thread<Res> | null {
    let least: Thread<Res> | null = null;
    for (const t of threads) if (t !== null && t.jobs.size < perThread && (least === null || t.jobs.size < least.jobs.size)) least = t;
    if (least !== null && least.jobs.size === 0) return least;
    const free = threads.findIndex((_, slot) => startable(slot));
    return free >= 0 ? startThread(free) : least;
  }

  function dispatch(): void {
    while (!closed && waiting.length > 0) {
      if (waiting[0]!.done) {
        waiting.shift();
        continue;
      }
      const thread = threadFor();
      if (thread === null) {
        // Every slot is busy to its limit, or waiting out its restart delay: try again when one can start.
        const next = Math.min(...threads.map((t, slot) => (t === null ? stoppedAt[slot]! + restartAfterMs - performance.now() : Number.POSITIVE_INFINITY)));
        if (Number.isFinite(next) && retry === undefined) {
          retry = setTimeout(() => {
            retry = undefined;
            dispatch();
          }, Math.max(0, next));
        }
        return;
      }
      const job = waiting.shift()!;
      thread.jobs.set(job.id, job);
      thread.worker.ref();
      thread.worker.postMessage(job.message, job.transfer);
    }
  }

  return {
    run(request, { transfer = [], signal } = {}) {
      return new Promise<Res>((resolve, reject) => {
        if (closed) return reject(new WorkerStoppedError('The worker pool is closed.'));
        if (signal?.aborted) return reject(signal.reason);
        const id = nextId++;
        const job: Job<Res> = { id, message: { id, request }, transfer, resolve, reject, signal, done: false };
        if (signal) {
          job.onAbort = () => settle(job, { error: signal.reason });
          signal.addEventListener('abort', job.onAbort, { once: true });
        }
        waiting.push(job);
        dispatch();
      });
    },
    available: () => !closed && threads.some((t, slot) => (t !== null && t.jobs.size < perThread) || startable(slot)),
    ready: () => !closed && threads.some((t) => t?.loaded === true),
    start() {
      if (closed) return;
      for (let slot = 0; slot < size; slot++) if (startable(slot)) startThread(slot);
    },
    get running() {
      return threads.filter((t) => t !== null).length;
    },
    get pending() {
      return waiting.length + threads.reduce((n, t) => n + (t?.jobs.size ?? 0), 0);
    },
    async close() {
      closed = true;
      clearTimeout(retry);
      const error = new WorkerStoppedError('The worker pool is closed.');
      for (const job of waiting.splice(0)) settle(job, { error });
      const running = threads.filter((t): t is Thread<Res> => t !== null);
      threads.fill(null);
      await Promise.all(running.map((t) => (t.loaded ? t.worker.terminate() : stopOnceLoaded(t))));
    },
  };
}

/** Stops a thread that is still loading once it has loaded (or after LOAD_WAIT_MS). */
async function stopOnceLoaded(thread: Thread<unknown>): Promise<void> {
  thread.worker.ref(); // the wait must not let the process end mid-load either
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([thread.settled, new Promise<void>((resolve) => (timer = setTimeout(resolve, LOAD_WAIT_MS)))]);
  clearTimeout(timer);
  await thread.worker.terminate();
}

export interface ServeOptions<Res> {
  /** One request at a time, in the order sent (default: each as it comes). */
  oneAtATime?: boolean;
  /** Buffers of the answer to transfer rather than copy. */
  transferOf?: (value: Res) => TransferListItem[];
  /** Errors the caller should see as they are (`WorkerRequestError.known`), not as a crash. */
  known?: (err: unknown) => boolean;
}

/** The thread side of a WorkerPool: answers every request with `handle`'s value or error. */
export function serveRequests<Req, Res>(handle: (request: Req) => Promise<Res>, options: ServeOptions<Res> = {}): void {
  const port = parentPort;
  if (!port) throw new Error('serveRequests runs in a worker thread');
  let previous: Promise<void> = Promise.resolve();
  const answer = async ({ id, request }: Envelope<Req>) => {
    try {
      const value = await handle(request);
      port.postMessage({ id, ok: true, value } satisfies Reply<Res>, options.transferOf?.(value) ?? []);
    } catch (err) {
      const reply: Reply<Res> = { id, ok: false, known: options.known?.(err) ?? false, message: err instanceof Error ? err.message : String(err), stack: err instanceof Error ? err.stack : undefined };
      port.postMessage(reply);
    }
  };
  port.on('message', (envelope: Envelope<Req>) => {
    if (options.oneAtATime) previous = previous.then(() => answer(envelope));
    else void answer(envelope);
  });
  port.postMessage({ id: READY_ID, ok: true, value: null } satisfies Reply<null>);
}
