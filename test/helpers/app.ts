import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { FastifyInstance, InjectOptions, LightMyRequestResponse } from 'fastify';
import { buildApp } from '../../src/app.js';
import { loadConfig } from '../../src/config.js';
import { type AppContext, type ContextOverrides, createContext } from '../../src/context.js';
import { createTestDatabase, type TestBackend } from './postgres.js';

/** The password hashing cost of test apps. */
export const TEST_SCRYPT = { N: 2 ** 10, r: 8, p: 1 };

export interface TestApp {
  app: FastifyInstance;
  ctx: AppContext;
  dataDir: string;
  /** Admin key of the default workspace. */
  adminKey: string;
  /** `app.inject` with the admin key (or `as`) as bearer and a JSON body. */
  request(opts: Omit<InjectOptions, 'body'> & { as?: string | null; body?: unknown }): Promise<LightMyRequestResponse>;
  close(): Promise<void>;
}

/** What the request factories need: a TestApp, or the built server's client (test/helpers/built-server.ts). */
export type Requester = Pick<TestApp, 'request'>;

export function tempDir(prefix = 'switchboard-test-'): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), prefix));
}

export interface TestAppOptions {
  /** Where the data lives: SQLite in the temporary directory (default), or a fresh PostgreSQL database of its own. */
  backend?: TestBackend;
  /** Extra environment variables; the rate limit is off unless set here. */
  env?: Record<string, string>;
  overrides?: ContextOverrides;
  /** Runs before `ready()`, for routes the product does not have (one that throws, one that is slow). */
  extend?: (app: FastifyInstance, ctx: AppContext) => void;
}

/** A fresh app on a temporary database, ready (not listening), with the default workspace's admin key. */
export async function createTestApp(options: TestAppOptions = {}): Promise<TestApp> {
  const dataDir = tempDir();
  const database = options.backend?.kind === 'postgres' ? await createTestDatabase() : null;
  // A small pool: test files run in parallel against one server (max_connections 100 by default).
  // SWITCHBOARD_TEST_DATABASE_POOL=1 (one CI run) shows code that waits for a second connection while holding one.
  const pool = process.env.SWITCHBOARD_TEST_DATABASE_POOL ?? '4';
  const onPostgres = database ? { SWITCHBOARD_DATABASE_URL: database.url, SWITCHBOARD_SECRET: crypto.randomBytes(32).toString('base64'), SWITCHBOARD_DATABASE_POOL: pool } : {};
  const config = loadConfig({ SWITCHBOARD_DATA_DIR: dataDir, LOG_LEVEL: 'silent', SWITCHBOARD_RATE_LIMIT: '0', ...onPostgres, ...options.env });
  // Passwords hashed at a test's cost (2^10 instead of OWASP's 2^17: ~1 ms, not ~300 ms, a hash).
  const ctx = await createContext(config, { scrypt: TEST_SCRYPT, ...options.overrides });
  const boot = await ctx.services.auth.bootstrap(config.adminKey);
  const adminKey = boot?.key ?? config.adminKey;
  if (!adminKey) throw new Error('no admin key');
  const app = await buildApp(ctx);
  options.extend?.(app, ctx);
  await app.ready();
  let closed = false;
  return {
    app,
    ctx,
    dataDir,
    adminKey,
    request({ as, body, headers, ...opts }) {
      const h: Record<string, string> = { ...(headers as Record<string, string>) };
      const key = as === undefined ? adminKey : as;
      if (key !== null) h.authorization = `Bearer ${key}`;
      if (body !== undefined) {
        h['content-type'] ??= 'application/json';
        return app.inject({ ...opts, headers: h, payload: typeof body === 'string' ? body : JSON.stringify(body) });
      }
      return app.inject({ ...opts, headers: h });
    },
    async close() {
      if (closed) return;
      closed = true;
      await app.close();
      await ctx.close();
      await database?.drop();
      fs.rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
