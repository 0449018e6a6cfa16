import type { Kysely } from 'kysely';
import { type Migration, type MigrationProvider, Migrator } from 'kysely/migration';
import { type DialectKind, type MigrationDialect, migrationDialect } from '../dialect.js';
import * as m001 from './001-initial.js';
import * as m002 from './002-knowledge.js';
import * as m003 from './003-knowledge-keys.js';
import * as m004 from './004-conversations.js';
import * as m005 from './005-tool-hub.js';
import * as m006 from './006-conversation-starts.js';
import * as m007 from './007-teams.js';
import * as m008 from './008-ab-tests.js';
import * as m009 from './009-analytics.js';
import * as m010 from './010-channels.js';
import * as m011 from './011-oauth.js';
import * as m012 from './012-openai-threads.js';
import * as m013 from './013-message-times.js';
import * as m014 from './014-postgres-keyword-index.js';
import * as m015 from './015-change-signals.js';
import * as m016 from './016-postgres-postings-keys.js';
import * as m017 from './017-rate-windows.js';
import * as m018 from './018-source-leases.js';
import * as m019 from './019-shared-sessions.js';
import * as m020 from './020-leases.js';
import * as m021 from './021-idempotency-owner.js';
import * as m022 from './022-tool-server-oauth.js';
import * as m023 from './023-mcp-tasks.js';
import * as m024 from './024-mcp-events.js';
import * as m025 from './025-mcp-replies.js';
import * as m026 from './026-persona-versions.js';
import * as m027 from './027-ab-test-versions.js';
import * as m028 from './028-evaluations.js';
import * as m029 from './029-handoffs.js';
import * as m030 from './030-handoff-outbox.js';
import * as m031 from './031-handoff-notifications.js';
import * as m032 from './032-handoff-desks.js';
import * as m033 from './033-interaction-sources.js';
import * as m034 from './034-tool-server-registration.js';

/** A step of the one chain both backends run; it branches on the dialect only through its type helpers. */
interface DialectMigration {
  up(db: Kysely<unknown>, d: MigrationDialect): Promise<void>;
}

/** Every migration, in order. A new one is imported and added here. */
const MIGRATIONS: Record<string, DialectMigration> = {
  '001-initial': m001,
  '002-knowledge': m002,
  '003-knowledge-keys': m003,
  '004-conversations': m004,
  '005-tool-hub': m005,
  '006-conversation-starts': m006,
  '007-teams': m007,
  '008-ab-tests': m008,
  '009-analytics': m009,
  '010-channels': m010,
  '011-oauth': m011,
  '012-openai-threads': m012,
  '013-message-times': m013,
  '014-postgres-keyword-index': m014,
  '015-change-signals': m015,
  '016-postgres-postings-keys': m016,
  '017-rate-windows': m017,
  '018-source-leases': m018,
  '019-shared-sessions': m019,
  '020-leases': m020,
  '021-idempotency-owner': m021,
  '022-tool-server-oauth': m022,
  '023-mcp-tasks': m023,
  '024-mcp-events': m024,
  '025-mcp-replies': m025,
  '026-persona-versions': m026,
  '027-ab-test-versions': m027,
  '028-evaluations': m028,
  '029-handoffs': m029,
  '030-handoff-outbox': m030,
  '031-handoff-notifications': m031,
  '032-handoff-desks': m032,
  '033-interaction-sources': m033,
  '034-tool-server-registration': m034,
};

/**
 * Applies every pending migration (up to `target` when given: migration tests seed rows in between);
 * throws with the failing migration's error. On PostgreSQL, Kysely's migrator holds an advisory
 * lock for the run, so instances starting together migrate once.
 */
export async function runMigrations(db: Kysely<any>, kind: DialectKind, target?: string): Promise<string[]> {
  const d = migrationDialect(kind);
  const migrations = Object.fromEntries(
    Object.entries(MIGRATIONS).map(([name, m]): [string, Migration] => [name, { up: (k) => m.up(k, d) }]),
  );
  const provider: MigrationProvider = { getMigrations: async () => migrations };
  const migrator = new Migrator({ db, provider });
  const { error, results } = await (target === undefined ? migrator.migrateToLatest() : migrator.migrateTo(target));
  if (error) throw error instanceof Error ? error : new Error(String(error));
  return (results ?? []).filter((r) => r.status === 'Success').map((r) => r.migrationName);
}
