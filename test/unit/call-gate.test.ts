// The concurrency gate of MCP tool calls and channel answers: limits, the queue, aborts, waiters without a signal.
import { describe, expect, it } from 'vitest';
import { UnavailableError } from '../../src/errors.js';
import { CallGate } from '../../src/lib/call-gate.js';

describe('CallGate', () => {
  it('lets maxConcurrent through, queues the rest in order and refuses beyond the queue', async () => {
    const gate = new CallGate('test', 2, 2);
    await gate.acquire();
    await gate.acquire();
    const order: number[] = [];
    const a = gate.acquire().then(() => order.push(1));
    const b = gate.acquire(new AbortController().signal).then(() => order.push(2));
    await expect(gate.acquire()).rejects.toBeInstanceOf(UnavailableError);
    gate.release();
    gate.release();
    await Promise.all([a, b]);
    expect(order).toEqual([1, 2]);
  });

  it('drops an aborted waiter from the queue, and wakes waiters without a signal', async () => {
    const gate = new CallGate('test', 1, Number.POSITIVE_INFINITY);
    await gate.acquire();
    const controller = new AbortController();
    const aborted = gate.acquire(controller.signal);
    const woken: number[] = [];
    const plain = Array.from({ length: 500 }, (_, i) => gate.acquire().then(() => woken.push(i)));
    controller.abort(new Error('gone'));
    await expect(aborted).rejects.toThrow('gone');
    for (let i = 0; i < 500; i++) gate.release();
    await Promise.all(plain);
    expect(woken).toEqual(Array.from({ length: 500 }, (_, i) => i));
  });
});
