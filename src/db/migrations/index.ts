import { type Kysely, sql } from 'kysely';
import { type Migration, type MigrationProvider, Migrator } from 'kysely/migration';
import { type DialectKind, type MigrationDialect, migrationDialect } from '../dialect.js';

/** A step of the one chain both backends run; it branches on the dialect only through its type helpers. */
interface DialectMigration {
  up(db: Kysely<unknown>, d: MigrationDialect): Promise<void>;
}

/**
 * Every migration, in order. A new one is added here. Loaded only when one is pending: a start on
 * an up-to-date database reads the names applied and loads none of them (one module each), nor
 * runs the migrator (its lock table and a schema introspection at every start; issue 40 item 19).
 */
const MIGRATIONS: Record<string, () => Promise<DialectMigration>> = {
  '001-initial': () => import('./001-initial.js'),
  '002-knowledge': () => import('./002-knowledge.js'),
  '003-knowledge-keys': () => import('./003-knowledge-keys.js'),
  '004-conversations': () => import('./004-conversations.js'),
  '005-tool-hub': () => import('./005-tool-hub.js'),
  '006-conversation-starts': () => import('./006-conversation-starts.js'),
  '007-teams': () => import('./007-teams.js'),
  '008-ab-tests': () => import('./008-ab-tests.js'),
  '009-analytics': () => import('./009-analytics.js'),
  '010-channels': () => import('./010-channels.js'),
  '011-oauth': () => import('./011-oauth.js'),
  '012-openai-threads': () => import('./012-openai-threads.js'),
  '013-message-times': () => import('./013-message-times.js'),
  '014-postgres-keyword-index': () => import('./014-postgres-keyword-index.js'),
  '015-change-signals': () => import('./015-change-signals.js'),
  '016-postgres-postings-keys': () => import('./016-postgres-postings-keys.js'),
  '017-rate-windows': () => import('./017-rate-windows.js'),
  '018-source-leases': () => import('./018-source-leases.js'),
  '019-shared-sessions': () => import('./019-shared-sessions.js'),
  '020-leases': () => import('./020-leases.js'),
  '021-idempotency-owner': () => import('./021-idempotency-owner.js'),
  '022-tool-server-oauth': () => import('./022-tool-server-oauth.js'),
  '023-mcp-tasks': () => import('./023-mcp-tasks.js'),
  '024-mcp-events': () => import('./024-mcp-events.js'),
  '025-mcp-replies': () => import('./025-mcp-replies.js'),
  '026-persona-versions': () => import('./026-persona-versions.js'),
  '027-ab-test-versions': () => import('./027-ab-test-versions.js'),
  '028-evaluations': () => import('./028-evaluations.js'),
  '029-handoffs': () => import('./029-handoffs.js'),
  '030-handoff-outbox': () => import('./030-handoff-outbox.js'),
  '031-handoff-notifications': () => import('./031-handoff-notifications.js'),
  '032-handoff-desks': () => import('./032-handoff-desks.js'),
  '033-interaction-sources': () => import('./033-interaction-sources.js'),
  '034-tool-server-registration': () => import('./034-tool-server-registration.js'),
  '035-people': () => import('./035-people.js'),
  '036-oidc': () => import('./036-oidc.js'),
};

/**
 * Applies every pending migration (up to `target` when given: migration tests seed rows in between);
 * throws with the failing migration's error. On PostgreSQL, Kysely's migrator holds an advisory
 * lock for the run, so instances starting together migrate once.
 */
export async function runMigrations(db: Kysely<any>, kind: DialectKind, target?: string): Promise<string[]> {
  if (target === undefined && (await upToDate(db, kind))) return [];
  const d = migrationDialect(kind);
  const loaded = await Promise.all(Object.entries(MIGRATIONS).map(async ([name, load]): Promise<[string, DialectMigration]> => [name, await load()]));
  const migrations = Object.fromEntries(loaded.map(([name, m]): [string, Migration] => [name, { up: (k) => m.up(k, d) }]));
  const provider: MigrationProvider = { getMigrations: async () => migrations };
  const migrator = new Migrator({ db, provider });
  const { error, results } = await (target === undefined ? migrator.migrateToLatest() : migrator.migrateTo(target));
  if (error) throw error instanceof Error ? error : new Error(String(error));
  return (results ?? []).filter((r) => r.status === 'Success').map((r) => r.migrationName);
}

/** Kysely's migrator's table (its default name and schema). */
const MIGRATION_TABLE = 'kysely_migration';

/**
 * Whether every migration is applied, and nothing else, in the order the migrator reads them (by
 * time, then name): then it would apply none and find nothing amiss. Plain reads, no lock: a
 * database found up to date stays so. Anything else (a new database, a pending migration, one this
 * build does not know) goes to the migrator, which applies or refuses as it always did.
 */
async function upToDate(db: Kysely<any>, kind: DialectKind): Promise<boolean> {
  const exists =
    kind === 'sqlite'
      ? sql<{ found: number }>`SELECT 1 AS found FROM sqlite_master WHERE type = 'table' AND name = ${MIGRATION_TABLE}`
      : sql<{ found: number }>`SELECT 1 AS found WHERE to_regclass(${MIGRATION_TABLE}) IS NOT NULL`;
  if ((await exists.execute(db)).rows.length === 0) return false;
  const { rows } = await sql<{ name: string; timestamp: string }>`SELECT name, timestamp FROM ${sql.table(MIGRATION_TABLE)}`.execute(db);
  const at = (row: { timestamp: string }) => new Date(row.timestamp).getTime();
  if (rows.some((row) => Number.isNaN(at(row)))) return false;
  // The migrator's order (kysely/dist/migration/migrator.js, #getExecutedMigrations).
  const applied = [...rows].sort((a, b) => at(a) - at(b) || a.name.localeCompare(b.name));
  const names = Object.keys(MIGRATIONS);
  return applied.length === names.length && applied.every((row, i) => row.name === names[i]);
}
