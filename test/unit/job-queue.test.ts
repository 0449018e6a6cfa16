import pino from 'pino';
import { describe, expect, it, vi } from 'vitest';
import { createJobQueue } from '../../src/core/knowledge/ingest.js';

interface Deferred {
  promise: Promise<void>;
  resolve(): void;
  reject(err: unknown): void;
}

function deferred(): Deferred {
  let resolve!: () => void;
  let reject!: (err: unknown) => void;
  const promise = new Promise<void>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

/** Lets pending promise callbacks run. */
const settle = () => new Promise((resolve) => setTimeout(resolve, 0));

/**
 * A runner whose jobs finish only when the test says so. Records starts, finishes and the
 * highest number of jobs running at once.
 */
function controlledRunner() {
  const started: string[] = [];
  const finished: string[] = [];
  const signals = new Map<string, AbortSignal>();
  const gates: Deferred[] = [];
  let running = 0;
  let maxRunning = 0;
  const run = vi.fn(async (id: string, signal: AbortSignal) => {
    started.push(id);
    signals.set(id, signal);
    running++;
    maxRunning = Math.max(maxRunning, running);
    const gate = deferred();
    gates.push(gate);
    try {
      await gate.promise;
      finished.push(id);
    } finally {
      running--;
    }
  });
  return {
    run,
    started,
    finished,
    signals,
    get maxRunning() {
      return maxRunning;
    },
    /** Finishes the oldest unfinished job (or fails it with `err`). */
    async next(err?: unknown) {
      await settle();
      const gate = gates.shift();
      if (!gate) throw new Error('no job is running');
      if (err === undefined) gate.resolve();
      else gate.reject(err);
      await settle();
    },
  };
}

const silent = () => pino({ level: 'silent' });

describe('createJobQueue', () => {
  it('runs jobs one at a time, in the order they were queued', async () => {
    const r = controlledRunner();
    const queue = createJobQueue(r.run, silent());
    for (const id of ['a', 'b', 'c']) queue.enqueue(id);
    await settle();
    expect(r.started).toEqual(['a']);
    expect(queue.pending).toBe(3);
    await r.next();
    expect(r.started).toEqual(['a', 'b']);
    expect(queue.pending).toBe(2);
    queue.enqueue('d'); // queued while running: after the others
    await r.next();
    await r.next();
    await r.next();
    await queue.idle();
    expect(r.started).toEqual(['a', 'b', 'c', 'd']);
    expect(r.finished).toEqual(['a', 'b', 'c', 'd']);
    expect(r.maxRunning).toBe(1);
    expect(queue.pending).toBe(0);
  });

  it('queues an id at most once, keeping its first place', async () => {
    const r = controlledRunner();
    const queue = createJobQueue(r.run, silent());
    for (const id of ['a', 'b', 'c', 'b', 'c', 'b']) queue.enqueue(id);
    expect(queue.pending).toBe(3);
    for (let i = 0; i < 3; i++) await r.next();
    await queue.idle();
    expect(r.started).toEqual(['a', 'b', 'c']);
  });

  it('runs a job again when its id is queued while it runs (a newer generation must not be lost)', async () => {
    const r = controlledRunner();
    const queue = createJobQueue(r.run, silent());
    queue.enqueue('a');
    await settle();
    queue.enqueue('a');
    queue.enqueue('a');
    await r.next();
    await r.next();
    await queue.idle();
    expect(r.started).toEqual(['a', 'a']);
  });

  it('idle() resolves at once when nothing is queued, else when the queue has drained', async () => {
    const r = controlledRunner();
    const queue = createJobQueue(r.run, silent());
    await expect(queue.idle()).resolves.toBeUndefined();
    queue.enqueue('a');
    queue.enqueue('b');
    let idle = false;
    const waiters = [queue.idle(), queue.idle()];
    void Promise.all(waiters).then(() => {
      idle = true;
    });
    await r.next();
    expect(idle).toBe(false);
    queue.enqueue('c'); // arrives before the queue drains: idle waits for it too
    await r.next();
    expect(idle).toBe(false);
    await r.next();
    await Promise.all(waiters);
    expect(idle).toBe(true);
    expect(r.finished).toEqual(['a', 'b', 'c']);
    // And the queue starts again after being idle.
    queue.enqueue('d');
    await r.next();
    await queue.idle();
    expect(r.finished).toEqual(['a', 'b', 'c', 'd']);
  });

  it('logs a failing job and goes on with the next one', async () => {
    const logger = silent();
    const error = vi.spyOn(logger, 'error');
    const ran: string[] = [];
    // Not async: 'sync-bad' throws synchronously rather than rejecting.
    const queue = createJobQueue((id) => {
      ran.push(id);
      if (id === 'sync-bad') throw new TypeError('thrown before any promise');
      return id === 'bad' ? Promise.reject(new Error('boom')) : Promise.resolve();
    }, logger);
    for (const id of ['bad', 'good', 'sync-bad', 'last']) queue.enqueue(id);
    await queue.idle();
    expect(ran).toEqual(['bad', 'good', 'sync-bad', 'last']);
    expect(error).toHaveBeenCalledTimes(2);
    expect(error.mock.calls[0]![0]).toMatchObject({ sourceId: 'bad', err: expect.objectContaining({ message: 'boom' }) });
    expect(error.mock.calls[1]![0]).toMatchObject({ sourceId: 'sync-bad' });
    expect(queue.pending).toBe(0);
  });

  it('survives a job that throws synchronously as the first one', async () => {
    const ran: string[] = [];
    const queue = createJobQueue((id) => {
      ran.push(id);
      if (id === 'sync-bad') throw new TypeError('thrown before any promise');
      return Promise.resolve();
    }, silent());
    queue.enqueue('sync-bad');
    await queue.idle();
    expect(queue.pending).toBe(0);
    queue.enqueue('next');
    await queue.idle();
    expect(ran).toEqual(['sync-bad', 'next']);
  });

  it("close() aborts the running job's signal, drops the queue, waits for the job, and ignores later jobs", async () => {
    const logger = silent();
    const error = vi.spyOn(logger, 'error');
    const started: string[] = [];
    let aborted: unknown;
    let settled = false;
    const queue = createJobQueue(async (id, signal) => {
      started.push(id);
      // Like the ingestor: wait for work, give up with the signal's reason when aborted.
      await new Promise<void>((_, reject) => {
        signal.addEventListener('abort', () => {
          aborted = signal.reason;
          setTimeout(() => {
            settled = true;
            reject(signal.reason);
          }, 20);
        });
      });
    }, logger);
    for (const id of ['a', 'b', 'c']) queue.enqueue(id);
    await settle();
    expect(started).toEqual(['a']);
    const closing = queue.close();
    expect(settled).toBe(false);
    await closing;
    expect(settled).toBe(true); // close() waited for the aborted job to end
    expect(aborted).toBeInstanceOf(Error);
    expect(started).toEqual(['a']); // b and c were dropped
    expect(error).not.toHaveBeenCalled(); // an aborted job is not a failure
    queue.enqueue('d');
    await settle();
    await queue.idle();
    expect(started).toEqual(['a']);
    expect(queue.pending).toBe(0);
    await expect(queue.close()).resolves.toBeUndefined(); // twice is fine
  });

  it('close() on an idle queue resolves, and later jobs are ignored', async () => {
    const run = vi.fn(async (_sourceId: string, _signal: AbortSignal) => {});
    const queue = createJobQueue(run, silent());
    queue.enqueue('a');
    await queue.idle();
    await queue.close();
    queue.enqueue('b');
    await queue.idle();
    await settle();
    expect(run.mock.calls.map((c) => c[0])).toEqual(['a']);
    expect(run.mock.calls[0]![1]).toBeInstanceOf(AbortSignal);
    expect(run.mock.calls[0]![1].aborted).toBe(true);
  });
});
