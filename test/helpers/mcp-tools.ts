// MCP tool hub tests (API.md §7): the fake server's paths, the server factory, log capture, polling.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import type { Logger } from 'pino';
import { expect } from 'vitest';
import { createLogger } from '../../src/lib/logger.js';
import { type Requester, tempDir } from './app.js';

/** The fake MCP server as a stdio command: plain JavaScript, run by this very node binary. */
export const FAKE_MCP_SERVER = fileURLToPath(new URL('../fakes/mcp-test-server.mjs', import.meta.url));

/** A credential value the tests look for everywhere it must not be. */
export const SECRET = 'sk-test-9f8e7d6c5b4a-do-not-leak';

/** POST /api/mcp/servers body for the fake stdio server. */
export function stdioServer(name: string, credentials: Record<string, string> = { API_TOKEN: SECRET }) {
  return { name, transport: 'stdio', command: process.execPath, args: [FAKE_MCP_SERVER], credentials };
}

/** POST /api/mcp/servers (admin key) expecting 201; returns the McpServer. */
export async function registerServer(t: Requester, body: Record<string, unknown>, as?: string) {
  const res = await t.request({ method: 'POST', url: '/api/mcp/servers', body, ...(as ? { as } : {}) });
  expect(res.statusCode, res.body).toBe(201);
  expect(res.headers.location).toBe(`/api/mcp/servers/${res.json().id}`);
  return res.json() as { id: string; name: string; status: string; error: string | null; tools: string[]; credentialNames: string[]; headerNames: string[] };
}

/** POST /api/mcp/tools/execute with the admin key (or `as`). */
export function execute(t: Requester, body: Record<string, unknown>, as?: string) {
  return t.request({ method: 'POST', url: '/api/mcp/tools/execute', body, ...(as ? { as } : {}) });
}

/** The JSON a fake tool answered with in its first text content. */
export function toolText(execution: { result: unknown }): string {
  const content = (execution.result as { content?: Array<{ text?: string }> }).content;
  return content?.[0]?.text ?? '';
}

/** Polls `check` until it returns a truthy value; fails after `timeoutMs`. */
export async function waitFor<T>(check: () => Promise<T> | T, timeoutMs = 8_000, what = 'condition'): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** The product's own logger (src/lib/logger.ts) at `trace`, writing into memory. */
export function captureLogs(): { logger: Logger; text(): string } {
  const chunks: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      chunks.push(chunk.toString('utf8'));
      done();
    },
  });
  const logger = createLogger('trace', stream);
  return { logger, text: () => chunks.join('') };
}

/** An address policy for the guard that allows exactly loopback 127.0.0.1 (every other private address stays refused). */
export const LOOPBACK_ONLY = { isAllowedAddress: (address: string) => address === '127.0.0.1' };

/**
 * The fake stdio servers this test process runs now: pids of its direct children started from
 * FAKE_MCP_SERVER (each vitest fork runs one test file, so none belong to another file).
 */
export function fakeServerPids(): number[] {
  let out: string;
  try {
    out = execFileSync('ps', ['-o', 'pid=,args=', '--ppid', String(process.pid)], { encoding: 'utf8' });
  } catch {
    return []; // ps exits 1 when there is no child at all
  }
  return out
    .split('\n')
    .filter((line) => line.includes(FAKE_MCP_SERVER))
    .map((line) => Number.parseInt(line.trim(), 10))
    .sort((a, b) => a - b);
}

/**
 * A folder for the fake's `hold` tool (`parameters: { dir }`): each call it starts leaves a marker
 * `started-<pid>-<n>`, and every held call answers (like whoami) once `release()` ran.
 */
export function holdFolder() {
  const dir = tempDir('switchboard-hold-');
  const started = () => fs.readdirSync(dir).filter((f) => f.startsWith('started-'));
  return {
    dir,
    started,
    /** The pids of the processes that started `hold` calls. */
    pids: () => [...new Set(started().map((f) => Number(f.split('-')[1])))],
    release: () => fs.writeFileSync(path.join(dir, 'release'), ''),
    remove: () => fs.rmSync(dir, { recursive: true, force: true }),
  };
}
