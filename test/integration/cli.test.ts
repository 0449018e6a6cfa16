import fs from 'node:fs';
import path from 'node:path';
import SqliteDatabase from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { runCli } from '../../src/cli.js';
import { keyPrefix } from '../../src/core/auth/keys.js';
import { createTestApp, tempDir } from '../helpers/app.js';
import { createTestDatabase, postgresUrl } from '../helpers/postgres.js';

// What mcp-config names as the command to start; main.ts passes the real ones.
const NODE = '/opt/node-24/bin/node';
const MAIN = '/opt/switchboard/dist/src/main.js';

function io(env: Record<string, string>) {
  const out = { stdout: '', stderr: '', url: '', stop: undefined as undefined | (() => Promise<void>) };
  return {
    out,
    io: {
      nodePath: NODE,
      mainScript: MAIN,
      env: { LOG_LEVEL: 'silent', ...env },
      stdout: (t: string) => void (out.stdout += t),
      stderr: (t: string) => void (out.stderr += t),
      onServing: (server: { url: string; stop: () => Promise<void> }) => {
        out.url = server.url;
        out.stop = server.stop;
      },
    },
  };
}

describe('switchboard CLI', () => {
  const dirs: string[] = [];
  const dataDir = () => {
    const d = tempDir('switchboard-cli-');
    dirs.push(d);
    return d;
  };
  afterEach(() => {
    for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
  });

  it('workspaces create prints the workspace and its admin key as JSON', async () => {
    const dir = dataDir();
    const { out, io: cli } = io({ SWITCHBOARD_DATA_DIR: dir });
    expect(await runCli(['workspaces', 'create', 'acme', '--json'], cli)).toBe(0);
    const result = JSON.parse(out.stdout);
    expect(result.workspace).toMatchObject({ name: 'acme', id: expect.stringMatching(/^wsp_/) });
    expect(result.key).toMatch(/^sb_[0-9A-Za-z]{40}$/);
    expect(result.apiKey.scopes).toEqual(['read', 'write', 'admin']);

    const again = io({ SWITCHBOARD_DATA_DIR: dir });
    expect(await runCli(['workspaces', 'create', 'acme', '--json'], again.io)).toBe(1);
    expect(JSON.parse(again.out.stdout).error.code).toBe('conflict');
  });

  it('keys create makes a key in the named workspace (default: default)', async () => {
    const dir = dataDir();
    const ws = io({ SWITCHBOARD_DATA_DIR: dir });
    await runCli(['workspaces', 'create', 'default', '--json'], ws.io);
    const { out, io: cli } = io({ SWITCHBOARD_DATA_DIR: dir });
    expect(await runCli(['keys', 'create', '--name', 'deploy', '--scopes', 'read', '--json'], cli)).toBe(0);
    const result = JSON.parse(out.stdout);
    expect(result).toMatchObject({ workspace: { name: 'default' }, apiKey: { name: 'deploy', scopes: ['read'] } });
    expect(result.key).toMatch(/^sb_/);

    const human = io({ SWITCHBOARD_DATA_DIR: dir });
    expect(await runCli(['keys', 'create', '--name', 'h'], human.io)).toBe(0);
    expect(human.out.stdout).toMatch(/sb_[0-9A-Za-z]{40}/);

    const missing = io({ SWITCHBOARD_DATA_DIR: dir });
    expect(await runCli(['keys', 'create', '--name', 'x', '--workspace', 'nope'], missing.io)).toBe(1);
    expect(missing.out.stderr).toContain('nope');

    const badScope = io({ SWITCHBOARD_DATA_DIR: dir });
    expect(await runCli(['keys', 'create', '--name', 'x', '--scopes', 'root'], badScope.io)).toBe(2);
  });

  it('users create invites a person: its one-use link (at the public URL) sets their password', async () => {
    const dir = dataDir();
    await runCli(['workspaces', 'create', 'default'], io({ SWITCHBOARD_DATA_DIR: dir }).io);
    const env = { SWITCHBOARD_DATA_DIR: dir, SWITCHBOARD_PUBLIC_URL: 'https://switchboard.example.com' };
    const { out, io: cli } = io(env);
    expect(await runCli(['users', 'create', '--email', 'ada@example.com', '--role', 'owner', '--json'], cli)).toBe(0);
    const result = JSON.parse(out.stdout);
    expect(result).toMatchObject({ workspace: { name: 'default' }, invitation: { id: expect.stringMatching(/^inv_/), email: 'ada@example.com', role: 'owner' } });
    expect(result.url).toMatch(/^https:\/\/switchboard\.example\.com\/console\/invite#sbi_[0-9A-Za-z]{43}$/);
    const human = io(env);
    expect(await runCli(['users', 'create', '--email', 'bob@example.com', '--role', 'viewer'], human.io)).toBe(0);
    expect(human.out.stdout).toMatch(/https:\/\/switchboard\.example\.com\/console\/invite#sbi_/);

    const t = await createTestApp({ env: { SWITCHBOARD_DATA_DIR: dir, SWITCHBOARD_ADMIN_KEY: `sb_${'a'.repeat(40)}` } });
    try {
      const token = new URL(result.url).hash.slice(1);
      const accepted = await t.request({ method: 'POST', url: '/auth/invitations/accept', as: null, body: { token, name: 'Ada', password: 'correct horse battery' } });
      expect(accepted.statusCode, accepted.body).toBe(201);
      expect(accepted.json().memberships).toEqual([{ workspace: { id: result.workspace.id, name: 'default' }, role: 'owner' }]);
      const events = await t.ctx.db.kysely.selectFrom('audit_events').select(['action', 'actor_type', 'actor_name']).where('action', '=', 'member.invite').execute();
      expect(events).toEqual([
        { action: 'member.invite', actor_type: 'system', actor_name: 'cli' },
        { action: 'member.invite', actor_type: 'system', actor_name: 'cli' },
      ]);
    } finally {
      await t.close();
    }

    for (const [args, field] of [
      [['--email', 'not-an-email', '--role', 'viewer'], '--email'],
      [['--email', 'c@example.com', '--role', 'root'], '--role'],
      [['--role', 'viewer'], '--email'],
    ] as const) {
      const bad = io(env);
      expect(await runCli(['users', 'create', ...args], bad.io)).toBe(2);
      expect(bad.out.stderr).toContain(field);
    }
    const missing = io(env);
    expect(await runCli(['users', 'create', '--email', 'd@example.com', '--role', 'viewer', '--workspace', 'nope'], missing.io)).toBe(1);
    expect(missing.out.stderr).toContain('nope');
    const member = io(env);
    expect(await runCli(['users', 'create', '--email', 'ADA@example.com', '--role', 'viewer', '--json'], member.io)).toBe(1);
    expect(JSON.parse(member.out.stdout).error.code).toBe('conflict');
  });

  it('refuses bad configuration naming every bad variable', async () => {
    const { out, io: cli } = io({ SWITCHBOARD_DATA_DIR: dataDir(), PORT: 'x', SWITCHBOARD_DURABILITY: 'y' });
    expect(await runCli(['serve'], cli)).toBe(1);
    expect(out.stderr).toContain('PORT');
    expect(out.stderr).toContain('SWITCHBOARD_DURABILITY');
  });

  it('rejects unknown commands and flags with usage', async () => {
    const a = io({});
    expect(await runCli(['frobnicate'], a.io)).toBe(2);
    expect(a.out.stderr).toContain('Usage');
    const b = io({});
    expect(await runCli(['serve', '--bogus'], b.io)).toBe(2);
  });

  it('serves, prints the bootstrap key once, backs up the live database, and shuts down flushing lastUsedAt', async () => {
    const dir = dataDir();
    const { out, io: cli } = io({ SWITCHBOARD_DATA_DIR: dir, PORT: '0' });
    expect(await runCli(['serve'], cli)).toBe(0);
    let keyId: string;
    try {
      const key = /sb_[0-9A-Za-z]{40}/.exec(out.stderr)?.[0];
      expect(key).toBeDefined();
      const res = await fetch(`${out.url}/auth/me`, { headers: { authorization: `Bearer ${key}` }, signal: AbortSignal.timeout(5000) });
      expect(res.status).toBe(200);
      keyId = ((await res.json()) as { key: { id: string } }).key.id;
    } finally {
      await out.stop?.();
    }
    // Shutdown flushed the in-memory lastUsedAt.
    const db = new SqliteDatabase(path.join(dir, 'switchboard.db'), { readonly: true });
    const row = db.prepare('SELECT last_used_at FROM api_keys WHERE id = ?').get(keyId) as { last_used_at: string | null };
    db.close();
    expect(row.last_used_at).not.toBeNull();
    await expect(fetch(`${out.url}/health`, { signal: AbortSignal.timeout(2000) })).rejects.toThrow();

    // A restart on the same data prints no new key.
    const second = io({ SWITCHBOARD_DATA_DIR: dir, PORT: '0' });
    await runCli(['serve'], second.io);
    await second.out.stop?.();
    expect(second.out.stderr).not.toMatch(/sb_[0-9A-Za-z]{40}/);
  });

  it('backup copies a database that another connection is writing to', async () => {
    const dir = dataDir();
    const ws = io({ SWITCHBOARD_DATA_DIR: dir });
    await runCli(['workspaces', 'create', 'live', '--json'], ws.io);
    // Keep a writer open, mid-use, while the backup runs.
    const writer = new SqliteDatabase(path.join(dir, 'switchboard.db'));
    writer.pragma('journal_mode = WAL');
    writer.prepare("INSERT INTO workspaces (id, name, created_at) VALUES ('wsp_live2', 'live2', '2026-01-01T00:00:00.000Z')").run();
    try {
      const file = path.join(dir, 'backups', 'copy.db');
      const { out, io: cli } = io({ SWITCHBOARD_DATA_DIR: dir });
      expect(await runCli(['backup', file, '--json'], cli)).toBe(0);
      expect(JSON.parse(out.stdout)).toMatchObject({ file, bytes: expect.any(Number) });
      const copy = new SqliteDatabase(file, { readonly: true });
      const names = copy.prepare('SELECT name FROM workspaces ORDER BY name').all();
      copy.close();
      expect(names).toEqual([{ name: 'live' }, { name: 'live2' }]);

      const again = io({ SWITCHBOARD_DATA_DIR: dir });
      expect(await runCli(['backup', file], again.io)).toBe(2); // never overwrites
    } finally {
      writer.close();
    }
  });

  describe('mcp-config', () => {
    /** Runs mcp-config; the printed JSON (stdout) and the notes (stderr). */
    async function mcpConfig(args: string[], env: Record<string, string>) {
      const { out, io: cli } = io(env);
      const code = await runCli(['mcp-config', ...args], cli);
      return { code, stdout: out.stdout, stderr: out.stderr, config: code === 0 ? JSON.parse(out.stdout) : undefined };
    }
    /** The scopes and name of the key whose secret is `secret`, read from the database. */
    function storedKey(dir: string, secret: string) {
      const db = new SqliteDatabase(path.join(dir, 'switchboard.db'), { readonly: true });
      const row = db.prepare('SELECT name, scopes, workspace_id FROM api_keys WHERE prefix = ?').get(keyPrefix(secret)) as { name: string; scopes: string; workspace_id: string };
      db.close();
      return { ...row, scopes: JSON.parse(row.scopes) as string[] };
    }

    it('prints a stdio entry per client with absolute paths and, without a key, a placeholder and how to get one', async () => {
      const expected = {
        command: NODE,
        args: [MAIN, 'mcp'],
        // A relative data directory is resolved where mcp-config runs: clients start commands elsewhere.
        env: { SWITCHBOARD_DATA_DIR: path.resolve('no-such-data'), SWITCHBOARD_API_KEY: '<paste an sb_ API key here>' },
      };
      const desktop = await mcpConfig([], { SWITCHBOARD_DATA_DIR: 'no-such-data' });
      expect(desktop.code).toBe(0);
      expect(desktop.config).toEqual({ mcpServers: { switchboard: expected } });
      expect(desktop.stderr).toContain('claude_desktop_config.json');
      expect(desktop.stderr).toContain('--new-key');
      expect(desktop.stderr).toContain('switchboard keys create');
      // Pretty-printed for a person; nothing but the JSON on stdout.
      expect(desktop.stdout).toBe(`${JSON.stringify(desktop.config, null, 2)}\n`);
      // Without --new-key nothing opens (or creates) the database.
      expect(fs.existsSync(path.resolve('no-such-data'))).toBe(false);

      const explicit = await mcpConfig(['--client', 'claude-desktop'], { SWITCHBOARD_DATA_DIR: 'no-such-data' });
      expect(explicit.config).toEqual(desktop.config);
      const cursor = await mcpConfig(['--client', 'cursor'], { SWITCHBOARD_DATA_DIR: 'no-such-data' });
      expect(cursor.config).toEqual({ mcpServers: { switchboard: expected } });
      expect(cursor.stderr).toContain('.cursor/mcp.json');
      const code = await mcpConfig(['--client', 'claude-code'], { SWITCHBOARD_DATA_DIR: 'no-such-data' });
      expect(code.config).toEqual({ mcpServers: { switchboard: expected } });
      expect(code.stderr).toContain('.mcp.json');
      const vscode = await mcpConfig(['--client', 'vscode'], { SWITCHBOARD_DATA_DIR: 'no-such-data' });
      expect(vscode.config).toEqual({ servers: { switchboard: { type: 'stdio', ...expected } } });
      expect(vscode.stderr).toContain('.vscode/mcp.json');

      // --json: the same object on one line.
      const json = await mcpConfig(['--client', 'vscode', '--json'], { SWITCHBOARD_DATA_DIR: 'no-such-data' });
      expect(json.stdout).toBe(`${JSON.stringify(vscode.config)}\n`);
    });

    it('carries the settings switchboard mcp shares with the server, and none of the listener or its keys', async () => {
      const dir = dataDir();
      const { config, stderr } = await mcpConfig([], {
        SWITCHBOARD_DATA_DIR: dir,
        SWITCHBOARD_EMBEDDINGS: 'openai',
        SWITCHBOARD_EMBEDDING_MODEL: 'text-embedding-3-large',
        OPENAI_API_KEY: 'sk-test',
        OPENAI_BASE_URL: 'http://127.0.0.1:9/v1',
        SWITCHBOARD_MCP_CONFIG: 'tools.json',
        SWITCHBOARD_MCP_STDIO: '1',
        SWITCHBOARD_ADMIN_KEY: `sb_${'a'.repeat(40)}`,
        PORT: '4321',
        HOST: '0.0.0.0',
        SWITCHBOARD_PUBLIC_URL: 'https://sb.example.com',
        SWITCHBOARD_RATE_LIMIT: '5',
        LOG_LEVEL: 'debug',
        SWITCHBOARD_MODEL: '',
      });
      expect(config.mcpServers.switchboard.env).toEqual({
        SWITCHBOARD_DATA_DIR: dir,
        SWITCHBOARD_EMBEDDINGS: 'openai',
        SWITCHBOARD_EMBEDDING_MODEL: 'text-embedding-3-large',
        OPENAI_API_KEY: 'sk-test',
        OPENAI_BASE_URL: 'http://127.0.0.1:9/v1',
        SWITCHBOARD_MCP_CONFIG: path.resolve('tools.json'),
        SWITCHBOARD_MCP_STDIO: '1',
        SWITCHBOARD_API_KEY: '<paste an sb_ API key here>',
      });
      expect(stderr).toContain('carries OPENAI_API_KEY');
    });

    it('creates a key with the scope asked for and every scope it implies, in the default or a named workspace', async () => {
      const dir = dataDir();
      expect((await runCli(['workspaces', 'create', 'default', '--json'], io({ SWITCHBOARD_DATA_DIR: dir }).io))).toBe(0);
      const other = io({ SWITCHBOARD_DATA_DIR: dir });
      expect(await runCli(['workspaces', 'create', 'acme', '--json'], other.io)).toBe(0);
      const acmeId = JSON.parse(other.out.stdout).workspace.id as string;

      const implied: Record<string, string[]> = { read: ['read'], write: ['read', 'write'], admin: ['read', 'write', 'admin'] };
      for (const [scope, scopes] of Object.entries(implied)) {
        const run = await mcpConfig(['--client', 'claude-desktop', '--new-key', '--scope', scope], { SWITCHBOARD_DATA_DIR: dir });
        expect(run.code).toBe(0);
        const secret = run.config.mcpServers.switchboard.env.SWITCHBOARD_API_KEY as string;
        expect(secret).toMatch(/^sb_[0-9A-Za-z]{40}$/);
        expect(storedKey(dir, secret)).toMatchObject({ name: 'MCP client: claude-desktop', scopes });
        expect(run.stderr).toMatch(new RegExp(`Created key key_\\w+ \\(${scopes.join(', ')}\\) in workspace default`));
        expect(run.stderr).not.toContain(secret);
      }
      // Without --scope: read and write, like keys create.
      const plain = await mcpConfig(['--new-key', '--client', 'cursor'], { SWITCHBOARD_DATA_DIR: dir });
      expect(storedKey(dir, plain.config.mcpServers.switchboard.env.SWITCHBOARD_API_KEY).scopes).toEqual(['read', 'write']);

      const acme = await mcpConfig(['--new-key', '--workspace', 'acme', '--scope', 'read', '--client', 'vscode'], { SWITCHBOARD_DATA_DIR: dir });
      expect(storedKey(dir, acme.config.servers.switchboard.env.SWITCHBOARD_API_KEY)).toMatchObject({ workspace_id: acmeId, scopes: ['read'] });

      const missing = await mcpConfig(['--new-key', '--workspace', 'nope'], { SWITCHBOARD_DATA_DIR: dir });
      expect(missing.code).toBe(1);
      expect(missing.stderr).toContain('"nope" does not exist');
      expect(missing.stdout).toBe('');
    });

    it('uses SWITCHBOARD_API_KEY once the database knows it, and refuses one it does not', async () => {
      const dir = dataDir();
      const ws = io({ SWITCHBOARD_DATA_DIR: dir });
      await runCli(['workspaces', 'create', 'default', '--json'], ws.io);
      const key = JSON.parse(ws.out.stdout).key as string;

      const ok = await mcpConfig(['--client', 'claude-code'], { SWITCHBOARD_DATA_DIR: dir, SWITCHBOARD_API_KEY: key });
      expect(ok.code).toBe(0);
      expect(ok.config.mcpServers.switchboard.env.SWITCHBOARD_API_KEY).toBe(key);
      expect(ok.stderr).toContain('Using SWITCHBOARD_API_KEY: key key_');
      expect(ok.stderr).toContain('read, write, admin');

      const unknown = await mcpConfig([], { SWITCHBOARD_DATA_DIR: dir, SWITCHBOARD_API_KEY: `sb_${'b'.repeat(40)}` });
      expect(unknown.code).toBe(1);
      expect(unknown.stderr).toContain('SWITCHBOARD_API_KEY: is not an active key');
      expect(unknown.stdout).toBe('');

      // --new-key wins over the environment's key.
      const fresh = await mcpConfig(['--new-key', '--scope', 'read'], { SWITCHBOARD_DATA_DIR: dir, SWITCHBOARD_API_KEY: key });
      expect(fresh.config.mcpServers.switchboard.env.SWITCHBOARD_API_KEY).not.toBe(key);
    });

    it('prints the Streamable HTTP form with the key as a bearer header, where the client can take one', async () => {
      const dir = dataDir();
      const ws = io({ SWITCHBOARD_DATA_DIR: dir });
      await runCli(['workspaces', 'create', 'default', '--json'], ws.io);
      const key = JSON.parse(ws.out.stdout).key as string;
      const env = { SWITCHBOARD_DATA_DIR: dir, SWITCHBOARD_API_KEY: key, PORT: '4321' };
      const endpoint = { url: 'http://127.0.0.1:4321/mcp', headers: { Authorization: `Bearer ${key}` } };

      expect((await mcpConfig(['--client', 'claude-code', '--http'], env)).config).toEqual({ mcpServers: { switchboard: { type: 'http', ...endpoint } } });
      expect((await mcpConfig(['--client', 'cursor', '--http'], env)).config).toEqual({ mcpServers: { switchboard: endpoint } });
      expect((await mcpConfig(['--client', 'vscode', '--http'], env)).config).toEqual({ servers: { switchboard: { type: 'http', ...endpoint } } });

      // A wildcard listener is reached on loopback; an IPv6 host in brackets; the public URL first.
      const wildcard = await mcpConfig(['--client', 'cursor', '--http'], { ...env, HOST: '0.0.0.0' });
      expect(wildcard.config.mcpServers.switchboard.url).toBe('http://127.0.0.1:4321/mcp');
      const v6 = await mcpConfig(['--client', 'cursor', '--http'], { ...env, HOST: '::1' });
      expect(v6.config.mcpServers.switchboard.url).toBe('http://[::1]:4321/mcp');
      const pub = await mcpConfig(['--client', 'cursor', '--http'], { ...env, SWITCHBOARD_PUBLIC_URL: 'https://sb.example.com' });
      expect(pub.config.mcpServers.switchboard.url).toBe('https://sb.example.com/mcp');

      const noKey = await mcpConfig(['--client', 'vscode', '--http'], { SWITCHBOARD_DATA_DIR: dir, PORT: '4321' });
      expect(noKey.config.servers.switchboard.headers).toEqual({ Authorization: 'Bearer <paste an sb_ API key here>' });
      expect(noKey.stderr).toContain('--new-key');

      // Claude Desktop's file takes no URL: an explanation, not an entry.
      const desktop = await mcpConfig(['--http'], env);
      expect(desktop.code).toBe(2);
      expect(desktop.stdout).toBe('');
      expect(desktop.stderr).toContain('Claude Desktop cannot take Streamable HTTP from its config file');
      expect(desktop.stderr).toContain('Add custom connector');

      const port0 = await mcpConfig(['--client', 'cursor', '--http'], { ...env, PORT: '0' });
      expect(port0.code).toBe(2);
      expect(port0.stderr).toContain('PORT is 0');
    });

    it('refuses unknown clients, scopes and flags with usage and exit code 2', async () => {
      const env = { SWITCHBOARD_DATA_DIR: 'no-such-data' };
      const cases: Array<[string[], string]> = [
        [['--client', 'vim'], '--client takes one of claude-desktop, claude-code, cursor, vscode'],
        [['--new-key', '--scope', 'root'], '--scope takes one of read, write, admin'],
        [['--scope', 'read'], '--scope and --workspace choose the key that --new-key creates'],
        [['--workspace', 'acme'], '--scope and --workspace choose the key that --new-key creates'],
        [['--new-key', '--scopes', 'read'], 'mcp-config takes no --scopes'],
        [['--name', 'x'], 'mcp-config takes no --name'],
        [['extra'], 'Usage: switchboard mcp-config'],
        [['--bogus'], "Unknown option '--bogus'"],
        [['--client'], "Option '--client <value>' argument missing"],
      ];
      for (const [args, message] of cases) {
        const run = await mcpConfig(args, env);
        expect(run.code, args.join(' ')).toBe(2);
        expect(run.stderr, args.join(' ')).toContain(message);
        expect(run.stdout, args.join(' ')).toBe('');
      }
      // The other commands refuse mcp-config's flags.
      const keys = io(env);
      expect(await runCli(['keys', 'create', '--name', 'x', '--scope', 'read'], keys.io)).toBe(2);
      expect(keys.out.stderr).toContain('--scope is an option of mcp-config only');
      // --json errors are JSON on stdout, as for every command.
      const json = io(env);
      expect(await runCli(['mcp-config', '--client', 'vim', '--json'], json.io)).toBe(2);
      expect(JSON.parse(json.out.stdout).error.message).toContain('--client takes one of');
      expect(fs.existsSync(path.resolve('no-such-data'))).toBe(false);
    });
  });
});

describe.skipIf(!postgresUrl())('switchboard CLI on PostgreSQL', () => {
  it('migrates a PostgreSQL database once, refuses a SQLite backup of it, and never prints its password', async () => {
    const database = await createTestDatabase();
    const url = new URL(database.url);
    url.password = 'not-printed-7f3a';
    const env = { SWITCHBOARD_DATA_DIR: tempDir('switchboard-cli-'), SWITCHBOARD_DATABASE_URL: url.toString(), SWITCHBOARD_SECRET: Buffer.alloc(32, 7).toString('base64') };
    try {
      const first = io(env);
      expect(await runCli(['migrate', '--json'], first.io), first.out.stderr).toBe(0);
      expect(JSON.parse(first.out.stdout).applied).toContain('014-postgres-keyword-index');
      const again = io(env);
      expect(await runCli(['migrate'], again.io)).toBe(0);
      expect(again.out.stdout).toContain('The database is up to date.');
      const backup = io(env);
      expect(await runCli(['backup', path.join(env.SWITCHBOARD_DATA_DIR, 'copy.db')], backup.io)).toBe(2);
      expect(backup.out.stderr).toMatch(/pg_dump/);
      const noSecret = io({ ...env, SWITCHBOARD_SECRET: '' });
      expect(await runCli(['migrate'], noSecret.io)).not.toBe(0);
      expect(noSecret.out.stderr).toMatch(/SWITCHBOARD_SECRET: is required with SWITCHBOARD_DATABASE_URL/);
      for (const o of [first, again, backup, noSecret]) expect(o.out.stdout + o.out.stderr).not.toContain('not-printed-7f3a');
    } finally {
      await database.drop();
      fs.rmSync(env.SWITCHBOARD_DATA_DIR, { recursive: true, force: true });
    }
  });
});

describe('switchboard serve with a PostgreSQL server that does not answer', () => {
  it('retries for SWITCHBOARD_DATABASE_WAIT seconds, then fails with one line that leaves the password out', async () => {
    const { out, io: cli } = io({
      SWITCHBOARD_DATA_DIR: tempDir('switchboard-cli-'),
      SWITCHBOARD_DATABASE_URL: 'postgres://sb:hunter2@127.0.0.1:1/switchboard',
      SWITCHBOARD_SECRET: Buffer.alloc(32, 7).toString('base64'),
      SWITCHBOARD_DATABASE_WAIT: '1',
    });
    expect(await runCli(['serve'], cli)).toBe(1);
    expect(out.stderr.trim()).toMatch(/^PostgreSQL at postgres:\/\/sb:\*\*\*@127\.0\.0\.1:1\/switchboard did not answer within 1 s: .*ECONNREFUSED/);
    expect(out.stderr.trim().split('\n')).toHaveLength(1);
    expect(out.stderr).not.toContain('hunter2');
  });
});
