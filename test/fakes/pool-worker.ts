// A worker thread for test/unit/worker-pool.test.ts (the compiled dist/ copy runs): answers
// `{ op, value }` requests through serveRequests, and can fail, crash or hold an answer.
import { workerData } from 'node:worker_threads';
import { serveRequests } from '../../src/lib/worker-pool.js';

/**
 * With `workerData.loadGate` (an Int32Array over shared memory), loading holds until the test lets
 * it go: [0] = 1 once loading began, wait while [1] = 0, then [2] = 1 once loading finished.
 * A native addon loading at start (better-sqlite3 in the search thread) is such a window.
 */
const gate = (workerData as { loadGate?: Int32Array } | undefined)?.loadGate;
if (gate) {
  Atomics.store(gate, 0, 1);
  Atomics.wait(gate, 1, 0);
  Atomics.store(gate, 2, 1);
}

export type PoolTestRequest = { op: 'double'; value: number } | { op: 'fail'; value: string } | { op: 'refuse'; value: string } | { op: 'crash' } | { op: 'hold'; ms: number; value: number };

class Refusal extends Error {}

serveRequests(
  async (request: PoolTestRequest) => {
    switch (request.op) {
      case 'double':
        return request.value * 2;
      case 'fail':
        throw new Error(request.value);
      case 'refuse':
        throw new Refusal(request.value);
      case 'crash':
        process.exit(3);
      case 'hold':
        await new Promise((resolve) => setTimeout(resolve, request.ms));
        return request.value;
    }
  },
  { known: (err) => err instanceof Refusal },
);
