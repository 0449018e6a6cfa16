import fs from 'node:fs';
import os from 'node:os';
import autocannon from 'autocannon';
import type { CpuPinning } from './affinity.js';
import { type BenchBackend, SQLITE } from './backends.js';

/** How hard and how long each case runs; `npm run bench -- --duration=3` etc. override them. */
export interface BenchOptions {
  connections: number;
  /** Seconds of load before measuring, discarded (JIT, caches, connection set-up). */
  warmupSeconds: number;
  /** Seconds measured per case. */
  durationSeconds: number;
  /** Write a V8 CPU profile of every server child into this directory. */
  cpuProfileDir: string | undefined;
  /** Keep server and load generator on cores of their own (`--no-pin` turns it off). */
  pin: boolean;
  /** Where they were pinned, set by run.ts once it has pinned itself; null when unpinned. */
  pinning: CpuPinning | null;
  /**
   * The storage backends to measure, in order (`--backends=sqlite,postgres`, both by default): a
   * suite that supports several runs its cases on each; PostgreSQL is left out when no server answers.
   */
  backends: BenchBackend[];
}

export const DEFAULT_OPTIONS: BenchOptions = {
  connections: 50,
  warmupSeconds: 2,
  durationSeconds: 10,
  cpuProfileDir: undefined,
  pin: true,
  pinning: null,
  backends: [SQLITE],
};

/** One measured case, as printed in the table and written to `bench/results/<suite>.json`. */
export interface BenchRow {
  name: string;
  requestsPerSecond: number;
  latencyP50Ms: number;
  latencyP99Ms: number;
  latencyMeanMs: number;
  /** From every response's own time (µs resolution), where the row has it. */
  latencyP95Ms?: number | null;
  /** Responses counted in the measured window. */
  requests: number;
  non2xx: number;
  errors: number;
  timeouts: number;
  /** CPU the server child used during the measured window, in % of one core. */
  serverCpuPercent: number | null;
  /** Server CPU time per response, in µs: steadier than req/s when the machine is shared. */
  serverCpuUsPerRequest: number | null;
  /** CPU the load generator (this process) used during the measured window, in % of one core. */
  loadCpuPercent: number;
  /** CPU used by every other process during the window, in % of one core: above ~20 % the numbers are noisy. */
  otherCpuPercent: number | null;
  /** CPU of a helper process the case needs (a fake upstream), in % of one core; not counted in `otherCpuPercent`. */
  helperCpuPercent?: number | null;
  /** The storage backend the row ran on, for rows run on each (bench/lib/backends.ts). */
  backend?: BenchBackend['kind'];
  /** CPU of the PostgreSQL backends serving the row's database, in % of one core; not counted in `otherCpuPercent`. */
  databaseCpuPercent?: number | null;
  /** The same per response (or operation), in µs. */
  databaseCpuUsPerRequest?: number | null;
  /** req/s of this row over req/s of the suite's ceiling row; null when the suite has none. */
  ratioToCeiling: number | null;
  /** Minimum ratio to the ceiling this row must reach; null when it has no target. */
  targetRatio: number | null;
  isCeiling: boolean;
  pass: boolean;
  /** Why the row failed, empty when it passed. */
  failures: string[];
}

/** A benchmark file in `bench/`: `run.ts` imports it and calls `run`. */
export interface BenchSuite {
  name: string;
  description: string;
  /** The backends it has rows for (`export const backends`); SQLite alone when it does not say. */
  backends?: readonly BenchBackend['kind'][];
  run(options: BenchOptions): Promise<BenchRow[]>;
}

export interface LoadTarget {
  url: string;
  headers?: Record<string, string>;
  /** Default GET. */
  method?: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  /** The request body (set `content-type` in `headers`). */
  body?: string;
  /** Bodies sent in turn (each connection cycles through them from the first); overrides `body`. */
  bodies?: string[];
  /** A body made for every request (e.g. a JSON-RPC id that must never repeat); overrides `body` and `bodies`. */
  nextBody?: () => string;
  /**
   * A body and headers made for every request (e.g. a signature over that body); overrides `body`,
   * `bodies` and `nextBody`. Its headers are added to `headers`.
   */
  next?: () => { body: string; headers?: Record<string, string> };
  /** Reads the server's CPU time (process.cpuUsage) so the row can tell whether the server was saturated. */
  serverCpu?: () => Promise<NodeJS.CpuUsage>;
  /** CPU time of a helper process the server depends on (a fake upstream), reported apart from "other". */
  helperCpu?: () => Promise<NodeJS.CpuUsage>;
  /** CPU µs so far of the database server's processes for this row (PostgreSQL), or null (SQLite: inside the server). */
  databaseCpu?: () => Promise<number | null>;
}

export interface CaseSpec {
  name: string;
  target: LoadTarget;
  isCeiling?: boolean;
  targetRatio?: number;
  /** Concurrent connections for this case, instead of `options.connections`. */
  connections?: number;
}

function fire(target: LoadTarget, seconds: number, connections: number, onResponse?: (ms: number) => void): Promise<autocannon.Result> {
  return new Promise((resolve, reject) => {
    const instance = autocannon(
      {
        url: target.url,
        headers: target.headers ?? {},
        ...(target.method ? { method: target.method } : {}),
        ...(target.body !== undefined ? { body: target.body } : {}),
        ...(target.bodies ? { requests: target.bodies.map((body) => ({ body })) } : {}),
        ...(target.nextBody ? { requests: [{ setupRequest: (req: autocannon.Request) => ({ ...req, body: target.nextBody!() }) }] } : {}),
        ...(target.next ? { requests: [{ setupRequest: (req: autocannon.Request) => withNext(req, target.next!()) }] } : {}),
        connections,
        pipelining: 1,
        duration: seconds,
        timeout: 10,
      },
      (err: unknown, result: autocannon.Result) => (err ? reject(err instanceof Error ? err : new Error(String(err))) : resolve(result)),
    );
    if (onResponse) instance.on('response', (_client, _status, _bytes, ms) => onResponse(ms));
  });
}

/** An autocannon request with a body and extra headers from `LoadTarget.next`. */
function withNext(req: autocannon.Request, next: { body: string; headers?: Record<string, string> }): autocannon.Request {
  return { ...req, body: next.body, headers: { ...req.headers, ...next.headers } };
}

/** User + system CPU, in µs. */
export const cpuUs = (u: NodeJS.CpuUsage) => u.user + u.system;

/** Warm-up (discarded), then the measured run. The row is not yet compared with the ceiling. */
export async function measure(spec: CaseSpec, options: BenchOptions): Promise<BenchRow> {
  return (await measureWithLatencies(spec, options)).row;
}

/** `measure`, also answering every measured response's time in ms (µs resolution, in the order they came). */
export async function measureWithLatencies(spec: CaseSpec, options: BenchOptions): Promise<{ row: BenchRow; latenciesMs: Float64Array }> {
  const connections = spec.connections ?? options.connections;
  process.stdout.write(
    `  ${spec.name}: ${spec.connections === undefined ? '' : `${connections} connections, `}warm-up ${options.warmupSeconds}s, measuring ${options.durationSeconds}s... `,
  );
  if (options.warmupSeconds > 0) await fire(spec.target, options.warmupSeconds, connections);

  let latencies = new Float64Array(1 << 16);
  let count = 0;
  const record = (ms: number) => {
    if (count === latencies.length) {
      const grown = new Float64Array(latencies.length * 2);
      grown.set(latencies);
      latencies = grown;
    }
    latencies[count++] = ms;
  };
  const serverBefore = spec.target.serverCpu ? await spec.target.serverCpu() : undefined;
  const helperBefore = spec.target.helperCpu ? await spec.target.helperCpu() : undefined;
  const databaseBefore = spec.target.databaseCpu ? await spec.target.databaseCpu() : null;
  const machineBefore = machineBusyUs();
  const loadBefore = process.cpuUsage();
  const started = process.hrtime.bigint();
  const result = await fire(spec.target, options.durationSeconds, connections, record);
  const elapsedUs = Number(process.hrtime.bigint() - started) / 1000;
  const load = process.cpuUsage(loadBefore);
  const machineUs = machineBusyUs() - machineBefore;
  const serverAfter = spec.target.serverCpu ? await spec.target.serverCpu() : undefined;
  const helperAfter = spec.target.helperCpu ? await spec.target.helperCpu() : undefined;
  const databaseAfter = spec.target.databaseCpu ? await spec.target.databaseCpu() : null;

  const percent = (us: number) => round((us / elapsedUs) * 100, 0);
  const loadUs = load.user + load.system;
  const serverUs = serverBefore && serverAfter ? cpuUs(serverAfter) - cpuUs(serverBefore) : null;
  const helperUs = helperBefore && helperAfter ? cpuUs(helperAfter) - cpuUs(helperBefore) : 0;
  const databaseUs = databaseBefore !== null && databaseAfter !== null ? databaseAfter - databaseBefore : null;
  const measured = latencies.slice(0, count);
  const sorted = measured.slice().sort();

  const failures: string[] = [];
  if (result.non2xx > 0) failures.push(`${result.non2xx} non-2xx responses`);
  if (result.errors > 0) failures.push(`${result.errors} connection errors (${result.timeouts} time-outs)`);
  if (result.requests.total === 0) failures.push('no responses');

  const row: BenchRow = {
    name: spec.name,
    requestsPerSecond: round(result.requests.average, 0),
    latencyP50Ms: result.latency.p50,
    latencyP99Ms: result.latency.p99,
    latencyMeanMs: round(result.latency.mean, 2),
    latencyP95Ms: sorted.length > 0 ? round(nearestRank(sorted, 0.95), 2) : null,
    requests: result.requests.total,
    non2xx: result.non2xx,
    errors: result.errors,
    timeouts: result.timeouts,
    serverCpuPercent: serverUs === null ? null : percent(serverUs),
    serverCpuUsPerRequest: serverUs === null || result.requests.total === 0 ? null : round(serverUs / result.requests.total, 1),
    loadCpuPercent: percent(loadUs),
    otherCpuPercent: serverUs === null ? null : Math.max(0, percent(machineUs - serverUs - loadUs - helperUs - (databaseUs ?? 0))),
    ...(spec.target.helperCpu ? { helperCpuPercent: percent(helperUs) } : {}),
    ...(databaseUs !== null
      ? { databaseCpuPercent: percent(databaseUs), databaseCpuUsPerRequest: result.requests.total === 0 ? null : round(databaseUs / result.requests.total, 1) }
      : {}),
    ratioToCeiling: null,
    targetRatio: spec.targetRatio ?? null,
    isCeiling: spec.isCeiling ?? false,
    pass: failures.length === 0,
    failures,
  };
  process.stdout.write(`${row.requestsPerSecond} req/s\n`);
  return { row, latenciesMs: measured };
}

/** Nearest-rank percentile of an ascending array. */
export function nearestRank(sorted: ArrayLike<number>, q: number): number {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))]!;
}

/**
 * Busy CPU time of the whole machine so far, in µs. Linux: /proc/stat, counting softirq (where
 * loopback TCP is processed) and steal, which os.cpus() leaves out; elsewhere os.cpus().
 */
export function machineBusyUs(): number {
  try {
    // cpu  user nice system idle iowait irq softirq steal guest guest_nice, in USER_HZ (100 on Linux)
    const fields = fs.readFileSync('/proc/stat', 'utf8').split('\n', 1)[0]?.trim().split(/\s+/).slice(1).map(Number) ?? [];
    if (fields.length >= 8 && fields.every(Number.isFinite)) {
      const [user = 0, nice = 0, system = 0, , , irq = 0, softirq = 0, steal = 0] = fields;
      return (user + nice + system + irq + softirq + steal) * 10_000;
    }
  } catch {
    // not Linux
  }
  let ms = 0;
  for (const { times } of os.cpus()) ms += times.user + times.nice + times.sys + times.irq;
  return ms * 1000;
}

/** Fills in every row's ratio to the suite's ceiling row and checks the targets. */
export function compareWithCeiling(rows: BenchRow[]): BenchRow[] {
  const ceiling = rows.find((r) => r.isCeiling);
  return rows.map((row) => {
    if (!ceiling || ceiling.requestsPerSecond === 0) {
      const failures = row.targetRatio !== null ? [...row.failures, 'no ceiling to compare with'] : row.failures;
      return { ...row, failures, pass: failures.length === 0 };
    }
    const ratio = round(row.requestsPerSecond / ceiling.requestsPerSecond, 3);
    const failures = [...row.failures];
    if (row.targetRatio !== null && ratio < row.targetRatio) {
      failures.push(`${pct(ratio)} of the ceiling, target ${pct(row.targetRatio)}`);
    }
    return { ...row, ratioToCeiling: ratio, failures, pass: failures.length === 0 };
  });
}

/** Checks a response before load is put on it, so the benchmark measures the answer it claims to. */
export async function expectResponse(
  label: string,
  url: string,
  init: RequestInit,
  check: (status: number, body: unknown, headers: Headers) => string | undefined,
): Promise<void> {
  const res = await fetch(url, init);
  const text = await res.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    // not JSON: the check sees the text
  }
  const problem = check(res.status, body, res.headers);
  if (problem) throw new Error(`${label}: ${problem} (HTTP ${res.status}: ${text.slice(0, 300)})`);
}

export function round(n: number, digits: number): number {
  const f = 10 ** digits;
  return Math.round(n * f) / f;
}

export function pct(ratio: number): string {
  return `${round(ratio * 100, 1)} %`;
}

const round2 = (n: number) => round(n, 2);

/** A row measured here rather than by autocannon: latencies in ms, server CPU over the window. */
export function plainRow(name: string, fields: Partial<BenchRow> & { latencies: number[]; requests: number; elapsedMs: number; serverCpuUs: number | null }): BenchRow {
  const sorted = [...fields.latencies].sort((a, b) => a - b);
  const { latencies: _, elapsedMs, serverCpuUs, ...rest } = fields;
  return {
    name,
    requestsPerSecond: elapsedMs > 0 ? Math.round((fields.requests / elapsedMs) * 1000) : 0,
    latencyP50Ms: round2(nearestRank(sorted, 0.5)),
    latencyP99Ms: round2(nearestRank(sorted, 0.99)),
    latencyMeanMs: sorted.length > 0 ? round2(sorted.reduce((a, b) => a + b, 0) / sorted.length) : 0,
    latencyP95Ms: sorted.length > 0 ? round2(nearestRank(sorted, 0.95)) : null,
    non2xx: 0,
    errors: 0,
    timeouts: 0,
    serverCpuPercent: serverCpuUs === null || elapsedMs <= 0 ? null : Math.round((serverCpuUs / (elapsedMs * 1000)) * 100),
    serverCpuUsPerRequest: serverCpuUs === null || fields.requests === 0 ? null : round(serverCpuUs / fields.requests, 1),
    loadCpuPercent: 0,
    otherCpuPercent: null,
    ratioToCeiling: null,
    targetRatio: null,
    isCeiling: false,
    pass: true,
    failures: [],
    ...rest,
  };
}

/** Milliseconds to two decimals, as every suite reports them. */
export const ms = (n: number) => round(n, 2);
/** A whole number with thousands separators ("1,234"). */
export const fmt = (n: number) => Math.round(n).toLocaleString('en-US');
/** A progress line on stderr (the tables go to stdout). */
export const progress = (text: string) => process.stderr.write(`  ${text}\n`);
