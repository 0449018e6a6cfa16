/**
 * `npm run bench [-- <filter>...] [--duration=s] [--warmup=s] [--connections=n] [--cpu-prof[=dir]] [--no-pin] [--backends=sqlite,postgres]`
 *
 * Runs every benchmark file in `bench/` (each top-level `*.ts` but this one exports `name`,
 * `description` and `run(options)`; helpers live in `bench/lib/`), or those whose name contains a
 * filter, prints one table and writes `bench/results/<name>.json`. Exits 1 when a row misses its
 * target, sees a non-2xx answer or an error, or a benchmark fails to run.
 *
 * Suites that export `backends` (issue 25: chat, knowledge, analytics, durability) run their
 * storage cases on SQLite and on PostgreSQL, each row labelled with its backend. PostgreSQL rows
 * use a throwaway database on BENCH_DATABASE_URL's server (postgres://postgres@127.0.0.1:5432/postgres
 * by default); when it does not answer they are skipped, and the run says so at its start and end.
 * `--backends=sqlite` leaves them out, `--backends=postgres` runs only them.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { type BenchOptions, type BenchRow, type BenchSuite, DEFAULT_OPTIONS, pct } from './lib/harness.js';
import { pinLoadGenerator } from './lib/affinity.js';
import { killAllServers, stopAllServers } from './lib/server-process.js';
import { BACKEND_KINDS, type BackendKind, DATABASE_VARIABLES, dropAllDatabases, resolveBackends } from './lib/backends.js';

const COMPILED_DIR = path.dirname(fileURLToPath(import.meta.url)); // dist/bench
const SOURCE_DIR = path.resolve(COMPILED_DIR, '../../bench');
const RESULTS_DIR = path.join(SOURCE_DIR, 'results');
/** Other processes' CPU, in % of one core, above which a row's req/s are flagged as disturbed. */
const BUSY_MACHINE_PERCENT = 20;
const USAGE =
  'usage: npm run bench [-- <filter>...] [--duration=<s>] [--warmup=<s>] [--connections=<n>] [--cpu-prof[=<dir>]] [--no-pin] [--backends=sqlite,postgres]';

interface Args {
  filters: string[];
  options: BenchOptions;
  backends: BackendKind[];
}

function parseArgs(argv: string[]): Args {
  const options = { ...DEFAULT_OPTIONS };
  const filters: string[] = [];
  let backends: BackendKind[] = [...BACKEND_KINDS];
  const positive = (flag: string, value: string | undefined, min: number) => {
    const n = Number(value);
    if (value === undefined || !Number.isFinite(n) || n < min) throw new Error(`${flag} needs a number ≥ ${min}\n${USAGE}`);
    return n;
  };
  for (const arg of argv) {
    const [flag, value] = arg.startsWith('--') ? (arg.split(/=(.*)/s, 2) as [string, string | undefined]) : [arg, undefined];
    if (flag === '--duration') options.durationSeconds = positive(flag, value, 1);
    else if (flag === '--warmup') options.warmupSeconds = positive(flag, value, 0);
    else if (flag === '--connections') options.connections = positive(flag, value, 1);
    else if (flag === '--no-pin') options.pin = false;
    else if (flag === '--backends') {
      const kinds = (value ?? '').split(',').map((k) => k.trim()).filter(Boolean);
      if (kinds.length === 0 || !kinds.every((k) => (BACKEND_KINDS as readonly string[]).includes(k))) throw new Error(`--backends needs ${BACKEND_KINDS.join(' and/or ')}, comma-separated\n${USAGE}`);
      backends = [...new Set(kinds as BackendKind[])];
    }
    else if (flag === '--cpu-prof') options.cpuProfileDir = path.resolve(value || path.join(RESULTS_DIR, 'profiles'));
    else if (flag === '--help' || flag === '-h') {
      console.log(USAGE);
      process.exit(0);
    } else if (flag.startsWith('-')) throw new Error(`unknown option ${flag}\n${USAGE}`);
    else filters.push(flag);
  }
  return { filters, options, backends };
}

/** The benchmark files, found from the sources so a deleted one left behind in dist/ is not run. */
function suiteFiles(): string[] {
  return fs
    .readdirSync(SOURCE_DIR)
    .filter((f) => f.endsWith('.ts') && !f.endsWith('.d.ts') && f !== 'run.ts')
    .map((f) => f.slice(0, -'.ts'.length))
    .sort();
}

async function loadSuite(base: string): Promise<BenchSuite> {
  const mod = (await import(`./${base}.js`)) as Partial<BenchSuite>;
  if (typeof mod.name !== 'string' || typeof mod.run !== 'function') {
    throw new Error(`bench/${base}.ts must export name, description and run(options)`);
  }
  return { name: mod.name, description: mod.description ?? '', ...(mod.backends ? { backends: mod.backends } : {}), run: mod.run };
}

function machine() {
  const cpus = os.cpus();
  let commit: string | null = null;
  let dirty: boolean | null = null;
  try {
    const git = (...args: string[]) => execFileSync('git', args, { cwd: SOURCE_DIR, encoding: 'utf8', stdio: 'pipe' }).trim();
    commit = git('rev-parse', 'HEAD');
    dirty = git('status', '--porcelain') !== '';
  } catch {
    // not a git checkout: leave them null
  }
  return {
    node: process.version,
    v8: process.versions.v8,
    platform: `${os.platform()} ${os.release()}`,
    arch: os.arch(),
    cpus: cpus.length,
    cpuModel: cpus[0]?.model ?? 'unknown',
    memoryGb: Math.round(os.totalmem() / 2 ** 30),
    loadAverage: os.loadavg().map((n) => Math.round(n * 100) / 100),
    commit,
    dirty,
  };
}

function table(rows: BenchRow[]): string {
  const header = ['benchmark', 'req/s', 'p50 ms', 'p99 ms', 'ratio', 'target', 'result', 'server µs/req', 'server cpu', 'PG µs/req', 'other cpu'];
  const body = rows.map((r) => [
    r.name,
    r.requestsPerSecond.toLocaleString('en-US'),
    String(r.latencyP50Ms),
    String(r.latencyP99Ms),
    r.ratioToCeiling === null ? '—' : r.isCeiling ? 'ceiling' : pct(r.ratioToCeiling),
    r.targetRatio === null ? '—' : `≥ ${pct(r.targetRatio)}`,
    r.pass ? 'pass' : 'FAIL',
    r.serverCpuUsPerRequest === null ? '—' : String(r.serverCpuUsPerRequest),
    r.serverCpuPercent === null ? '—' : `${r.serverCpuPercent} %`,
    r.databaseCpuUsPerRequest == null ? '—' : String(r.databaseCpuUsPerRequest),
    r.otherCpuPercent === null ? '—' : `${r.otherCpuPercent} %`,
  ]);
  const all = [header, ...body];
  const widths = header.map((_, i) => Math.max(...all.map((cells) => (cells[i] ?? '').length)));
  const line = (cells: string[]) =>
    cells.map((c, i) => (i === 0 ? c.padEnd(widths[i] ?? 0) : c.padStart(widths[i] ?? 0))).join('  ');
  return [line(header), widths.map((w) => '-'.repeat(w)).join('  '), ...body.map(line)].join('\n');
}

async function main(): Promise<number> {
  const { filters, options, backends: requested } = parseArgs(process.argv.slice(2));
  const suites = await Promise.all(suiteFiles().map(loadSuite));
  const chosen = filters.length === 0 ? suites : suites.filter((s) => filters.some((f) => s.name.includes(f)));
  if (chosen.length === 0) {
    console.error(`No benchmark matches ${filters.join(', ')}; there are: ${suites.map((s) => s.name).join(', ')}`);
    return 1;
  }
  // Each row chooses its backend itself: a database selected in the caller's shell must not turn
  // the SQLite rows into PostgreSQL ones (or point PostgreSQL rows at a database they would fill).
  const inherited = DATABASE_VARIABLES.filter((v) => process.env[v] !== undefined);
  for (const v of inherited) delete process.env[v];
  if (inherited.length > 0) console.log(`Ignoring ${inherited.join(', ')} from the environment: PostgreSQL rows use a throwaway database on BENCH_DATABASE_URL's server.`);
  const { backends, skipped } = await resolveBackends(requested);
  options.backends = backends;
  const postgres = backends.find((b) => b.kind === 'postgres');
  const backendLine = postgres
    ? `PostgreSQL rows: ${postgres.server}, a throwaway database per server`
    : skipped
      ? `PostgreSQL rows SKIPPED: ${skipped}`
      : 'PostgreSQL rows left out (--backends)';
  if (options.cpuProfileDir) fs.mkdirSync(options.cpuProfileDir, { recursive: true });
  fs.mkdirSync(RESULTS_DIR, { recursive: true });

  if (options.pin) options.pinning = pinLoadGenerator();
  const info = machine();
  const pinned = options.pinning
    ? `load generator on cpu ${options.pinning.load}, servers on cpu ${options.pinning.server}`
    : 'unpinned';
  console.log(
    `Node ${info.node} on ${info.cpus} × ${info.cpuModel}; ${options.connections} connections, ` +
      `${options.warmupSeconds}s warm-up + ${options.durationSeconds}s per case; ${pinned}\n${backendLine}\n`,
  );
  let ok = true;
  const judged: { suite: string; row: BenchRow }[] = [];
  for (const suite of chosen) {
    const supported = suite.backends ?? ['sqlite'];
    if (!backends.some((b) => supported.includes(b.kind))) {
      console.log(`${suite.name}: skipped, it has rows for ${supported.join(' and ')} only and this run measures ${backends.map((b) => b.kind).join(', ') || 'no backend'}\n`);
      continue;
    }
    console.log(`${suite.name}: ${suite.description}`);
    const started = new Date();
    let rows: BenchRow[];
    try {
      rows = await suite.run(options);
    } catch (err) {
      ok = false;
      console.error(`\n${suite.name} failed: ${err instanceof Error ? err.message : String(err)}\n`);
      continue;
    }
    const pass = rows.every((r) => r.pass);
    ok &&= pass;
    for (const row of rows) judged.push({ suite: suite.name, row });
    console.log(`\n${table(rows)}\n`);
    for (const r of rows.filter((row) => !row.pass)) console.log(`  FAIL ${r.name}: ${r.failures.join('; ')}`);
    const busy = rows.filter((r) => (r.otherCpuPercent ?? 0) > BUSY_MACHINE_PERCENT);
    if (busy.length > 0) {
      console.log(
        `  NOTE other processes used > ${BUSY_MACHINE_PERCENT} % of a core during: ${busy.map((r) => r.name).join(', ')}; ` +
          'req/s are low there, "server µs/req" holds up better.',
      );
    }

    const file = path.join(RESULTS_DIR, `${suite.name}.json`);
    const storage = {
      backends: backends.filter((b) => supported.includes(b.kind)).map((b) => ({ kind: b.kind, server: b.server })),
      ...(skipped && supported.includes('postgres') ? { postgresSkipped: skipped } : {}),
    };
    const report = { suite: suite.name, description: suite.description, date: started.toISOString(), machine: info, options: { ...options, backends: undefined }, storage, pass, rows };
    fs.writeFileSync(file, `${JSON.stringify(report, null, 2)}\n`);
    console.log(`Wrote ${path.relative(process.cwd(), file)}${options.cpuProfileDir ? `; CPU profiles in ${options.cpuProfileDir}` : ''}\n`);
  }
  console.log(targetTable(judged));
  if (skipped) console.log(`\nPostgreSQL rows SKIPPED: ${skipped}`);
  return ok ? 0 : 1;
}

/** Every row that has a target, across the suites run: its figure against the target (the README's table). */
function targetTable(judged: { suite: string; row: BenchRow }[]): string {
  const lines: string[][] = [];
  for (const { suite, row } of judged) {
    const m = row as BenchRow & { metric?: string; value?: number; target?: { kind: 'min' | 'max'; value: number } | null };
    if (m.metric !== undefined && m.value !== undefined && m.target) {
      lines.push([suite, row.name, `${m.metric} ${m.value.toLocaleString('en-US')}`, `${m.target.kind === 'min' ? '≥' : '≤'} ${m.target.value.toLocaleString('en-US')}`, row.pass ? 'pass' : 'FAIL']);
    } else if (row.targetRatio !== null) {
      lines.push([suite, row.name, `${pct(row.ratioToCeiling ?? 0)} of the ceiling`, `≥ ${pct(row.targetRatio)}`, row.pass ? 'pass' : 'FAIL']);
    }
  }
  if (lines.length === 0) return '';
  const head = ['suite', 'case', 'figure', 'target', 'result'];
  const widths = head.map((h, i) => Math.max(h.length, ...lines.map((l) => l[i]!.length)));
  const fmt = (cells: string[]) => cells.map((c, i) => c.padEnd(widths[i]!)).join('  ').trimEnd();
  return ['Targets', fmt(head), fmt(widths.map((w) => '-'.repeat(w))), ...lines.map(fmt)].join('\n');
}

process.on('exit', killAllServers);
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    console.error(`\n${signal}: stopping the servers`);
    void stopAllServers()
      .then(dropAllDatabases)
      .finally(() => process.exit(130));
  });
}

main().then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    console.error(err instanceof Error ? err.message : err);
    killAllServers();
    process.exitCode = 1;
  },
);
