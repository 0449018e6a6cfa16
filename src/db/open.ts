/**
 * The one place that chooses the backend (DESIGN.md, "One machine or many"): SQLite in the data
 * directory, or PostgreSQL when SWITCHBOARD_DATABASE_URL is set. Each brings its connection, its
 * migrations, its per-dialect modules and its background work; features receive these and never
 * branch on which backend it is. Each driver is loaded only when its backend is chosen.
 */
import os from 'node:os';
import path from 'node:path';
import type { Logger } from 'pino';
import type { AnalyticsReads } from '../business/analytics/analytics.store.js';
import type { Config } from '../config.js';
import type { KnowledgeDialect } from '../core/knowledge/knowledge-dialect.js';
import type { SqliteSearchIndexOptions } from '../core/knowledge/search-index.js';
import type { RateClaims } from '../http/rate-limit.js';
import type { ChangeCounters } from '../http/response-cache.js';
import type { HotWrites } from './backend.js';
import { type ChangeSignals, localChangeSignals } from './change-signals.js';
import type { Db } from './database.js';
import type { PostgresDb } from './postgres/connection.js';

export interface Backend {
  db: Db | PostgresDb;
  /** The migrations this opening applied (`switchboard migrate` prints them). */
  migrated: string[];
  knowledge: KnowledgeDialect;
  hot: HotWrites;
  /** The analytics statements whose SQL differs by dialect. */
  analytics: AnalyticsReads;
  /** The SQLite file search threads may open, or null (PostgreSQL, or SQLite in memory). */
  searchFile: string | null;
  /**
   * What tells the response cache the database is unchanged, or null for no cache: PostgreSQL's
   * other writers (instances, CLI processes) have no cheap per-request change counter yet.
   */
  changeCounters: ChangeCounters | null;
  /** The rate limit's budget shared by the instances on this database, or null (SQLite: counted in memory). */
  rateClaims: RateClaims | null;
  /** Tells the caches of every instance on this database that rows they may hold changed. */
  signals: ChangeSignals;
  /** Called at every write that commits (SQLite: starts the WAL checkpoint thread). */
  onWrite(): void;
  /** Stops the background work and closes the database. */
  close(): Promise<void>;
}

/** How often the checkpoint thread copies the WAL into the database (wal-checkpointer.ts). */
const WAL_CHECKPOINT_MS = 200;

export function databaseFile(config: Config): string {
  return path.join(config.dataDir, 'switchboard.db');
}

export async function openBackend(config: Config, logger: Logger, options: { databaseFile?: string; index?: SqliteSearchIndexOptions } = {}): Promise<Backend> {
  return config.database ? openPostgresBackend(config.database, logger, options.index) : openSqliteBackend(config, logger, options);
}

async function openSqliteBackend(config: Config, logger: Logger, options: { databaseFile?: string; index?: SqliteSearchIndexOptions }): Promise<Backend> {
  const [{ migrate, openDatabase }, { createWalCheckpointer }, { createSqliteHotWrites }, { createSqliteKnowledge }, { createWriteGroup }, { createSqliteAnalyticsReads }] = await Promise.all([
    import('./database.js'),
    import('./wal-checkpointer.js'),
    import('./sqlite/hot-writes.js'),
    import('./sqlite/knowledge.js'),
    import('./write-group.js'),
    import('./sqlite/analytics-reads.js'),
  ]);
  const filename = options.databaseFile ?? databaseFile(config);
  const db = openDatabase({ filename, durability: config.durability });
  let migrated: string[];
  try {
    migrated = await migrate(db);
  } catch (err) {
    await db.close();
    throw err;
  }
  // With a second core, WAL checkpoints leave the main thread's commits (answers, processed sources) for a thread of their own.
  const checkpointer = os.availableParallelism() > 1 ? createWalCheckpointer(db, { filename, durability: config.durability, intervalMs: WAL_CHECKPOINT_MS }, logger) : null;
  const onWrite = () => checkpointer?.start();
  return {
    db,
    migrated,
    knowledge: createSqliteKnowledge(db, options.index),
    analytics: createSqliteAnalyticsReads(db),
    // One write group for the hot path's writes (answers, channel messages): one commit per event-loop turn.
    hot: createSqliteHotWrites(db, createWriteGroup(db.sqlite, { onWrite })),
    searchFile: filename === ':memory:' ? null : filename,
    changeCounters: db,
    rateClaims: null,
    signals: localChangeSignals(),
    onWrite,
    async close() {
      try {
        await checkpointer?.close();
      } finally {
        await db.close();
      }
    },
  };
}

async function openPostgresBackend(database: NonNullable<Config['database']>, logger: Logger, index: SqliteSearchIndexOptions | undefined): Promise<Backend> {
  const [{ openPostgres, redactDatabaseUrl }, { runMigrations }, { createPostgresHotWrites }, { createPostgresKnowledge }, { createPostgresAnalyticsReads }, { sharedChangeSignals }, { createPostgresRateClaims }] = await Promise.all([
    import('./postgres/connection.js'),
    import('./migrations/index.js'),
    import('./postgres/hot-writes.js'),
    import('./postgres/knowledge.js'),
    import('./postgres/analytics-reads.js'),
    import('./change-signals.js'),
    import('./postgres/rate-claims.js'),
  ]);
  const where = redactDatabaseUrl(database.url);
  const db = await openPostgres({
    url: database.url,
    poolSize: database.poolSize,
    startupDeadlineMs: database.waitSeconds * 1000,
    onConnectionError: (err) => logger.warn({ err: err.message, database: where }, 'a PostgreSQL connection was closed; the pool replaces it'),
  });
  let migrated: string[];
  try {
    migrated = await runMigrations(db.kysely, 'postgres');
    if (migrated.length > 0) logger.info({ database: where, migrations: migrated }, 'PostgreSQL schema migrated');
  } catch (err) {
    await db.close();
    throw err;
  }
  let signals: Awaited<ReturnType<typeof sharedChangeSignals>>;
  try {
    signals = await sharedChangeSignals(db.kysely, logger);
  } catch (err) {
    await db.close();
    throw err;
  }
  return {
    db,
    migrated,
    knowledge: createPostgresKnowledge(db, index),
    analytics: createPostgresAnalyticsReads(db),
    hot: createPostgresHotWrites(db),
    searchFile: null,
    changeCounters: null,
    rateClaims: createPostgresRateClaims(db),
    signals,
    onWrite: () => {},
    async close() {
      try {
        await signals.close();
      } finally {
        await db.close();
      }
    },
  };
}
