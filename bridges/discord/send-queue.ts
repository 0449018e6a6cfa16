/**
 * The bridge's outbound queue for `send()` (API.md §9 `POST /business/channels/:id/send`): one send
 * at a time, all parts of a message together; a `high` send goes ahead of every queued `normal` and
 * `low` one, `normal` ahead of `low`, first come first served within a priority. The one in flight
 * is never overtaken. Bounded: past `maxQueued` waiting sends a new one is refused.
 */
import { UnavailableError } from '../../src/errors.js';

export type Priority = 'low' | 'normal' | 'high';

const RANK: Record<Priority, number> = { high: 0, normal: 1, low: 2 };

interface Job {
  rank: number;
  run: () => Promise<void>;
}

export class SendQueue {
  private readonly waiting: Job[] = [];
  private running = false;
  private idleWaiters: Array<() => void> = [];

  constructor(private readonly maxQueued: number) {}

  /** Runs `task` in its turn; answers its result. */
  push<T>(priority: Priority, task: () => Promise<T>): Promise<T> {
    if (this.waiting.length >= this.maxQueued) {
      return Promise.reject(new UnavailableError(`The Discord send queue is full (${this.maxQueued} messages waiting); try again later.`));
    }
    return new Promise<T>((resolve, reject) => {
      const job: Job = { rank: RANK[priority], run: () => task().then(resolve, reject) };
      // Stable insertion: after every job of the same or a higher priority.
      const at = this.waiting.findIndex((j) => j.rank > job.rank);
      if (at === -1) this.waiting.push(job);
      else this.waiting.splice(at, 0, job);
      void this.pump();
    });
  }

  get size(): number {
    return this.waiting.length + (this.running ? 1 : 0);
  }

  /** Resolves when nothing is queued or running, or after `ms`. */
  idle(ms: number): Promise<void> {
    if (this.size === 0) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, ms);
      timer.unref();
      this.idleWaiters.push(() => {
        clearTimeout(timer);
        resolve();
      });
    });
  }

  private async pump(): Promise<void> {
    if (this.running) return;
    this.running = true;
    try {
      for (let job = this.waiting.shift(); job; job = this.waiting.shift()) await job.run();
    } finally {
      this.running = false;
      const waiters = this.idleWaiters;
      this.idleWaiters = [];
      for (const wake of waiters) wake();
    }
  }
}
