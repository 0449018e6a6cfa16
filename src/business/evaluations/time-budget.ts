/**
 * User regexes under a time limit, counted in the check's own running (scorers.ts: a case's regex
 * and the patterns of its JSON Schema).
 */
import vm from 'node:vm';

// A case's regex, and the patterns of its JSON Schema (pattern, patternProperties), run against
// model output: a catastrophic one ((a+)+$) would block the event loop for hours. They run as a
// call from a script in a vm context, whose timeout terminates whatever JavaScript is running,
// the regex engine included. One context and one compiled script serve every call.
//
// The vm's timeout is wall-clock time, but the budget is the check's own running: on a loaded
// machine (or a fresh process, whose first run in the context pays for more than the check) the
// thread may spend most of a window not running at all, and a check that matches would read as
// timed out. So a window that runs out is weighed by the thread's CPU time in it: below the budget,
// the machine took the time and the check runs again in a window twice as long, until it has had
// its budget of running or GUARD_WALL_FACTOR budgets of wall-clock time have passed.
let sandbox: { context: vm.Context; script: vm.Script } | undefined;
/** What withinBudget answers for a check that ran out of its budget. */
export const TIMED_OUT = Symbol('timed out');
/** The first window is this much longer than the budget: the watchdog's own start runs in it. */
const GUARD_FIRST_WINDOW = 1.2;
/** Wall-clock time, in budgets, after which a check that has not had its budget of running still times out. */
const GUARD_WALL_FACTOR = 10;

/** This thread's CPU time in ms (the whole process's where Node has no threadCpuUsage: more, so never more lenient). */
const cpuMs: () => number =
  typeof process.threadCpuUsage === 'function'
    ? () => {
        const u = process.threadCpuUsage();
        return (u.user + u.system) / 1000;
      }
    : () => {
        const u = process.cpuUsage();
        return (u.user + u.system) / 1000;
      };

function sandboxed(): { context: vm.Context; script: vm.Script } {
  if (sandbox) return sandbox;
  const created = {
    context: vm.createContext({ call: () => undefined }, { codeGeneration: { strings: false, wasm: false } }),
    script: new vm.Script('call()'),
  };
  // Warm-up, outside any budget: the first run in a new context costs more than the calls after it.
  created.script.runInContext(created.context, { timeout: 1_000 });
  created.context.call = null;
  sandbox = created;
  return created;
}

function runOnce<T>(fn: () => T, windowMs: number): T | typeof TIMED_OUT {
  const { context, script } = sandboxed();
  context.call = fn;
  try {
    return script.runInContext(context, { timeout: windowMs }) as T;
  } catch (error) {
    if ((error as { code?: unknown } | null)?.code === 'ERR_SCRIPT_EXECUTION_TIMEOUT') return TIMED_OUT;
    throw error;
  } finally {
    context.call = null;
  }
}

/**
 * Runs `fn` (synchronous, free of side effects: it may run more than once) until it returns, or
 * until it has run `budgetMs` of this thread's CPU time in one window; TIMED_OUT then. Time the
 * thread spends not running (a busy machine, a stall) is not counted against the budget.
 */
export function withinBudget<T>(fn: () => T, budgetMs: number): T | typeof TIMED_OUT {
  const deadline = performance.now() + budgetMs * GUARD_WALL_FACTOR;
  let windowMs = Math.ceil(budgetMs * GUARD_FIRST_WINDOW);
  for (;;) {
    const before = cpuMs();
    const result = runOnce(fn, windowMs);
    if (result !== TIMED_OUT) return result;
    const left = deadline - performance.now();
    if (cpuMs() - before >= budgetMs || left < 1) return TIMED_OUT;
    windowMs = Math.max(1, Math.min(windowMs * 2, Math.floor(left)));
  }
}
