/**
 * The storage backends a bench run measures (issue 25 item 7: PostgreSQL beside SQLite in the same
 * run). SQLite needs nothing; PostgreSQL rows each get a throwaway database (`CREATE DATABASE
 * sb_bench_<random>`, dropped afterwards) on the server of BENCH_DATABASE_URL, by default
 * postgres://postgres@127.0.0.1:5432/postgres, a user allowed to create databases. When that
 * server does not answer, the PostgreSQL rows are skipped with a line saying why.
 *
 * A row's code is the same for both: it receives a `BackendDatabase` and passes its `env`
 * (SWITCHBOARD_DATABASE_URL and SWITCHBOARD_SECRET on PostgreSQL, nothing on SQLite) to the
 * server it starts, as an operator would.
 */
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import { sql } from 'kysely';
import type pg from 'pg';
import type { AppContext } from '../../src/context.js';

export const BACKEND_KINDS = ['sqlite', 'postgres'] as const;
export type BackendKind = (typeof BACKEND_KINDS)[number];

export interface BenchBackend {
  kind: BackendKind;
  label: 'SQLite' | 'PostgreSQL';
  /** PostgreSQL: the admin URL throwaway databases are created with; null for SQLite. */
  adminUrl: string | null;
  /** PostgreSQL: "PostgreSQL 15.20 at postgres://…" (password hidden); null for SQLite. */
  server: string | null;
}

export const SQLITE: BenchBackend = { kind: 'sqlite', label: 'SQLite', adminUrl: null, server: null };

export const DEFAULT_ADMIN_URL = 'postgres://postgres@127.0.0.1:5432/postgres';
/** The variables that select PostgreSQL: never inherited from the caller's shell, only set per row. */
export const DATABASE_VARIABLES = ['SWITCHBOARD_DATABASE_URL', 'SWITCHBOARD_SECRET', 'SWITCHBOARD_DATABASE_POOL'] as const;
const PROBE_TIMEOUT_MS = 3_000;

/** A row's name with its backend, so SQLite and PostgreSQL rows of one case stand apart in every table. */
export const labelled = (name: string, backend: BenchBackend) => `${name} [${backend.label}]`;

/** The URL with its password hidden, for output and results files. */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return '(unparsable URL)';
  }
}

async function client(url: string, timeoutMs = PROBE_TIMEOUT_MS): Promise<pg.Client> {
  const { default: pgModule } = await import('pg');
  const c = new pgModule.Client({ connectionString: url, connectionTimeoutMillis: timeoutMs, application_name: 'switchboard-bench' });
  // A connection the server drops (the database dropped under it) must not end the bench.
  c.on('error', () => {});
  await c.connect();
  return c;
}

/**
 * The backends asked for, PostgreSQL only when its server answers: `skipped` says why it is left
 * out (printed by run.ts, written to each results file).
 */
export async function resolveBackends(requested: readonly BackendKind[]): Promise<{ backends: BenchBackend[]; skipped: string | null }> {
  const backends: BenchBackend[] = [];
  let skipped: string | null = null;
  for (const kind of requested) {
    if (kind === 'sqlite') {
      backends.push(SQLITE);
      continue;
    }
    const adminUrl = process.env.BENCH_DATABASE_URL || DEFAULT_ADMIN_URL;
    try {
      const c = await client(adminUrl);
      try {
        const version = (await c.query<{ v: string }>("SELECT split_part(version(), ' ', 2) AS v")).rows[0]?.v ?? '?';
        backends.push({ kind, label: 'PostgreSQL', adminUrl, server: `PostgreSQL ${version} at ${redactUrl(adminUrl)}` });
      } finally {
        await c.end();
      }
    } catch (err) {
      skipped = `no PostgreSQL server answers at ${redactUrl(adminUrl)} (${err instanceof Error ? err.message : String(err)}); start one or set BENCH_DATABASE_URL`;
    }
  }
  return { backends, skipped };
}

/** Where one row (or one server of a row) keeps its data. */
export interface BackendDatabase {
  backend: BenchBackend;
  /** The database's name on the server; null on SQLite (the data directory holds it). */
  name: string | null;
  /** Configuration for the server under test (env of a child, or loadConfig's input): empty on SQLite. */
  env: Record<string, string>;
  /**
   * CPU µs the database server has spent for this database so far (every backend process connected
   * to it, autovacuum included; not the WAL writer and checkpointer, which serve every database), or
   * null on SQLite, where it is the server process's own. Call before and after a window.
   */
  cpuUs(): Promise<number | null>;
  /** Ends its connections and drops it; safe to call twice. */
  drop(): Promise<void>;
}

// Interpolated into SQL as an identifier, so checked rather than trusted, though generated here.
const NAME = /^sb_bench_[a-z0-9]{1,50}$/;
const live = new Set<BackendDatabase>();

/** A fresh database for `backend`: nothing to create on SQLite (the row's data directory is enough). */
export async function createBackendDatabase(backend: BenchBackend): Promise<BackendDatabase> {
  if (backend.kind === 'sqlite' || backend.adminUrl === null) {
    return { backend, name: null, env: {}, cpuUs: async () => null, drop: async () => {} };
  }
  const adminUrl = backend.adminUrl;
  const name = `sb_bench_${randomBytes(8).toString('hex')}`;
  if (!NAME.test(name)) throw new Error(`refusing database name ${JSON.stringify(name)}`);
  const admin = await client(adminUrl);
  try {
    // template0: CREATE DATABASE from template1 fails while anyone (a test run's setup) is connected to it.
    await admin.query(`CREATE DATABASE "${name}" TEMPLATE template0`);
  } catch (err) {
    await admin.end();
    throw err;
  }
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  // Per backend process: the last CPU reading. One that exits keeps its last reading; one that
  // starts counts from zero, which is right, as it did not exist at the previous call.
  const seen = new Map<number, number>();
  let dropping: Promise<void> | undefined;
  const db: BackendDatabase = {
    backend,
    name,
    env: { SWITCHBOARD_DATABASE_URL: url.toString(), SWITCHBOARD_SECRET: randomBytes(32).toString('base64') },
    async cpuUs() {
      const { rows } = await admin.query<{ pid: number }>('SELECT pid FROM pg_stat_activity WHERE datname = $1', [name]);
      for (const { pid } of rows) {
        const us = processCpuUs(pid);
        if (us !== null) seen.set(pid, us);
      }
      let total = 0;
      for (const us of seen.values()) total += us;
      return total;
    },
    drop() {
      dropping ??= (async () => {
        live.delete(db);
        try {
          // No new connections first, so a pool that reconnects cannot slip in before the DROP.
          await admin.query(`ALTER DATABASE "${name}" WITH ALLOW_CONNECTIONS false`);
          await admin.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()', [name]);
          await admin.query(`DROP DATABASE IF EXISTS "${name}"`);
        } finally {
          await admin.end().catch(() => {});
        }
      })();
      return dropping;
    },
  };
  live.add(db);
  return db;
}

/** `work` on a fresh database of `backend`, dropped afterwards whatever happens. */
export async function withBackendDatabase<T>(backend: BenchBackend, work: (db: BackendDatabase) => Promise<T>): Promise<T> {
  const db = await createBackendDatabase(backend);
  try {
    return await work(db);
  } finally {
    await db.drop();
  }
}

/** On Ctrl-C: every throwaway database still there is dropped (after the servers using it stopped). */
export async function dropAllDatabases(): Promise<void> {
  await Promise.all([...live].map((db) => db.drop().catch(() => {})));
}

/** utime + stime of a process in µs (Linux /proc, 10 ms ticks), or null when it is gone. */
function processCpuUs(pid: number): number | null {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) * 10_000;
  } catch {
    return null;
  }
}

/** A server child's environment: the caller's, without any database selection, plus this row's. */
export function serverEnv(db: BackendDatabase, extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const name of DATABASE_VARIABLES) delete env[name];
  return { ...env, ...db.env, ...extra };
}

/** "PostgreSQL backends of this database: 1,234 µs/op (56 % of a core)", or '' on SQLite. */
export function databaseCpuNote(cpuUs: number | null, operations: number, elapsedMs: number, unit = 'op'): string {
  if (cpuUs === null) return '';
  const perOp = operations > 0 ? Math.round(cpuUs / operations) : 0;
  const percent = elapsedMs > 0 ? Math.round((cpuUs / (elapsedMs * 1000)) * 100) : 0;
  return `PostgreSQL backends of this database ${perOp.toLocaleString('en-US')} µs/${unit} (${percent} % of a core)`;
}

/**
 * PostgreSQL: VACUUM ANALYZE, what autovacuum does within a minute or so of a bulk load (inserts
 * trigger it since PostgreSQL 13), so a row measures the state a running server reaches rather than
 * the seconds after seeding. Without the statistics the planner estimates the tables as empty (the
 * keyword search then walked every chunk of the workspace: ~8× the tuples and ~30 % more database
 * CPU an answer); without the visibility map every "index-only" read of the postings also visits
 * the heap (a SciFact claim at 10k chunks: 29 ms, 16 ms after VACUUM). Nothing on SQLite, whose rows
 * stay as they were measured.
 */
export async function vacuumAnalyzeIfPostgres(db: AppContext['db']): Promise<void> {
  if (db.kind === 'postgres') await sql`VACUUM ANALYZE`.execute(db.kysely);
}
