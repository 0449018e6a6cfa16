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
 *
 * Every statement is a round trip to the server, so writes of one kind can be batched: a `Batcher`
 * gets the group's consecutive writes of its kind together and writes them with one statement per
 * table (the answer path: sessions, messages, interactions, tool calls).
 */
import type { Kysely, Transaction } from 'kysely';
import type { Database } from '../schema.js';

export type PgWrite<T> = (trx: Transaction<Database>) => Promise<T>;

/** Writes many items of one kind in one go, answering one result per item, in order. */
export interface Batcher<I, R> {
  run(trx: Transaction<Database>, items: I[]): Promise<R[]>;
}

export interface PgWriteGroup {
  run<T>(write: PgWrite<T>): Promise<T>;
  /** Joins `item` to the group's batch of `batcher`'s kind. */
  batch<I, R>(batcher: Batcher<I, R>, item: I): Promise<R>;
}

type Pending = { resolve: (value: unknown) => void; reject: (err: unknown) => void } & (
  | { write: PgWrite<unknown>; batcher?: undefined; item?: undefined }
  | { write?: undefined; batcher: Batcher<unknown, unknown>; item: unknown }
);

/** Most items one batch statement carries (PostgreSQL takes at most 65,535 parameters a statement). */
const MAX_BATCH = 200;

/** Runs the writes of a group in order, consecutive items of one batcher together; one result per write. */
async function runAll(trx: Transaction<Database>, group: Pending[]): Promise<unknown[]> {
  const out: unknown[] = [];
  for (let i = 0; i < group.length; ) {
    const p = group[i]!;
    if (p.write) {
      out.push(await p.write(trx));
      i++;
      continue;
    }
    let j = i;
    while (j < group.length && j - i < MAX_BATCH && group[j]!.batcher === p.batcher) j++;
    out.push(...(await p.batcher.run(trx, group.slice(i, j).map((q) => q.item))));
    i = j;
  }
  return out;
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
      results = await db.transaction().execute((trx) => runAll(trx, group));
    } catch {
      for (const p of group) {
        try {
          p.resolve(await db.transaction().execute(async (trx) => (await runAll(trx, [p]))[0]));
        } catch (err) {
          p.reject(err);
        }
      }
      return;
    }
    group.forEach((p, i) => p.resolve(results[i]));
  }

  function add(entry: Pending): void {
    if (pending.length === 0) options.onWrite?.();
    pending.push(entry);
    schedule();
  }

  return {
    run<T>(write: PgWrite<T>): Promise<T> {
      return new Promise<T>((resolve, reject) => add({ write: write as PgWrite<unknown>, resolve: resolve as (value: unknown) => void, reject }));
    },
    batch<I, R>(batcher: Batcher<I, R>, item: I): Promise<R> {
      return new Promise<R>((resolve, reject) =>
        add({ batcher: batcher as Batcher<unknown, unknown>, item, resolve: resolve as (value: unknown) => void, reject }),
      );
    },
  };
}
