import fs from 'node:fs';
import path from 'node:path';
import SqliteDatabase from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { runCli } from '../../src/cli.js';
import { tempDir } from '../helpers/app.js';

function io(env: Record<string, string>) {
  const out = { stdout: '', stderr: '', url: '', stop: undefined as undefined | (() => Promise<void>) };
  return {
    out,
    io: {
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
});
