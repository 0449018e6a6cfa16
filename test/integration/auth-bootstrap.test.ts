// Instances starting together on one database each run the start-up bootstrap (API.md §2, §13):
// whichever inserts the default workspace or the admin key first, every one of them must start.
import { afterEach, describe, expect, it } from 'vitest';
import { createAuthService } from '../../src/core/auth/auth.service.js';
import { createAuthStore } from '../../src/core/auth/auth.store.js';
import { generateKeySecret, hashKey } from '../../src/core/auth/keys.js';
import { systemClock } from '../../src/lib/clock.js';
import { randomIds } from '../../src/lib/ids.js';
import { testBackends } from '../helpers/postgres.js';
import { type OpenedBackend, openTestBackend } from '../helpers/sql-backend.js';

const STARTS = 6;

describe.each(testBackends())('bootstrap of instances starting together on $kind', (which) => {
  let opened: OpenedBackend | undefined;
  afterEach(async () => {
    await opened?.close();
    opened = undefined;
  });

  const services = (o: OpenedBackend) => Array.from({ length: STARTS }, () => createAuthService({ store: createAuthStore(o.backend.kysely), clock: systemClock, ids: randomIds }));

  it('with SWITCHBOARD_ADMIN_KEY: every start succeeds, one workspace, one key', async () => {
    opened = await openTestBackend(which);
    const adminKey = generateKeySecret();
    await expect(Promise.all(services(opened).map((s) => s.bootstrap(adminKey)))).resolves.toEqual(Array(STARTS).fill(null));
    const { kysely } = opened.backend;
    expect(await kysely.selectFrom('workspaces').select('name').execute()).toEqual([{ name: 'default' }]);
    expect((await kysely.selectFrom('api_keys').select('hash').execute()).map((k) => k.hash)).toEqual([hashKey(adminKey)]);
  });

  it('without it: every start succeeds, and exactly one prints a key', async () => {
    opened = await openTestBackend(which);
    const results = await Promise.all(services(opened).map((s) => s.bootstrap(undefined)));
    expect(results.filter((r) => r !== null)).toHaveLength(1);
    expect(await opened.backend.kysely.selectFrom('api_keys').select('id').execute()).toHaveLength(1);
  });
});
