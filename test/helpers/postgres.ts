// PostgreSQL for test files: the server chosen once by postgres-global-setup.ts (which also declares
// the `postgresUrl` key of vitest's ProvidedContext), a fresh database per test file so files keep
// running in parallel, and the list of backends a storage suite runs against.
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { inject } from 'vitest';

/** Admin URL of the run's PostgreSQL server, or null when the PostgreSQL suites are skipped. */
export function postgresUrl(): string | null {
  // undefined when a config without the globalSetup runs the file: that is "no server" too.
  return inject('postgresUrl') ?? null;
}

export type TestBackend = { kind: 'sqlite' } | { kind: 'postgres' };

/** For `describe.each(testBackends())`: SQLite always, PostgreSQL when the run has a server. */
export function testBackends(): TestBackend[] {
  return postgresUrl() === null ? [{ kind: 'sqlite' }] : [{ kind: 'sqlite' }, { kind: 'postgres' }];
}

export interface TestDatabase {
  /** Connection URL of the new, empty database (same server and credentials as the admin URL). */
  url: string;
  /** Ends every connection to the database and drops it; safe to call twice. */
  drop(): Promise<void>;
}

// Interpolated into SQL as an identifier, so it is checked rather than trusted, even though it is
// generated below: only this shape can never need quoting or escaping.
const NAME = /^sb_test_[a-z0-9]{1,55}$/;

/** `CREATE DATABASE` with a random `sb_test_…` name on the run's server. */
export async function createTestDatabase(): Promise<TestDatabase> {
  const admin = postgresUrl();
  if (admin === null) throw new Error('createTestDatabase: this run has no PostgreSQL server (see the PostgreSQL line at the start of the run)');
  const name = `sb_test_${randomBytes(10).toString('hex')}`;
  if (!NAME.test(name)) throw new Error(`createTestDatabase: refusing database name ${JSON.stringify(name)}`);

  // template0, because nobody can be connected to it: CREATE DATABASE from template1 fails while
  // any session (another test file's, a developer's psql) is connected to template1.
  await withClient(admin, (client) => client.query(`CREATE DATABASE "${name}" TEMPLATE template0`));

  const url = new URL(admin);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    drop: () =>
      withClient(admin, async (client) => {
        const exists = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
        if (exists.rowCount === 0) return;
        // No new connections first, so a pool that reconnects cannot slip in between the
        // terminations and the DROP; DROP DATABASE then waits for terminated backends to exit.
        await client.query(`ALTER DATABASE "${name}" WITH ALLOW_CONNECTIONS false`);
        await client.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()', [name]);
        await client.query(`DROP DATABASE IF EXISTS "${name}"`);
      }),
  };
}

/** Runs `work` on a connection of its own to `url`, closed afterwards. */
export async function withClient<T>(url: string, work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}
