/**
 * Writes grouped per turn of the event loop (issue 18): every write asked for in one turn runs in
 * one transaction at the next `setImmediate`, and each promise settles only after that commit, so
 * a write acknowledged to a caller is durable (kill -9 safe in WAL). One commit per group instead
 * of one per write: on a busy server an autocommitted insert cost ~40–70 µs, most of it the commit.
 * The answer path's exchange writes and the channel inbox's writes share the context's one group.
 *
 * No savepoint per write: each costs more than the write (SQLite copies every page it touches to a
 * statement journal first; measured ~90 µs per exchange). Should one write throw, the whole group
 * rolls back and each write is retried in a transaction of its own, so one bad write fails alone.
 * A write is synchronous SQLite work only: it may run twice (grouped, then alone) and must not
 * await or touch anything outside the database.
 */
import type { Database } from 'better-sqlite3';

export interface WriteGroup {
  /** Runs `write` in the next group's transaction; settles with its result after the commit. */
  run<T>(write: () => T): Promise<T>;
}

export interface WriteGroupOptions {
  /** Called when a group is scheduled (context.ts: starts the WAL checkpoint thread). */
  onWrite?: () => void;
}

interface Pending {
  write: () => unknown;
  resolve: (value: unknown) => void;
  reject: (err: unknown) => void;
}

export function createWriteGroup(sqlite: Database, options: WriteGroupOptions = {}): WriteGroup {
  let pending: Pending[] = [];
  const writeGroup = sqlite.transaction((group: Pending[]) => group.map((p) => p.write()));
  const writeAlone = sqlite.transaction((p: Pending) => p.write());

  function flush(): void {
    const group = pending;
    pending = [];
    let results: unknown[];
    try {
      results = writeGroup(group);
    } catch {
      for (const p of group) {
        try {
          p.resolve(writeAlone(p));
        } catch (err) {
          p.reject(err);
        }
      }
      return;
    }
    group.forEach((p, i) => p.resolve(results[i]));
  }

  return {
    run<T>(write: () => T): Promise<T> {
      return new Promise<T>((resolve, reject) => {
        if (pending.length === 0) {
          setImmediate(flush);
          options.onWrite?.();
        }
        pending.push({ write, resolve: resolve as (value: unknown) => void, reject });
      });
    },
  };
}
