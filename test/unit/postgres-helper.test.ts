// The PostgreSQL test helper against the run's real server: the per-file databases every
// PostgreSQL suite relies on for isolation must really be separate, and really gone after drop().
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { redactUrl } from '../helpers/postgres-global-setup.js';
import { createTestDatabase, postgresUrl, type TestDatabase, testBackends } from '../helpers/postgres.js';

const created: TestDatabase[] = [];

async function newDatabase(): Promise<TestDatabase> {
  const database = await createTestDatabase();
  created.push(database);
  return database;
}

async function connect(url: string): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  return client;
}

async function tableExists(url: string, table: string): Promise<boolean> {
  const client = await connect(url);
  try {
    const { rows } = await client.query<{ found: string | null }>('SELECT to_regclass($1)::text AS found', [table]);
    return rows[0]?.found != null;
  } finally {
    await client.end();
  }
}

async function databaseExists(name: string): Promise<boolean> {
  const client = await connect(postgresUrl()!);
  try {
    const { rowCount } = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
    return rowCount === 1;
  } finally {
    await client.end();
  }
}

const databaseName = (url: string) => new URL(url).pathname.slice(1);

describe.skipIf(!postgresUrl())('createTestDatabase', () => {
  afterAll(async () => {
    for (const database of created) await database.drop();
  });

  it('gives a fresh database that answers a query', async () => {
    const database = await newDatabase();
    expect(databaseName(database.url)).toMatch(/^sb_test_[a-z0-9]+$/);
    const client = await connect(database.url);
    try {
      const { rows } = await client.query<{ name: string; sum: number; tables: string }>(
        "SELECT current_database() AS name, 1 + 1 AS sum, (SELECT count(*) FROM pg_tables WHERE schemaname = 'public') AS tables",
      );
      expect(rows).toEqual([{ name: databaseName(database.url), sum: 2, tables: '0' }]);
    } finally {
      await client.end();
    }
  });

  it('gives two distinct databases, and a table created in one is absent from the other', async () => {
    const [a, b] = await Promise.all([newDatabase(), newDatabase()]);
    expect(databaseName(a.url)).not.toBe(databaseName(b.url));

    const client = await connect(a.url);
    try {
      await client.query('CREATE TABLE only_in_a (id integer PRIMARY KEY)');
      await client.query('INSERT INTO only_in_a VALUES (1)');
    } finally {
      await client.end();
    }

    expect(await tableExists(a.url, 'public.only_in_a')).toBe(true);
    expect(await tableExists(b.url, 'public.only_in_a')).toBe(false);
  });

  it('drop() removes the database while a connection to it is still open, and a second drop() is harmless', async () => {
    const database = await newDatabase();
    const name = databaseName(database.url);
    const open = await connect(database.url);
    const dropped = new Promise<Error>((resolve) => open.on('error', resolve));
    await open.query('CREATE TABLE t (id integer)');
    expect(await databaseExists(name)).toBe(true);

    await database.drop();

    expect(await databaseExists(name)).toBe(false);
    // The open session was ended by the server (57P01: terminating connection due to administrator command).
    expect(await dropped).toMatchObject({ code: '57P01' });
    await expect(open.query('SELECT 1')).rejects.toThrow();
    await open.end().catch(() => {});

    await database.drop();
    expect(await databaseExists(name)).toBe(false);
  });
});

describe('testBackends', () => {
  it('always lists SQLite first, and PostgreSQL exactly when the run has a server', () => {
    const kinds = testBackends().map((backend) => backend.kind);
    expect(kinds).toEqual(postgresUrl() === null ? ['sqlite'] : ['sqlite', 'postgres']);
  });
});

describe('redactUrl', () => {
  it('hides the password and keeps the rest of the URL', () => {
    const shown = redactUrl('postgres://switchboard:s3cr%40t@db.internal:6543/app?sslmode=require');
    expect(shown).toBe('postgres://switchboard:***@db.internal:6543/app?sslmode=require');
    expect(shown).not.toContain('s3cr');
  });

  it('withholds a string it cannot parse, since it may hold a password in another form', () => {
    expect(redactUrl('host=db password=hunter2')).toBe('(unparsable URL)');
  });

  it('leaves a URL without a password as it is', () => {
    expect(redactUrl('postgres://postgres@127.0.0.1:5432/postgres')).toBe('postgres://postgres@127.0.0.1:5432/postgres');
  });
});
