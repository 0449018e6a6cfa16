// A worker thread for test/unit/worker-pool.test.ts (the compiled dist/ copy runs): answers
// `{ op, value }` requests through serveRequests, and can fail, crash or hold an answer.
import { serveRequests } from '../../src/lib/worker-pool.js';

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
