// The change signals of instances on one PostgreSQL database (src/db/change-signals.ts): a change
// made by one instance runs the other's handlers within a poll, including a change made before the
// other's first poll (its caches may already hold rows by then).
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { type ChangeSignals, sharedChangeSignals } from '../../src/db/change-signals.js';
import { testBackends } from '../helpers/postgres.js';
import { type OpenedBackend, openTestBackend } from '../helpers/sql-backend.js';

const logger = pino({ level: 'silent' });

describe.each(testBackends().filter((b) => b.kind === 'postgres'))('change signals on $kind', (which) => {
  let opened: OpenedBackend | undefined;
  const open: ChangeSignals[] = [];
  afterEach(async () => {
    for (const s of open.splice(0)) await s.close();
    await opened?.close();
    opened = undefined;
  });

  const instance = async (pollMs: number) => {
    const s = await sharedChangeSignals(opened!.backend.kysely, logger, { pollMs });
    open.push(s);
    return s;
  };

  it('runs the handlers of every other instance once per change, and its own at once', async () => {
    opened = await openTestBackend(which);
    const [a, b] = [await instance(20), await instance(20)];
    // A third instance that never polls marks a point in time on another topic: once A and B have
    // each run its handler, each has read the table after every change before the mark (one read
    // returns all topics), so a second run of a 'keys' handler (an echo) would have happened by then.
    const marker = await instance(60_000);
    const seen = { a: 0, b: 0 };
    const marks = { a: 0, b: 0 };
    a.onChange('keys', () => seen.a++);
    b.onChange('keys', () => seen.b++);
    a.onChange('personas', () => marks.a++);
    b.onChange('personas', () => marks.b++);
    const bothReadSince = async () => {
      const before = { ...marks };
      await marker.changed('personas');
      await expect.poll(() => marks.a > before.a && marks.b > before.b).toBe(true);
    };

    await a.changed('keys');
    expect(seen.a).toBe(1);
    await bothReadSince();
    expect(seen).toEqual({ a: 1, b: 1 });
    await b.changed('keys');
    expect(seen.b).toBe(2);
    await bothReadSince();
    expect(seen).toEqual({ a: 2, b: 2 });
  });

  it('sees a change made before its first poll', async () => {
    opened = await openTestBackend(which);
    const other = await instance(60_000);
    // Started (its starting point read), not yet polled: another instance changes keys now.
    const starting = await instance(100);
    let runs = 0;
    starting.onChange('keys', () => runs++);
    await other.changed('keys');
    await expect.poll(() => runs, { timeout: 5_000 }).toBe(1);
  });
});
