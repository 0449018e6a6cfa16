// A migrated database on either backend for store-level tests: SQLite in memory, or a fresh
// PostgreSQL database of its own (test/helpers/postgres.ts) dropped when closed.
import type { AnalyticsReads } from '../../src/business/analytics/analytics.store.js';
import { createPostgresAnalyticsReads } from '../../src/db/postgres/analytics-reads.js';
import { createSqliteAnalyticsReads } from '../../src/db/sqlite/analytics-reads.js';
import type { KnowledgeDialect } from '../../src/core/knowledge/knowledge-dialect.js';
import type { SqliteSearchIndexOptions } from '../../src/core/knowledge/search-index.js';
import type { HotWrites, SqlBackend } from '../../src/db/backend.js';
import { openDatabase } from '../../src/db/database.js';
import { runMigrations } from '../../src/db/migrations/index.js';
import { openPostgres } from '../../src/db/postgres/connection.js';
import { createPostgresHotWrites } from '../../src/db/postgres/hot-writes.js';
import { createPostgresKnowledge } from '../../src/db/postgres/knowledge.js';
import { createSqliteHotWrites } from '../../src/db/sqlite/hot-writes.js';
import { createSqliteKnowledge } from '../../src/db/sqlite/knowledge.js';
import { createWriteGroup } from '../../src/db/write-group.js';
import { createTestDatabase, type TestBackend } from './postgres.js';

export interface OpenedBackend {
  backend: SqlBackend;
  /** The backend's grouped hot-path writes, with a fresh write group; `onWrite` counts groups. */
  hotWrites(onWrite?: () => void): HotWrites;
  /** The backend's analytics statements that differ by dialect. */
  analyticsReads(): AnalyticsReads;
  /** The backend's knowledge module (search index and the writes sharing its transaction). */
  knowledge(options?: SqliteSearchIndexOptions): KnowledgeDialect;
  close(): Promise<void>;
}

/** `migrateTo`: stop after this migration (to seed rows the later ones must carry); all by default. */
export async function openTestBackend(which: TestBackend, options: { migrateTo?: string; poolSize?: number } = {}): Promise<OpenedBackend> {
  if (which.kind === 'sqlite') {
    const db = openDatabase({ filename: ':memory:', durability: 'normal' });
    await runMigrations(db.kysely, 'sqlite', options.migrateTo);
    return { backend: db, hotWrites: (onWrite) => createSqliteHotWrites(db, createWriteGroup(db.sqlite, onWrite ? { onWrite } : {})), knowledge: (o) => createSqliteKnowledge(db, o), analyticsReads: () => createSqliteAnalyticsReads(db), close: () => db.close() };
  }
  const database = await createTestDatabase();
  const db = await openPostgres({ url: database.url, poolSize: options.poolSize ?? 4, startupDeadlineMs: 10_000 });
  await runMigrations(db.kysely, 'postgres', options.migrateTo);
  return {
    backend: db,
    hotWrites: (onWrite) => createPostgresHotWrites(db, onWrite ? { onWrite } : {}),
    knowledge: (o) => createPostgresKnowledge(db, o),
    analyticsReads: () => createPostgresAnalyticsReads(db),
    async close() {
      await db.close();
      await database.drop();
    },
  };
}
