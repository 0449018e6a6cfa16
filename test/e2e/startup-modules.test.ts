// What `switchboard serve` loads at start-up (issue 23, issue 40 item 19): the Slack and Discord
// bridges' platforms, the openai package, the MCP SDK's server and client sides (v1 and v2), the
// PostgreSQL driver, Ajv, the document extractors' libraries, the OpenAPI document's plugins and the
// console's file server load when something first needs them, not at every start; a configured
// Slack channel still loads Bolt at start-up. The CLI's commands load what they use: `--help`
// nothing but the command line, `keys create` the database and no HTTP server. Module presence, not
// time: the built server (and CLI) runs with a hook that lists every module it loaded
// (test/fakes/module-log.mjs).
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { generateKeySecret } from '../../src/core/auth/keys.js';
import { createTestApp, tempDir } from '../helpers/app.js';
import { builtServers, MAIN, ROOT } from '../helpers/built-server.js';
import { createTestDatabase, postgresUrl } from '../helpers/postgres.js';
import { createChannel, createPersona } from '../helpers/factories.js';

const HOOK = pathToFileURL(path.resolve(import.meta.dirname, '../fakes/module-log.mjs')).href;
/** Slack's Web API on a port nothing listens on: a Slack channel's bridge starts, and cannot connect. */
const NO_SLACK = 'http://127.0.0.1:9/api/';

/** Packages (and SDK parts) no server start loads unless configured to use them. */
const LAZY = {
  slack: '/node_modules/@slack/bolt/',
  slackWebApi: '/node_modules/@slack/web-api/',
  discord: '/node_modules/discord.js/',
  discordParts: '/node_modules/@discordjs/',
  openai: '/node_modules/openai/',
  mcpServer: '/node_modules/@modelcontextprotocol/sdk/dist/esm/server/mcp.js',
  mcpTransport: '/node_modules/@modelcontextprotocol/sdk/dist/esm/server/webStandardStreamableHttp.js',
  // The SDK's v2 server: the 2026-07-28 lane of /mcp (src/mcp/server-modern.ts).
  mcpModernServer: '/node_modules/@modelcontextprotocol/server/',
  // Node's request and response as the transport's fetch ones (src/mcp/http.ts).
  honoNodeServer: '/node_modules/@hono/node-server/',
  mcpClient: '/node_modules/@modelcontextprotocol/sdk/dist/esm/client/index.js',
  // The SDK's v2 client: tool servers (src/core/tools/mcp-clients.ts) and their OAuth (tool-oauth.ts).
  mcpModernClient: '/node_modules/@modelcontextprotocol/client/',
  // The protocol's message schemas (hundreds of zod schemas built at import).
  mcpTypes: '/node_modules/@modelcontextprotocol/sdk/dist/esm/types.js',
  swagger: '/node_modules/@fastify/swagger/',
  swaggerUi: '/node_modules/@fastify/swagger-ui/',
  staticFiles: '/node_modules/@fastify/static/',
  // Routes validate with zod; Ajv is for external tools' schemas only (src/core/tools/json-schema.ts).
  ajv: '/node_modules/ajv/',
  // The PostgreSQL driver, only with SWITCHBOARD_DATABASE_URL (src/db/open.ts).
  pg: '/node_modules/pg/',
  // CORS only when SWITCHBOARD_CORS_ORIGINS is set.
  cors: '/node_modules/@fastify/cors/',
  // Document extraction, at the first source of its kind (src/core/knowledge/extractors/).
  pdf: '/node_modules/unpdf/',
  docx: '/node_modules/mammoth/',
  dom: '/node_modules/linkedom/',
  readability: '/node_modules/@mozilla/readability/',
  csv: '/node_modules/csv-parse/',
  // OIDC sign-in, at its first use (src/core/people/oidc.client.ts), even when configured.
  openidClient: '/node_modules/openid-client/',
  oauth4webapi: '/node_modules/oauth4webapi/',
};

/** Modules of ours a restart does without: a migration's (only when one is pending, src/db/migrations/index.ts), a document extractor's (at the first file of its kind). */
const OWN_LAZY = {
  migration: '/dist/src/db/migrations/001-initial.js',
  markdownExtractor: '/dist/src/core/knowledge/extractors/markdown.js',
  pdfExtractor: '/dist/src/core/knowledge/extractors/pdf.js',
};

/** Many-file libraries the built server loads from dist/vendor/ (scripts/bundle-vendor.mjs), never from their package: kysely, zod, fastify and fastify's own dependencies, pino, @fastify/multipart. */
const BUNDLED = ['/node_modules/kysely/', '/node_modules/zod/', '/node_modules/fastify/', '/node_modules/fastify-type-provider-zod/', '/node_modules/avvio/', '/node_modules/find-my-way/', '/node_modules/semver/', '/node_modules/@fastify/multipart/', '/node_modules/@fastify/busboy/', '/node_modules/pino/', '/node_modules/@modelcontextprotocol/sdk/'];

const loads = (modules: string[], part: string) => modules.some((url) => url.includes(part));

/**
 * The built command runs its own code bundled (scripts/bundle-server.mjs): dist/server/'s files, each
 * holding modules of dist (dist/src/…, dist/vendor/…) as dist/server/modules.json lists them. A file
 * of it loads, and every module it holds runs (its top level is theirs): the log gains their paths,
 * so the checks below read as they would for the unbundled modules. A lazily imported module sits in
 * a file of its own, or in one shared only with other lazy ones.
 */
const BUNDLE = path.join(ROOT, 'dist/server');
function withBundled(log: string[]): string[] {
  const held = JSON.parse(fs.readFileSync(path.join(BUNDLE, 'modules.json'), 'utf8')) as Record<string, string[]>;
  const prefix = pathToFileURL(BUNDLE).href + '/';
  const expanded = log.flatMap((url) => (url.startsWith(prefix) ? (held[url.slice(prefix.length)] ?? []).map((m) => pathToFileURL(path.join(ROOT, 'dist', m)).href) : []));
  return [...log, ...expanded];
}

/** The bundle ran, not tsc's modules: of dist/src, only main.js (it turns the compile cache on first) loads by its own path. */
function expectBundled(log: string[]) {
  expect(loads(log, '/dist/server/cli.js')).toBe(true);
  const own = pathToFileURL(path.join(ROOT, 'dist/src')).href + '/';
  expect(log.filter((url) => url.startsWith(own))).toEqual([pathToFileURL(MAIN).href]);
}

describe('modules a server start loads (built server)', () => {
  const dirs: string[] = [];
  const stops: Array<() => void> = [];
  afterAll(() => {
    for (const stop of stops) stop();
    for (const dir of dirs) fs.rmSync(dir, { recursive: true, force: true });
  });

  /** Serves the data directory, runs `use` against it, stops it with SIGTERM and answers the modules it loaded. */
  async function modulesOf(dataDir: string, key: string, use: (url: string) => Promise<void> = async () => {}, env: Record<string, string> = {}): Promise<string[]> {
    const logFile = path.join(dataDir, 'modules.txt');
    fs.rmSync(logFile, { force: true });
    const { serve, killAll } = builtServers({ dataDir, adminKey: key, env: { NODE_OPTIONS: `--import=${HOOK}`, MODULE_LOG: logFile, SWITCHBOARD_SLACK_API_URL: NO_SLACK, ...env } });
    stops.push(killAll);
    const server = await serve();
    expect((await fetch(`${server.url}/health`)).status).toBe(200);
    await use(server.url);
    server.child.kill('SIGTERM');
    await server.exited;
    expect(server.child.exitCode).toBe(0);
    const log = fs.readFileSync(logFile, 'utf8').split('\n');
    expectBundled(log);
    return withBundled(log);
  }

  it('with no channel and the offline model, restarted: no platform SDK, no openai, no MCP server or client, no OpenAPI plugins, no file server, no migration or document extractor', async () => {
    const dataDir = tempDir('switchboard-startup-modules-');
    dirs.push(dataDir);
    const key = generateKeySecret();
    // The first start migrates the new database; a restart finds it up to date and loads no migration.
    const first = await modulesOf(dataDir, key);
    expect(loads(first, OWN_LAZY.migration)).toBe(true);
    // OIDC configured (a provider nothing answers at): the client loads at the first sign-in, not at start.
    const modules = await modulesOf(dataDir, key, async () => {}, { SWITCHBOARD_OIDC_ISSUER: 'http://127.0.0.1:9', SWITCHBOARD_OIDC_CLIENT_ID: 'switchboard', SWITCHBOARD_OIDC_CLIENT_SECRET: 'not-used' });
    // The hook sees the server's own modules (the test would pass vacuously otherwise).
    expect(loads(modules, '/dist/vendor/fastify.js')).toBe(true);
    expect(loads(modules, '/dist/src/app.js')).toBe(true);
    // The many-file libraries come from their bundles (scripts/bundle-vendor.mjs), in one copy each.
    for (const part of BUNDLED) expect(loads(modules, part), part).toBe(false);
    for (const [name, part] of Object.entries({ ...LAZY, ...OWN_LAZY })) expect(loads(modules, part), name).toBe(false);
    // Node's bundled undici (fetch, WebSocket) loads when an ES module imports node:http (lib/node-http.ts).
    expect(modules).toContain('NativeModule internal/http');
    expect(modules).not.toContain('NativeModule internal/deps/undici/undici');
  });

  it.skipIf(!postgresUrl())('with SWITCHBOARD_DATABASE_URL: the PostgreSQL driver loads, SQLite’s does not', async () => {
    const dataDir = tempDir('switchboard-startup-modules-');
    dirs.push(dataDir);
    const database = await createTestDatabase();
    try {
      const modules = await modulesOf(dataDir, generateKeySecret(), async () => {}, { SWITCHBOARD_DATABASE_URL: database.url, SWITCHBOARD_SECRET: Buffer.alloc(32, 3).toString('base64') });
      expect(loads(modules, LAZY.pg)).toBe(true);
      expect(loads(modules, '/node_modules/better-sqlite3/')).toBe(false);
      expect(loads(modules, '/node_modules/sqlite-vec')).toBe(false);
    } finally {
      await database.drop();
    }
  });

  it('with a Slack channel: Bolt loads at start-up, Discord still does not', async () => {
    const key = generateKeySecret();
    const t = await createTestApp({ env: { SWITCHBOARD_ADMIN_KEY: key, SWITCHBOARD_SLACK_API_URL: NO_SLACK }, overrides: { channels: { initialWaitMs: 0 } } });
    dirs.push(t.dataDir);
    const persona = await createPersona(t);
    await createChannel(t, { type: 'slack', personaId: persona.id, credentials: { botToken: 'xoxb-1', signingSecret: 'secret' } });
    // Closed without deleting its directory: the built server starts on it.
    await t.app.close();
    await t.ctx.close();
    const modules = await modulesOf(t.dataDir, key);
    expect(loads(modules, LAZY.slack)).toBe(true);
    expect(loads(modules, LAZY.discord)).toBe(false);
  });

  it('/mcp loads the MCP server and its transport at its first request', async () => {
    const dataDir = tempDir('switchboard-startup-modules-');
    dirs.push(dataDir);
    const key = generateKeySecret();
    const modules = await modulesOf(dataDir, key, async (url) => {
      const res = await fetch(`${url}/mcp`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'startup-test', version: '1' } } }),
      });
      expect(res.status).toBe(200);
      await res.text();
    });
    expect(loads(modules, LAZY.mcpServer)).toBe(true);
    expect(loads(modules, LAZY.mcpTransport)).toBe(true);
    expect(loads(modules, LAZY.mcpModernServer)).toBe(true);
    expect(loads(modules, LAZY.honoNodeServer)).toBe(true);
  });

  it('/openapi.json, /docs and /console load their plugins at their first request', async () => {
    const dataDir = tempDir('switchboard-startup-modules-');
    dirs.push(dataDir);
    const modules = await modulesOf(dataDir, generateKeySecret(), async (url) => {
      expect((await fetch(`${url}/openapi.json`)).status).toBe(200);
      expect((await fetch(`${url}/console/`)).status).toBe(200);
    });
    expect(loads(modules, LAZY.swagger)).toBe(true);
    expect(loads(modules, LAZY.swaggerUi)).toBe(true);
    // The console's own copy (swagger-ui has another, below its folder).
    expect(modules).toContain(pathToFileURL(fs.realpathSync(path.join(ROOT, 'node_modules/@fastify/static/index.js'))).href);
  });
  /** Runs the built CLI with the module hook on `dataDir` and answers its exit code, output and the modules it loaded. */
  function cliModules(dataDir: string, args: string[]): { code: number | null; stdout: string; stderr: string; modules: string[] } {
    const logFile = path.join(dataDir, 'cli-modules.txt');
    fs.rmSync(logFile, { force: true });
    const run = spawnSync(process.execPath, [MAIN, ...args], {
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? '', SWITCHBOARD_DATA_DIR: dataDir, LOG_LEVEL: 'silent', NODE_OPTIONS: `--import=${HOOK}`, MODULE_LOG: logFile },
      encoding: 'utf8',
      timeout: 30_000,
    });
    const log = fs.readFileSync(logFile, 'utf8').split('\n');
    expectBundled(log);
    return { code: run.status, stdout: run.stdout, stderr: run.stderr, modules: withBundled(log) };
  }

  it('switchboard --help loads the command line alone: no configuration schema, database, logger or HTTP server', () => {
    const dataDir = tempDir('switchboard-startup-modules-');
    dirs.push(dataDir);
    const { code, stdout, modules } = cliModules(dataDir, ['--help']);
    expect(code).toBe(0);
    expect(stdout).toContain('Usage: switchboard <command>');
    expect(loads(modules, '/dist/src/cli.js')).toBe(true);
    for (const part of ['/node_modules/', '/dist/src/config.js', '/dist/src/context.js', '/dist/src/app.js', '/dist/src/db/']) expect(loads(modules, part), part).toBe(false);
  });

  it('switchboard workspaces create and keys create open the database and nothing of the HTTP server or the other features', () => {
    const dataDir = tempDir('switchboard-startup-modules-');
    dirs.push(dataDir);
    // The database brings its per-dialect modules (db/open.ts); the features' services and routes stay out.
    const unused = ['/node_modules/fastify/', '/dist/vendor/fastify.js', '/dist/src/app.js', '/dist/src/server.js', '/dist/src/context.js', '.routes.js', '/dist/src/mcp/', '/dist/src/core/chat/', '/dist/src/core/knowledge/knowledge.service.js', '/dist/src/business/channels/', '/dist/src/business/evaluations/', ...Object.values(LAZY)];
    for (const args of [
      ['workspaces', 'create', 'acme', '--json'],
      ['keys', 'create', '--name', 'ci', '--workspace', 'acme', '--json'],
    ]) {
      const { code, stdout, stderr, modules } = cliModules(dataDir, args);
      expect(code, stderr).toBe(0);
      expect(JSON.parse(stdout).key).toMatch(/^sb_/);
      expect(loads(modules, '/dist/vendor/kysely.js')).toBe(true);
      for (const part of BUNDLED) expect(loads(modules, part), `${args[0]}: ${part}`).toBe(false);
      expect(loads(modules, '/dist/src/core/auth/auth.service.js')).toBe(true);
      for (const part of unused) expect(loads(modules, part), `${args[0]}: ${part}`).toBe(false);
    }
  });
});
