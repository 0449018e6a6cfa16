// What `switchboard mcp-config` prints, started by a real MCP client: the MCP Inspector's CLI (a
// devDependency, run offline). The printed file goes to the Inspector's --config unchanged, the
// Inspector starts what it names (or connects to the URL it names) and Switchboard's tools come
// back. The built CLI (dist/, built by npm test), the server and the Inspector run as child
// processes, each bounded in time and killed with its process group at the end.
import { type ChildProcess, spawn } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { generateKeySecret } from '../../src/core/auth/keys.js';
import { tempDir } from '../helpers/app.js';
import { builtServers, MAIN } from '../helpers/built-server.js';

const inspectorPackage = createRequire(import.meta.url).resolve('@modelcontextprotocol/inspector/package.json');
const INSPECTOR = path.join(
  path.dirname(inspectorPackage),
  (JSON.parse(fs.readFileSync(inspectorPackage, 'utf8')) as { bin: Record<string, string> }).bin['mcp-inspector']!,
);

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

const running = new Set<ChildProcess>();

/** A Node script run to its end, in its own process group, killed with that group after `timeoutMs`. */
function runNode(args: string[], options: { cwd: string; env: Record<string, string>; timeoutMs?: number }): Promise<Run> {
  const timeoutMs = options.timeoutMs ?? 45_000;
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, args, { cwd: options.cwd, env: options.env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    running.add(child);
    let stdout = '';
    let stderr = '';
    child.stdout!.on('data', (c: Buffer) => (stdout += c.toString('utf8')));
    child.stderr!.on('data', (c: Buffer) => (stderr += c.toString('utf8')));
    const timer = setTimeout(() => {
      killGroup(child);
      reject(new Error(`${path.basename(args[0]!)} ${args.slice(1, 4).join(' ')} ran past ${timeoutMs} ms; stderr: ${stderr}`));
    }, timeoutMs);
    child.once('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    child.once('close', (code) => {
      clearTimeout(timer);
      running.delete(child);
      resolve({ code, stdout, stderr });
    });
  });
}

function killGroup(child: ChildProcess) {
  try {
    process.kill(-child.pid!, 'SIGKILL');
  } catch {
    // Already gone.
  }
}

describe('switchboard mcp-config, started by the MCP Inspector CLI', { timeout: 120_000 }, () => {
  const home = tempDir('switchboard-mcp-config-');
  // A `node` first on PATH that is not the one to run: the printed entry must name its Node by path.
  const wrongBin = path.join(home, 'wrong-bin');
  fs.mkdirSync(wrongBin);
  fs.writeFileSync(path.join(wrongBin, 'node'), '#!/bin/sh\necho "the node on PATH ran" >&2\nexit 3\n', { mode: 0o755 });
  const PATH = `${wrongBin}:${process.env.PATH ?? ''}`;
  // Where the Inspector runs: another directory, a HOME of its own (no catalog written to the real one).
  const elsewhere = path.join(home, 'elsewhere');
  fs.mkdirSync(elsewhere);
  const inspectorEnv = { PATH, HOME: elsewhere };
  const servers = builtServers({ dataDir: path.join(home, 'served'), adminKey: generateKeySecret() });

  afterAll(() => {
    servers.killAll();
    for (const child of running) killGroup(child);
    fs.rmSync(home, { recursive: true, force: true });
  });

  /** `switchboard ARGS` with a relative data directory, run from `home`. */
  const switchboard = (args: string[], env: Record<string, string> = {}) =>
    runNode([MAIN, ...args], { cwd: home, env: { PATH, SWITCHBOARD_DATA_DIR: 'data', LOG_LEVEL: 'silent', ...env }, timeoutMs: 30_000 });

  /** Runs the Inspector CLI on a config file; its stdout parsed. */
  async function inspect(configFile: string, method: string[]) {
    const run = await runNode([INSPECTOR, '--cli', '--config', configFile, '--server', 'switchboard', '--method', ...method], { cwd: elsewhere, env: inspectorEnv });
    return { ...run, result: run.stdout.trim().startsWith('{') ? (JSON.parse(run.stdout) as Record<string, unknown>) : undefined };
  }

  const toolNames = (result: Record<string, unknown> | undefined) => ((result?.tools ?? []) as Array<{ name: string }>).map((t) => t.name);

  it('the stdio entry for Claude Desktop, with a read key it creates, starts unchanged and lists the tools', async () => {
    expect(fs.existsSync(MAIN), 'dist/ is built by npm test').toBe(true);
    expect((await switchboard(['workspaces', 'create', 'default', '--json'])).code).toBe(0);
    const printed = await switchboard(['mcp-config', '--client', 'claude-desktop', '--new-key', '--scope', 'read']);
    expect(printed.code, printed.stderr).toBe(0);
    const file = path.join(elsewhere, 'claude_desktop_config.json');
    fs.writeFileSync(file, printed.stdout);
    expect(JSON.parse(printed.stdout).mcpServers.switchboard.env.SWITCHBOARD_DATA_DIR).toBe(path.join(home, 'data'));

    const list = await inspect(file, ['tools/list']);
    expect(list.code, list.stderr).toBe(0);
    expect(toolNames(list.result)).toEqual(expect.arrayContaining(['list_personas', 'create_persona', 'search_knowledge', 'ask_persona']));

    // The key it made is read-only: a tool that changes data is refused by Switchboard itself.
    const create = await inspect(file, ['tools/call', '--tool-name', 'create_persona', '--tool-arg', 'name=Desk', 'instructions=Hi']);
    expect(create.result).toMatchObject({ isError: true, content: [{ text: 'Forbidden: create_persona needs the "write" scope.' }] });
  });

  it("VS Code's stdio entry starts unchanged (moved under the mcpServers key the Inspector reads)", async () => {
    const printed = await switchboard(['mcp-config', '--client', 'vscode', '--new-key', '--scope', 'write']);
    expect(printed.code, printed.stderr).toBe(0);
    const { servers: entries } = JSON.parse(printed.stdout) as { servers: Record<string, unknown> };
    const file = path.join(elsewhere, 'vscode.json');
    fs.writeFileSync(file, JSON.stringify({ mcpServers: entries }));

    const created = await inspect(file, ['tools/call', '--tool-name', 'create_persona', '--tool-arg', 'name=Desk', 'instructions=Hi']);
    expect(created.code, created.stderr).toBe(0);
    expect(created.result).toMatchObject({ structuredContent: { name: 'Desk' } });
  });

  it('the Streamable HTTP entries reach a running server with their bearer key', async () => {
    const server = await servers.serve();
    const port = new URL(server.url).port;
    const env = { SWITCHBOARD_DATA_DIR: path.join(home, 'served'), HOST: '127.0.0.1', PORT: port };

    // Claude Code's form (`type: "http"`) is one the Inspector's --config reads as it is.
    const printed = await switchboard(['mcp-config', '--client', 'claude-code', '--http', '--new-key', '--scope', 'read'], env);
    expect(printed.code, printed.stderr).toBe(0);
    const entry = JSON.parse(printed.stdout).mcpServers.switchboard as { url: string; headers: Record<string, string> };
    expect(entry.url).toBe(`${server.url}/mcp`);
    const file = path.join(elsewhere, 'claude-code.json');
    fs.writeFileSync(file, printed.stdout);
    const list = await inspect(file, ['tools/list']);
    expect(list.code, list.stderr).toBe(0);
    expect(toolNames(list.result)).toContain('list_personas');

    // Cursor's form has no `type` (Cursor knows a URL entry by its `url`), which the Inspector's
    // --config would take for stdio: its URL and header go to the Inspector's own flags instead.
    const cursor = await switchboard(['mcp-config', '--client', 'cursor', '--http', '--new-key', '--scope', 'read'], env);
    expect(cursor.code, cursor.stderr).toBe(0);
    const remote = JSON.parse(cursor.stdout).mcpServers.switchboard as { url: string; headers: Record<string, string> };
    const headers = Object.entries(remote.headers).map(([name, value]) => `${name}: ${value}`);
    const run = await runNode([INSPECTOR, '--cli', remote.url, '--transport', 'http', '--header', ...headers, '--method', 'tools/list'], { cwd: elsewhere, env: inspectorEnv });
    expect(run.code, run.stderr).toBe(0);
    expect(toolNames(JSON.parse(run.stdout))).toContain('list_personas');
  });
});
