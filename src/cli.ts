import fs from 'node:fs';
import type { Readable, Writable } from 'node:stream';
import { parseArgs } from 'node:util';
import { type Config, ConfigError, loadConfig } from './config.js';
import { createContext, databaseFile } from './context.js';
import { DEFAULT_WORKSPACE } from './core/auth/auth.service.js';
import { EmbedderMismatchError } from './core/knowledge/vector-state.js';
import { type Scope, SCOPES } from './core/auth/keys.js';
import { backupDatabase, migrate, openDatabase } from './db/database.js';
import { AppError } from './errors.js';
import { runIngest, runReindex } from './knowledge-cli.js';
import { runMcpStdio } from './mcp/stdio.js';
import { startServer } from './server.js';

export interface CliIo {
  env: NodeJS.ProcessEnv;
  /** The MCP stdio transport's streams (`switchboard mcp`). */
  stdin?: Readable;
  stdoutStream?: Writable;
  stdout: (text: string) => void;
  stderr: (text: string) => void;
  /** Called by `serve` (and `mcp`) once serving, so the caller can wire signals; tests use it to reach and stop the server. */
  onServing?: (server: { url: string; stop: () => Promise<void> }) => void;
  /** stderr is a terminal (progress bars redraw in place). */
  isTTY?: boolean;
}

const HELP = `Usage: switchboard <command> [options]

Commands:
  serve                                   run the HTTP API (default)
  mcp                                     serve MCP on stdin/stdout as the key in SWITCHBOARD_API_KEY
  keys create --name N [--scopes read,write] [--workspace NAME]
                                          create an API key; prints its secret once
  workspaces create NAME                  create a workspace and print its first admin key
  ingest PATH|URL... [--persona ID] [--workspace NAME]
                                          add files, folders (walked for pdf, docx, md, txt, html,
                                          csv, json) and URLs as knowledge; again = update
  reindex                                 re-embed every chunk after changing SWITCHBOARD_EMBEDDINGS
  backup FILE                             consistent copy of the live database (SQLite online backup)
  migrate                                 apply pending database migrations

Every command takes --json to print one JSON object. Configuration comes from the environment
(see README.md); the database lives in SWITCHBOARD_DATA_DIR (default ./data).`;

class UsageError extends Error {}

/** Runs one CLI command; resolves to the process exit code. */
export async function runCli(argv: string[], io: CliIo): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      strict: true,
      options: {
        json: { type: 'boolean', default: false },
        help: { type: 'boolean', short: 'h', default: false },
        name: { type: 'string' },
        scopes: { type: 'string' },
        workspace: { type: 'string' },
        persona: { type: 'string' },
      },
    });
  } catch (err) {
    io.stderr(`${(err as Error).message}\n\n${HELP}\n`);
    return 2;
  }
  const { values, positionals } = parsed;
  const json = values.json ?? false;
  const print = (obj: Record<string, unknown>, human: string) => io.stdout(json ? `${JSON.stringify(obj)}\n` : `${human}\n`);
  if (values.help) {
    io.stdout(`${HELP}\n`);
    return 0;
  }
  const [command = 'serve', sub, ...rest] = positionals;

  try {
    const config = loadConfig(io.env);
    switch (command) {
      case 'serve':
        return await serve(config, io);
      case 'mcp': {
        if (sub !== undefined) throw new UsageError('Usage: switchboard mcp (the key comes from SWITCHBOARD_API_KEY)');
        if (!io.stdin || !io.stdoutStream) throw new UsageError('switchboard mcp needs standard input and output.');
        return await runMcpStdio(config, { stdin: io.stdin, stdout: io.stdoutStream, stderr: io.stderr, onServing: io.onServing });
      }
      case 'keys': {
        if (sub !== 'create' || rest.length > 0) throw new UsageError('Usage: switchboard keys create --name N [--scopes read,write] [--workspace NAME]');
        if (!values.name) throw new UsageError('keys create needs --name');
        const scopes = parseScopes(values.scopes ?? 'read,write');
        const ctx = await createContext(config);
        try {
          const { workspace, key } = await ctx.services.auth.createKeyInWorkspace(values.workspace ?? DEFAULT_WORKSPACE, values.name, scopes);
          const { key: secret, ...apiKey } = key;
          print({ workspace, apiKey, key: secret }, `Created key ${apiKey.id} (${apiKey.scopes.join(', ')}) in workspace ${workspace.name}:\n\n    ${secret}\n\nIt is shown this once.`);
        } finally {
          await ctx.close();
        }
        return 0;
      }
      case 'workspaces': {
        const name = rest[0];
        if (sub !== 'create' || !name || rest.length > 1) throw new UsageError('Usage: switchboard workspaces create NAME');
        const ctx = await createContext(config);
        try {
          const { workspace, key } = await ctx.services.auth.createWorkspace(name);
          const { key: secret, ...apiKey } = key;
          print({ workspace, apiKey, key: secret }, `Created workspace ${workspace.name} (${workspace.id}); its admin key:\n\n    ${secret}\n\nIt is shown this once.`);
        } finally {
          await ctx.close();
        }
        return 0;
      }
      case 'ingest': {
        const inputs = [sub, ...rest].filter((x): x is string => x !== undefined);
        if (inputs.length === 0) throw new UsageError('Usage: switchboard ingest PATH|URL... [--persona ID] [--workspace NAME]');
        return await runIngest(config, { inputs, personaId: values.persona, workspace: values.workspace, json }, io);
      }
      case 'reindex': {
        if (sub !== undefined) throw new UsageError('Usage: switchboard reindex');
        return await runReindex(config, json, io);
      }
      case 'backup': {
        const file = sub;
        if (!file || rest.length > 0) throw new UsageError('Usage: switchboard backup FILE');
        if (fs.existsSync(file)) throw new UsageError(`${file} already exists; choose a new file name.`);
        const source = databaseFile(config);
        if (!fs.existsSync(source)) throw new UsageError(`No database at ${source}.`);
        const db = openDatabase({ filename: source, durability: config.durability });
        try {
          await backupDatabase(db, file);
        } finally {
          await db.close();
        }
        const bytes = fs.statSync(file).size;
        print({ file, bytes }, `Backed up ${source} to ${file} (${bytes} bytes).`);
        return 0;
      }
      case 'migrate': {
        if (sub !== undefined) throw new UsageError('Usage: switchboard migrate');
        const db = openDatabase({ filename: databaseFile(config), durability: config.durability });
        try {
          const applied = await migrate(db);
          print({ applied }, applied.length ? `Applied: ${applied.join(', ')}` : 'The database is up to date.');
        } finally {
          await db.close();
        }
        return 0;
      }
      default:
        throw new UsageError(`Unknown command "${command}".\n\n${HELP}`);
    }
  } catch (err) {
    const message = err instanceof ConfigError || err instanceof UsageError || err instanceof AppError || err instanceof EmbedderMismatchError ? err.message : String((err as Error)?.stack ?? err);
    if (json) io.stdout(`${JSON.stringify({ error: { message, ...(err instanceof AppError ? { code: err.code } : {}) } })}\n`);
    else io.stderr(`${message}\n`);
    return err instanceof UsageError ? 2 : 1;
  }
}

function parseScopes(text: string): Scope[] {
  const scopes = text.split(',').map((s) => s.trim()).filter(Boolean);
  const bad = scopes.filter((s) => !(SCOPES as readonly string[]).includes(s));
  if (bad.length > 0 || scopes.length === 0) throw new UsageError(`--scopes takes a comma-separated list of ${SCOPES.join(', ')}`);
  return scopes as Scope[];
}

async function serve(config: Config, io: CliIo): Promise<number> {
  const server = await startServer(config, io.stderr);
  io.onServing?.({ url: server.url, stop: () => server.close() });
  return 0;
}
