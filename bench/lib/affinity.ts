import { execFileSync } from 'node:child_process';
import os from 'node:os';

/** The cores the load generator and the server are pinned to, so neither drifts onto the other's. */
export interface CpuPinning {
  load: number;
  server: number;
}

/**
 * Pins every thread of `pid` (V8's GC helpers too) to one core with `taskset`. Returns false where
 * that is not possible (not Linux, no util-linux, a restricted container): the run goes on unpinned.
 */
export function pinToCpu(pid: number, cpu: number): boolean {
  if (os.platform() !== 'linux') return false;
  try {
    execFileSync('taskset', ['--all-tasks', '--cpu-list', '--pid', String(cpu), String(pid)], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/** Pins this process to the first core and returns the plan, or null with fewer than 2 cores or no taskset. */
export function pinLoadGenerator(): CpuPinning | null {
  const cpus = os.cpus().length;
  if (cpus < 2) return null;
  const plan = { load: 0, server: cpus - 1 };
  return pinToCpu(process.pid, plan.load) ? plan : null;
}

/**
 * Lets every thread of `pid` run on any core again (undoes `pinToCpu`). False where that is not
 * possible; the caller then knows the process stayed where it was.
 */
export function unpin(pid: number): boolean {
  const cpus = os.cpus().length;
  if (os.platform() !== 'linux') return false;
  try {
    execFileSync('taskset', ['--all-tasks', '--cpu-list', '--pid', `0-${cpus - 1}`, String(pid)], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/**
 * `taskset` with the arguments that start a command on every core (a child otherwise inherits the
 * pinned load generator's one core), or null where there is no taskset (the child then inherits).
 */
export function unpinnedLauncher(): { command: string; args: string[] } | null {
  if (os.platform() !== 'linux') return null;
  try {
    execFileSync('taskset', ['--version'], { stdio: 'ignore' });
  } catch {
    return null;
  }
  return { command: 'taskset', args: ['--cpu-list', `0-${os.cpus().length - 1}`] };
}
