/**
 * Analytics over a large recorded history (in process, the real app on a temporary database):
 *  - BENCH_ANALYTICS_ROWS interactions (default 1,000,000) over the last 60 days, written with one
 *    prepared statement in one transaction (SQLite) or one `INSERT … unnest` per 5,000 (PostgreSQL),
 *    then ANALYZE (PostgreSQL: VACUUM ANALYZE, the statistics and visibility map autovacuum keeps,
 *    without which an index-only scan visits the table): 8 personas, 4 channels (a third of answers without one),
 *    ~25 % opening a session, 2 % failed, long-tailed latencies, ~0.3 tool calls an answer (some
 *    failing) and a 1–5 rating on ~5 % of answers;
 *  - GET /business/analytics?timeframe=30d p95 (target ≤ 200 ms) and
 *    GET /business/analytics/performance?timeframe=30d p95 (target ≤ 300 ms) through `app.inject`
 *    (routing, validation, service, SQLite, serialization), one request at a time;
 *  - POST /business/analytics/export of every interaction (dataset `answers`) as CSV over a real
 *    socket, read by fetch in this process: time, rows/s, and the process's RSS and heap (before,
 *    sampled peak, after);
 *  - the same for dataset `messages` (the text) over BENCH_ANALYTICS_EXCHANGES exchanges (default
 *    200,000: a question of 60–300 characters and an answer of 200–1,200, 4 exchanges a session,
 *    1 in 8 with a tool round) in another workspace, with as many messages of a third workspace
 *    interleaved in the same days, which the export must step over.
 * The two p95 rows run on each backend of the run, labelled with it (issue 25: a throwaway
 * PostgreSQL database, target p95 ≤ 300 ms for both), with the CPU of the database's PostgreSQL
 * processes; the exports on SQLite.
 */
import { systemActor } from '../src/core/auth/actor.js';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { type Kysely, sql } from 'kysely';
import { buildApp } from '../src/app.js';
import { loadConfig } from '../src/config.js';
import { type AppContext, createContext } from '../src/context.js';
import type { Database } from '../src/db/schema.js';
import { type BackendDatabase, type BenchBackend, databaseCpuNote, labelled, withBackendDatabase } from './lib/backends.js';
import { type BenchOptions, type BenchRow, fmt } from './lib/harness.js';
import { type MetricRow, metricRow, metricTable, startWindow } from './lib/in-process.js';

export const name = 'analytics';
export const backends = ['sqlite', 'postgres'] as const;
export const description =
  'analytics overview and performance p95 over 1M recorded interactions (30d), on SQLite and PostgreSQL; a 1M-row CSV export of answers and a 200k-row CSV export of messages: time and RSS';

const DAY_MS = 86_400_000;
const SPAN_DAYS = 60;
const CONVERSATION_DAYS = 30;
const WARMUP = 3;
const MEASURED = 30;
/** p95 targets per backend (PostgreSQL's: issue 25, "analytics 30d over 1M interactions ≤ 300 ms"). */
const OVERVIEW_P95_MS: Record<BenchBackend['kind'], number> = { sqlite: 200, postgres: 300 };
const PERFORMANCE_P95_MS: Record<BenchBackend['kind'], number> = { sqlite: 300, postgres: 300 };
const TOOLS = ['knowledge.search', 'crm.lookup', 'tickets.create', 'weather.get'];

function countOf(variable: string, fallback: string): number {
  const raw = process.env[variable] ?? fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1_000) throw new Error(`${variable}=${raw}: expected a whole number ≥ 1000`);
  return n;
}

const mib = (bytes: number) => Math.round(bytes / 2 ** 20);

/** Deterministic xorshift in [0, 1). */
function prng(seed: number) {
  let s = seed >>> 0 || 1;
  return () => {
    s ^= s << 13;
    s >>>= 0;
    s ^= s >>> 17;
    s ^= s << 5;
    s >>>= 0;
    return s / 2 ** 32;
  };
}

/** The generated tables and their columns, in the order `generate` gives values: one list for both backends' statements. */
const HISTORY_COLUMNS = {
  interactions: [
    ['workspace_id', 'text'], ['persona_id', 'text'], ['channel_id', 'text'], ['user_id', 'text'], ['model', 'text'], ['started_at', 'text'], ['latency_ms', 'bigint'],
    ['ttft_ms', 'bigint'], ['prompt_tokens', 'bigint'], ['completion_tokens', 'bigint'], ['tool_calls', 'bigint'], ['error', 'text'], ['rating', 'bigint'], ['new_session', 'bigint'],
  ],
  interaction_tools: [['workspace_id', 'text'], ['started_at', 'text'], ['persona_id', 'text'], ['channel_id', 'text'], ['tool_name', 'text'], ['is_error', 'bigint']],
  feedback: [['workspace_id', 'text'], ['persona_id', 'text'], ['channel_id', 'text'], ['rating', 'bigint'], ['created_at', 'text']],
} as const satisfies Record<string, readonly (readonly [string, 'text' | 'bigint'])[]>;
type HistoryTable = keyof typeof HISTORY_COLUMNS;

/** Where generated rows go; `flush` after each slice of interactions, `close` once at the end. */
export interface HistoryWriter {
  add(table: HistoryTable, values: unknown[]): void;
  flush(): Promise<void>;
  close(): Promise<void>;
}

/** SQLite: one prepared statement per table, every row in one transaction (as the SQLite rows were always written). */
function sqliteHistoryWriter(sqlite: import('better-sqlite3').Database): HistoryWriter {
  const insert = Object.fromEntries(
    Object.entries(HISTORY_COLUMNS).map(([table, columns]) => [
      table,
      sqlite.prepare(`INSERT INTO ${table} (${columns.map(([c]) => c).join(', ')}) VALUES (${columns.map(() => '?').join(', ')})`),
    ]),
  ) as Record<HistoryTable, import('better-sqlite3').Statement>;
  sqlite.exec('BEGIN');
  return {
    add: (table, values) => void insert[table].run(...values),
    flush: async () => {},
    close: async () => void sqlite.exec('COMMIT'),
  };
}

/**
 * PostgreSQL: each slice's rows of a table as one `INSERT … SELECT FROM unnest(<one array per
 * column>)`, a statement of a fixed shape whatever the number of rows (a multi-row VALUES list of
 * thousands of rows would be parsed anew each time).
 */
function postgresHistoryWriter(kysely: Kysely<Database>): HistoryWriter {
  const buffers = Object.fromEntries(Object.entries(HISTORY_COLUMNS).map(([table, columns]) => [table, columns.map(() => [] as unknown[])])) as Record<HistoryTable, unknown[][]>;
  return {
    add(table, values) {
      const columns = buffers[table];
      for (let c = 0; c < values.length; c++) columns[c]!.push(values[c]);
    },
    async flush() {
      for (const table of Object.keys(HISTORY_COLUMNS) as HistoryTable[]) {
        const columns = HISTORY_COLUMNS[table];
        const data = buffers[table];
        if (data[0]!.length === 0) continue;
        const arrays = sql.join(columns.map(([, type], c) => sql`CAST(${data[c]} AS ${sql.raw(type)}[])`));
        await sql`INSERT INTO ${sql.table(table)} (${sql.join(columns.map(([c]) => sql.ref(c)))}) SELECT * FROM unnest(${arrays})`.execute(kysely);
        for (const column of data) column.length = 0;
      }
    },
    async close() {
      await this.flush();
    },
  };
}

/** Interactions generated between two flushes (PostgreSQL: rows per statement). */
const SLICE = 5_000;

/**
 * `rows` interactions over the last SPAN_DAYS, with their tool calls and ratings, through `writer`:
 * the same rows, in the same order, on either backend (one seeded generator).
 */
export async function generate(writer: HistoryWriter, workspaceId: string, personas: string[], rows: number, now: number) {
  const rnd = prng(20_260_310);
  const start = now - SPAN_DAYS * DAY_MS;
  let tools = 0;
  let ratings = 0;
  for (let i = 0; i < rows; i++) {
    const at = new Date(start + Math.floor((i / rows) * SPAN_DAYS * DAY_MS)).toISOString();
    const persona = personas[Math.floor(rnd() * personas.length)]!;
    const c = Math.floor(rnd() * 6);
    const channel = c < 4 ? `chn_bench${c}` : null;
    const failed = rnd() < 0.02;
    // Long tail: most answers 0.3–2 s, a few up to ~30 s.
    const latency = Math.round(300 + 1_700 * rnd() ** 2 + (rnd() < 0.03 ? 28_000 * rnd() : 0));
    const calls = rnd() < 0.25 ? 1 + Math.floor(rnd() * 2) : 0;
    const rating = !failed && rnd() < 0.05 ? 1 + Math.floor(rnd() * 5) : null;
    writer.add('interactions', [workspaceId, persona, channel, `user${Math.floor(rnd() * 5_000)}`, 'gpt-4o-mini', at, latency, failed ? null : Math.round(latency * 0.3), 400 + Math.floor(rnd() * 800), failed ? 0 : 50 + Math.floor(rnd() * 300), calls, failed ? 'upstream_error' : null, rating, rnd() < 0.25 ? 1 : 0]);
    for (let k = 0; k < calls; k++, tools++) writer.add('interaction_tools', [workspaceId, at, persona, channel, TOOLS[Math.floor(rnd() * TOOLS.length)]!, rnd() < 0.05 ? 1 : 0]);
    if (rating !== null) {
      writer.add('feedback', [workspaceId, persona, channel, rating, at]);
      ratings++;
    }
    if ((i + 1) % SLICE === 0) await writer.flush();
  }
  await writer.close();
  return { tools, ratings };
}

const EXCHANGES_PER_SESSION = 4;
const WORDS = 'the order refund invoice shipping account password delivery billing support answer question policy days business contact team'.split(' ');

/**
 * `exchanges` conversations' worth of sessions, messages and interactions over the last
 * CONVERSATION_DAYS, as the chat store writes them (a question, an optional tool round, the answer,
 * one interaction per answer), alternating between `workspaceId` and `noiseWorkspaceId`. Returns
 * the number of messages the `messages` export of `workspaceId` holds (questions and answers).
 */
export function generateConversations(sqlite: import('better-sqlite3').Database, workspaceId: string, noiseWorkspaceId: string, personas: Record<string, string>, exchanges: number, now: number) {
  const session = sqlite.prepare(
    `INSERT INTO sessions (id, workspace_id, persona_id, ab_test_id, variant, channel_id, user_id, title, message_count, created_at, last_message_at)
     VALUES (?, ?, ?, NULL, NULL, NULL, ?, ?, ?, ?, ?)`,
  );
  const message = sqlite.prepare('INSERT INTO messages (id, session_id, role, content, tool_calls, tool_call_id, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)');
  const interaction = sqlite.prepare(
    `INSERT INTO interactions (workspace_id, session_id, message_id, persona_id, user_id, model, started_at, latency_ms, prompt_tokens, completion_tokens, tool_calls, new_session)
     VALUES (?, ?, ?, ?, ?, 'gpt-4o-mini', ?, ?, ?, ?, ?, ?)`,
  );
  const touch = sqlite.prepare('UPDATE sessions SET message_count = ?, last_message_at = ? WHERE id = ?');
  const rnd = prng(20_261_124);
  const text = (min: number, max: number) => {
    const target = min + Math.floor(rnd() * (max - min));
    let out = '';
    while (out.length < target) out += `${WORDS[Math.floor(rnd() * WORDS.length)]} `;
    return out.trimEnd();
  };
  const start = now - CONVERSATION_DAYS * DAY_MS;
  let exported = 0;
  let msg = 0;
  sqlite.transaction(() => {
    for (let i = 0; i < exchanges; i += EXCHANGES_PER_SESSION) {
      const mine = (i / EXCHANGES_PER_SESSION) % 2 === 0;
      const ws = mine ? workspaceId : noiseWorkspaceId;
      const sessionId = `ses_bench${i}`;
      const user = `user${Math.floor(rnd() * 5_000)}`;
      const n = Math.min(EXCHANGES_PER_SESSION, exchanges - i);
      const at = (k: number) => new Date(start + Math.floor(((i + k) / exchanges) * CONVERSATION_DAYS * DAY_MS)).toISOString();
      let count = 0;
      const rows: Array<[string, string, string | null, string | null]> = [];
      for (let k = 0; k < n; k++) {
        const time = at(k);
        const tool = rnd() < 1 / 8;
        const answerId = `msg_bench${msg++}`;
        rows.length = 0;
        rows.push(['user', text(60, 300), null, null]);
        if (tool) rows.push(['assistant', '', '[{"id":"call_1","name":"knowledge.search","arguments":{},"result":[],"isError":false}]', null], ['tool', '[]', null, 'call_1']);
        if (k === 0) session.run(sessionId, ws, personas[ws]!, user, rows[0]![1].slice(0, 60), 0, time, time);
        for (const [role, content, toolCalls, toolCallId] of rows) message.run(`msg_bench${msg++}`, sessionId, role, content, toolCalls, toolCallId, time);
        message.run(answerId, sessionId, 'assistant', text(200, 1_200), null, null, time);
        count += rows.length + 1;
        interaction.run(ws, sessionId, answerId, personas[ws]!, user, time, 300 + Math.floor(rnd() * 1_700), 400 + Math.floor(rnd() * 800), 50 + Math.floor(rnd() * 300), tool ? 1 : 0, k === 0 ? 1 : 0);
        if (mine) exported += 2;
      }
      touch.run(count, at(n - 1), sessionId);
    }
  })();
  return exported;
}

export async function run(options: BenchOptions): Promise<BenchRow[]> {
  const rows = countOf('BENCH_ANALYTICS_ROWS', '1000000');
  const exchanges = countOf('BENCH_ANALYTICS_EXCHANGES', '200000');
  const out: MetricRow[] = [];
  for (const backend of options.backends) out.push(...(await withBackendDatabase(backend, (db) => runOn(db, rows, exchanges))));
  console.log(`\n${metricTable(out)}`);
  return out;
}

/** Brings the planner's statistics (and on PostgreSQL the visibility map) up to date after the bulk load; answers the database's size. */
async function settle(ctx: AppContext, dataDir: string): Promise<number> {
  if (ctx.db.kind === 'sqlite') {
    ctx.db.sqlite.pragma('wal_checkpoint(TRUNCATE)');
    ctx.db.sqlite.exec('ANALYZE');
    return fs.statSync(path.join(dataDir, 'switchboard.db')).size;
  }
  for (const table of ['interactions', 'interaction_tools', 'feedback'] as const) await sql`VACUUM ANALYZE ${sql.table(table)}`.execute(ctx.db.kysely);
  const size = await sql<{ bytes: number }>`SELECT pg_database_size(current_database()) AS bytes`.execute(ctx.db.kysely);
  return Number(size.rows[0]?.bytes ?? 0);
}

/** The rows on one backend: the two p95 rows, then (SQLite) the exports. */
async function runOn(db: BackendDatabase, rows: number, exchanges: number): Promise<MetricRow[]> {
  const { backend } = db;
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'switchboard-bench-analytics-'));
  const ctx = await createContext(loadConfig({ SWITCHBOARD_DATA_DIR: dataDir, LOG_LEVEL: 'silent', SWITCHBOARD_RATE_LIMIT: '0', ...db.env }));
  const app = await buildApp(ctx);
  const out: MetricRow[] = [];
  try {
    const { workspace, key } = await ctx.services.auth.createWorkspace('bench');
    const personas: string[] = [];
    for (let p = 0; p < 8; p++) personas.push((await ctx.services.personas.create(systemActor(workspace.id), { name: `P${p}`, instructions: 'x', traits: [], tools: [] })).id);
    process.stdout.write(`  writing ${fmt(rows)} interactions over ${SPAN_DAYS} days into ${backend.label}... `);
    const gen = startWindow();
    const writer = ctx.db.kind === 'sqlite' ? sqliteHistoryWriter(ctx.db.sqlite) : postgresHistoryWriter(ctx.db.kysely);
    const extra = await generate(writer, workspace.id, personas, rows, ctx.clock.now().getTime());
    const generated = gen();
    process.stdout.write(`${(generated.elapsedMs / 1000).toFixed(1)} s (+${fmt(extra.tools)} tool calls, ${fmt(extra.ratings)} ratings)\n`);
    let conversations: { messages: number; talkKey: string; note: string } | null = null;
    if (ctx.db.kind === 'sqlite') {
      const talk = await ctx.services.auth.createWorkspace('bench-conversations');
      const noise = await ctx.services.auth.createWorkspace('bench-noise');
      const talkPersonas: Record<string, string> = {};
      for (const ws of [talk.workspace.id, noise.workspace.id]) {
        talkPersonas[ws] = (await ctx.services.personas.create(systemActor(ws), { name: 'Support', instructions: 'x', traits: [], tools: [] })).id;
      }
      process.stdout.write(`  writing ${fmt(exchanges)} exchanges over ${CONVERSATION_DAYS} days in two workspaces... `);
      const talkWindow = startWindow();
      const messages = generateConversations(ctx.db.sqlite, talk.workspace.id, noise.workspace.id, talkPersonas, exchanges, ctx.clock.now().getTime());
      const talkGenerated = talkWindow();
      process.stdout.write(`${(talkGenerated.elapsedMs / 1000).toFixed(1)} s (${fmt(messages)} messages to export)\n`);
      conversations = {
        messages,
        talkKey: talk.key.key,
        note: `${fmt(exchanges)} exchanges over ${CONVERSATION_DAYS} days in two workspaces (1 in 8 with a tool round, left out of the export), written in ${(talkGenerated.elapsedMs / 1000).toFixed(1)} s; this workspace's questions and answers: ${fmt(messages)}`,
      };
    }
    const settling = startWindow();
    const dbBytes = await settle(ctx, dataDir);
    const settled = settling();
    const settleNote = ctx.db.kind === 'postgres' ? `; VACUUM ANALYZE ${(settled.elapsedMs / 1000).toFixed(1)} s` : '';
    const dataNote = `${fmt(rows)} interactions over ${SPAN_DAYS} days (${fmt(extra.tools)} tool calls, ${fmt(extra.ratings)} ratings), written in ${(generated.elapsedMs / 1000).toFixed(1)} s${settleNote}; database ${mib(dbBytes)} MiB`;

    const headers = { authorization: `Bearer ${key.key}` };
    for (const [url, target] of [
      ['/business/analytics?timeframe=30d', OVERVIEW_P95_MS[backend.kind]],
      ['/business/analytics/performance?timeframe=30d', PERFORMANCE_P95_MS[backend.kind]],
    ] as const) {
      const call = async () => {
        const res = await app.inject({ method: 'GET', url, headers });
        if (res.statusCode !== 200) throw new Error(`${url}: HTTP ${res.statusCode} ${res.body.slice(0, 300)}`);
        return res.json();
      };
      for (let i = 0; i < WARMUP; i++) await call();
      const latencies: number[] = [];
      const databaseBefore = await db.cpuUs();
      const window = startWindow();
      let sample: unknown;
      for (let i = 0; i < MEASURED; i++) {
        const t0 = performance.now();
        sample = await call();
        latencies.push(performance.now() - t0);
      }
      const w = window();
      const databaseAfter = await db.cpuUs();
      const databaseCpuUs = databaseBefore === null || databaseAfter === null ? null : databaseAfter - databaseBefore;
      const sorted = [...latencies].sort((a, b) => a - b);
      const p95 = Math.round(sorted[Math.ceil(0.95 * sorted.length) - 1]! * 10) / 10;
      const counted = JSON.stringify(sample).slice(0, 160);
      const database = databaseCpuNote(databaseCpuUs, MEASURED, w.elapsedMs, 'request');
      out.push(
        metricRow({
          name: labelled(`GET ${url}`, backend),
          backend: backend.kind,
          metric: 'p95 ms',
          value: p95,
          target: { kind: 'max', value: target },
          operations: MEASURED,
          window: w,
          latenciesMs: latencies,
          databaseCpuUs,
          notes: [
            `${dataNote}; ${WARMUP} warm-up + ${MEASURED} requests one at a time via app.inject; this process ${fmt(w.cpuUs / MEASURED)} µs/request${database ? `, ${database}` : ''}; answer starts ${counted}…`,
          ],
        }),
      );
      process.stdout.write(`  ${url} on ${backend.label}: p50 ${out.at(-1)!.latencyP50Ms} ms, p95 ${p95} ms\n`);
    }
    if (!conversations) return out;

    await app.listen({ port: 0, host: '127.0.0.1' });
    const origin = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
    const exportCsv = async (dataset: string, timeframe: string, key: string) => {
      const res = await fetch(`${origin}/business/analytics/export`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ timeframe, dataset, format: 'csv' }),
      });
      if (res.status !== 200 || !res.body) throw new Error(`export: HTTP ${res.status}`);
      let bytes = 0;
      let lines = 0;
      for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
        bytes += chunk.length;
        for (let i = 0; i < chunk.length; i++) if (chunk[i] === 10) lines++;
      }
      return { bytes, lines };
    };
    /** One export measured after a warm-up run: time, rows/s, RSS and heap (before, sampled peak, after). */
    const measureExport = async (dataset: string, timeframe: string, key: string, expected: number, what: string, note: string) => {
      // The first run pages the table in through SQLite's memory map (file pages count in RSS); the second is measured.
      process.stdout.write(`  exporting ${what} as CSV (warm-up run, then measured)... `);
      await exportCsv(dataset, timeframe, key);
      global.gc?.();
      const before = process.memoryUsage();
      let peakRss = before.rss;
      let peakHeap = before.heapUsed;
      const sampler = setInterval(() => {
        const m = process.memoryUsage();
        peakRss = Math.max(peakRss, m.rss);
        peakHeap = Math.max(peakHeap, m.heapUsed);
      }, 20);
      const window = startWindow();
      const file = await exportCsv(dataset, timeframe, key);
      const w = window();
      clearInterval(sampler);
      const after = process.memoryUsage();
      if (file.lines !== expected + 1) throw new Error(`export ${dataset}: ${file.lines} lines for ${expected} rows`);
      const seconds = Math.round(w.elapsedMs / 100) / 10;
      process.stdout.write(`${seconds} s, RSS ${mib(before.rss)} → peak ${mib(peakRss)} → ${mib(after.rss)} MiB\n`);
      out.push(
        metricRow({
          name: `POST /business/analytics/export ${dataset} csv (${fmt(expected)} rows)`,
          metric: 'seconds',
          value: seconds,
          operations: expected,
          window: w,
          notes: [
            note,
            `${mib(file.bytes)} MiB of CSV, ${fmt(expected / (w.elapsedMs / 1000))} rows/s, streamed over a socket and read by fetch in the same process`,
            `RSS before ${mib(before.rss)} MiB, sampled peak ${mib(peakRss)} MiB (+${mib(peakRss - before.rss)}), after ${mib(after.rss)} MiB; heap used before ${mib(before.heapUsed)} MiB, peak ${mib(peakHeap)} MiB, after ${mib(after.heapUsed)} MiB`,
          ],
        }),
        metricRow({
          name: `export ${dataset} peak RSS growth`,
          metric: 'MiB',
          value: mib(peakRss - before.rss),
          operations: expected,
          notes: ['peak RSS sampled every 20 ms minus RSS before the measured export (after a warm-up export that paged the table in)'],
        }),
      );
    };
    await measureExport('answers', `${SPAN_DAYS + 1}d`, key.key, rows, 'every interaction', dataNote);
    await measureExport('messages', `${CONVERSATION_DAYS + 1}d`, conversations.talkKey, conversations.messages, `every message of ${fmt(exchanges / 2)} exchanges`, conversations.note);
  } finally {
    await app.close();
    await ctx.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
  return out;
}
