import { Kysely, PostgresDialect, type PostgresPool, type PostgresPoolClient } from 'kysely';
import type { Pool, PoolClient, PoolConfig } from 'pg';
import type { PreparedRead, SqlBackend } from '../backend.js';
import type { Database } from '../schema.js';

export interface PostgresOptions {
  /** `postgres://user:password@host:port/database`; the password never reaches a log or an error. */
  url: string;
  /** Connections this instance may hold at once. */
  poolSize: number;
  /** How long start-up keeps retrying a server that does not answer before it gives up. */
  startupDeadlineMs?: number;
  /**
   * Reports connections the server or the network ended (a restart, a failover, a terminated
   * backend), idle or in use; the query on one fails, and the pool replaces it.
   */
  onConnectionError?: (err: Error) => void;
  /**
   * Replaces how the pool connects (tests: PGlite's node-postgres connection, an in-process
   * PostgreSQL with the pgvector extension); the URL is then only named in errors.
   */
  connect?: Partial<PoolConfig>;
}

export interface PostgresDb extends SqlBackend {
  readonly kind: 'postgres';
  kysely: Kysely<Database>;
  /** The server answers a query now (for /health). */
  ping(): Promise<boolean>;
  close(): Promise<void>;
}

/** The server did not answer within the start-up deadline: one readable line, the password left out. */
export class DatabaseUnavailableError extends Error {
  override name = 'DatabaseUnavailableError';
}

/** The URL with its password replaced, fit for logs and error messages. */
export function redactDatabaseUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    for (const name of [...u.searchParams.keys()]) if (/pass/i.test(name)) u.searchParams.set(name, '***');
    return u.toString();
  } catch {
    return 'postgres://(unparsable URL)';
  }
}

/** `?` placeholders as PostgreSQL's `$1, $2, …` (the prepared reads hold no literal question mark). */
export function numberedPlaceholders(text: string): string {
  let n = 0;
  return text.replace(/\?/g, () => `$${++n}`);
}

/** Types PostgreSQL returns as strings that stores expect as numbers (ANCHORS-storage.md, rule 3). */
const INT8 = 20;
const NUMERIC = 1700;

const DEFAULT_STARTUP_DEADLINE_MS = 30_000;
const FIRST_RETRY_MS = 250;
const MAX_RETRY_MS = 4_000;

/** A statement failed because its connection is gone: the server ended it (FATAL, class 57P) or the link broke (class 08, no code). */
function connectionLost(err: unknown): boolean {
  const { code, severity } = (err ?? {}) as { code?: unknown; severity?: unknown };
  if (severity === 'FATAL' || severity === 'PANIC') return true;
  if (typeof code === 'string') return code.startsWith('08') || code.startsWith('57P');
  return err instanceof Error && /Connection terminated|not queryable/.test(err.message);
}

/**
 * The pool as Kysely takes it, with one change: a connection whose statement failed because the
 * connection is gone goes back destroyed. pg learns that its socket closed a moment after the
 * statement failed with the server's FATAL (a terminated backend, a shutdown, a failover): Kysely
 * releases it first, and the next statement to take it would fail too. One wrapper per connection,
 * so Kysely's per-connection state stays one per connection.
 */
function droppingLost(pool: Pool): PostgresPool {
  const wrappers = new WeakMap<PoolClient, PostgresPoolClient & { lost: boolean }>();
  return {
    Client: (pool as unknown as { Client: PostgresPool['Client'] }).Client,
    options: pool.options,
    end: () => pool.end(),
    async connect() {
      const client = await pool.connect();
      let wrapper = wrappers.get(client);
      if (!wrapper) {
        const created: PostgresPoolClient & { lost: boolean } = {
          lost: false,
          get processID() {
            return (client as unknown as { processID?: number }).processID;
          },
          query: ((...args: Parameters<PoolClient['query']>) => {
            const result = (client.query as (...a: unknown[]) => unknown)(...args);
            // A cursor (not a promise) is Kysely's streaming, which this service does not use.
            if (!(result instanceof Promise)) return result;
            return result.catch((err: unknown) => {
              if (connectionLost(err)) created.lost = true;
              throw err;
            });
          }) as PostgresPoolClient['query'],
          release: (destroy?: boolean) => client.release(destroy === true || created.lost),
        };
        wrapper = created;
        wrappers.set(client, wrapper);
      }
      return wrapper;
    },
  };
}

/**
 * Opens a pool on a PostgreSQL server, waiting for it with back-off (a database that starts beside
 * the service answers a little later) up to the deadline, then failing with one readable line.
 * `pg` is imported here, so a SQLite instance never loads it (rule 7).
 */
export async function openPostgres(opts: PostgresOptions): Promise<PostgresDb> {
  const pg = (await import('pg')).default;
  const parsers = {
    // Counts, sizes and milliseconds fit a double exactly; aggregates (SUM, AVG) come back as NUMERIC.
    getTypeParser(oid: number, format?: 'text' | 'binary') {
      if (oid === INT8 || oid === NUMERIC) return (value: string) => Number(value);
      return pg.types.getTypeParser(oid, format);
    },
  };
  const config: PoolConfig = {
    connectionString: opts.url,
    max: opts.poolSize,
    types: parsers as PoolConfig['types'],
    connectionTimeoutMillis: 10_000,
    application_name: 'switchboard',
    // The JIT compiler spent ~0.4 s on first executions of the analytics statements on each new
    // connection, far more than it saved: these are short OLTP queries and index scans.
    options: '-c jit=off',
    ...opts.connect,
  };
  const pool: Pool = new pg.Pool(config);
  // A connection that ends emits an error event, and an error event nobody listens to ends the
  // process. The pool listens only while a connection is idle; Kysely holds one checked out for a
  // statement or a whole transaction, so each connection gets a listener of its own for its life.
  pool.on('connect', (client) => client.on('error', (err) => opts.onConnectionError?.(err)));
  pool.on('error', () => {}); // an idle connection's error: its own listener above reports it

  const deadline = Date.now() + (opts.startupDeadlineMs ?? DEFAULT_STARTUP_DEADLINE_MS);
  for (let wait = FIRST_RETRY_MS; ; wait = Math.min(wait * 2, MAX_RETRY_MS)) {
    try {
      await pool.query('SELECT 1');
      break;
    } catch (err) {
      if (Date.now() + wait > deadline) {
        await pool.end().catch(() => {});
        const reason = err instanceof Error ? err.message : String(err);
        const waited = Math.round((opts.startupDeadlineMs ?? DEFAULT_STARTUP_DEADLINE_MS) / 1000);
        throw new DatabaseUnavailableError(`PostgreSQL at ${redactDatabaseUrl(opts.url)} did not answer within ${waited} s: ${reason}`, { cause: err });
      }
      await new Promise((resolve) => setTimeout(resolve, wait));
    }
  }

  const kysely = new Kysely<Database>({ dialect: new PostgresDialect({ pool: droppingLost(pool) }) });
  let closed = false;
  let statements = 0;
  return {
    kind: 'postgres',
    kysely,
    prepare<Row>(text: string): PreparedRead<Row> {
      // A named statement is parsed and planned once per connection, then only bound and run.
      const name = `sb_read_${++statements}`;
      const query = numberedPlaceholders(text);
      const run = async (values: unknown[]) => (await pool.query({ name, text: query, values })).rows as Row[];
      return {
        first: async (...params) => (await run(params))[0],
        all: (...params) => run(params),
      };
    },
    async ping() {
      try {
        await pool.query('SELECT 1');
        return true;
      } catch {
        return false;
      }
    },
    async close() {
      if (closed) return;
      closed = true;
      await kysely.destroy(); // ends the pool
    },
  };
}
