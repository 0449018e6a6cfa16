/**
 * How an in-memory cache learns that rows it holds changed in another process (DESIGN.md, "One
 * machine or many"). A writer calls `changed(topic)` once its change has committed; `onChange`
 * handlers (a cache dropping what it holds of the topic) run at once in this process, and in every
 * other instance on the same database within one poll: each reads the `change_signals` table
 * (migration 015) every POLL_MS and runs the handlers of the topics whose sequence moved. The table
 * is the truth, so an instance that was away (a lost connection, a long pause) still sees every
 * topic that moved meanwhile at its next read.
 *
 * On SQLite the signals stay in the process: the only other writers of a data directory are CLI
 * commands and `switchboard mcp`, which the caches' own time-to-live covers as before.
 */
import { type Kysely, sql } from 'kysely';
import type { Logger } from 'pino';
import type { Database } from './schema.js';

/** The caches that listen: `keys` (auth.service.ts), `personas` (personas.service.ts, PostgreSQL only), `mcp-sessions` (the sessions an instance holds, mcp/http.ts), `channels` (the live channels, channels.service.ts), `tool-servers` (the tool hub's connections, tool-hub.ts). */
export type ChangeTopic = 'keys' | 'personas' | 'mcp-sessions' | 'channels' | 'tool-servers' | 'mcp-tasks' | 'mcp-replies';

export interface ChangeSignals {
  /** Tells every instance that rows of `topic` changed; call after the change committed. */
  changed(topic: ChangeTopic): Promise<void>;
  /** Runs `handler` after each change of `topic`, here at once and from another instance within a poll. */
  onChange(topic: ChangeTopic, handler: () => void): void;
  close(): Promise<void>;
}

/** How often an instance reads the signals: a change elsewhere reaches its caches within this and the read, the 1 s the README promises (many instances; test/e2e/instances.test.ts asserts it). */
export const POLL_MS = 250;

function handlers() {
  const byTopic = new Map<string, Array<() => void>>();
  return {
    add(topic: string, handler: () => void) {
      byTopic.set(topic, [...(byTopic.get(topic) ?? []), handler]);
    },
    run(topic: string) {
      for (const handler of byTopic.get(topic) ?? []) handler();
    },
  };
}

/** One process: handlers run when this process changes a topic. */
export function localChangeSignals(): ChangeSignals {
  const h = handlers();
  return {
    async changed(topic) {
      h.run(topic);
    },
    onChange: (topic, handler) => h.add(topic, handler),
    async close() {},
  };
}

/**
 * Many instances on one PostgreSQL database: the `change_signals` rows, read every `pollMs`. The
 * first read happens here, before the instance serves anything: it learns where each topic stands
 * while no cache holds a row yet. (Read by the first poll instead, a change made by another
 * instance between this one's first request and that read was taken for the starting point, and a
 * key revoked then stayed cached here for the cache's whole lifetime.)
 */
export async function sharedChangeSignals(db: Kysely<Database>, logger: Logger, { pollMs = POLL_MS } = {}): Promise<ChangeSignals> {
  const h = handlers();
  /** The sequence of each topic as last read; a topic that first appears counts as moved. */
  const seen = new Map<string, number>();
  let closed = false;
  let failing = false;
  let reading: Promise<void> | undefined;

  const readRows = () => db.selectFrom('change_signals').select(['topic', 'seq']).execute();
  for (const { topic, seq } of await readRows()) seen.set(topic, seq);

  async function read() {
    for (const { topic, seq } of await readRows()) {
      const before = seen.get(topic);
      seen.set(topic, seq);
      if (before !== seq) h.run(topic);
    }
  }

  const timer = setInterval(() => {
    if (reading) return;
    reading = read()
      .then(() => {
        if (failing) logger.info('change signals readable again');
        failing = false;
      })
      .catch((err: unknown) => {
        // The database is away: caches keep their own time-to-live meanwhile; the next read catches up.
        if (!failing && !closed) logger.warn({ err: (err as Error).message }, 'change signals unreadable; retrying');
        failing = true;
      })
      .finally(() => (reading = undefined));
  }, pollMs);
  timer.unref();

  return {
    async changed(topic) {
      const row = await sql<{ seq: number }>`
        INSERT INTO change_signals (topic, seq) VALUES (${topic}, 1)
        ON CONFLICT (topic) DO UPDATE SET seq = change_signals.seq + 1
        RETURNING seq`.execute(db);
      // Our own change: handled now, and not again when the next read sees the new number. A read
      // that was under way may have seen it first and run the handlers already: then not twice.
      const seq = row.rows[0]!.seq;
      if ((seen.get(topic) ?? 0) >= seq) return;
      seen.set(topic, seq);
      h.run(topic);
    },
    onChange: (topic, handler) => h.add(topic, handler),
    async close() {
      closed = true;
      clearInterval(timer);
      await reading;
    },
  };
}
