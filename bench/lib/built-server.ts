/**
 * The built server (`node dist/src/main.js serve`) as a child process, as an operator runs it: on a
 * data directory and a database (bench/lib/backends.ts), a free port on 127.0.0.1, the rate limit
 * off, a known admin key. The knowledge rows ingest into it; the durability rows kill it with -9.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { type BackendDatabase, serverEnv } from './backends.js';

const MAIN = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../src/main.js'); // dist/bench/lib → dist/src
/** The admin key every built server here starts with (SWITCHBOARD_ADMIN_KEY); `call` sends it. */
export const ADMIN_KEY = `sb_${'b'.repeat(40)}`;

/** A port nothing listens on right now, for the child server (it prints nothing at LOG_LEVEL=silent). */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as net.AddressInfo;
      probe.close(() => resolve(port));
    });
    probe.on('error', reject);
  });
}

/** CPU µs of a process, every thread, or of one thread given its stat file (Linux /proc; 10 ms ticks). */
export function processCpuUs(pid: number, statFile = `/proc/${pid}/stat`): number {
  const stat = fs.readFileSync(statFile, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10_000;
}

export interface Server {
  child: ChildProcess;
  origin: string;
  agent: http.Agent;
  /** Where it stores its data (PostgreSQL: whose processes' CPU counts with the server's). */
  db: BackendDatabase;
  /** Settles when the process has exited. */
  exited: Promise<void>;
  /** SIGTERM, SIGKILL after 15 s. */
  stop(): Promise<void>;
  /** kill -9, resolved once it is gone. */
  kill(): Promise<void>;
}

/**
 * `node dist/src/main.js serve` on `dataDir` and `db`'s database, allowed on every core (this process is pinned to the
 * first, and children inherit that): through `taskset` where there is one. Resolves once /health answers 200.
 * `env` adds configuration variables.
 */
export async function startServer(dataDir: string, db: BackendDatabase, cpuProfileDir?: string, env: Record<string, string> = {}): Promise<Server> {
  const port = await freePort();
  const cores = os.cpus().length;
  let taskset = false;
  try {
    execFileSync('taskset', ['--version'], { stdio: 'ignore' });
    taskset = os.platform() === 'linux';
  } catch {
    // no util-linux: the child inherits this process's affinity
  }
  // `--cpu-prof`: one profile per thread (main, ingestion and search workers), written when the server exits.
  const nodeArgs = [...(cpuProfileDir ? ['--cpu-prof', `--cpu-prof-dir=${cpuProfileDir}`] : []), MAIN, 'serve'];
  const childEnv = serverEnv(db, { SWITCHBOARD_DATA_DIR: dataDir, PORT: String(port), HOST: '127.0.0.1', LOG_LEVEL: 'silent', SWITCHBOARD_RATE_LIMIT: '0', SWITCHBOARD_ADMIN_KEY: ADMIN_KEY, ...env });
  const child = taskset
    ? spawn('taskset', ['--cpu-list', `0-${cores - 1}`, process.execPath, ...nodeArgs], { env: childEnv, stdio: ['ignore', 'ignore', 'inherit'] })
    : spawn(process.execPath, nodeArgs, { env: childEnv, stdio: ['ignore', 'ignore', 'inherit'] });
  const origin = `http://127.0.0.1:${port}`;
  const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const deadline = Date.now() + 30_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`the server exited with ${child.exitCode}`);
    try {
      if ((await call(agent, origin, 'GET', '/health')).status === 200) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) throw new Error('the server did not start within 30 s');
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    child,
    origin,
    agent,
    db,
    exited,
    async stop() {
      agent.destroy();
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
      await exited;
      clearTimeout(timer);
    },
    async kill() {
      child.kill('SIGKILL');
      await exited;
      agent.destroy();
    },
  };
}

/** One request with the admin key; `json()` parses the body on demand. */
export function call(agent: http.Agent, origin: string, method: string, url: string, body?: unknown): Promise<{ status: number; json: () => any }> {
  return new Promise((resolve, reject) => {
    const payload = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
    const req = http.request(`${origin}${url}`, {
      method,
      agent,
      headers: { authorization: `Bearer ${ADMIN_KEY}`, ...(payload ? { 'content-type': 'application/json', 'content-length': payload.length } : {}) },
    });
    req.on('response', (res) => {
      const parts: Buffer[] = [];
      res.on('data', (d: Buffer) => parts.push(d));
      res.on('end', () => {
        const text = Buffer.concat(parts).toString('utf8');
        resolve({ status: res.statusCode ?? 0, json: () => JSON.parse(text) });
      });
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(payload);
  });
}

