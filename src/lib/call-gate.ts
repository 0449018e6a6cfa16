import { UnavailableError } from '../errors.js';

/**
 * At most `maxConcurrent` calls in flight; up to `maxQueued` more wait their turn (an aborted
 * waiter leaves the queue); beyond that a call is refused at once with 503. A waiter without a
 * signal cannot be aborted: hundreds of waiters listening on one never-aborted signal made each
 * `addEventListener` walk all the others (~25 µs a call at a burst of 500 channel messages).
 */
export class CallGate {
  private active = 0;
  private readonly waiters: Array<() => void> = [];

  constructor(
    private readonly name: string,
    private readonly maxConcurrent: number,
    private readonly maxQueued: number,
  ) {}

  async acquire(signal?: AbortSignal): Promise<void> {
    if (this.active < this.maxConcurrent) {
      this.active++;
      return;
    }
    if (this.waiters.length >= this.maxQueued) {
      throw new UnavailableError(`${this.name} has ${this.active} calls running and ${this.waiters.length} waiting; retry shortly.`);
    }
    await new Promise<void>((resolve, reject) => {
      const wake = () => {
        signal?.removeEventListener('abort', onAbort);
        resolve();
      };
      const onAbort = () => {
        const i = this.waiters.indexOf(wake);
        if (i >= 0) this.waiters.splice(i, 1);
        reject(signal!.reason);
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      this.waiters.push(wake); // a woken waiter inherits the slot of the call that finished
    });
  }

  release(): void {
    const next = this.waiters.shift();
    if (next) next();
    else this.active--;
  }

  /** Lets every waiter through (the server is going away; they fail on their own). */
  drain(): void {
    for (const wake of this.waiters.splice(0)) wake();
  }
}
