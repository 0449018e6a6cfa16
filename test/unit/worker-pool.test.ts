// The worker pool behind the ingestion and search threads (src/lib/worker-pool.ts), with a test
// worker (test/fakes/pool-worker.ts, compiled; `npm test` builds first): answers and errors by id,
// the per-thread limit, a thread that dies, its restart delay, aborts and closing.
import fs from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { createWorkerPool, type WorkerPool, WorkerRequestError, WorkerStoppedError } from '../../src/lib/worker-pool.js';
import type { PoolTestRequest } from '../fakes/pool-worker.js';
import { waitFor } from '../helpers/mcp-tools.js';

/** The compiled test worker (vitest runs the sources; a thread needs JavaScript). */
const script = new URL('../../dist/test/fakes/pool-worker.js', import.meta.url);

describe('worker pool', () => {
  it('has its compiled test worker (run `npx tsc -p tsconfig.json`)', () => expect(fs.existsSync(script)).toBe(true));

  let pool: WorkerPool<PoolTestRequest, number> | undefined;
  const stopped: string[] = [];
  afterEach(async () => {
    await pool?.close();
    pool = undefined;
    stopped.length = 0;
  });
  const open = (size: number, extra: { perThread?: number; restartAfterMs?: number } = {}) =>
    (pool = createWorkerPool<PoolTestRequest, number>({ script, size, ...extra, onStopped: (err) => stopped.push(err.message) }));

  it('answers each request by id, spreading them over its threads; a thrown error comes back as WorkerRequestError', async () => {
    const p = open(2);
    expect(p.running).toBe(0);
    const answers = await Promise.all(Array.from({ length: 40 }, (_, i) => p.run({ op: 'double', value: i })));
    expect(answers).toEqual(Array.from({ length: 40 }, (_, i) => i * 2));
    expect(p.running).toBe(2);
    const failed = await p.run({ op: 'fail', value: 'no such page' }).catch((e: unknown) => e);
    expect(failed).toBeInstanceOf(WorkerRequestError);
    expect(failed).toMatchObject({ message: 'no such page', known: false });
    expect(await p.run({ op: 'refuse', value: 'unreadable' }).catch((e: unknown) => e)).toMatchObject({ message: 'unreadable', known: true });
    expect(p.pending).toBe(0);
  });

  it('holds at most perThread requests on a thread; the rest wait their turn', async () => {
    const p = open(1, { perThread: 2 });
    const held = [p.run({ op: 'hold', ms: 100, value: 1 }), p.run({ op: 'hold', ms: 100, value: 2 }), p.run({ op: 'double', value: 5 })];
    expect(p.pending).toBe(3);
    expect(p.available()).toBe(false); // one thread, two requests on it
    expect(await Promise.all(held)).toEqual([1, 2, 10]);
    expect(p.available()).toBe(true);
  });

  it('fails what a dying thread held with WorkerStoppedError, and starts another no sooner than restartAfterMs', async () => {
    const p = open(1, { restartAfterMs: 300 });
    const held = p.run({ op: 'hold', ms: 10_000, value: 1 });
    const crash = p.run({ op: 'crash' });
    await expect(crash).rejects.toBeInstanceOf(WorkerStoppedError);
    await expect(held).rejects.toBeInstanceOf(WorkerStoppedError);
    expect(stopped).toEqual(['exit code 3']);
    expect(p.running).toBe(0);
    expect(p.available()).toBe(false); // waiting out the restart delay
    const started = performance.now();
    expect(await p.run({ op: 'double', value: 21 })).toBe(42); // queued until a thread can start
    expect(performance.now() - started).toBeGreaterThanOrEqual(200);
    expect(p.running).toBe(1);
  });

  it('drops an aborted request (waiting or running) with the signal’s reason, and fails everything once closed', async () => {
    const p = open(1, { perThread: 1 });
    const controller = new AbortController();
    const running = p.run({ op: 'hold', ms: 200, value: 1 }, { signal: controller.signal });
    const waiting = p.run({ op: 'double', value: 2 }, { signal: controller.signal });
    controller.abort(new Error('client gone'));
    await expect(running).rejects.toThrow('client gone');
    await expect(waiting).rejects.toThrow('client gone');
    expect(await p.run({ op: 'double', value: 4 })).toBe(8); // the thread went on
    const late = p.run({ op: 'hold', ms: 10_000, value: 1 });
    await p.close();
    await expect(late).rejects.toBeInstanceOf(WorkerStoppedError);
    await expect(p.run({ op: 'double', value: 1 })).rejects.toThrow(/closed/);
    expect(stopped).toEqual([]); // closing is not a thread stopping
  });

  it('is ready once a thread has loaded its script, not when it is spawned; no longer after it stops or the pool closes', async () => {
    const p = open(1);
    expect(p.ready()).toBe(false);
    p.start();
    expect(p.running).toBe(1);
    expect(p.ready()).toBe(false); // spawned, still loading
    await waitFor(() => p.ready(), 10_000, 'the thread to load');
    await expect(p.run({ op: 'crash' })).rejects.toBeInstanceOf(WorkerStoppedError);
    expect(p.ready()).toBe(false);
    expect(await p.run({ op: 'double', value: 2 })).toBe(4); // its replacement
    expect(p.ready()).toBe(true);
    await p.close();
    expect(p.ready()).toBe(false);
  });

  it('lets a thread that is still loading finish before close() stops it (stopping one mid-load aborted the process)', async () => {
    const gate = new Int32Array(new SharedArrayBuffer(12));
    const p = (pool = createWorkerPool<PoolTestRequest, number>({ script, size: 1, workerData: { loadGate: gate } }));
    p.start();
    await waitFor(() => Atomics.load(gate, 0) === 1, 10_000, 'the thread to begin loading');
    const closing = p.close();
    // Without the wait, close() had already asked the thread to stop, which interrupts its load.
    for (let turn = 0; turn < 20; turn++) await new Promise((resolve) => setImmediate(resolve));
    Atomics.store(gate, 1, 1);
    Atomics.notify(gate, 1);
    await closing;
    expect(Atomics.load(gate, 2)).toBe(1);
  });
});
