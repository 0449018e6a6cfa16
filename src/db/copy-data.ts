/**
 * `switchboard copy-data --to postgres://…` and `--from postgres://…` (API.md §13, issue 25 item 5):
 * the whole content of the SQLite data directory moves to PostgreSQL, or back, with every primary
 * key, `seq` and `rowid` kept, so keys, sessions, cursors and references work unchanged after the move.
 *
 * - The source is read inside one read-only snapshot (a read-only SQLite connection; a REPEATABLE
 *   READ, READ ONLY transaction on PostgreSQL) and never migrated or written.
 * - The target is migrated by opening it as `serve` would (openBackend), and must not already hold
 *   the source's workspaces. A record in its `settings` (COPY_MARKER) names the source and, per
 *   table, the last key copied, written in the same transaction as each batch: a run that stops
 *   anywhere is finished by running the same command again, which continues after those keys.
 *   Rows go in with ON CONFLICT DO NOTHING, in key order, so nothing is ever copied twice.
 * - Chunks are copied as rows; the target's keyword and vector index is then built from them
 *   through its own KnowledgeDialect (`reembed` with each chunk's stored vector and the title
 *   ingestion gave it), for every copied chunk that has no binary code yet: `reembed` writes the
 *   code together with the keyword rows in one transaction, so "no code" is exactly "not indexed".
 * - PostgreSQL identity sequences are moved past the copied numbers; then every table's count is
 *   compared between source and target, and only a copy whose counts all match drops the record.
 * Sealed credentials are copied as they are: both sides must use the same SWITCHBOARD_SECRET.
 */
import fs from 'node:fs';
import path from 'node:path';
import SqliteDatabase from 'better-sqlite3';
import { Kysely, type RawBuilder, sql, SqliteDialect } from 'kysely';
import { type Config, loadConfig } from '../config.js';
import { chunkTitle } from '../core/knowledge/ingest.js';
import type { ReembeddedChunk } from '../core/knowledge/knowledge-dialect.js';
import { type SearchIndex, vectorFromBlob } from '../core/knowledge/search-index.js';
import { AppError } from '../errors.js';
import { createCipher, SECRET_KEY_FILE } from '../lib/cipher.js';
import { createLogger } from '../lib/logger.js';
import { type Backend, databaseFile, openBackend } from './open.js';
import { openPostgres, redactDatabaseUrl } from './postgres/connection.js';
import type { Database } from './schema.js';
import { progressBar } from '../lib/progress.js';

/** The `settings` key of an unfinished copy's record in the target (never copied, never counted). */
export const COPY_MARKER = 'copy_data';

/** How a table's rows belong to the source's workspaces: what the counts compare in a target that may hold others. */
type Scope = { column: string } | { via: string; parent: keyof Database } | 'global';

interface TablePlan {
  name: keyof Database;
  /** The primary key: the copy's order and its resume point. */
  key: string[];
  /** A row number PostgreSQL assigns from an identity sequence. */
  serial?: string;
  scope: Scope;
}

const WS: Scope = { column: 'workspace_id' };

/** Every table of schema.ts, parents before the rows that reference them (PostgreSQL checks foreign keys at once). */
const TABLES = [
  { name: 'workspaces', key: ['id'], scope: { column: 'id' } },
  { name: 'settings', key: ['key'], scope: 'global' },
  { name: 'users', key: ['id'], scope: 'global' },
  { name: 'oidc_identities', key: ['issuer', 'subject'], scope: 'global' },
  { name: 'memberships', key: ['workspace_id', 'user_id'], scope: WS },
  { name: 'login_sessions', key: ['id'], scope: WS },
  { name: 'invitations', key: ['id'], scope: WS },
  { name: 'audit_events', key: ['id'], scope: WS },
  { name: 'api_keys', key: ['id'], scope: WS },
  { name: 'personas', key: ['id'], scope: WS },
  { name: 'persona_versions', key: ['persona_id', 'version'], scope: WS },
  { name: 'idempotency_keys', key: ['seq'], serial: 'seq', scope: WS },
  { name: 'knowledge_sources', key: ['id'], scope: WS },
  { name: 'knowledge_chunks', key: ['rowid'], serial: 'rowid', scope: WS },
  { name: 'sessions', key: ['id'], scope: WS },
  { name: 'messages', key: ['seq'], serial: 'seq', scope: { via: 'session_id', parent: 'sessions' } },
  { name: 'interactions', key: ['seq'], serial: 'seq', scope: WS },
  { name: 'feedback', key: ['seq'], serial: 'seq', scope: WS },
  { name: 'interaction_tools', key: ['seq'], serial: 'seq', scope: WS },
  { name: 'ab_tests', key: ['id'], scope: WS },
  { name: 'channels', key: ['id'], scope: WS },
  { name: 'channel_inbox', key: ['seq'], serial: 'seq', scope: { via: 'channel_id', parent: 'channels' } },
  { name: 'channel_conversations', key: ['channel_id', 'conversation_id'], scope: { via: 'channel_id', parent: 'channels' } },
  { name: 'channel_messages', key: ['channel_id', 'external_id'], scope: { via: 'channel_id', parent: 'channels' } },
  { name: 'mcp_servers', key: ['id'], scope: WS },
  { name: 'mcp_server_oauth', key: ['server_id'], scope: WS },
  { name: 'tool_executions', key: ['id'], scope: WS },
  { name: 'teams', key: ['id'], scope: WS },
  { name: 'team_members', key: ['seq'], serial: 'seq', scope: WS },
  { name: 'oauth_clients', key: ['client_id'], scope: 'global' },
  { name: 'oauth_grants', key: ['id'], scope: WS },
  { name: 'oauth_codes', key: ['hash'], scope: { via: 'grant_id', parent: 'oauth_grants' } },
  { name: 'oauth_tokens', key: ['hash'], scope: { via: 'grant_id', parent: 'oauth_grants' } },
  { name: 'datasets', key: ['id'], scope: WS },
  { name: 'dataset_cases', key: ['id'], scope: WS },
  { name: 'eval_runs', key: ['id'], scope: WS },
  { name: 'eval_results', key: ['run_id', 'case_id'], scope: { via: 'run_id', parent: 'eval_runs' } },
  { name: 'handoffs', key: ['id'], scope: WS },
  { name: 'handoff_outbox', key: ['seq'], serial: 'seq', scope: WS },
  { name: 'handoff_notifications', key: ['seq'], serial: 'seq', scope: WS },
  { name: 'handoff_desk_threads', key: ['seq'], serial: 'seq', scope: WS },
  { name: 'openai_threads', key: ['workspace_id', 'model', 'user_key', 'history_hash'], scope: WS },
] as const satisfies readonly TablePlan[];

/**
 * Tables that hold no data, only coordination between running instances, or what a client redoes in
 * a minute (an MCP session it reopens, a consent page it asks for again, a tool server's sign-in it starts again, an MCP task it calls again, the failed sign-ins counted for a quarter of an hour, an OIDC sign-in under way): a new database starts without them.
 */
type NotData = 'change_signals' | 'rate_windows' | 'leases' | 'mcp_sessions' | 'oauth_pending' | 'mcp_server_oauth_pending' | 'mcp_tasks' | 'mcp_events' | 'mcp_replies' | 'signin_failures' | 'oidc_pending';

// A table added to schema.ts without a line above (or in NotData) fails to compile here, rather than being left behind.
type Uncopied = Exclude<keyof Database, (typeof TABLES)[number]['name'] | NotData>;
const everyTable: [Uncopied] extends [never] ? true : Uncopied = true;
void everyTable;

/** Bytes a batch aims at (chunks carry ~1.5 KB vectors, sources their whole original file). */
const BATCH_BYTES = 4 * 2 ** 20;
/** Bound parameters per statement: PostgreSQL allows 65,535, SQLite 32,766. */
const MAX_PARAMETERS = 30_000;
/** Chunks indexed per transaction of the target's index. */
const INDEX_BATCH = 1_000;

export interface CopyDataOptions {
  /** `to`: the SQLite data directory into PostgreSQL at `url`; `from`: PostgreSQL at `url` into the data directory. */
  direction: 'to' | 'from';
  url: string;
  json: boolean;
  /** The environment the command runs with: the PostgreSQL side is configured as `serve` with SWITCHBOARD_DATABASE_URL=url. */
  env: NodeJS.ProcessEnv;
  /** Tests: at most this many rows per batch. */
  batchRows?: number;
  /** Tests: called after every committed batch; throwing stops the copy there, as a crash would. */
  afterBatch?: (batch: { phase: 'copy' | 'index'; table: string; rows: number }) => void;
}

export interface CopyDataIo {
  stdout: (text: string) => void;
  stderr: (text: string) => void;
  isTTY?: boolean;
}

export interface TableCount {
  table: string;
  source: number;
  target: number;
  /** Rows this run inserted (a resumed run counts only what it added). */
  copied: number;
}

export interface CopyDataSummary {
  from: string;
  to: string;
  resumed: boolean;
  tables: TableCount[];
  rows: number;
  copied: number;
  chunksIndexed: number;
  seconds: number;
  verified: boolean;
  mismatches: string[];
}

/** The record of an unfinished copy, kept in the target's settings. */
interface Marker {
  source: string;
  startedAt: string;
  tables: Record<string, { after: unknown[]; done: number }>;
}

/** The source, read inside one read-only snapshot. */
interface Source {
  label: string;
  snapshot<T>(work: (k: Kysely<any>) => Promise<T>): Promise<T>;
  close(): Promise<void>;
}

/**
 * Runs `copy-data`; resolves to the exit code (1 when a count differs). Refusals (the secret, a
 * target that already holds the source's workspaces, an unmigrated source) throw AppError.
 */
export async function runCopyData(config: Config, options: CopyDataOptions, io: CopyDataIo): Promise<number> {
  const started = performance.now();
  const secret = checkSecret(config, options.direction);
  // The PostgreSQL side exactly as `serve` would open it with SWITCHBOARD_DATABASE_URL set (pool, wait).
  const onPostgres = loadConfig({ ...options.env, SWITCHBOARD_DATABASE_URL: options.url });
  const postgres = onPostgres.database!;
  const file = databaseFile(config);
  const sqliteLabel = `SQLite ${path.resolve(file)}`;
  const postgresLabel = `PostgreSQL ${redactDatabaseUrl(postgres.url)}`;
  const logger = createLogger('silent');

  let source: Source | undefined;
  let target: Backend | undefined;
  try {
    if (options.direction === 'to') {
      if (!fs.existsSync(file)) throw new AppError('not_found', `No SQLite database at ${file} to copy (SWITCHBOARD_DATA_DIR).`);
      source = openSqliteSource(file, sqliteLabel);
      target = await openBackend(onPostgres, logger);
    } else {
      source = await openPostgresSource(postgres, postgresLabel);
      target = await openBackend({ ...config, database: undefined }, logger);
    }
    const targetLabel = options.direction === 'to' ? postgresLabel : sqliteLabel;
    const summary = await source.snapshot((src) => copy(src, source!.label, target!, targetLabel, secret, options, io));
    summary.seconds = Math.round((performance.now() - started) / 100) / 10;
    report(summary, options, io);
    return summary.verified ? 0 : 1;
  } finally {
    await source?.close();
    await target?.close();
  }
}

/**
 * SWITCHBOARD_SECRET is required, and with a data directory that holds a generated key file it must
 * be that key: credentials are copied sealed, and the other side opens them with SWITCHBOARD_SECRET.
 */
function checkSecret(config: Config, direction: 'to' | 'from'): Buffer {
  const keyFile = path.join(config.dataDir, SECRET_KEY_FILE);
  const fileKey = fs.existsSync(keyFile) ? Buffer.from(fs.readFileSync(keyFile, 'utf8').trim(), 'base64') : null;
  if (!config.secret) {
    const hint =
      direction === 'to'
        ? fileKey
          ? `this SQLite instance seals them with the key in ${keyFile}: set SWITCHBOARD_SECRET to that file's content, for this command and for every PostgreSQL instance`
          : 'set SWITCHBOARD_SECRET to the key the SQLite instance runs with, for this command and for every PostgreSQL instance'
        : 'set SWITCHBOARD_SECRET to the key the PostgreSQL instances run with, for this command and for the SQLite instance afterwards';
    throw new AppError(
      'validation_failed',
      `copy-data needs SWITCHBOARD_SECRET. Sealed credentials (MCP servers' and channels' secrets, stored idempotent responses) are copied as they are, so both sides must open them with the same key: ${hint}.`,
    );
  }
  if (fileKey && !fileKey.equals(config.secret)) {
    throw new AppError(
      'validation_failed',
      direction === 'to'
        ? `SWITCHBOARD_SECRET differs from ${keyFile}, the key this SQLite instance seals its credentials with. They are copied sealed, so the PostgreSQL instances must run with that key: set SWITCHBOARD_SECRET to the file's content.`
        : `${keyFile} holds another key than SWITCHBOARD_SECRET. The copied credentials are sealed with SWITCHBOARD_SECRET, which the SQLite instance must run with; its own key file would then open nothing it sealed before. Copy into a data directory without ${SECRET_KEY_FILE}, or with that key as SWITCHBOARD_SECRET.`,
    );
  }
  return config.secret;
}

function openSqliteSource(file: string, label: string): Source {
  // Read-only: the source file is never written, whatever happens here.
  const sqlite = new SqliteDatabase(file, { readonly: true, fileMustExist: true });
  sqlite.pragma('busy_timeout = 5000');
  const kysely = new Kysely<any>({ dialect: new SqliteDialect({ database: sqlite }) });
  return {
    label,
    // One read transaction: every table is read from the same snapshot, whatever a running instance writes meanwhile.
    snapshot: (work) => kysely.transaction().execute(work),
    close: () => kysely.destroy(),
  };
}

async function openPostgresSource(database: NonNullable<Config['database']>, label: string): Promise<Source> {
  // Not through openBackend: that would migrate the source, which copy-data leaves untouched.
  const db = await openPostgres({ url: database.url, poolSize: 1, startupDeadlineMs: database.waitSeconds * 1000 });
  return {
    label,
    snapshot: (work) => db.kysely.transaction().setIsolationLevel('repeatable read').setAccessMode('read only').execute(work),
    close: () => db.close(),
  };
}

async function copy(src: Kysely<any>, sourceLabel: string, target: Backend, targetLabel: string, secret: Buffer, options: CopyDataOptions, io: CopyDataIo): Promise<CopyDataSummary> {
  const dst = target.db.kysely as Kysely<any>;
  const show = progressPrinter(io);
  await checkMigrations(src, dst, sourceLabel);

  const sourceSettings = (await src.selectFrom('settings').select(['key', 'value']).execute()) as { key: string; value: string }[];
  if (sourceSettings.some((s) => s.key === COPY_MARKER)) {
    throw new AppError('conflict', `${sourceLabel} is the target of an unfinished copy-data: finish that copy first (run it again), then copy from it.`);
  }
  const workspaces = (await src.selectFrom('workspaces').select(['id', 'name']).orderBy('id').execute()) as { id: string; name: string }[];
  const wsIds = workspaces.map((w) => w.id);

  const markerRow = (await dst.selectFrom('settings').select('value').where('key', '=', COPY_MARKER).executeTakeFirst()) as { value: string } | undefined;
  const existing = markerRow ? (JSON.parse(markerRow.value) as Marker) : null;
  if (existing && existing.source !== sourceLabel) {
    throw new AppError(
      'conflict',
      `${targetLabel} holds an unfinished copy from ${existing.source}: run that copy again to finish it, or copy into an empty database.`,
    );
  }
  const resumed = existing !== null;
  if (!resumed) await refuseOccupiedTarget(dst, targetLabel, workspaces, sourceSettings);
  await refuseSerialOverlap(src, dst, targetLabel, wsIds);
  await checkSealedRows(src, secret);
  const dimension = await storedDimension(src);

  const marker: Marker = existing ?? { source: sourceLabel, startedAt: new Date().toISOString(), tables: {} };
  // A plain insert: of two runs started together into one target, the second fails here.
  if (!resumed) await dst.insertInto('settings').values({ key: COPY_MARKER, value: JSON.stringify(marker) }).execute();

  // The index opens before any chunk row arrives: a SQLite target creates its vector table here, and
  // neither backend finds stored vectors to re-encode on its own (the rows below are indexed once).
  const index = dimension === null ? null : await target.knowledge.openIndex(dimension);

  const counts: TableCount[] = [];
  for (const plan of TABLES as readonly TablePlan[]) {
    const total = await countSource(src, plan, wsIds);
    const copied = await copyTable(src, dst, target.db.kind, plan, total, marker, options, show);
    counts.push({ table: plan.name, source: total, target: 0, copied });
  }

  const chunksIndexed = index === null ? 0 : await indexChunks(dst, target, index, wsIds, options, show);

  const mismatches: string[] = [];
  for (const c of counts) {
    const plan = (TABLES as readonly TablePlan[]).find((t) => t.name === c.table)!;
    c.target = await countTarget(src, dst, plan, wsIds);
    if (c.target !== c.source) mismatches.push(`${c.table} (source ${c.source}, target ${c.target})`);
  }
  if (mismatches.length === 0) await dst.deleteFrom('settings').where('key', '=', COPY_MARKER).execute();
  return {
    from: sourceLabel,
    to: targetLabel,
    resumed,
    tables: counts,
    rows: counts.reduce((n, c) => n + c.source, 0),
    copied: counts.reduce((n, c) => n + c.copied, 0),
    chunksIndexed,
    seconds: 0,
    verified: mismatches.length === 0,
    mismatches,
  };
}

/** Both databases must be at the same migration: the copy moves rows column for column. */
async function checkMigrations(src: Kysely<any>, dst: Kysely<any>, sourceLabel: string): Promise<void> {
  const names = async (k: Kysely<any>) => ((await k.selectFrom('kysely_migration').select('name').orderBy('name').execute()) as { name: string }[]).map((r) => r.name);
  let source: string[];
  try {
    source = await names(src);
  } catch {
    throw new AppError('validation_failed', `${sourceLabel} is not a Switchboard database (it has no migration table).`);
  }
  const target = await names(dst);
  const missing = target.filter((n) => !source.includes(n));
  const unknown = source.filter((n) => !target.includes(n));
  if (unknown.length > 0) {
    throw new AppError('conflict', `${sourceLabel} was migrated by a newer Switchboard (${unknown.join(', ')}): copy with that version.`);
  }
  if (missing.length > 0) {
    throw new AppError(
      'conflict',
      `${sourceLabel} lacks migrations ${missing.join(', ')}; copy-data leaves the source untouched, so migrate it first (switchboard migrate, with the source configured).`,
    );
  }
}

/** A target already holding a workspace of the source (by id, or by name, which is unique), or other settings, is refused. */
async function refuseOccupiedTarget(dst: Kysely<any>, targetLabel: string, workspaces: { id: string; name: string }[], sourceSettings: { key: string; value: string }[]): Promise<void> {
  if (workspaces.length > 0) {
    const ids = workspaces.map((w) => w.id);
    const names = workspaces.map((w) => w.name);
    const present = (await dst
      .selectFrom('workspaces')
      .select(['id', 'name'])
      .where((eb) => eb.or([eb('id', 'in', ids), eb('name', 'in', names)]))
      .orderBy('name')
      .execute()) as { id: string; name: string }[];
    if (present.length > 0) {
      throw new AppError(
        'conflict',
        `${targetLabel} already holds workspace${present.length > 1 ? 's' : ''} ${present.map((w) => `"${w.name}" (${w.id})`).join(', ')}, which the source has too. ` +
          'copy-data copies into a database without them: a new, empty one (CREATE DATABASE, or a new data directory). ' +
          'An interrupted copy-data continues when run again; this target holds no record of one.',
      );
    }
  }
  // The embedder and dimension the copied vectors come with must be the target's too (the codes' signature is the index's own).
  const targetSettings = (await dst.selectFrom('settings').select(['key', 'value']).execute()) as { key: string; value: string }[];
  const differing = sourceSettings.filter((s) => s.key !== 'vector_codes' && targetSettings.some((t) => t.key === s.key && t.value !== s.value));
  if (differing.length > 0) {
    throw new AppError(
      'conflict',
      `${targetLabel} holds knowledge of another embedder (${differing.map((s) => `${s.key}: target ${JSON.stringify(targetSettings.find((t) => t.key === s.key)!.value)}, source ${JSON.stringify(s.value)}`).join('; ')}): copy into an empty database.`,
    );
  }
}

/** Copied rows keep their `seq`/`rowid`, so a target whose other rows already use those numbers cannot take them. */
async function refuseSerialOverlap(src: Kysely<any>, dst: Kysely<any>, targetLabel: string, wsIds: string[]): Promise<void> {
  for (const plan of TABLES as readonly TablePlan[]) {
    if (!plan.serial) continue;
    const range = (await src
      .selectFrom(plan.name)
      .select([sql<number | null>`min(${sql.ref(plan.serial)})`.as('lo'), sql<number | null>`max(${sql.ref(plan.serial)})`.as('hi')])
      .executeTakeFirstOrThrow()) as { lo: number | null; hi: number | null };
    if (range.lo === null || range.hi === null) continue;
    const { n } = (await dst
      .selectFrom(plan.name)
      .select(sql<number>`count(*)`.as('n'))
      .where(sql<boolean>`${sql.ref(plan.serial)} BETWEEN ${Number(range.lo)} AND ${Number(range.hi)} AND NOT (${scopeSql(plan, wsIds)})`)
      .executeTakeFirstOrThrow()) as { n: number };
    if (Number(n) > 0) {
      throw new AppError(
        'conflict',
        `${targetLabel} holds ${n} ${plan.name} rows of other workspaces numbered ${range.lo}–${range.hi}, numbers the copied rows keep: copy into an empty database.`,
      );
    }
  }
}

/**
 * The credentials in the source must open with SWITCHBOARD_SECRET, or the target could never use
 * them: one sealed value of each kind is tried, under the associated data its feature seals it with
 * (channels.service.ts, vault.ts, idempotency.service.ts).
 */
async function checkSealedRows(src: Kysely<any>, secret: Buffer): Promise<void> {
  const cipher = createCipher(secret);
  const samples: { what: string; sealed: string; context: string }[] = [];
  const channel = (await src.selectFrom('channels').select(['id', 'secrets']).orderBy('id').limit(1).executeTakeFirst()) as { id: string; secrets: string } | undefined;
  if (channel) samples.push({ what: `channel ${channel.id}`, sealed: channel.secrets, context: `channel:${channel.id}` });
  const server = (await src.selectFrom('mcp_servers').select(['id', 'secrets']).orderBy('id').limit(1).executeTakeFirst()) as { id: string; secrets: string } | undefined;
  if (server) samples.push({ what: `MCP server ${server.id}`, sealed: server.secrets, context: `mcp-server:${server.id}` });
  const stored = (await src
    .selectFrom('idempotency_keys')
    .select(['workspace_id', 'method', 'path', 'key', 'response'])
    .where('response', 'is not', null)
    .orderBy('seq')
    .limit(1)
    .executeTakeFirst()) as { workspace_id: string; method: string; path: string; key: string; response: string } | undefined;
  if (stored) samples.push({ what: 'a stored idempotent response', sealed: stored.response, context: `idempotency:${stored.workspace_id}:${stored.method}:${stored.path}:${stored.key}` });
  for (const s of samples) {
    try {
      cipher.decrypt(s.sealed, s.context);
    } catch {
      throw new AppError(
        'validation_failed',
        `SWITCHBOARD_SECRET does not open the credentials sealed in the source (${s.what}). They are copied sealed, so SWITCHBOARD_SECRET must be the key the source instance seals with.`,
      );
    }
  }
}

/** The dimension of the stored vectors (settings 'dimension', recorded by the first indexing), or null when nothing was ever embedded. */
async function storedDimension(src: Kysely<any>): Promise<number | null> {
  const row = (await src.selectFrom('settings').select('value').where('key', '=', 'dimension').executeTakeFirst()) as { value: string } | undefined;
  const { n } = (await src.selectFrom('knowledge_chunks').select(sql<number>`count(*)`.as('n')).executeTakeFirstOrThrow()) as { n: number };
  const dimension = row ? Number(row.value) : NaN;
  if (Number.isInteger(dimension) && dimension > 0) return dimension;
  if (Number(n) > 0) throw new AppError('validation_failed', `The source holds ${n} chunks but no valid 'dimension' setting (${JSON.stringify(row?.value ?? null)}); start it once so it records one.`);
  return null;
}

/** "This row is one of the source's workspaces'" as SQL, for counts in a target that may hold other workspaces too. */
function scopeSql(plan: TablePlan, wsIds: string[]): RawBuilder<boolean> {
  if (plan.scope === 'global') return sql<boolean>`1 = 1`;
  // PostgreSQL refuses `IN ()`.
  if (wsIds.length === 0) return sql<boolean>`1 = 0`;
  const ids = sql.join(wsIds);
  if ('column' in plan.scope) return sql<boolean>`${sql.ref(plan.scope.column)} IN (${ids})`;
  return sql<boolean>`${sql.ref(plan.scope.via)} IN (SELECT id FROM ${sql.table(plan.scope.parent)} WHERE workspace_id IN (${ids}))`;
}

async function countSource(src: Kysely<any>, plan: TablePlan, wsIds: string[]): Promise<number> {
  let q = src.selectFrom(plan.name).select(sql<number>`count(*)`.as('n')).where(scopeSql(plan, wsIds));
  if (plan.name === 'settings') q = q.where('key', '<>', COPY_MARKER);
  return Number(((await q.executeTakeFirstOrThrow()) as { n: number }).n);
}

/** The target's rows of the source: those of its workspaces, or for global tables those with the source's keys. */
async function countTarget(src: Kysely<any>, dst: Kysely<any>, plan: TablePlan, wsIds: string[]): Promise<number> {
  if (plan.scope !== 'global') {
    return Number(((await dst.selectFrom(plan.name).select(sql<number>`count(*)`.as('n')).where(scopeSql(plan, wsIds)).executeTakeFirstOrThrow()) as { n: number }).n);
  }
  const key = plan.key[0]!;
  let found = 0;
  for (let after: unknown = null; ; ) {
    let q = src.selectFrom(plan.name).select(key).where(key, '<>', COPY_MARKER).orderBy(key).limit(1_000);
    if (after !== null) q = q.where(key, '>', after);
    const keys = ((await q.execute()) as Record<string, unknown>[]).map((r) => r[key]);
    if (keys.length === 0) return found;
    found += Number(((await dst.selectFrom(plan.name).select(sql<number>`count(*)`.as('n')).where(key, 'in', keys).executeTakeFirstOrThrow()) as { n: number }).n);
    after = keys[keys.length - 1];
  }
}

/** Approximate size of a row in memory and on the wire. */
function rowBytes(row: Record<string, unknown>): number {
  let n = 0;
  for (const v of Object.values(row)) n += typeof v === 'string' ? v.length : Buffer.isBuffer(v) ? v.length : 8;
  return n;
}

/**
 * Copies one table in key order, continuing after the key the marker recorded. Each batch commits
 * with its new resume point; the batch size follows the rows' size (one row first: a source's
 * content may be megabytes).
 */
async function copyTable(
  src: Kysely<any>,
  dst: Kysely<any>,
  targetKind: 'sqlite' | 'postgres',
  plan: TablePlan,
  total: number,
  marker: Marker,
  options: CopyDataOptions,
  show: Progress,
): Promise<number> {
  const keys = plan.key;
  const state = marker.tables[plan.name] ?? { after: [], done: 0 };
  let inserted = 0;
  let pageRows = 1;
  const maxRows = options.batchRows ?? Number.POSITIVE_INFINITY;
  show(state.done, total, plan.name, false);
  for (;;) {
    let q = src.selectFrom(plan.name).selectAll();
    if (plan.name === 'settings') q = q.where('key', '<>', COPY_MARKER);
    if (state.after.length > 0) q = q.where(sql<boolean>`(${sql.join(keys.map((k) => sql.ref(k)))}) > (${sql.join(state.after)})`);
    for (const k of keys) q = q.orderBy(k);
    const rows = (await q.limit(pageRows).execute()) as Record<string, unknown>[];
    if (rows.length === 0) break;
    const last = rows[rows.length - 1]!;
    const next = { after: keys.map((k) => last[k]), done: state.done + rows.length };
    marker.tables[plan.name] = next;
    try {
      await dst.transaction().execute(async (trx) => {
        const result = await trx.insertInto(plan.name).values(rows).onConflict((oc) => oc.doNothing()).executeTakeFirst();
        inserted += Number(result.numInsertedOrUpdatedRows ?? 0);
        await trx.updateTable('settings').set({ value: JSON.stringify(marker) }).where('key', '=', COPY_MARKER).execute();
      });
    } catch (err) {
      marker.tables[plan.name] = state;
      const where = state.after.length > 0 ? ` after key ${JSON.stringify(state.after)}` : '';
      throw new AppError('internal', `Copying ${plan.name}${where} failed: ${(err as Error).message}`);
    }
    Object.assign(state, next);
    show(state.done, total, plan.name, false);
    options.afterBatch?.({ phase: 'copy', table: plan.name, rows: rows.length });
    if (rows.length < pageRows) break;
    const columns = Object.keys(rows[0]!).length;
    const average = rows.reduce((n, r) => n + rowBytes(r), 0) / rows.length;
    pageRows = Math.max(1, Math.min(Math.floor(BATCH_BYTES / Math.max(average, 1)), Math.floor(MAX_PARAMETERS / columns), maxRows));
  }
  // New rows on PostgreSQL take the next number of the identity sequence, which the copied numbers passed by.
  if (plan.serial && targetKind === 'postgres') {
    await sql`
      SELECT setval(q.seq, GREATEST(q.m, COALESCE(pg_sequence_last_value(q.seq), 0)))
      FROM (SELECT pg_get_serial_sequence(${plan.name}, ${plan.serial})::regclass AS seq,
                   (SELECT max(${sql.ref(plan.serial)}) FROM ${sql.table(plan.name)}) AS m) q
      WHERE q.m IS NOT NULL`.execute(dst);
  }
  show(state.done, total, plan.name, true);
  return inserted;
}

interface ChunkToIndex {
  rowid: number;
  workspace_id: string;
  source_id: string;
  scope: string;
  text: string;
  heading_path: string;
  embedding: Buffer;
  source_name: string;
}

/**
 * Indexes the copied chunks that have no code yet, by rowid, with their stored vectors and the title
 * ingestion indexed them under (the source's name and the chunk's headings, ingest.ts chunkTitle).
 */
async function indexChunks(dst: Kysely<any>, target: Backend, index: SearchIndex, wsIds: string[], options: CopyDataOptions, show: Progress): Promise<number> {
  if (wsIds.length === 0) return 0;
  const ids = sql.join(wsIds);
  const unindexed = sql`c.workspace_id IN (${ids}) AND NOT EXISTS (SELECT 1 FROM knowledge_codes k WHERE k.rowid = c.rowid)`;
  const total = Number((await sql<{ n: number }>`SELECT count(*) AS n FROM knowledge_chunks c WHERE ${unindexed}`.execute(dst)).rows[0]!.n);
  const batch = Math.min(INDEX_BATCH, options.batchRows ?? INDEX_BATCH);
  let done = 0;
  show(0, total, 'chunks indexed', false);
  for (let after = 0; ; ) {
    const rows = (
      await sql<ChunkToIndex>`
        SELECT c.rowid AS rowid, c.workspace_id AS workspace_id, c.source_id AS source_id, c.scope AS scope, c.text AS text,
          c.heading_path AS heading_path, c.embedding AS embedding, s.name AS source_name
        FROM knowledge_chunks c JOIN knowledge_sources s ON s.id = c.source_id
        WHERE c.rowid > ${after} AND ${unindexed}
        ORDER BY c.rowid LIMIT ${batch}`.execute(dst)
    ).rows;
    if (rows.length === 0) break;
    const chunks: ReembeddedChunk[] = rows.map((r) => {
      if (r.embedding.length !== index.dimension * 4) {
        throw new AppError('internal', `Chunk ${r.rowid} has a vector of ${r.embedding.length / 4} dimensions; the index has ${index.dimension}.`);
      }
      return {
        rowid: Number(r.rowid),
        workspaceId: r.workspace_id,
        sourceId: r.source_id,
        scope: r.scope,
        title: chunkTitle(r.source_name, JSON.parse(r.heading_path) as string[]),
        text: r.text,
        vector: vectorFromBlob(r.embedding),
      };
    });
    await target.knowledge.reembed(index, chunks);
    done += rows.length;
    after = Number(rows[rows.length - 1]!.rowid);
    show(done, total, 'chunks indexed', false);
    options.afterBatch?.({ phase: 'index', table: 'knowledge_chunks', rows: rows.length });
  }
  // Instances holding a workspace's codes in memory reload them.
  if (done > 0) await target.knowledge.bumpVectorEpochs();
  show(done, total, 'chunks indexed', true);
  return done;
}

type Progress = (done: number, total: number, what: string, final: boolean) => void;

/**
 * Progress on stderr, as `ingest` and `reindex` show it: one line redrawn per table on a terminal;
 * otherwise a line per table when it is done (and at each tenth of a large one).
 */
function progressPrinter(io: CopyDataIo): Progress {
  let shownTenth = -1;
  return (done, total, what, final) => {
    const line = `${progressBar(done, total)} ${what}`;
    if (io.isTTY) {
      io.stderr(`\r\x1b[2K${line.slice(0, 120)}${final ? '\n' : ''}`);
      return;
    }
    const tenth = total === 0 ? 10 : Math.floor((done / total) * 10);
    if (final || (tenth > shownTenth && tenth < 10 && done > 0)) io.stderr(`${line}\n`);
    shownTenth = final ? -1 : Math.max(shownTenth, tenth);
  };
}

function report(summary: CopyDataSummary, options: CopyDataOptions, io: CopyDataIo): void {
  if (options.json) {
    io.stdout(`${JSON.stringify(summary)}\n`);
    return;
  }
  const lines = [
    `Copied ${summary.from} to ${summary.to}${summary.resumed ? ' (continuing an interrupted copy)' : ''} in ${summary.seconds} s: ` +
      `${summary.rows} rows in ${summary.tables.length} tables (${summary.copied} new), ${summary.chunksIndexed} chunks indexed.`,
  ];
  if (summary.verified) {
    lines.push('Every table holds as many rows as in the source.');
    lines.push(
      options.direction === 'to'
        ? 'Run Switchboard on it with SWITCHBOARD_DATABASE_URL set to that database and this same SWITCHBOARD_SECRET.'
        : 'Run Switchboard on this data directory (without SWITCHBOARD_DATABASE_URL) with this same SWITCHBOARD_SECRET.',
    );
    io.stdout(`${lines.join('\n')}\n`);
  } else {
    io.stdout(`${lines.join('\n')}\n`);
    io.stderr(`Counts differ after the copy: ${summary.mismatches.join(', ')}. The target keeps the copy's record; run the same command again once the cause is fixed.\n`);
  }
}
