/**
 * Start-up (issue 23 item 5, issue 40 item 19): `node dist/src/main.js serve` on an existing data
 * directory, as a person restarting the server would run it, held against a bare fastify server
 * (bench/lib/bare-fastify.ts: the project's fastify, one GET /health route) started by the same node
 * in the same run.
 *  - A data directory is made and initialised by one start and a graceful stop (migrations, the
 *    bootstrap key, the secret key file), so every measured start opens an existing database. That
 *    start also fills Node's compile cache (src/main.ts), as any earlier start on the machine would;
 *    one unmeasured start of the bare server warms the file cache for it likewise.
 *  - Then BENCH_STARTUP_RUNS pairs (default 10), one process at a time, each on a free port on
 *    127.0.0.1 (Switchboard with the offline model and no channel), the bare server and Switchboard
 *    alternately, the order flipped every pair so neither always follows the other: the time from
 *    spawn to the first 200 on GET /health (polled every 5 ms), the CPU the process used until then,
 *    its RSS (VmRSS of /proc/<pid>/status) 1 s after that answer, and a graceful stop (SIGTERM, exit
 *    code 0) before the next.
 *  - Targets: Switchboard's median to /health at most 2 × the bare server's median in the same run,
 *    and ≤ 110 MiB idle RSS. The machine is shared, so the CPU to /health (steadier than wall time
 *    when other processes compete) and its ratio, and the other processes' CPU during the runs, are
 *    reported beside them.
 * BENCH_STARTUP_MAIN points at another build's main.js (to compare two checkouts).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { unpinnedLauncher } from './lib/affinity.js';
import { type BenchOptions, type BenchRow, machineBusyUs, round } from './lib/harness.js';
import { type MetricRow, metricRow, metricTable, percentile, type Window } from './lib/in-process.js';

export const name = 'startup';
export const description = 'node dist/src/main.js serve on an existing data directory against a bare fastify server, alternately: spawn → first 200 on /health, its ratio, and idle RSS 1 s later (medians of 10 pairs)';

const MAIN = process.env.BENCH_STARTUP_MAIN
  ? path.resolve(process.env.BENCH_STARTUP_MAIN)
  : path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../src/main.js');
const BARE = path.resolve(path.dirname(fileURLToPath(import.meta.url)), 'lib/bare-fastify.js');
const ADMIN_KEY = 'sb_benchstartup0123456789abcdefghijklmnopqr';
/** Switchboard's median to /health over the bare server's, in the same run. */
const RATIO_TARGET = 2;
const RSS_TARGET_MIB = 110;
const SETTLE_MS = 1_000;
const POLL_MS = 5;
const START_TIMEOUT_MS = 30_000;
const STOP_TIMEOUT_MS = 15_000;
/** USER_HZ: /proc/<pid>/stat counts CPU in ticks of 10 ms. */
const TICK_MS = 10;

function runCount(): number {
  const raw = process.env.BENCH_STARTUP_RUNS ?? '10';
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1) throw new Error(`BENCH_STARTUP_RUNS=${raw}: expected a whole number ≥ 1`);
  return n;
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

/** The status of GET /health, or null when nothing answers yet. */
function health(port: number): Promise<number | null> {
  return new Promise((resolve) => {
    const req = http.get({ host: '127.0.0.1', port, path: '/health', agent: false }, (res) => {
      res.resume();
      res.once('end', () => resolve(res.statusCode ?? null));
    });
    req.once('error', () => resolve(null));
    req.setTimeout(5_000, () => req.destroy());
  });
}

/** User + system CPU of a running process (all its threads), in ms. */
function cpuMs(pid: number): number {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) * TICK_MS;
}

function status(pid: number): { rssMiB: number; threads: number } {
  const text = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  const field = (key: string) => Number(new RegExp(`^${key}:\\s+(\\d+)`, 'm').exec(text)?.[1] ?? NaN);
  return { rssMiB: round(field('VmRSS') / 1024, 1), threads: field('Threads') };
}

interface Start {
  child: ChildProcess;
  port: number;
  spawnedAt: number;
  output: () => string;
}

/** What is started: Switchboard on a data directory, or the bare fastify server. */
type Subject = { kind: 'switchboard'; dataDir: string } | { kind: 'bare' };

function serve(subject: Subject, port: number, options: BenchOptions): Start {
  const tag = subject.kind === 'bare' ? 'bare' : 'startup';
  const profile = options.cpuProfileDir ? ['--cpu-prof', `--cpu-prof-dir=${path.join(options.cpuProfileDir, `${tag}-${Date.now()}`)}`] : [];
  const node = subject.kind === 'bare' ? [...profile, BARE] : [...profile, MAIN, 'serve'];
  // run.ts pins itself to one core; the server gets every core, as it would outside the bench.
  const launcher = options.pinning ? unpinnedLauncher() : null;
  const env: Record<string, string> = { PATH: process.env.PATH ?? '', HOME: os.tmpdir(), HOST: '127.0.0.1', PORT: String(port) };
  if (subject.kind === 'switchboard') Object.assign(env, { SWITCHBOARD_DATA_DIR: subject.dataDir, SWITCHBOARD_ADMIN_KEY: ADMIN_KEY, LOG_LEVEL: 'info' });
  const spawnedAt = performance.now();
  const child = launcher
    ? spawn(launcher.command, [...launcher.args, process.execPath, ...node], { env, stdio: ['ignore', 'pipe', 'pipe'] })
    : spawn(process.execPath, node, { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  const keep = (chunk: Buffer) => {
    out = (out + chunk.toString('utf8')).slice(-4_000);
  };
  child.stdout!.on('data', keep);
  child.stderr!.on('data', keep);
  return { child, port, spawnedAt, output: () => out };
}

/** Polls /health until it answers 200; the time from spawn to that answer, in ms. */
async function untilHealthy(start: Start): Promise<number> {
  for (;;) {
    const code = await health(start.port);
    const now = performance.now();
    if (code === 200) return now - start.spawnedAt;
    if (start.child.exitCode !== null || start.child.signalCode !== null) {
      throw new Error(`the server exited (${start.child.exitCode ?? start.child.signalCode}) before /health answered:\n${start.output()}`);
    }
    if (now - start.spawnedAt > START_TIMEOUT_MS) throw new Error(`no 200 on /health within ${START_TIMEOUT_MS} ms:\n${start.output()}`);
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
  }
}

/** SIGTERM, and the exit code (a graceful stop exits 0). */
async function stop(start: Start): Promise<number | null> {
  const { child } = start;
  if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), STOP_TIMEOUT_MS);
  try {
    return await exited;
  } finally {
    clearTimeout(timer);
  }
}

interface Measured {
  healthMs: number;
  cpuMs: number;
  rssMiB: number;
  threads: number;
}

async function measureOne(subject: Subject, options: BenchOptions): Promise<Measured> {
  const start = serve(subject, await freePort(), options);
  try {
    const healthMs = await untilHealthy(start);
    const cpu = cpuMs(start.child.pid!);
    await new Promise((resolve) => setTimeout(resolve, SETTLE_MS));
    const idle = status(start.child.pid!);
    const code = await stop(start);
    if (code !== 0) throw new Error(`the server exited ${code} on SIGTERM:\n${start.output()}`);
    return { healthMs: round(healthMs, 1), cpuMs: cpu, rssMiB: idle.rssMiB, threads: idle.threads };
  } finally {
    if (start.child.exitCode === null && start.child.signalCode === null) start.child.kill('SIGKILL');
  }
}

const median = (values: number[]) => percentile([...values].sort((a, b) => a - b), 0.5);
const p90 = (values: number[]) => percentile([...values].sort((a, b) => a - b), 0.9);

const ratio = (a: number, b: number) => (b > 0 ? round(a / b, 2) : Number.POSITIVE_INFINITY);

export async function run(options: BenchOptions): Promise<BenchRow[]> {
  for (const file of [MAIN, BARE]) if (!fs.existsSync(file)) throw new Error(`${file} does not exist: build first (npx tsc -p tsconfig.json)`);
  if (os.platform() !== 'linux') throw new Error('the start-up bench reads /proc: Linux only');
  const runs = runCount();
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'switchboard-bench-startup-'));
  const switchboard: Subject = { kind: 'switchboard', dataDir };
  const bare: Subject = { kind: 'bare' };
  try {
    process.stdout.write(`  initialising ${dataDir} (one start and a graceful stop)... `);
    const first = await measureOne(switchboard, options);
    const firstBare = await measureOne(bare, options);
    process.stdout.write(`/health after ${first.healthMs} ms (bare fastify: ${firstBare.healthMs} ms)\n`);

    const measured: Measured[] = [];
    const floor: Measured[] = [];
    const loadBefore = os.loadavg()[0]!;
    const started = performance.now();
    const machineBefore = machineBusyUs();
    const ownBefore = process.cpuUsage();
    for (let i = 0; i < runs; i++) {
      // Alternately, and each pair in the other order than the one before.
      const order: Subject[] = i % 2 === 0 ? [bare, switchboard] : [switchboard, bare];
      for (const subject of order) {
        const m = await measureOne(subject, options);
        (subject.kind === 'bare' ? floor : measured).push(m);
      }
      const m = measured[i]!;
      const b = floor[i]!;
      process.stdout.write(
        `  pair ${i + 1}/${runs}: /health ${m.healthMs} ms (cpu ${m.cpuMs} ms), idle RSS ${m.rssMiB} MiB, ${m.threads} threads; bare fastify ${b.healthMs} ms (cpu ${b.cpuMs} ms), ${b.rssMiB} MiB\n`,
      );
    }
    const elapsedMs = performance.now() - started;
    const own = process.cpuUsage(ownBefore);
    // Busy CPU of the whole machine minus this process and the servers (counted until their /health
    // answer; their idle second and shutdown are small): what others ran meanwhile.
    const serversUs = [...measured, ...floor].reduce((sum, m) => sum + m.cpuMs * 1000, 0);
    const otherUs = Math.max(0, machineBusyUs() - machineBefore - own.user - own.system - serversUs);
    const percent = (us: number) => round((us / (elapsedMs * 1000)) * 100, 0);
    const windowOf = (starts: Measured[]): Window => {
      const cpuUs = starts.reduce((sum, m) => sum + m.cpuMs * 1000, 0);
      return { elapsedMs, cpuUs, cpuPercent: percent(cpuUs), otherCpuPercent: percent(otherUs) };
    };
    const window = windowOf(measured);
    const bareWindow = windowOf(floor);
    const loadAfter = os.loadavg()[0]!;
    const healthMs = measured.map((m) => m.healthMs);
    const cpu = measured.map((m) => m.cpuMs);
    const rss = measured.map((m) => m.rssMiB);
    const bareMs = floor.map((m) => m.healthMs);
    const bareCpu = floor.map((m) => m.cpuMs);
    const pairRatios = measured.map((m, i) => ratio(m.healthMs, floor[i]!.healthMs));
    const machine = `${os.cpus().length} cores; load average ${round(loadBefore, 2)} before, ${round(loadAfter, 2)} after; other processes used ${window.otherCpuPercent} % of a core meanwhile`;
    const spread = (values: number[], unit: string) => `min ${Math.min(...values)} ${unit}, p90 ${p90(values)} ${unit}, max ${Math.max(...values)} ${unit}`;

    const rows: MetricRow[] = [
      metricRow({
        name: 'bare fastify: spawn → first 200 on /health',
        metric: 'median ms',
        value: median(bareMs),
        operations: runs,
        window: bareWindow,
        latenciesMs: bareMs,
        notes: [`${runs} starts of bench/lib/bare-fastify.ts (one route), alternating with Switchboard's: ${spread(bareMs, 'ms')}; CPU until /health ${spread(bareCpu, 'ms')}; idle RSS median ${median(floor.map((m) => m.rssMiB))} MiB`],
      }),
      metricRow({
        name: 'spawn → first 200 on /health',
        metric: 'median ms',
        value: median(healthMs),
        operations: runs,
        window,
        latenciesMs: healthMs,
        notes: [`${runs} starts on an existing data directory: ${spread(healthMs, 'ms')}; ${machine}`],
      }),
      metricRow({
        name: 'spawn → /health over bare fastify',
        metric: 'ratio of medians',
        value: ratio(median(healthMs), median(bareMs)),
        target: { kind: 'max', value: RATIO_TARGET },
        operations: runs,
        window,
        notes: [`median ${median(healthMs)} ms over the bare server's ${median(bareMs)} ms in the same run; pair by pair: median ${median(pairRatios)}, ${spread(pairRatios, '×')}`],
      }),
      metricRow({
        name: 'spawn → first 200 on /health, p90',
        metric: 'p90 ms',
        value: p90(healthMs),
        operations: runs,
        window,
        latenciesMs: healthMs,
      }),
      metricRow({
        name: 'CPU until /health answers',
        metric: 'median cpu ms',
        value: median(cpu),
        operations: runs,
        window,
        notes: [
          `user + system CPU of the server process (every thread) when /health first answered: ${spread(cpu, 'ms')}; ` +
            `${ratio(median(cpu), median(bareCpu))} × the bare server's ${median(bareCpu)} ms (CPU is steadier than wall time on a shared machine)`,
        ],
      }),
      metricRow({
        name: `idle RSS ${SETTLE_MS / 1000} s after /health`,
        metric: 'median MiB',
        value: median(rss),
        target: { kind: 'max', value: RSS_TARGET_MIB },
        operations: runs,
        window,
        notes: [`VmRSS of the server process: ${spread(rss, 'MiB')}; threads ${Math.min(...measured.map((m) => m.threads))}–${Math.max(...measured.map((m) => m.threads))}`],
      }),
    ];
    console.log(`\n${metricTable(rows)}`);
    return rows;
  } finally {
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}
