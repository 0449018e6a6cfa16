/**
 * Conversations (API.md §5–§6) against a zero-latency fake OpenAI-compatible model, so what is
 * measured is the platform: auth, the persona, a hybrid search of a 200-article knowledge base, the
 * prompt, the model client, streaming and storing the exchange. Three processes: this one (load
 * generator), the Switchboard server (`switchboard-chat`, its own core) and the fake model
 * (`fake-model.ts`, on the load generator's core). Rows:
 *  - the fake model called directly by 10 clients (the baseline), then `POST /query` by 10 clients:
 *    platform overhead = Switchboard's p50/p95 minus the fake's (target: p95 overhead ≤ 20 ms);
 *  - `POST /query` by 50 clients (target ≥ 1,000 queries/s, p99 ≤ 100 ms);
 *  - time to first chunk by one sequential client, `POST /query/stream` to the first `text` chunk
 *    minus the fake's own time to its first content chunk, alternating (target: p50 ≤ 5 ms);
 *  - 1,000 and 5,000 chat streams open at once (`POST /query/stream`, the fake holding each one open
 *    and sending a token every 2 s): the server's heap growth once all have their first chunk, after
 *    a full GC (target < 200 MB), RSS growth and KB per stream; every stream must then end with
 *    `done` and `[DONE]` once the fake is told to finish;
 *  - with the offline model (no model process): `POST /query` by 50 clients (target ≥ 1,500/s), then
 *    follow-ups by 50 clients in 1,000 sessions opened first, in turn (each reads its session and
 *    latest turns before answering; sessions grow by ~40 messages in the run; no target).
 * On PostgreSQL too (issue 25, a throwaway database, the same seeding and warm-up): `POST /query` by
 * 50 clients (target ≥ 1,000 answers/s), labelled with its backend beside the SQLite row, with the
 * CPU of the database's PostgreSQL processes.
 * Questions cycle through 50 about the knowledge base's topics. The fake sees exactly what the
 * platform sends it, and the baseline replays those bodies. Knobs (environment):
 * BENCH_CHAT_STREAMS (stream counts, default "1000,5000"; "0" skips the stream cases), BENCH_CHAT_CASES
 * ("requests", "streams" or both, the default, comma-separated),
 * BENCH_CHAT_STREAM_BATCH (streams opened at a time, default 200), BENCH_CHAT_TOKEN_MS (token
 * interval of a held stream, default 2000). `--connections` does not apply: the targets name theirs.
 */
import http from 'node:http';
import { type BenchOptions, type BenchRow, expectResponse, measureWithLatencies, nearestRank, plainRow, round, fmt, progress, ms, cpuUs } from './lib/harness.js';
import { chatQuestions } from './lib/chat-corpus.js';
import { type FakeModelProcess, startFakeModel } from './lib/fake-model-process.js';
import { envInt, type FiguredRow, judge, type MetricRow, metricTable, sampled } from './lib/in-process.js';
import { type BackendDatabase, labelled, withBackendDatabase } from './lib/backends.js';
import { type ServerProcess, startServerProcess } from './lib/server-process.js';
import { CHAT_SOURCE_COUNT, FAKE_MODEL_URL_ENV } from './lib/server-protocol.js';
import { classifyModel, classifyPlatform, openSse, type SseOutcome } from './lib/sse-client.js';


export const name = 'chat';
export const backends = ['sqlite', 'postgres'] as const;
export const description =
  'POST /query at 50 clients (answers/s and p99, on SQLite and PostgreSQL) and its overhead over a zero-latency fake model at 10, time to first chunk, server heap with 1,000 and 5,000 open chat streams, offline answers and follow-ups';

const OVERHEAD_CLIENTS = 10;
const OVERHEAD_P95_TARGET_MS = 20;
const THROUGHPUT_CLIENTS = 50;
const THROUGHPUT_TARGET = 1_000;
const THROUGHPUT_P99_TARGET_MS = 100;
const OFFLINE_TARGET = 1_500;
/** Sessions the follow-up row continues, in turn. */
const FOLLOW_UP_SESSIONS = 1_000;
const TTFT_P50_TARGET_MS = 5;
const HEAP_GROWTH_TARGET_MB = 200;
const QUESTIONS = 50;
/** The fake never needs a real key; Switchboard's client sends it as the bearer. */
const MODEL_KEY = 'sk-bench-not-a-real-key';
const MB = 1_000_000;
const IDLE_TIMEOUT_MS = 120_000;
/** How long a batch of streams may take to see its first chunks, and all streams to end after `finish`. */
const BATCH_TIMEOUT_MS = 60_000;
const FINISH_TIMEOUT_MS = 120_000;

/** A row judged on its own figure (MetricRow, as the knowledge suite's), with the figures behind it. */
export type ChatRow = FiguredRow;


function envStreams(): number[] {
  const raw = process.env.BENCH_CHAT_STREAMS;
  const counts = (raw ?? '1000,5000').split(',').map((s) => Number(s.trim()));
  if (!counts.every((n) => Number.isInteger(n) && n >= 0)) throw new Error(`BENCH_CHAT_STREAMS=${raw}: expected stream counts, e.g. 1000,5000`);
  return counts.filter((n) => n > 0);
}

const CASES = ['requests', 'offline', 'streams'] as const;

function envCases(): Set<(typeof CASES)[number]> {
  const raw = process.env.BENCH_CHAT_CASES;
  const names = (raw ?? CASES.join(',')).split(',').map((s) => s.trim()).filter(Boolean);
  const unknown = names.filter((n) => !(CASES as readonly string[]).includes(n));
  if (names.length === 0 || unknown.length > 0) throw new Error(`BENCH_CHAT_CASES=${raw}: expected ${CASES.join(' and/or ')}`);
  return new Set(names as (typeof CASES)[number][]);
}






/**
 * `fake` null: the offline model. `pinned` false: the server's threads (the main one and the search
 * thread) may run on both cores, beside the fake model and the load generator, as issue 18 measures
 * answers/s "on 2 cores".
 */
async function startChatServer(
  fake: FakeModelProcess | null,
  options: BenchOptions,
  { exposeGc = false, pinned = true, db }: { exposeGc?: boolean; pinned?: boolean; db?: BackendDatabase } = {},
): Promise<ServerProcess & { personaId: string; key: string }> {
  const started = performance.now();
  const server = await startServerProcess('switchboard-chat', {
    cpuProfileDir: options.cpuProfileDir,
    cpu: pinned ? options.pinning?.server : 'any',
    env: { ...db?.env, ...(fake ? { [FAKE_MODEL_URL_ENV]: fake.baseUrl } : {}) },
    exposeGc,
  });
  if (!server.key || !server.personaId) {
    await server.stop();
    throw new Error('the switchboard-chat server reported no key or persona');
  }
  progress(`switchboard-chat server up in ${((performance.now() - started) / 1000).toFixed(1)} s (${CHAT_SOURCE_COUNT} knowledge sources${db ? `, ${db.backend.label}` : ''})`);
  return server as ServerProcess & { personaId: string; key: string };
}

interface Setup {
  server: ServerProcess & { personaId: string; key: string };
  fake: FakeModelProcess;
  headers: Record<string, string>;
  bodies: string[];
  agent: http.Agent;
}

/** The platform's request headers and the `{ personaId, message }` body of each question. */
function setupFor(server: Setup['server'], fake: FakeModelProcess, questions: string[], agent: http.Agent): Setup {
  return {
    server,
    fake,
    headers: { authorization: `Bearer ${server.key}`, 'content-type': 'application/json' },
    bodies: questions.map((message) => JSON.stringify({ personaId: server.personaId, message })),
    agent,
  };
}

function platformStream(setup: Setup, body: string) {
  return openSse({
    url: new URL('/query/stream', setup.server.origin),
    headers: setup.headers,
    body,
    agent: setup.agent,
    classify: classifyPlatform,
    idleTimeoutMs: IDLE_TIMEOUT_MS,
  });
}

function modelStream(setup: Setup, body: string) {
  return openSse({
    url: new URL(setup.fake.completionsUrl),
    headers: { authorization: `Bearer ${MODEL_KEY}`, 'content-type': 'application/json' },
    body,
    agent: setup.agent,
    classify: classifyModel,
    idleTimeoutMs: IDLE_TIMEOUT_MS,
  });
}

/** Why a platform stream is not a whole answer (first text, `done`, `[DONE]`), or undefined. */
function streamProblem(o: SseOutcome): string | undefined {
  if (o.error) return o.error;
  if (o.firstMs === null) return 'no text chunk';
  if (!o.doneEvent) return 'no done chunk';
  if (!o.doneMarker) return 'no [DONE]';
  return undefined;
}

/** The answers are what they claim to be: JSON with text and retrieved sources; a stream with text, `done`, `[DONE]`. */
async function checkAnswers(setup: Setup): Promise<void> {
  const url = `${setup.server.origin}/query`;
  await expectResponse('POST /query', url, { method: 'POST', headers: setup.headers, body: setup.bodies[0]! }, (status, body) => {
    if (status !== 200) return 'expected 200';
    const b = body as { response?: unknown; sources?: unknown[]; usage?: { completionTokens?: number } } | null;
    if (typeof b?.response !== 'string' || b.response === '') return 'expected a non-empty response';
    if (!Array.isArray(b.sources) || b.sources.length === 0) return 'expected retrieved sources (the knowledge base should match)';
    if (!(b.usage?.completionTokens && b.usage.completionTokens > 0)) return 'expected usage from the model';
    return undefined;
  });
  const stream = await platformStream(setup, setup.bodies[0]!).result;
  const problem = streamProblem(stream);
  if (problem) throw new Error(`POST /query/stream: ${problem}`);
}

/** Each question once through the platform, one at a time; then the fake's copies of what the platform sent. */
async function primeAndCapture(setup: Setup): Promise<string[]> {
  for (const body of setup.bodies) {
    const problem = streamProblem(await platformStream(setup, body).result);
    if (problem) throw new Error(`POST /query/stream (priming): ${problem}`);
  }
  const captured = await setup.fake.requests();
  if (captured.length === 0) throw new Error('the fake model recorded no requests');
  return captured.slice(-setup.bodies.length);
}

async function overheadRows(setup: Setup, modelBodies: string[], options: BenchOptions): Promise<ChatRow[]> {
  const modelHeaders = { authorization: `Bearer ${MODEL_KEY}`, 'content-type': 'application/json' };
  const model = await measureWithLatencies(
    {
      name: `fake model direct, ${OVERHEAD_CLIENTS} clients (baseline)`,
      connections: OVERHEAD_CLIENTS,
      target: { url: setup.fake.completionsUrl, method: 'POST', headers: modelHeaders, bodies: modelBodies, serverCpu: setup.fake.cpuUsage },
    },
    options,
  );
  const platform = await measureWithLatencies(
    {
      name: `POST /query, ${OVERHEAD_CLIENTS} clients`,
      connections: OVERHEAD_CLIENTS,
      target: queryTarget(setup),
    },
    options,
  );
  const modelRow = sampled(model);
  const platformRow = sampled(platform);
  const [m50, m95] = [modelRow.latencyP50Ms, modelRow.latencyP95Ms ?? 0];
  const [p50, p95] = [platformRow.latencyP50Ms, platformRow.latencyP95Ms ?? 0];
  const over50 = ms(p50 - m50);
  const over95 = ms(p95 - m95);
  const promptChars = Math.round(modelBodies.reduce((n, b) => n + b.length, 0) / modelBodies.length);
  return [
    judge(modelRow, {
      metric: 'p95 ms',
      value: m95,
      notes: [
        `the fake model's POST /v1/chat/completions (streamed, include_usage) with the ${modelBodies.length} bodies the platform sent it (~${fmt(promptChars)} chars each), p50 ${m50} ms, p95 ${m95} ms`,
      ],
      figures: { p50Ms: m50, p95Ms: m95, requestBodies: modelBodies.length },
    }),
    judge(platformRow, {
      metric: 'overhead p95 ms',
      value: over95,
      target: { kind: 'max', value: OVERHEAD_P95_TARGET_MS },
      notes: [
        `Switchboard p50 ${p50} ms / p95 ${p95} ms minus the fake model direct p50 ${m50} ms / p95 ${m95} ms = overhead p50 ${over50} ms / p95 ${over95} ms (same load, ${OVERHEAD_CLIENTS} clients); ` +
          `fake model CPU ${platformRow.helperCpuPercent ?? '—'} % of a core`,
      ],
      figures: { platformP50Ms: p50, platformP95Ms: p95, modelP50Ms: m50, modelP95Ms: m95, overheadP50Ms: over50, overheadP95Ms: over95 },
    }),
  ];
}

/** POST /query with the questions in turn; the fake model's (and PostgreSQL's) CPU reported beside the server's. */
function queryTarget(setup: Setup, db?: BackendDatabase) {
  return {
    url: `${setup.server.origin}/query`,
    method: 'POST' as const,
    headers: setup.headers,
    bodies: setup.bodies,
    serverCpu: setup.server.cpuUsage,
    helperCpu: setup.fake.cpuUsage,
    ...(db ? { databaseCpu: db.cpuUs } : {}),
  };
}

async function throughputRow(setup: Setup, options: BenchOptions, db: BackendDatabase): Promise<ChatRow> {
  const measured = await measureWithLatencies(
    {
      name: labelled(`POST /query, ${THROUGHPUT_CLIENTS} clients`, db.backend),
      connections: THROUGHPUT_CLIENTS,
      target: queryTarget(setup, db),
    },
    options,
  );
  const row = { ...sampled(measured), backend: db.backend.kind };
  const p99 = row.latencyP99Ms ?? 0;
  const database = row.databaseCpuPercent == null ? '' : `, PostgreSQL backends of its database ${row.databaseCpuPercent} % (${fmt(row.databaseCpuUsPerRequest ?? 0)} µs/answer)`;
  return judge(row, {
    metric: 'queries/s',
    value: row.requestsPerSecond,
    target: { kind: 'min', value: THROUGHPUT_TARGET },
    notes: [
      `${fmt(row.requests)} answers (new session each, ${QUESTIONS} questions in turn, hybrid search of ${CHAT_SOURCE_COUNT} sources, stored in ${db.backend.label}${db.backend.kind === 'postgres' ? ', tables VACUUM ANALYZEd after seeding' : ''}), ` +
        `server ${row.serverCpuPercent ?? '—'} % of a core (${fmt(row.serverCpuUsPerRequest ?? 0)} µs/answer), fake model ${row.helperCpuPercent ?? '—'} %, load generator ${row.loadCpuPercent} %${database}, other processes ${row.otherCpuPercent ?? '—'} %`,
    ],
    figures: { queriesPerSecond: row.requestsPerSecond, latencyP95Ms: row.latencyP95Ms ?? null, latencyP99Ms: p99, databaseCpuUsPerAnswer: row.databaseCpuUsPerRequest ?? null },
    failures: p99 <= THROUGHPUT_P99_TARGET_MS ? [] : [`p99 ${p99} ms, target ≤ ${THROUGHPUT_P99_TARGET_MS} ms`],
  });
}

/** One client, one request at a time, alternating the fake model direct and the platform. */
async function ttftRow(setup: Setup, modelBodies: string[], options: BenchOptions): Promise<ChatRow> {
  process.stdout.write(`  time to first chunk, 1 client: warm-up ${options.warmupSeconds}s, measuring ${options.durationSeconds}s... `);
  const model: number[] = [];
  const platform: number[] = [];
  const failures: string[] = [];
  let i = 0;
  const pair = async (keep: boolean) => {
    const m = await modelStream(setup, modelBodies[i % modelBodies.length]!).result;
    const p = await platformStream(setup, setup.bodies[i % setup.bodies.length]!).result;
    i++;
    const problem = streamProblem(p) ?? (m.error ? `fake model: ${m.error}` : m.firstMs === null ? 'fake model: no content chunk' : undefined);
    if (problem) {
      failures.push(problem);
      return;
    }
    if (keep) {
      model.push(m.firstMs!);
      platform.push(p.firstMs!);
    }
  };
  const until = (seconds: number) => performance.now() + seconds * 1000;
  for (const end = until(options.warmupSeconds); performance.now() < end; ) await pair(false);
  const cpuBefore = await setup.server.cpuUsage();
  const started = performance.now();
  // At least 50 pairs, however short the run.
  for (const end = until(options.durationSeconds); performance.now() < end || platform.length < 50; ) {
    await pair(true);
    if (failures.length > 20) break;
  }
  const elapsedMs = performance.now() - started;
  const cpu = cpuUs(await setup.server.cpuUsage()) - cpuUs(cpuBefore);
  const sorted = (l: number[]) => [...l].sort((a, b) => a - b);
  const [m, p] = [sorted(model), sorted(platform)];
  const m50 = ms(nearestRank(m, 0.5));
  const m95 = ms(nearestRank(m, 0.95));
  const p50 = ms(nearestRank(p, 0.5));
  const p95 = ms(nearestRank(p, 0.95));
  const over50 = ms(p50 - m50);
  const over95 = ms(p95 - m95);
  process.stdout.write(`overhead p50 ${over50} ms, p95 ${over95} ms\n`);
  const base = plainRow('time to first chunk, 1 client (POST /query/stream)', {
    latencies: platform,
    requests: platform.length,
    elapsedMs,
    serverCpuUs: cpu,
    errors: failures.length,
  });
  return judge(base, {
    metric: 'TTFT overhead p50 ms',
    value: over50,
    target: { kind: 'max', value: TTFT_P50_TARGET_MS },
    notes: [
      `first \`text\` chunk from Switchboard p50 ${p50} ms / p95 ${p95} ms minus the fake model's first content chunk direct p50 ${m50} ms / p95 ${m95} ms = ` +
        `overhead p50 ${over50} ms / p95 ${over95} ms, ${platform.length} pairs alternating, one request at a time (req/s counts platform requests only)`,
    ],
    figures: { platformP50Ms: p50, platformP95Ms: p95, modelP50Ms: m50, modelP95Ms: m95, overheadP50Ms: over50, overheadP95Ms: over95, pairs: platform.length },
    failures: failures.length > 0 ? [`${failures.length} failed exchanges (first: ${failures[0]})`] : [],
  });
}

function withTimeout<T>(promise: Promise<T>, timeoutMs: number): Promise<T | 'timeout'> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    promise.finally(() => clearTimeout(timer)),
    new Promise<'timeout'>((resolve) => (timer = setTimeout(() => resolve('timeout'), timeoutMs))),
  ]);
}

/** N streams open at once on a fresh server: heap and RSS growth while all are open, then every one must finish. */
async function streamsRow(fake: FakeModelProcess, n: number, questions: string[], options: BenchOptions): Promise<ChatRow> {
  const batch = envInt('BENCH_CHAT_STREAM_BATCH', 200, 1);
  const tickMs = envInt('BENCH_CHAT_TOKEN_MS', 2_000, 10);
  const label = `${fmt(n)} open chat streams`;
  progress(`${label}: starting a fresh server`);
  const server = await startChatServer(fake, options, { exposeGc: true });
  const agent = new http.Agent({ keepAlive: true, maxSockets: Infinity });
  const setup = setupFor(server, fake, questions, agent);
  const streams: ReturnType<typeof platformStream>[] = [];
  try {
    await fake.set({ mode: 'instant' });
    await checkAnswers(setup);
    // Warm-up: every question once, then a batch at once, so JIT, caches and pools are as in use.
    await primeAndCapture(setup);
    const warm = await Promise.all(setup.bodies.slice(0, batch).map((b) => platformStream(setup, b).result));
    const warmFailed = warm.filter((o) => streamProblem(o)).length;
    if (warmFailed > 0) throw new Error(`${warmFailed} of ${warm.length} warm-up streams failed: ${streamProblem(warm.find((o) => streamProblem(o))!)}`);

    await fake.set({ mode: 'hold', tickMs, maxHoldMs: 600_000 });
    const before = await server.memoryUsage();
    const cpuBefore = await server.cpuUsage();
    progress(`${label}: heap ${(before.usage.heapUsed / MB).toFixed(1)} MB, RSS ${(before.usage.rss / MB).toFixed(1)} MB before (after a full GC: ${before.gc}); opening ${batch} at a time`);
    const opening = performance.now();
    let lastReport = opening;
    let stalledBatches = 0;
    for (let i = 0; i < n; i += batch) {
      const size = Math.min(batch, n - i);
      const opened = Array.from({ length: size }, (_, j) => platformStream(setup, setup.bodies[(i + j) % setup.bodies.length]!));
      streams.push(...opened);
      if ((await withTimeout(Promise.all(opened.map((s) => s.first)), BATCH_TIMEOUT_MS)) === 'timeout') stalledBatches++;
      if (performance.now() - lastReport > 1_000 || i + size >= n) {
        lastReport = performance.now();
        progress(`${label}: ${fmt(i + size)} opened in ${((lastReport - opening) / 1000).toFixed(1)} s`);
      }
    }
    const openMs = performance.now() - opening;
    const cpuOpen = cpuUs(await server.cpuUsage()) - cpuUs(cpuBefore);
    const held = (await fake.stats()).held;
    const after = await server.memoryUsage();
    const heapGrowth = after.usage.heapUsed - before.usage.heapUsed;
    const rssGrowth = after.usage.rss - before.usage.rss;
    const externalGrowth = after.usage.external - before.usage.external;
    progress(
      `${label}: all opened; the fake holds ${fmt(held)}; heap +${(heapGrowth / MB).toFixed(1)} MB, RSS +${(rssGrowth / MB).toFixed(1)} MB; telling the fake to finish`,
    );

    const finishing = performance.now();
    await fake.finish();
    const all = Promise.all(streams.map((s) => s.result));
    if ((await withTimeout(all, FINISH_TIMEOUT_MS)) === 'timeout') {
      progress(`${label}: streams still open ${FINISH_TIMEOUT_MS / 1000} s after finish; cancelling them`);
      for (const s of streams) s.cancel('still open after finish');
    }
    const outcomes = await all;
    progress(`${label}: all ended in ${((performance.now() - finishing) / 1000).toFixed(1)} s`);

    const firstChunks = outcomes.filter((o) => o.firstMs !== null).length;
    const failed = outcomes.filter((o) => streamProblem(o) !== undefined);
    const non2xx = outcomes.filter((o) => o.status !== 0 && o.status !== 200).length;
    const transport = outcomes.filter((o) => o.status === 0).length;
    const failures: string[] = [];
    if (failed.length > 0) {
      const reasons = new Map<string, number>();
      for (const o of failed) {
        const why = streamProblem(o)!.slice(0, 80);
        reasons.set(why, (reasons.get(why) ?? 0) + 1);
      }
      failures.push(`${fmt(failed.length)} of ${fmt(n)} streams failed (${[...reasons].map(([why, k]) => `${k}× ${why}`).join('; ')})`);
    }
    if (firstChunks < n) failures.push(`${fmt(n - firstChunks)} streams never got a first chunk`);
    if (stalledBatches > 0) failures.push(`${stalledBatches} batches waited over ${BATCH_TIMEOUT_MS / 1000} s for first chunks`);
    if (!before.gc) failures.push('the server ran without --expose-gc: heap figures include garbage');

    const firstLatencies = outcomes.flatMap((o) => (o.firstMs === null ? [] : [o.firstMs]));
    const base = plainRow(label, {
      latencies: firstLatencies,
      requests: n - failed.length,
      elapsedMs: openMs,
      serverCpuUs: cpuOpen,
      non2xx,
      errors: transport,
    });
    const heapMb = round(heapGrowth / MB, 1);
    const perStreamKb = round(heapGrowth / n / 1000, 1);
    return judge(base, {
      metric: 'heap growth MB',
      value: heapMb,
      target: { kind: 'max', value: HEAP_GROWTH_TARGET_MB },
      notes: [
        `server heapUsed ${(before.usage.heapUsed / MB).toFixed(1)} → ${(after.usage.heapUsed / MB).toFixed(1)} MB (+${heapMb} MB, ${perStreamKb} KB/stream), ` +
          `RSS ${(before.usage.rss / MB).toFixed(1)} → ${(after.usage.rss / MB).toFixed(1)} MB (+${(rssGrowth / MB).toFixed(1)} MB, ${round(rssGrowth / n / 1000, 1)} KB/stream), ` +
          `external +${(externalGrowth / MB).toFixed(1)} MB; after a full GC, with all ${fmt(firstChunks)} streams past their first chunk and the fake holding ${fmt(held)}`,
        `opened ${batch} at a time in ${(openMs / 1000).toFixed(1)} s (req/s = streams opened per second; latencies = time to each stream's first chunk); ` +
          `a token every ${tickMs} ms while held; ${fmt(outcomes.length - failed.length)} ended with done + [DONE] after finish, ${fmt(failed.length)} failed`,
      ],
      figures: {
        streams: n,
        firstChunks,
        completed: n - failed.length,
        failed: failed.length,
        heldByModel: held,
        heapBeforeMB: round(before.usage.heapUsed / MB, 1),
        heapAfterMB: round(after.usage.heapUsed / MB, 1),
        heapGrowthMB: heapMb,
        rssGrowthMB: round(rssGrowth / MB, 1),
        externalGrowthMB: round(externalGrowth / MB, 1),
        heapKBPerStream: perStreamKb,
        rssKBPerStream: round(rssGrowth / n / 1000, 1),
        openSeconds: round(openMs / 1000, 2),
      },
      failures,
    });
  } finally {
    for (const s of streams) s.cancel('benchmark stopped');
    await fake.finish().catch(() => 0);
    await fake.set({ mode: 'instant' }).catch(() => undefined);
    agent.destroy();
    await server.stop();
  }
}

/**
 * Overhead at 10 clients, throughput at 50, time to first chunk: one server on `db`, warmed up by
 * every question once. On PostgreSQL the throughput row alone, the figure issue 25 sets for it.
 */
async function requestRows(fake: FakeModelProcess, questions: string[], options: BenchOptions, db: BackendDatabase): Promise<ChatRow[]> {
  const rows: ChatRow[] = [];
  const server = await startChatServer(fake, options, { pinned: false, db });
  const agent = new http.Agent({ keepAlive: true, maxSockets: Infinity });
  const all = db.backend.kind === 'sqlite';
  try {
    const setup = setupFor(server, fake, questions, agent);
    await checkAnswers(setup);
    const modelBodies = await primeAndCapture(setup);
    if (all) rows.push(...(await overheadRows(setup, modelBodies, options)));
    rows.push(await throughputRow(setup, options, db));
    if (all) rows.push(await ttftRow(setup, modelBodies, options));
  } finally {
    agent.destroy();
    await server.stop();
  }
  return rows;
}

/**
 * POST /query at 50 clients with the offline model (no model process): the platform's own ceiling;
 * then follow-ups in existing sessions on the same server.
 */
async function offlineRows(questions: string[], options: BenchOptions): Promise<ChatRow[]> {
  const server = await startChatServer(null, options, { pinned: false });
  try {
    const headers = { authorization: `Bearer ${server.key}`, 'content-type': 'application/json' };
    const bodies = questions.map((message) => JSON.stringify({ personaId: server.personaId, message }));
    await expectResponse('POST /query (offline)', `${server.origin}/query`, { method: 'POST', headers, body: bodies[0]! }, (status, body) => {
      const b = body as { response?: unknown; sources?: unknown[] } | null;
      if (status !== 200 || typeof b?.response !== 'string' || !Array.isArray(b.sources) || b.sources.length === 0) return 'expected 200 with a response and sources';
      return undefined;
    });
    const measured = await measureWithLatencies(
      {
        name: `POST /query, offline model, ${THROUGHPUT_CLIENTS} clients`,
        connections: THROUGHPUT_CLIENTS,
        target: { url: `${server.origin}/query`, method: 'POST' as const, headers, bodies, serverCpu: server.cpuUsage },
      },
      options,
    );
    const row = sampled(measured);
    const judged = judge(row, {
      metric: 'queries/s',
      value: row.requestsPerSecond,
      target: { kind: 'min', value: OFFLINE_TARGET },
      notes: [
        `${fmt(row.requests)} answers by the offline model (no model process; hybrid search of ${CHAT_SOURCE_COUNT} sources, stored), server unpinned, ` +
          `${row.serverCpuPercent ?? '—'} % of a core (main and search threads), load generator ${row.loadCpuPercent} %`,
      ],
      figures: { queriesPerSecond: row.requestsPerSecond, latencyP99Ms: row.latencyP99Ms ?? null },
    });
    return [judged, await followUpRow(server, headers, questions, options)];
  } finally {
    await server.stop();
  }
}

/** Follow-ups by 50 clients, in turn across FOLLOW_UP_SESSIONS sessions opened first (no target). */
async function followUpRow(server: ServerProcess & { personaId: string }, headers: Record<string, string>, questions: string[], options: BenchOptions): Promise<ChatRow> {
  const sessions: string[] = [];
  for (let i = 0; i < FOLLOW_UP_SESSIONS; i += THROUGHPUT_CLIENTS) {
    const opened = await Promise.all(
      Array.from({ length: Math.min(THROUGHPUT_CLIENTS, FOLLOW_UP_SESSIONS - i) }, async (_, k) => {
        const res = await fetch(`${server.origin}/query`, { method: 'POST', headers, body: JSON.stringify({ personaId: server.personaId, message: questions[(i + k) % questions.length] }) });
        const body = (await res.json()) as { sessionId?: string };
        if (res.status !== 200 || typeof body.sessionId !== 'string') throw new Error(`opening a session for the follow-up row: HTTP ${res.status}`);
        return body.sessionId;
      }),
    );
    sessions.push(...opened);
  }
  let turn = 0;
  const measured = await measureWithLatencies(
    {
      name: `POST /query follow-ups in ${fmt(FOLLOW_UP_SESSIONS)} sessions, offline model, ${THROUGHPUT_CLIENTS} clients`,
      connections: THROUGHPUT_CLIENTS,
      target: {
        url: `${server.origin}/query`,
        method: 'POST' as const,
        headers,
        nextBody: () => {
          const n = turn++;
          return JSON.stringify({ personaId: server.personaId, sessionId: sessions[n % sessions.length], message: questions[n % questions.length] });
        },
        serverCpu: server.cpuUsage,
      },
    },
    options,
  );
  const row = sampled(measured);
  const perSession = Math.round((row.requests / sessions.length) * 2);
  return judge(row, {
    metric: 'queries/s',
    value: row.requestsPerSecond,
    notes: [
      `${fmt(row.requests)} follow-ups in ${fmt(sessions.length)} sessions opened first, in turn (each reads its session and up to 100 latest messages; ` +
        `~${perSession} messages added per session in the run); server ${row.serverCpuPercent ?? '—'} % of a core`,
    ],
    figures: { queriesPerSecond: row.requestsPerSecond, latencyP99Ms: row.latencyP99Ms ?? null, sessions: sessions.length },
  });
}

export async function run(options: BenchOptions): Promise<BenchRow[]> {
  const cases = envCases();
  const streamCounts = cases.has('streams') ? envStreams() : [];
  const questions = chatQuestions(QUESTIONS);
  const rows: ChatRow[] = [];
  const sqlite = options.backends.some((b) => b.kind === 'sqlite');
  const fake = await startFakeModel({ cpu: options.pinning?.load });
  try {
    if (cases.has('requests')) {
      for (const backend of options.backends) rows.push(...(await withBackendDatabase(backend, (db) => requestRows(fake, questions, options, db))));
    }
    if (sqlite && cases.has('offline')) rows.push(...(await offlineRows(questions, options)));
    for (const n of sqlite ? streamCounts : []) rows.push(await streamsRow(fake, n, questions, options));
  } finally {
    await fake.stop();
  }
  console.log(`\n${metricTable(rows)}`);
  return rows;
}
