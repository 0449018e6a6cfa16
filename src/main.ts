#!/usr/bin/env node
import module from 'node:module';
import { fileURLToPath } from 'node:url';

// V8 keeps the code it compiled for the modules below on disk for the next start (Node's compile
// cache: in os.tmpdir(), or the folder NODE_COMPILE_CACHE names): ~15 % less CPU to start (issue 23).
// Hence the imports after it.
module.enableCompileCache();
const { runCli } = await import('./cli.js');

/** The `switchboard` command. Only this file touches the process: argv, signals, exit codes. */
const code = await runCli(process.argv.slice(2), {
  env: process.env,
  stdin: process.stdin,
  stdoutStream: process.stdout,
  stdout: (t) => process.stdout.write(t),
  stderr: (t) => process.stderr.write(t),
  isTTY: process.stderr.isTTY === true,
  nodePath: process.execPath,
  mainScript: fileURLToPath(import.meta.url),
  onServing: ({ stop, drainSeconds }) => {
    let stopping = false;
    const shutdown = (signal: string) => {
      if (stopping) {
        process.stderr.write(`${signal} again: exiting now.\n`);
        process.exit(1);
      }
      stopping = true;
      // stop() drains for SWITCHBOARD_DRAIN_SECONDS and then closes what is left: this is the last resort.
      setTimeout(() => {
        process.stderr.write(`${signal}: still stopping ${drainSeconds + 10} s later; exiting now.\n`);
        process.exit(1);
      }, (drainSeconds + 10) * 1000).unref();
      stop().then(
        () => process.exit(0),
        (err: unknown) => {
          process.stderr.write(`Shutdown failed: ${String(err)}\n`);
          process.exit(1);
        },
      );
    };
    process.on('SIGTERM', () => shutdown('SIGTERM'));
    process.on('SIGINT', () => shutdown('SIGINT'));
    // Start-up is over: what only it needed goes back to the OS (~30 MB of young generation). Not at
    // once: the health checks and requests that came with the start are answered first, not after
    // the collection's pause (measured: at once, the first /health waited ~0.1 s for it).
    // It brings node:v8 and node:vm, which nothing before needs: loaded then, not before /health.
    setTimeout(() => {
      // Written now rather than at exit, so a server that is killed still leaves it for the next start.
      module.flushCompileCache();
      void import('./lib/startup-memory.js').then(({ releaseStartupMemory }) => releaseStartupMemory());
    }, 250).unref();
  },
});
if (code !== 0) process.exitCode = code;
