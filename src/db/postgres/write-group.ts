/**
 * PostgreSQL's counterpart of src/db/write-group.ts: the hot path's writes asked for in one turn of
 * the event loop run in one transaction on one pooled connection at the next `setImmediate`, and
 * each promise settles only after that commit, so an acknowledged write is durable. One commit per
 * group instead of one per write (a commit waits for the WAL flush). Should one write fail, the
 * group rolls back and each write is retried in a transaction of its own, so one bad write fails
 * alone. A write may therefore run twice and must touch nothing outside the database.
 *
 * One group at a time: writes asked for while a group commits wait and go together in the next
 * (group commit), so rows get their sequence numbers in the order they were asked for (an
 * exchange's question and answer stay adjacent) and one instance holds one connection for them.
 */
import type { Kysely, Transaction } from 'kysely';
import type { Database } from '../schema.js';

export type PgWrite<T> = (trx: Transaction<Database>) => Promise<T>;

export interface PgWriteGroup {
  run<T>(write: PgWrite<T>): Promise<T>;
}

interface Pending {
  write: PgWrite<unknown>;
  resolve: (value: unknown) => void;
  reject: (err: unknown) => void;
}

export function createPgWriteGroup(db: Kysely<Database>, options: { onWrite?: () => void } = {}): PgWriteGroup {
  let pending: Pending[] = [];
  let scheduled = false;
  let flushing = false;

  function schedule(): void {
    if (scheduled || flushing || pending.length === 0) return;
    scheduled = true;
    setImmediate(() => {
      scheduled = false;
      flushing = true;
      void flush().finally(() => {
        flushing = false;
        schedule();
      });
    });
  }

  async function flush(): Promise<void> {
    const group = pending;
    pending = [];
    let results: unknown[];
    try {
      results = await db.transaction().execute(async (trx) => {
        const out: unknown[] = [];
        // One statement at a time: a connection runs one query at once.
        for (const p of group) out.push(await p.write(trx));
        return out;
      });
    } catch {
      for (const p of group) {
        try {
          p.resolve(await db.transaction().execute((trx) => p.write(trx)));
        } catch (err) {
          p.reject(err);
        }
      }
      return;
    }
    group.forEach((p, i) => p.resolve(results[i]));
  }

  return {
    run<T>(write: PgWrite<T>): Promise<T> {
      return new Promise<T>((resolve, reject) => {
        if (pending.length === 0) options.onWrite?.();
        pending.push({ write: write as PgWrite<unknown>, resolve: resolve as (value: unknown) => void, reject });
        schedule();
      });
    },
  };
}
