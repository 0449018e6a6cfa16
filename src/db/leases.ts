import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import type { Database } from './schema.js';

/** The lease an instance renews while it is alive (`instance:<owner>`): work it claimed is taken from it only once this lapsed. */
export const instanceLease = (owner: string) => `instance:${owner}`;

/**
 * Named leases (migration 020): work that runs on one instance at a time (API.md §13). An instance
 * takes a lease that is free, lapsed or already its own, and renews it while it does the work; one
 * that dies stops renewing and another takes the work over once `until_ms` has passed; one that
 * drains releases its leases, so another takes them at once. Times are milliseconds since the epoch.
 */
export function createLeaseStore(db: Kysely<Database>) {
  return {
    /** Takes or renews `name` for `owner` until `untilMs`; false when another instance holds it. */
    async acquire(name: string, owner: string, nowMs: number, untilMs: number, note: string | null = null): Promise<boolean> {
      const row = await db
        .insertInto('leases')
        .values({ name, owner, until_ms: untilMs, note })
        .onConflict((oc) =>
          oc
            .column('name')
            .doUpdateSet({ owner, until_ms: untilMs, note })
            .where((eb) => eb.or([eb('leases.owner', '=', owner), eb('leases.until_ms', '<', nowMs)])),
        )
        .returning('owner')
        .executeTakeFirst();
      return row?.owner === owner;
    },

    /** The leases named, held or lapsed: who holds each and what the holder noted. */
    async read(names: string[]) {
      if (names.length === 0) return [];
      return db.selectFrom('leases').select(['name', 'owner', 'until_ms', 'note']).where('name', 'in', names).execute();
    },

    /** Of these instances, those alive: their instance lease is held and has not lapsed. */
    async alive(owners: string[], nowMs: number): Promise<Set<string>> {
      if (owners.length === 0) return new Set();
      const rows = await db
        .selectFrom('leases')
        .select('owner')
        .where('name', 'in', owners.map(instanceLease))
        .where('until_ms', '>=', nowMs)
        .execute();
      return new Set(rows.map((r) => r.owner));
    },

    /** Lets go of `owner`'s leases among `names` (all of them when omitted). */
    async release(owner: string, names?: string[]): Promise<void> {
      let q = db.deleteFrom('leases').where('owner', '=', owner);
      if (names) {
        if (names.length === 0) return;
        q = q.where('name', 'in', names);
      }
      await q.execute();
    },
  };
}

export type LeaseStore = ReturnType<typeof createLeaseStore>;

/**
 * This instance's instance lease, taken now and renewed every third of `ms` until `stop()`, which
 * lets go of it (and of every other lease the instance still holds).
 */
export async function startHeartbeat(store: LeaseStore, owner: string, ms: number, logger: Logger, now: () => number = Date.now) {
  const renew = () => store.acquire(instanceLease(owner), owner, now(), now() + ms);
  await renew();
  let renewing: Promise<unknown> | undefined;
  const timer = setInterval(() => {
    renewing ??= renew()
      .catch((err: unknown) => logger.warn({ err }, 'the instance lease could not be renewed'))
      .finally(() => (renewing = undefined));
  }, Math.max(100, Math.floor(ms / 3)));
  timer.unref();
  return {
    async stop(): Promise<void> {
      clearInterval(timer);
      await renewing;
      await store.release(owner).catch((err: unknown) => logger.warn({ err }, 'leases could not be released'));
    },
  };
}
