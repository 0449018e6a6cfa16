// The built server (`node dist/src/main.js serve`) as a real child process, for the kill -9 tests:
// spawned on a data directory with a known admin key, resolved once its "Switchboard listening on"
// log line names its URL, and always killed by `killAll()`.
import { type ChildProcess, spawn } from 'node:child_process';
import path from 'node:path';
import type { InjectOptions, LightMyRequestResponse } from 'fastify';
import type { Requester } from './app.js';

export const ROOT = path.resolve(import.meta.dirname, '../..');
export const MAIN = path.join(ROOT, 'dist/src/main.js');

export interface BuiltServer {
  child: ChildProcess;
  url: string;
  exited: Promise<void>;
  /** What the server wrote on stderr so far (the start banner: the bootstrap key, the setup link). */
  stderr(): string;
}

export function builtServers(options: { dataDir: string; adminKey: string; listenTimeoutMs?: number; env?: Record<string, string> }) {
  const children = new Set<ChildProcess>();
  const listenTimeoutMs = options.listenTimeoutMs ?? 15_000;
  return {
    /** `switchboard serve` on 127.0.0.1, port 0, rate limit off, info logs (JSON on stdout). */
    serve(): Promise<BuiltServer> {
      const child = spawn(process.execPath, [MAIN, 'serve'], {
        cwd: ROOT,
        env: {
          PATH: process.env.PATH ?? '',
          SWITCHBOARD_DATA_DIR: options.dataDir,
          HOST: '127.0.0.1',
          PORT: '0',
          SWITCHBOARD_ADMIN_KEY: options.adminKey,
          SWITCHBOARD_RATE_LIMIT: '0',
          LOG_LEVEL: 'info',
          ...options.env,
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      children.add(child);
      const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
      let stderr = '';
      child.stderr!.on('data', (c: Buffer) => (stderr += c.toString('utf8')));
      return new Promise<BuiltServer>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`server did not listen within ${listenTimeoutMs} ms; stderr: ${stderr}`)), listenTimeoutMs);
        let buffered = '';
        let found = false;
        // pino writes JSON lines to stdout; stdout keeps being drained after the line is found.
        child.stdout!.on('data', (c: Buffer) => {
          if (found) return;
          buffered += c.toString('utf8');
          let nl: number;
          while ((nl = buffered.indexOf('\n')) >= 0) {
            const line = buffered.slice(0, nl);
            buffered = buffered.slice(nl + 1);
            let entry: { msg?: string; url?: string };
            try {
              entry = JSON.parse(line) as typeof entry;
            } catch {
              continue;
            }
            if (entry.msg?.startsWith('Switchboard listening on') && entry.url) {
              found = true;
              clearTimeout(timer);
              resolve({ child, url: entry.url, exited, stderr: () => stderr });
              return;
            }
          }
        });
        child.once('exit', (code, signal) => {
          clearTimeout(timer);
          if (!found) reject(new Error(`server exited (${code ?? signal}) before listening; stderr: ${stderr}`));
        });
      });
    },
    killAll() {
      for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    },
  };
}

/**
 * The built server's HTTP API over fetch with the `TestApp.request` signature, so the request
 * factories (test/helpers/factories.ts) and `expectProblem` work against it: the admin key (or
 * `as`) as bearer, a JSON body (a string or FormData is sent as it is).
 */
export function builtClient(server: Pick<BuiltServer, 'url'>, adminKey: string): Requester {
  return {
    async request({ as, body, headers, method = 'GET', url }: Omit<InjectOptions, 'body'> & { as?: string | null; body?: unknown }) {
      const h: Record<string, string> = { ...(headers as Record<string, string> | undefined) };
      const key = as === undefined ? adminKey : as;
      if (key !== null) h.authorization = `Bearer ${key}`;
      let payload: string | FormData | undefined;
      if (body instanceof FormData) payload = body;
      else if (body !== undefined) {
        h['content-type'] ??= 'application/json';
        payload = typeof body === 'string' ? body : JSON.stringify(body);
      }
      const res = await fetch(new URL(String(url), server.url), { method, headers: h, body: payload });
      const text = await res.text();
      // The parts of an inject response that the tests read (status, headers, body, json()).
      return {
        statusCode: res.status,
        headers: Object.fromEntries(res.headers),
        body: text,
        payload: text,
        json: () => JSON.parse(text) as unknown,
      } as unknown as LightMyRequestResponse;
    },
  };
}
