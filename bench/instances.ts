/**
 * Issue 26, item 9: answers/s with two instances on one PostgreSQL database against one, on the
 * same machine in the same run, and what an answer costs the database. Two built servers (`node
 * dist/src/main.js serve`, offline model, hashed embeddings, the same 200-article knowledge base
 * and persona as bench/chat.ts) share a throwaway database; each reaches PostgreSQL through its own
 * wire counter (bench/lib/pg-wire-counter.ts). The load generator sends `POST /query` (the same 50
 * questions in turn) with `--connections` clients: all to A, then half to each (a round-robin
 * balancer without its own cost), then all to A again. CPU per answer is the servers' (both
 * processes, every thread, from /proc) and PostgreSQL's (its backends for this database); the load
 * generator's is in the notes. Rows:
 *  - answers/s, one instance (the mean of the two one-instance windows) and two instances; the
 *    two-instance row's target is ≥ 90 % of one's: on 2 cores there is no gain to expect, only no loss;
 *  - per answer, from the counters over the two-instance window: database round trips, bytes each
 *    way, connection-busy ms (the time from a query's Sync to PostgreSQL's ReadyForQuery, summed),
 *    PostgreSQL CPU µs, and the connections each instance opened. README "Many instances" sizes a
 *    cluster from these figures.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import autocannon from 'autocannon';
import { chatQuestions, chatSources } from './lib/chat-corpus.js';
import { type BackendDatabase, labelled, withBackendDatabase } from './lib/backends.js';
import { ADMIN_KEY, call, processCpuUs, type Server, startServer } from './lib/built-server.js';
import { type BenchOptions, type BenchRow, fmt, machineBusyUs, progress, round } from './lib/harness.js';
import { type MetricRow, metricRow, metricTable, type Window } from './lib/in-process.js';
import { startWireCounter, type WireCounter, type WireCounts } from './lib/pg-wire-counter.js';

export const name = 'instances';
export const description = 'POST /query answers/s with two instances on one PostgreSQL database against one (same machine, same run), and the database round trips, bytes, connection time and connections per answer';
export const backends = ['postgres'] as const;

const SOURCES = 200;
const QUESTIONS = 50;
/** Two instances must keep at least this share of one instance's answers/s (2 cores: no gain expected, no loss allowed). */
const TWO_OVER_ONE_TARGET = 0.9;
/** The pool each instance runs with (SWITCHBOARD_DATABASE_POOL), stated in the rows. */
const POOL = 10;

interface Instance {
  server: Server;
  counter: WireCounter;
}

/** Answers/s and latencies of `connections` clients spread over `origins` for `seconds`. */
async function load(origins: string[], bodies: string[], connections: number, seconds: number): Promise<{ answers: number; non2xx: number; errors: number; latencies: number[]; elapsedMs: number }> {
  const latencies: number[] = [];
  const started = performance.now();
  const results = await Promise.all(
    origins.map(
      (origin, i) =>
        new Promise<autocannon.Result>((resolve, reject) => {
          const share = Math.floor(connections / origins.length) + (i < connections % origins.length ? 1 : 0);
          const instance = autocannon(
            {
              url: `${origin}/query`,
              method: 'POST',
              headers: { authorization: `Bearer ${ADMIN_KEY}`, 'content-type': 'application/json' },
              requests: bodies.map((body) => ({ body })),
              connections: share,
              pipelining: 1,
              duration: seconds,
              timeout: 10,
            },
            (err: unknown, result: autocannon.Result) => (err ? reject(err instanceof Error ? err : new Error(String(err))) : resolve(result)),
          );
          instance.on('response', (_client, _status, _bytes, ms) => latencies.push(ms));
        }),
    ),
  );
  return {
    answers: results.reduce((n, r) => n + r['2xx'], 0),
    non2xx: results.reduce((n, r) => n + r.non2xx, 0),
    errors: results.reduce((n, r) => n + r.errors + r.timeouts, 0),
    latencies,
    elapsedMs: performance.now() - started,
  };
}

const minus = (a: WireCounts, b: WireCounts): WireCounts => ({
  roundTrips: a.roundTrips - b.roundTrips,
  bytesToServer: a.bytesToServer - b.bytesToServer,
  bytesFromServer: a.bytesFromServer - b.bytesFromServer,
  busyMs: a.busyMs - b.busyMs,
  connectionsOpened: a.connectionsOpened - b.connectionsOpened,
  connectionsOpen: a.connectionsOpen,
  connectionsPeak: a.connectionsPeak,
});
const plus = (a: WireCounts, b: WireCounts): WireCounts => ({
  roundTrips: a.roundTrips + b.roundTrips,
  bytesToServer: a.bytesToServer + b.bytesToServer,
  bytesFromServer: a.bytesFromServer + b.bytesFromServer,
  busyMs: a.busyMs + b.busyMs,
  connectionsOpened: a.connectionsOpened + b.connectionsOpened,
  connectionsOpen: a.connectionsOpen + b.connectionsOpen,
  connectionsPeak: a.connectionsPeak + b.connectionsPeak,
});

async function rows(db: BackendDatabase, options: BenchOptions): Promise<MetricRow[]> {
  const dirs = ['a', 'b'].map((n) => fs.mkdtempSync(path.join(os.tmpdir(), `switchboard-bench-instance-${n}-`)));
  const instances: Instance[] = [];
  try {
    for (const dir of dirs) {
      const counter = await startWireCounter(db.env.SWITCHBOARD_DATABASE_URL!);
      const env = { ...db.env, SWITCHBOARD_DATABASE_URL: counter.url, SWITCHBOARD_DATABASE_POOL: String(POOL) };
      instances.push({ server: await startServer(dir, { ...db, env }, options.cpuProfileDir), counter });
    }
    const [a, b] = instances as [Instance, Instance];
    // The knowledge base and persona, through A; B serves them from the shared database.
    const started = performance.now();
    for (const source of chatSources(SOURCES)) {
      const res = await call(a.server.agent, a.server.origin, 'POST', '/knowledge', source);
      if (res.status !== 201 && res.status !== 202) throw new Error(`POST /knowledge answered ${res.status}`);
    }
    for (;;) {
      const list = (await call(a.server.agent, a.server.origin, 'GET', '/knowledge?limit=100&status=processing')).json() as { data: unknown[] };
      if (list.data.length === 0) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    const persona = await call(a.server.agent, a.server.origin, 'POST', '/personas', { name: 'Help centre', instructions: 'Answer from the knowledge base.' });
    const personaId = (persona.json() as { id: string }).id;
    progress(`two instances up, ${SOURCES} sources ingested in ${((performance.now() - started) / 1000).toFixed(1)} s`);
    const bodies = chatQuestions(QUESTIONS).map((message) => JSON.stringify({ personaId, message }));

    const windowOf = async (origins: string[]) => {
      await load(origins, bodies, options.connections, options.warmupSeconds);
      const counts = () => plus(a.counter.counts(), b.counter.counts());
      const before = counts();
      const dbBefore = await db.cpuUs();
      // The servers' CPU (every thread of both processes) from /proc; the load generator's is this process's.
      const serversUs = () => instances.reduce((us, i) => us + processCpuUs(i.server.child.pid!), 0);
      const serversBefore = serversUs();
      const machineBefore = machineBusyUs();
      const loadBefore = process.cpuUsage();
      const started = performance.now();
      const result = await load(origins, bodies, options.connections, options.durationSeconds);
      const elapsedMs = performance.now() - started;
      const dbUs = ((await db.cpuUs()) ?? 0) - (dbBefore ?? 0);
      const servers = serversUs() - serversBefore;
      const loadUsed = process.cpuUsage(loadBefore);
      const percent = (us: number) => round((us / (elapsedMs * 1000)) * 100, 0);
      // "Other" is what neither the servers, the load generator nor the database used (metricRow takes the database's off).
      const window: Window = { elapsedMs, cpuUs: servers, cpuPercent: percent(servers), otherCpuPercent: Math.max(0, percent(machineBusyUs() - machineBefore - servers - loadUsed.user - loadUsed.system)) };
      return { result, window, wire: minus(counts(), before), databaseCpuUs: dbUs, perInstance: [a.counter.counts(), b.counter.counts()], loadCpuPercent: percent(loadUsed.user + loadUsed.system) };
    };
    progress('one instance');
    const one1 = await windowOf([a.server.origin]);
    progress('two instances');
    const two = await windowOf([a.server.origin, b.server.origin]);
    progress('one instance again');
    const one2 = await windowOf([a.server.origin]);

    const rate = (w: typeof one1) => (w.result.answers / w.result.elapsedMs) * 1000;
    const oneRate = (rate(one1) + rate(one2)) / 2;
    const twoRate = rate(two);
    const checks = (w: typeof one1) => [...(w.result.non2xx > 0 ? [`${w.result.non2xx} non-2xx`] : []), ...(w.result.errors > 0 ? [`${w.result.errors} errors`] : [])];
    const per = (n: number) => round(n / two.result.answers, 2);
    const wire = two.wire;
    const oneRow = metricRow({
      name: labelled(`POST /query answers/s, one instance (${options.connections} clients)`, db.backend),
      backend: db.backend.kind,
      metric: 'answers/s',
      value: round(oneRate, 0),
      operations: one1.result.answers + one2.result.answers,
      window: {
        elapsedMs: one1.window.elapsedMs + one2.window.elapsedMs,
        cpuUs: one1.window.cpuUs + one2.window.cpuUs,
        cpuPercent: round(((one1.window.cpuUs + one2.window.cpuUs) / ((one1.window.elapsedMs + one2.window.elapsedMs) * 1000)) * 100, 0),
        otherCpuPercent: Math.max(one1.window.otherCpuPercent, one2.window.otherCpuPercent),
      },
      latenciesMs: [...one1.result.latencies, ...one2.result.latencies],
      databaseCpuUs: one1.databaseCpuUs + one2.databaseCpuUs,
      notes: [`two windows around the two-instance one: ${fmt(rate(one1))} and ${fmt(rate(one2))} answers/s; load generator ${one1.loadCpuPercent} and ${one2.loadCpuPercent} % of a core`, ...checks(one1), ...checks(one2)],
    });
    const twoRow = metricRow({
      name: labelled(`POST /query answers/s, two instances (${options.connections} clients, half each)`, db.backend),
      backend: db.backend.kind,
      metric: 'answers/s',
      value: round(twoRate, 0),
      target: { kind: 'min', value: round(oneRate * TWO_OVER_ONE_TARGET, 0) },
      operations: two.result.answers,
      window: two.window,
      latenciesMs: two.result.latencies,
      databaseCpuUs: two.databaseCpuUs,
      notes: [`load generator ${two.loadCpuPercent} % of a core`, `${round(twoRate / oneRate, 2)}× one instance (target ≥ ${TWO_OVER_ONE_TARGET}×: 2 cores give no gain, and must lose nothing)`, ...checks(two)],
    });
    const figures = metricRow({
      name: labelled('per answer, two instances: database round trips', db.backend),
      backend: db.backend.kind,
      metric: 'round trips',
      value: per(wire.roundTrips),
      operations: two.result.answers,
      window: two.window,
      databaseCpuUs: two.databaseCpuUs,
      notes: [
        `bytes to PostgreSQL ${fmt(wire.bytesToServer / two.result.answers)}, from PostgreSQL ${fmt(wire.bytesFromServer / two.result.answers)}`,
        `connection busy ${per(wire.busyMs)} ms (Sync to ReadyForQuery, summed over its round trips)`,
        `PostgreSQL CPU ${fmt(two.databaseCpuUs / two.result.answers)} µs, servers' CPU ${fmt(two.window.cpuUs / two.result.answers)} µs`,
        `connections: pool ${POOL} per instance; opened A ${two.perInstance[0]!.connectionsOpened}, B ${two.perInstance[1]!.connectionsOpened}; most open at once A ${two.perInstance[0]!.connectionsPeak}, B ${two.perInstance[1]!.connectionsPeak} (change-signal poll and heartbeat included)`,
      ],
    });
    return [oneRow, twoRow, figures];
  } finally {
    for (const { server, counter } of instances) {
      await server.stop();
      await counter.close();
    }
    for (const dir of dirs) fs.rmSync(dir, { recursive: true, force: true });
  }
}

export async function run(options: BenchOptions): Promise<BenchRow[]> {
  const out: MetricRow[] = [];
  for (const backend of options.backends) {
    if (backend.kind !== 'postgres') continue;
    out.push(...(await withBackendDatabase(backend, (db) => rows(db, options))));
  }
  console.log(`\n${metricTable(out)}`);
  return out;
}
