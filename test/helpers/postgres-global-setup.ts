// Decides once per vitest run which PostgreSQL server the PostgreSQL suites use, and hands its admin
// URL to every test file as `inject('postgresUrl')` (null when there is none):
//   (a) SWITCHBOARD_TEST_DATABASE_URL when set; it must answer, or the run fails, because someone
//       asked for that server;
//   (b) a server answering at postgres://postgres@127.0.0.1:5432/postgres with trust auth (CI's
//       Debian cluster, a developer's local one);
//   (c) a throwaway cluster started here from the installed server binaries, stopped and deleted at
//       teardown, so a machine with the package installed but no server running still tests both
//       backends.
// With none of them the PostgreSQL suites are skipped with one line saying why, except under
// CI=true, where a skip would let a PostgreSQL regression through green: there it fails the run.
//
// Two variables exist only to exercise (c) and the skip on a machine that has a server and binaries:
//   SWITCHBOARD_TEST_POSTGRES_PROBE_URL  the URL probed in (b) instead of 127.0.0.1:5432;
//   SWITCHBOARD_TEST_POSTGRES_BINDIR     where initdb and pg_ctl are, instead of `pg_config --bindir`
//                                        or /usr/lib/postgresql/*/bin (an empty directory rules (c) out).
// Messages never carry a password: every URL goes through `redactUrl`.
import { spawn, spawnSync } from 'node:child_process';
import { accessSync, constants as fsConstants, existsSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { appendFile, chown, mkdtemp, readFile, rm } from 'node:fs/promises';
import net, { type AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import pg from 'pg';
import type { TestProject } from 'vitest/node';

declare module 'vitest' {
  export interface ProvidedContext {
    /** Admin URL of the run's PostgreSQL server (a superuser, database `postgres`), or null. */
    postgresUrl: string | null;
  }
}

const LOCAL_URL = 'postgres://postgres@127.0.0.1:5432/postgres';
const PROBE_TIMEOUT_MS = 2_000;
const READY_TIMEOUT_MS = 30_000;

export default async function setup(project: TestProject): Promise<(() => Promise<void>) | undefined> {
  const chosen = await choosePostgres();
  project.provide('postgresUrl', chosen.url);
  if (chosen.url === null) {
    const reasons = chosen.reasons.join('; ');
    if (process.env.CI === 'true') throw new Error(`PostgreSQL suites cannot be skipped under CI=true, and there is no server: ${reasons}`);
    console.warn(`PostgreSQL suites skipped: ${reasons}`);
  }
  return chosen.teardown;
}

interface Choice {
  url: string | null;
  reasons: string[];
  teardown?: () => Promise<void>;
}

async function choosePostgres(): Promise<Choice> {
  const explicit = process.env.SWITCHBOARD_TEST_DATABASE_URL;
  if (explicit) {
    const failure = await probe(explicit);
    if (failure !== null) throw new Error(`SWITCHBOARD_TEST_DATABASE_URL (${redactUrl(explicit)}) does not answer: ${failure}`);
    return { url: explicit, reasons: [] };
  }
  const reasons = ['SWITCHBOARD_TEST_DATABASE_URL is not set'];

  const local = process.env.SWITCHBOARD_TEST_POSTGRES_PROBE_URL || LOCAL_URL;
  const localFailure = await probe(local);
  if (localFailure === null) return { url: local, reasons: [] };
  reasons.push(`nothing answers at ${redactUrl(local)} (${localFailure})`);

  const cluster = await startThrowawayCluster();
  if ('reason' in cluster) return { url: null, reasons: [...reasons, cluster.reason] };
  console.warn(`PostgreSQL suites use a throwaway cluster (${cluster.version}) on ${redactUrl(cluster.url)}`);
  return { url: cluster.url, reasons: [], teardown: cluster.stop };
}

/** Null when `url` accepts a connection and a query, else why not (one line). */
async function probe(url: string): Promise<string | null> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: PROBE_TIMEOUT_MS });
  // A server that drops the connection mid-probe emits 'error'; the failed promise already says so.
  client.on('error', () => {});
  try {
    await client.connect();
    await client.query('SELECT 1');
    return null;
  } catch (error) {
    return describeError(error);
  } finally {
    await client.end().catch(() => {});
  }
}

function describeError(error: unknown): string {
  if (error instanceof AggregateError && error.errors.length > 0) return describeError(error.errors[0]);
  if (error instanceof Error) {
    const code = (error as { code?: unknown }).code;
    const message = error.message.split('\n')[0] || error.name;
    return typeof code === 'string' && !message.includes(code) ? `${code}: ${message}` : message;
  }
  return String(error);
}

/** `url` with any password replaced by `***`; unparsable input is withheld entirely. */
export function redactUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = '***';
    return parsed.toString();
  } catch {
    return '(unparsable URL)';
  }
}

type Cluster = { url: string; version: string; stop: () => Promise<void> } | { reason: string };

async function startThrowawayCluster(): Promise<Cluster> {
  const bindir = findBindir();
  if (bindir === null) {
    const where = process.env.SWITCHBOARD_TEST_POSTGRES_BINDIR;
    return { reason: `no PostgreSQL server binaries (initdb, pg_ctl) ${where === undefined ? 'are installed' : `in ${where}`}` };
  }
  const initdb = path.join(bindir, 'initdb');
  const pgCtl = path.join(bindir, 'pg_ctl');

  // initdb and postgres refuse to run as root, so as root the cluster belongs to the postgres
  // system user that the distribution packages create.
  let asUser: string[] = [];
  let owner: { uid: number; gid: number } | null = null;
  if (process.getuid?.() === 0) {
    owner = systemUser('postgres');
    if (owner === null) return { reason: `running as root and there is no postgres system user to run ${initdb}` };
    const runuser = findExecutable('runuser');
    const setpriv = findExecutable('setpriv');
    if (runuser) asUser = [runuser, '-u', 'postgres', '--'];
    else if (setpriv) asUser = [setpriv, `--reuid=${owner.uid}`, `--regid=${owner.gid}`, '--init-groups'];
    else return { reason: 'running as root and neither runuser nor setpriv is there to drop to the postgres user' };
  }

  const dir = await mkdtemp(path.join(os.tmpdir(), 'switchboard-pg-'));
  const dataDir = path.join(dir, 'data');
  const logFile = path.join(dir, 'server.log');
  const run = (command: string, args: string[]) => runCommand([...asUser, command, ...args], dir);
  const stopArgv = [...asUser, pgCtl, 'stop', '-D', dataDir, '-m', 'immediate', '-w'];
  // Stops any postmaster the data dir has, including one whose start timed out while it was still
  // coming up, then deletes everything.
  const stopSync = () => {
    if (existsSync(path.join(dataDir, 'postmaster.pid'))) spawnSync(stopArgv[0]!, stopArgv.slice(1), { cwd: dir, stdio: 'ignore' });
    rmSync(dir, { recursive: true, force: true });
  };
  // The teardown below is the normal path; this catches a process that exits without running it.
  process.once('exit', stopSync);

  try {
    if (owner) await chown(dir, owner.uid, owner.gid);
    // C.UTF-8 is what Debian's packaged cluster uses: UTF-8 text with byte-order collation and
    // Unicode-aware lower()/upper(), the same on every machine. fsync=off is safe here because the
    // cluster dies with the run; it only spares the loaded CI disk.
    const init = await run(initdb, ['-D', dataDir, '-A', 'trust', '-U', 'postgres', '-E', 'UTF8', '--locale=C.UTF-8', '--no-sync']);
    if (init.code !== 0) throw new Error(`initdb failed: ${causeLine(init.output)}`);
    await appendFile(
      path.join(dataDir, 'postgresql.conf'),
      `\n# switchboard test run\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = '${dir.replaceAll("'", "''")}'\nfsync = off\n`,
    );

    // The free port can be taken between closing the probe socket and the postmaster binding it.
    let started = false;
    let url = '';
    let failure = '';
    for (let attempt = 0; attempt < 3 && !started; attempt++) {
      const port = await freePort();
      const start = await run(pgCtl, ['start', '-D', dataDir, '-l', logFile, '-o', `-p ${port}`, '-w', '-t', '60']);
      if (start.code === 0) {
        started = true;
        url = `postgres://postgres@127.0.0.1:${port}/postgres`;
      } else {
        failure = `pg_ctl start failed: ${causeLine(await readFile(logFile, 'utf8').catch(() => start.output))}`;
      }
    }
    if (!started) throw new Error(failure);
    await waitUntilAnswering(url);

    const version = lastLine((await runCommand([path.join(bindir, 'postgres'), '--version'], dir)).output);
    return {
      url,
      version,
      stop: async () => {
        process.removeListener('exit', stopSync);
        const stop = await runCommand(stopArgv, dir);
        await rm(dir, { recursive: true, force: true });
        if (stop.code !== 0) throw new Error(`pg_ctl stop failed: ${causeLine(stop.output)}`);
      },
    };
  } catch (error) {
    process.removeListener('exit', stopSync);
    stopSync();
    return { reason: `a throwaway cluster from ${bindir} did not start (${describeError(error)})` };
  }
}

async function waitUntilAnswering(url: string): Promise<void> {
  const deadline = Date.now() + READY_TIMEOUT_MS;
  for (;;) {
    const failure = await probe(url);
    if (failure === null) return;
    if (Date.now() > deadline) throw new Error(`the server did not answer within ${READY_TIMEOUT_MS} ms: ${failure}`);
    await delay(100);
  }
}

function findBindir(): string | null {
  const hasTools = (dir: string) => isExecutable(path.join(dir, 'initdb')) && isExecutable(path.join(dir, 'pg_ctl'));
  const override = process.env.SWITCHBOARD_TEST_POSTGRES_BINDIR;
  if (override !== undefined) return hasTools(override) ? override : null;
  const pgConfig = spawnSync('pg_config', ['--bindir'], { encoding: 'utf8' });
  const fromPgConfig = pgConfig.status === 0 ? pgConfig.stdout.trim() : '';
  if (fromPgConfig && hasTools(fromPgConfig)) return fromPgConfig;
  // Debian and Ubuntu keep each major version apart and put no initdb on PATH; prefer the newest.
  const debian = '/usr/lib/postgresql';
  const versions = existsSync(debian) ? readdirSync(debian).filter((v) => /^\d+(\.\d+)?$/.test(v)) : [];
  versions.sort((a, b) => Number(b) - Number(a));
  for (const version of versions) {
    const dir = path.join(debian, version, 'bin');
    if (hasTools(dir)) return dir;
  }
  return null;
}

function isExecutable(file: string): boolean {
  try {
    accessSync(file, fsConstants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** runuser and setpriv live in sbin, which a non-login PATH often lacks. */
function findExecutable(name: string): string | null {
  const dirs = [...(process.env.PATH ?? '').split(path.delimiter), '/usr/sbin', '/sbin', '/usr/bin', '/bin'];
  for (const dir of dirs) {
    if (dir && isExecutable(path.join(dir, name))) return path.join(dir, name);
  }
  return null;
}

function systemUser(name: string): { uid: number; gid: number } | null {
  let passwd: string;
  try {
    passwd = readFileSync('/etc/passwd', 'utf8');
  } catch {
    return null;
  }
  for (const line of passwd.split('\n')) {
    const [user, , uid, gid] = line.split(':');
    if (user === name && uid && gid) return { uid: Number(uid), gid: Number(gid) };
  }
  return null;
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

/** Runs a command to its end with stdout and stderr together; never throws for a non-zero exit. */
function runCommand(argv: string[], cwd: string): Promise<{ code: number; output: string }> {
  return new Promise((resolve) => {
    const [command, ...args] = argv;
    // cwd is the temp dir: the postgres user may not be allowed into the repository's directory.
    const child = spawn(command!, args, { cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
    child.once('error', (error) => resolve({ code: -1, output: `${output}${error.message}` }));
    child.once('close', (code) => resolve({ code: code ?? -1, output }));
  });
}

/** The last line that reports an error, which names the cause (a taken port, a missing locale). */
function causeLine(text: string): string {
  const lines = text.split('\n').filter((line) => /\b(FATAL|ERROR|PANIC)\b|error:/.test(line));
  return lines.at(-1)?.trim() ?? lastLine(text);
}

function lastLine(text: string): string {
  const lines = text.split('\n').map((line) => line.trim()).filter(Boolean);
  return lines.at(-1) ?? '(no output)';
}
