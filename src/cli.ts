// Each command imports what it uses when it runs (issue 40 item 19): `--help` loads this file
// alone, `keys create` the database and the auth service, `serve` the server.
import fs from 'node:fs';
import type { Readable, Writable } from 'node:stream';
import { parseArgs } from 'node:util';
import type { Config } from './config.js';
import type { Scope } from './core/auth/keys.js';
import type { ClientServer, McpClient } from './mcp/client-config.js';

export interface CliIo {
  env: NodeJS.ProcessEnv;
  /** The MCP stdio transport's streams (`switchboard mcp`). */
  stdin?: Readable;
  stdoutStream?: Writable;
  stdout: (text: string) => void;
  stderr: (text: string) => void;
  /** Called by `serve` (and `mcp`) once serving, so the caller can wire signals; tests use it to reach and stop the server. */
  onServing?: (server: { url: string; stop: () => Promise<void>; drainSeconds: number }) => void;
  /** stderr is a terminal (progress bars redraw in place). */
  isTTY?: boolean;
  /** The running Node binary and this command's entry script (dist/src/main.js), absolute: what `mcp-config` tells a client to start. */
  nodePath?: string;
  mainScript?: string;
}

const HELP = `Usage: switchboard <command> [options]

Commands:
  serve                                   run the HTTP API (default)
  mcp                                     serve MCP on stdin/stdout as the key in SWITCHBOARD_API_KEY
  keys create --name N [--scopes read,write] [--workspace NAME]
                                          create an API key; prints its secret once
  workspaces create NAME                  create a workspace and print its first admin key
  users create --email E --role R [--workspace NAME]
                                          invite a person (role viewer, agent, editor, admin or
                                          owner); prints a one-use link (7 days) where they set
                                          a password
  ingest PATH|URL... [--persona ID] [--workspace NAME]
                                          add files, folders (walked for pdf, docx, md, txt, html,
                                          csv, json) and URLs as knowledge; again = update
  reindex                                 re-embed every chunk after changing SWITCHBOARD_EMBEDDINGS
  backup FILE                             consistent copy of the live database (SQLite online backup)
  migrate                                 apply pending database migrations
  copy-data --to URL | --from URL         copy every row of the SQLite database in SWITCHBOARD_DATA_DIR
                                          into the PostgreSQL database at URL (--to), or back (--from);
                                          keys, sessions and credentials keep working (same
                                          SWITCHBOARD_SECRET on both sides); stop the instance first;
                                          an interrupted copy continues when run again
  mcp-config [--client claude-desktop|claude-code|cursor|vscode] [--http]
             [--new-key [--scope read|write|admin] [--workspace NAME]]
                                          print the client's config for Switchboard, ready to paste
                                          (absolute paths; default client claude-desktop, stdio).
                                          Its key: --new-key creates one (scope write = read and
                                          write; admin = all three), else SWITCHBOARD_API_KEY, else
                                          a placeholder. --http: the Streamable HTTP form at
                                          HOST:PORT/mcp (not for Claude Desktop's config file)

Every command takes --json to print one JSON object. Configuration comes from the environment
(see docs/operations.md); the database lives in SWITCHBOARD_DATA_DIR (default ./data).`;

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
        email: { type: 'string' },
        role: { type: 'string' },
        persona: { type: 'string' },
        client: { type: 'string' },
        http: { type: 'boolean' },
        'new-key': { type: 'boolean' },
        scope: { type: 'string' },
        to: { type: 'string' },
        from: { type: 'string' },
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
    if (command === 'mcp-config') {
      const stray = (['name', 'scopes', 'persona'] as const).find((n) => values[n] !== undefined);
      if (stray) throw new UsageError(`mcp-config takes no --${stray}${stray === 'scopes' ? ' (the key --new-key creates takes --scope read|write|admin)' : ''}.\n\n${MCP_CONFIG_USAGE}`);
    } else {
      const stray = (['client', 'http', 'new-key', 'scope'] as const).find((n) => values[n] !== undefined);
      if (stray) throw new UsageError(`--${stray} is an option of mcp-config only.\n\n${HELP}`);
    }
    const { loadConfig } = await import('./config.js');
    const config = loadConfig(io.env);
    switch (command) {
      case 'serve':
        return await serve(config, io);
      case 'mcp': {
        if (sub !== undefined) throw new UsageError('Usage: switchboard mcp (the key comes from SWITCHBOARD_API_KEY)');
        if (!io.stdin || !io.stdoutStream) throw new UsageError('switchboard mcp needs standard input and output.');
        // The MCP server and SDK load only for this command (serve loads them at the first /mcp request).
        const { runMcpStdio } = await import('./mcp/stdio.js');
        return await runMcpStdio(config, { stdin: io.stdin, stdout: io.stdoutStream, stderr: io.stderr, onServing: io.onServing });
      }
      case 'keys': {
        if (sub !== 'create' || rest.length > 0) throw new UsageError('Usage: switchboard keys create --name N [--scopes read,write] [--workspace NAME]');
        if (!values.name) throw new UsageError('keys create needs --name');
        const scopes = await parseScopes(values.scopes ?? 'read,write');
        const [{ openAuth }, { DEFAULT_WORKSPACE }] = await Promise.all([import('./core/auth/open-auth.js'), import('./core/auth/auth.service.js')]);
        const opened = await openAuth(config);
        try {
          const { workspace, key } = await opened.auth.createKeyInWorkspace(values.workspace ?? DEFAULT_WORKSPACE, values.name, scopes);
          const { key: secret, ...apiKey } = key;
          print({ workspace, apiKey, key: secret }, `Created key ${apiKey.id} (${apiKey.scopes.join(', ')}) in workspace ${workspace.name}:\n\n    ${secret}\n\nIt is shown this once.`);
        } finally {
          await opened.close();
        }
        return 0;
      }
      case 'workspaces': {
        const name = rest[0];
        if (sub !== 'create' || !name || rest.length > 1) throw new UsageError('Usage: switchboard workspaces create NAME');
        const { openAuth } = await import('./core/auth/open-auth.js');
        const opened = await openAuth(config);
        try {
          const { workspace, key } = await opened.auth.createWorkspace(name);
          const { key: secret, ...apiKey } = key;
          print({ workspace, apiKey, key: secret }, `Created workspace ${workspace.name} (${workspace.id}); its admin key:\n\n    ${secret}\n\nIt is shown this once.`);
        } finally {
          await opened.close();
        }
        return 0;
      }
      case 'users': {
        const usage = 'Usage: switchboard users create --email E --role viewer|agent|editor|admin|owner [--workspace NAME]';
        if (sub !== 'create' || rest.length > 0) throw new UsageError(usage);
        const [{ inviteSchema }, { DEFAULT_WORKSPACE }] = await Promise.all([import('./core/people/members.schemas.js'), import('./core/auth/auth.service.js')]);
        const checked = inviteSchema.safeParse({ email: values.email, role: values.role });
        if (!checked.success) {
          const field = String(checked.error.issues[0]?.path[0] ?? 'email');
          throw new UsageError(`--${field} ${field === 'role' ? 'takes viewer, agent, editor, admin or owner' : 'takes an e-mail address'}.\n\n${usage}`);
        }
        const [{ createUserInvitation }, { publicBase }, { invitationUrl }] = await Promise.all([
          import('./core/people/open-invitations.js'),
          import('./core/oauth/oauth.routes.js'),
          import('./core/people/invitations.service.js'),
        ]);
        const { workspace, invitation, token } = await createUserInvitation(config, { workspace: values.workspace ?? DEFAULT_WORKSPACE, ...checked.data });
        const url = invitationUrl(publicBase(config, undefined), token);
        print({ workspace, invitation, url }, `Invited ${invitation.email} as ${invitation.role} of workspace ${workspace.name}. They set a password at this link (one use, until ${invitation.expiresAt}):\n\n    ${url}\n\nIt is shown this once.`);
        return 0;
      }
      case 'ingest': {
        const inputs = [sub, ...rest].filter((x): x is string => x !== undefined);
        if (inputs.length === 0) throw new UsageError('Usage: switchboard ingest PATH|URL... [--persona ID] [--workspace NAME]');
        const { runIngest } = await import('./knowledge-cli.js');
        return await runIngest(config, { inputs, personaId: values.persona, workspace: values.workspace, json }, io);
      }
      case 'reindex': {
        if (sub !== undefined) throw new UsageError('Usage: switchboard reindex');
        const { runReindex } = await import('./knowledge-cli.js');
        return await runReindex(config, json, io);
      }
      case 'backup': {
        const file = sub;
        if (!file || rest.length > 0) throw new UsageError('Usage: switchboard backup FILE');
        if (fs.existsSync(file)) throw new UsageError(`${file} already exists; choose a new file name.`);
        if (config.database) {
          throw new UsageError('backup copies the SQLite database; with SWITCHBOARD_DATABASE_URL the data is in PostgreSQL: back it up with pg_dump (or your provider’s snapshots).');
        }
        const { databaseFile } = await import('./db/open.js');
        const source = databaseFile(config);
        if (!fs.existsSync(source)) throw new UsageError(`No database at ${source}.`);
        const { backupDatabase, openDatabase } = await import('./db/database.js');
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
        // openBackend applies the pending migrations of either backend (PostgreSQL under an advisory lock).
        const [{ openBackend }, { createLogger }] = await Promise.all([import('./db/open.js'), import('./lib/logger.js')]);
        const backend = await openBackend(config, createLogger('silent'));
        await backend.close();
        const applied = backend.migrated;
        print({ applied }, applied.length ? `Applied: ${applied.join(', ')}` : 'The database is up to date.');
        return 0;
      }
      case 'copy-data': {
        const usage = 'Usage: switchboard copy-data --to postgres://… | --from postgres://… [--json]';
        const url = values.to ?? values.from;
        if (sub !== undefined || url === undefined || (values.to !== undefined && values.from !== undefined)) throw new UsageError(usage);
        // The URL itself is never echoed: it may hold a password.
        if (!/^postgres(ql)?:\/\/[^/]/i.test(url)) throw new UsageError(`--${values.to !== undefined ? 'to' : 'from'} takes a PostgreSQL URL such as postgres://user:password@host:5432/switchboard.\n\n${usage}`);
        const { runCopyData } = await import('./db/copy-data.js');
        return await runCopyData(config, { direction: values.to !== undefined ? 'to' : 'from', url, json, env: io.env }, io);
      }
      case 'mcp-config': {
        if (sub !== undefined) throw new UsageError(MCP_CONFIG_USAGE);
        return await mcpConfig(config, values, json, io);
      }
      default:
        throw new UsageError(`Unknown command "${command}".\n\n${HELP}`);
    }
  } catch (err) {
    const { message, code } = await failure(err);
    if (json) io.stdout(`${JSON.stringify({ error: { message, ...(code !== undefined ? { code } : {}) } })}\n`);
    else io.stderr(`${message}\n`);
    return err instanceof UsageError ? 2 : 1;
  }
}

/**
 * What a failed command prints: the message of an error it expects, else the stack. The classes'
 * modules are imported here, in order; each is loaded already when one of its errors was thrown.
 */
async function failure(err: unknown): Promise<{ message: string; code?: string }> {
  if (err instanceof UsageError) return { message: err.message };
  const { AppError } = await import('./errors.js');
  if (err instanceof AppError) return { message: err.message, code: err.code };
  const expected = [
    async () => (await import('./config.js')).ConfigError,
    async () => (await import('./core/knowledge/vector-state.js')).EmbedderMismatchError,
    async () => (await import('./db/postgres/connection.js')).DatabaseUnavailableError,
  ];
  for (const errorClass of expected) if (err instanceof (await errorClass())) return { message: (err as Error).message };
  return { message: String((err as Error)?.stack ?? err) };
}

async function parseScopes(text: string): Promise<Scope[]> {
  const { SCOPES } = await import('./core/auth/keys.js');
  const scopes = text.split(',').map((s) => s.trim()).filter(Boolean);
  const bad = scopes.filter((s) => !(SCOPES as readonly string[]).includes(s));
  if (bad.length > 0 || scopes.length === 0) throw new UsageError(`--scopes takes a comma-separated list of ${SCOPES.join(', ')}`);
  return scopes as Scope[];
}

const MCP_CONFIG_USAGE = 'Usage: switchboard mcp-config [--client claude-desktop|claude-code|cursor|vscode] [--http] [--new-key [--scope read|write|admin] [--workspace NAME]] [--json]';

/**
 * `mcp-config`: prints the client's config (stdout: that JSON alone, so it can be redirected into
 * a file unchanged) and, on stderr, where it goes and what the key is. Never invents a key: it
 * creates one (--new-key), takes SWITCHBOARD_API_KEY after checking it against the database, or
 * leaves a placeholder and says how to get one.
 */
async function mcpConfig(
  config: Config,
  values: { client?: string; http?: boolean; 'new-key'?: boolean; scope?: string; workspace?: string },
  json: boolean,
  io: CliIo,
): Promise<number> {
  const [{ CLIENT_FILES, claudeDesktopHttpRefusal, clientConfig, KEY_PLACEHOLDER, MCP_CLIENTS, mcpUrl }, { hasScope, SCOPES }, { SECRET_VARIABLES, stdioServerEnv, ConfigError }, { databaseFile }, { openAuth }, { DEFAULT_WORKSPACE }] =
    await Promise.all([
      import('./mcp/client-config.js'),
      import('./core/auth/keys.js'),
      import('./config.js'),
      import('./db/open.js'),
      import('./core/auth/open-auth.js'),
      import('./core/auth/auth.service.js'),
    ]);
  const client = values.client ?? 'claude-desktop';
  if (!(MCP_CLIENTS as readonly string[]).includes(client)) throw new UsageError(`--client takes one of ${MCP_CLIENTS.join(', ')}.\n\n${MCP_CONFIG_USAGE}`);
  const newKey = values['new-key'] === true;
  if (!newKey && (values.scope !== undefined || values.workspace !== undefined)) {
    throw new UsageError(`--scope and --workspace choose the key that --new-key creates; add --new-key, or leave them out to use SWITCHBOARD_API_KEY.\n\n${MCP_CONFIG_USAGE}`);
  }
  const scope = values.scope ?? 'write';
  if (!(SCOPES as readonly string[]).includes(scope)) throw new UsageError(`--scope takes one of ${SCOPES.join(', ')} (each includes the ones before it).`);
  // admin implies write, which implies read (API.md §2): the key holds every scope its top one includes.
  const scopes = SCOPES.filter((s) => hasScope([scope as Scope], s));
  let url: string | null = null;
  if (values.http) {
    if (client === 'claude-desktop') throw new UsageError(claudeDesktopHttpRefusal(config));
    url = mcpUrl(config);
    if (url === null) throw new UsageError('PORT is 0 (a free port chosen at start), so there is no URL to print: set PORT to the port the server listens on, or SWITCHBOARD_PUBLIC_URL.');
  } else if (!io.nodePath || !io.mainScript) {
    throw new Error('mcp-config needs the paths of Node and of the switchboard script.');
  }

  const notes: string[] = [];
  let key: string | undefined;
  if (newKey) {
    const opened = await openAuth(config);
    try {
      const created = await opened.auth.createKeyInWorkspace(values.workspace ?? DEFAULT_WORKSPACE, `MCP client: ${client}`, scopes);
      key = created.key.key;
      notes.push(`Created key ${created.key.id} (${created.key.scopes.join(', ')}) in workspace ${created.workspace.name} for this entry; the entry is the only copy of its secret. Revoke it with DELETE /auth/api-keys/${created.key.id}.`);
    } finally {
      await opened.close();
    }
  } else if (config.apiKey) {
    key = config.apiKey;
    const source = databaseFile(config);
    if (fs.existsSync(source)) {
      const opened = await openAuth(config);
      try {
        const actor = await opened.auth.authenticateCurrent(key);
        if (!actor) {
          throw new ConfigError([{ variable: 'SWITCHBOARD_API_KEY', message: `is not an active key of ${source} (malformed, unknown, revoked, expired or rotated out); run mcp-config with --new-key to create one` }]);
        }
        notes.push(`Using SWITCHBOARD_API_KEY: key ${actor.id} (${actor.scopes.join(', ')}).`);
      } finally {
        await opened.close();
      }
    } else {
      notes.push(`Using SWITCHBOARD_API_KEY, unchecked: there is no database at ${source} yet.`);
    }
  } else {
    notes.push(
      `No API key in this entry: replace "${KEY_PLACEHOLDER}" with one, or run again with --new-key [--scope read|write|admin] ` +
        'to create one (or with SWITCHBOARD_API_KEY set). Other ways to a key: switchboard keys create --name NAME, or POST /auth/api-keys.',
    );
  }

  const secret = key ?? KEY_PLACEHOLDER;
  let holdsSecret = key !== undefined;
  let server: ClientServer;
  if (url !== null) {
    server = { transport: 'http', url, headers: { Authorization: `Bearer ${secret}` } };
    notes.push(`The server must be running and reachable at ${url}.`);
  } else {
    const env = { ...stdioServerEnv(io.env, config), SWITCHBOARD_API_KEY: secret };
    server = { transport: 'stdio', command: io.nodePath!, args: [io.mainScript!, 'mcp'], env };
    const carried = SECRET_VARIABLES.filter((name) => name in env);
    if (carried.length > 0) notes.push(`The entry carries ${carried.join(' and ')} from this environment: switchboard mcp needs the same model and secret as the server.`);
    holdsSecret ||= carried.length > 0;
    notes.push(`It starts ${io.mainScript} with the Node at ${io.nodePath}; run mcp-config again after moving either.`);
  }
  if (holdsSecret) notes.push('It holds secrets: keep the file it goes into private.');
  const document = clientConfig(client as McpClient, server);
  io.stdout(json ? `${JSON.stringify(document)}\n` : `${JSON.stringify(document, null, 2)}\n`);
  io.stderr(`${[CLIENT_FILES[client as McpClient], ...notes].join('\n')}\n`);
  return 0;
}

async function serve(config: Config, io: CliIo): Promise<number> {
  const { startServer } = await import('./server.js');
  const server = await startServer(config, io.stderr);
  io.onServing?.({ url: server.url, stop: () => server.close(), drainSeconds: config.drainSeconds });
  return 0;
}
