/**
 * Rows for benchmarks that call a service in this process instead of loading a server over HTTP.
 * They keep the BenchRow shape run.ts prints and stores: `requestsPerSecond` is operations per
 * second (chunks, queries), the "server" is this process (so `serverCpuUsPerRequest` is CPU µs per
 * operation, steadier than a rate on a shared machine), and `loadCpuPercent` is 0 (no separate load
 * generator). Each row also carries the figure it is judged on, its target and notes.
 */
import { type BenchRow, machineBusyUs, nearestRank, round } from './harness.js';

export interface MetricTarget {
  /** `min`: the value must be at least `value`; `max`: at most. */
  kind: 'min' | 'max';
  value: number;
}

export interface MetricRow extends BenchRow {
  /** What `value` measures, e.g. "chunks/s", "p95 ms", "recall@10". */
  metric: string;
  value: number;
  target: MetricTarget | null;
  notes: string[];
  latencyP95Ms: number | null;
}

/** Wall time, this process's CPU and the whole machine's busy CPU over one phase. */
export interface Window {
  elapsedMs: number;
  cpuUs: number;
  cpuPercent: number;
  /** CPU every other process used meanwhile, in % of one core. */
  otherCpuPercent: number;
}


/** Starts measuring; call the result to end the window. */
export function startWindow(): () => Window {
  const started = performance.now();
  const cpu = process.cpuUsage();
  const machine = machineBusyUs();
  return () => {
    const elapsedMs = performance.now() - started;
    const used = process.cpuUsage(cpu);
    const cpuUs = used.user + used.system;
    const machineUs = machineBusyUs() - machine;
    const percent = (us: number) => round((us / (elapsedMs * 1000)) * 100, 0);
    return { elapsedMs, cpuUs, cpuPercent: percent(cpuUs), otherCpuPercent: Math.max(0, percent(machineUs - cpuUs)) };
  };
}

/** Nearest-rank percentile of ascending `sorted`. */
export function percentile(sorted: number[], q: number): number {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))]!;
}

export interface MetricSpec {
  name: string;
  metric: string;
  value: number;
  target?: MetricTarget;
  /** Operations in the window (chunks, queries). */
  operations: number;
  window?: Window;
  /** Per-operation latencies in ms, any order. */
  latenciesMs?: number[];
  notes?: string[];
  /** The backend the row ran on (rows run on each; bench/lib/backends.ts). */
  backend?: BenchRow['backend'];
  /** CPU µs the PostgreSQL backends of the row's database spent in the window: reported, and not counted as other processes'. */
  databaseCpuUs?: number | null;
}

export function metricRow(spec: MetricSpec): MetricRow {
  const w = spec.window;
  const sorted = spec.latenciesMs ? [...spec.latenciesMs].sort((a, b) => a - b) : null;
  const ms = (n: number) => round(n, 2);
  const failures: string[] = [];
  const t = spec.target;
  if (t && (t.kind === 'min' ? !(spec.value >= t.value) : !(spec.value <= t.value))) {
    failures.push(`${spec.metric} ${spec.value}, target ${t.kind === 'min' ? '≥' : '≤'} ${t.value}`);
  }
  if (spec.operations === 0) failures.push('nothing measured');
  const dbUs = spec.databaseCpuUs ?? null;
  const dbPercent = dbUs !== null && w && w.elapsedMs > 0 ? round((dbUs / (w.elapsedMs * 1000)) * 100, 0) : null;
  return {
    name: spec.name,
    requestsPerSecond: w && w.elapsedMs > 0 ? round((spec.operations / w.elapsedMs) * 1000, 0) : 0,
    latencyP50Ms: sorted ? ms(percentile(sorted, 0.5)) : 0,
    latencyP99Ms: sorted ? ms(percentile(sorted, 0.99)) : 0,
    latencyMeanMs: sorted && sorted.length > 0 ? ms(sorted.reduce((a, b) => a + b, 0) / sorted.length) : 0,
    requests: spec.operations,
    non2xx: 0,
    errors: 0,
    timeouts: 0,
    serverCpuPercent: w ? w.cpuPercent : null,
    serverCpuUsPerRequest: w && spec.operations > 0 ? round(w.cpuUs / spec.operations, 1) : null,
    loadCpuPercent: 0,
    otherCpuPercent: w ? Math.max(0, w.otherCpuPercent - (dbPercent ?? 0)) : null,
    ...(spec.backend ? { backend: spec.backend } : {}),
    ...(dbUs !== null ? { databaseCpuPercent: dbPercent, databaseCpuUsPerRequest: spec.operations > 0 ? round(dbUs / spec.operations, 1) : null } : {}),
    ratioToCeiling: null,
    targetRatio: null,
    isCeiling: false,
    pass: failures.length === 0,
    failures,
    metric: spec.metric,
    value: spec.value,
    target: t ?? null,
    notes: spec.notes ?? [],
    latencyP95Ms: sorted ? ms(percentile(sorted, 0.95)) : null,
  };
}

/** The rows with their own figures (run.ts's table has no column for p95, recall or targets), then their notes. */
export function metricTable(rows: MetricRow[]): string {
  const header = ['case', 'metric', 'value', 'target', 'p50 ms', 'p95 ms', 'p99 ms', 'cpu µs/op', 'PG µs/op', 'other cpu'];
  const body = rows.map((r) => [
    r.name,
    r.metric,
    r.value.toLocaleString('en-US'),
    r.target ? `${r.target.kind === 'min' ? '≥' : '≤'} ${r.target.value.toLocaleString('en-US')}` : '—',
    r.latencyP95Ms === null ? '—' : String(r.latencyP50Ms),
    r.latencyP95Ms === null ? '—' : String(r.latencyP95Ms),
    r.latencyP95Ms === null ? '—' : String(r.latencyP99Ms),
    r.serverCpuUsPerRequest === null ? '—' : String(r.serverCpuUsPerRequest),
    r.databaseCpuUsPerRequest == null ? '—' : String(r.databaseCpuUsPerRequest),
    r.otherCpuPercent === null ? '—' : `${r.otherCpuPercent} %`,
  ]);
  const all = [header, ...body];
  const widths = header.map((_, i) => Math.max(...all.map((c) => (c[i] ?? '').length)));
  const line = (cells: string[]) => cells.map((c, i) => (i <= 1 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  ');
  const notes = rows.flatMap((r) => r.notes.map((n) => `  ${r.name}: ${n}`));
  return [line(header), widths.map((w) => '-'.repeat(w)).join('  '), ...body.map(line), '', ...notes].join('\n');
}

/** A judged row that also carries the raw figures it was computed from (bench/chat, channels, openai). */
export interface FiguredRow extends MetricRow {
  figures: Record<string, number | null>;
}

/** A load row judged on one figure against its target; extra `failures` fail it too. */
export function judge(
  base: BenchRow,
  spec: { metric: string; value: number; target?: MetricTarget; notes: string[]; figures: Record<string, number | null>; failures?: string[] },
): FiguredRow {
  const failures = [...base.failures, ...(spec.failures ?? [])];
  const t = spec.target;
  if (t && !(t.kind === 'min' ? spec.value >= t.value : spec.value <= t.value)) {
    failures.push(`${spec.metric} ${spec.value}, target ${t.kind === 'min' ? '≥' : '≤'} ${t.value}`);
  }
  return { ...base, latencyP95Ms: base.latencyP95Ms ?? null, metric: spec.metric, value: spec.value, target: t ?? null, notes: spec.notes, figures: spec.figures, pass: failures.length === 0, failures };
}

/** The row's percentiles from every response's own time (autocannon's own are whole milliseconds). */
export function sampled(measured: { row: BenchRow; latenciesMs: Float64Array }): BenchRow {
  const sorted = measured.latenciesMs.slice().sort();
  if (sorted.length === 0) return measured.row;
  const ms = (q: number) => round(nearestRank(sorted, q), 2);
  return { ...measured.row, latencyP50Ms: ms(0.5), latencyP95Ms: ms(0.95), latencyP99Ms: ms(0.99) };
}

/** A whole-number setting from the environment (BENCH_…), or `fallback`; anything else stops the run. */
export function envInt(name: string, fallback: number, min: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw.trim() === '') return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < min) throw new Error(`${name}=${raw}: expected a whole number ≥ ${min}`);
  return n;
}
