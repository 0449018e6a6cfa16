// `switchboard mcp` as desktop assistants start it: the built CLI spawned by the SDK's
// StdioClientTransport from the repository's own mcp.json (`npm test` builds dist/ first).
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateKeySecret } from '../../src/core/auth/keys.js';
import { tempDir } from '../helpers/app.js';
import { sha256 } from '../fakes/mcp-test-server.mjs';
import { callError, callOk, expectHandbookAnswer } from '../helpers/mcp.js';
import { FAKE_MCP_SERVER } from '../helpers/mcp-tools.js';

const ROOT = path.resolve(import.meta.dirname, '../..');
const MAIN = path.join(ROOT, 'dist/src/main.js');

interface StdioEntry {
  command: string;
  args: string[];
  env: Record<string, string>;
}

/** `${NAME}` references expanded the way Claude Code and Cursor expand them. */
function expand(text: string, vars: Record<string, string>): string {
  return text.replace(/\$\{([A-Z_]+)\}/g, (_, name: string) => {
    if (!(name in vars)) throw new Error(`mcp.json references ${name}, which the test does not set`);
    return vars[name]!;
  });
}

function mcpJsonEntry(vars: Record<string, string>): StdioEntry {
  const config = JSON.parse(fs.readFileSync(path.join(ROOT, 'mcp.json'), 'utf8')) as { mcpServers: Record<string, StdioEntry> };
  const entry = config.mcpServers.switchboard!;
  return {
    command: expand(entry.command, vars),
    args: entry.args.map((a) => expand(a, vars)),
    env: Object.fromEntries(Object.entries(entry.env).map(([k, v]) => [k, expand(v, vars)])),
  };
}

/** Runs the CLI to its end with no stdin; for the refusals. */
function runMcp(env: Record<string, string>) {
  return spawnSync(process.execPath, [MAIN, 'mcp'], { env: { PATH: process.env.PATH ?? '', ...env }, input: '', encoding: 'utf8', timeout: 15_000 });
}

describe('switchboard mcp (stdio)', { timeout: 30_000 }, () => {
  const home = tempDir('switchboard-mcp-home-');
  const key = generateKeySecret();
  const toolsFile = path.join(home, 'tools.json');
  const TOOL_TOKEN = 'tool-token-held-by-switchboard-only';
  let client: Client;
  let transport: StdioClientTransport;
  const stderr: string[] = [];

  beforeAll(async () => {
    expect(fs.existsSync(MAIN), 'dist/ is built by npm test (and npm install)').toBe(true);
    // The repository itself stands in for SWITCHBOARD_HOME, with a throwaway data directory beside it.
    fs.symlinkSync(path.join(ROOT, 'dist'), path.join(home, 'dist'));
    const entry = mcpJsonEntry({ SWITCHBOARD_HOME: home, SWITCHBOARD_API_KEY: key });
    // The operator's tool servers: the fake MCP server, holding a token the assistant never sees.
    fs.writeFileSync(toolsFile, JSON.stringify({ mcpServers: { fake: { command: process.execPath, args: [FAKE_MCP_SERVER], env: { API_TOKEN: TOOL_TOKEN } } } }));
    expect(entry.command).toBe('node');
    transport = new StdioClientTransport({
      command: process.execPath,
      args: entry.args,
      // SWITCHBOARD_ADMIN_KEY makes the key exist in the fresh database, as a scripted deployment would.
      env: { PATH: process.env.PATH ?? '', ...entry.env, SWITCHBOARD_ADMIN_KEY: key, SWITCHBOARD_MCP_CONFIG: toolsFile },
      stderr: 'pipe',
    });
    transport.stderr?.on('data', (chunk: Buffer) => stderr.push(chunk.toString('utf8')));
    client = new Client({ name: 'switchboard-stdio-test', version: '1.0.0' });
    await client.connect(transport);
  });

  afterAll(async () => {
    await client?.close();
    fs.rmSync(home, { recursive: true, force: true });
  });

  it('manages personas and knowledge and answers questions over stdio', async () => {
    expect(client.getServerVersion()).toMatchObject({ name: 'switchboard' });
    await expectHandbookAnswer(client);
    expect(await callError(client, 'get_persona', { id: 'per_nope' })).toBe('Not found: Persona per_nope not found.');
    expect(fs.existsSync(path.join(home, 'data', 'switchboard.db'))).toBe(true);
  });

  it('lets a persona answer with an external tool whose token only the service holds', async () => {
    const persona = await callOk(client, 'create_persona', { name: 'Ops', instructions: 'Use your tools.', tools: ['fake.whoami'] });
    const answer = await callOk(client, 'ask_persona', { personaId: persona.id, message: '/tool fake.whoami {}', enableMCPTools: true });
    expect(answer.toolCalls[0].name).toBe('fake.whoami');
    expect(answer.response).toContain(sha256(TOOL_TOKEN));
    expect(JSON.stringify(answer)).not.toContain(TOOL_TOKEN);
  });

  it('writes logs to stderr only, as JSON lines, never the key', async () => {
    const logs = stderr.join('');
    expect(logs).toContain('Switchboard MCP server on stdio');
    expect(logs).not.toContain(key);
    expect(logs).not.toContain(TOOL_TOKEN);
  });

  it('asks a 2025-era client that can ask its user before deleting, through elicitation/create', async () => {
    const asking = new Client({ name: 'asking-stdio-client', version: '1.0.0' }, { capabilities: { elicitation: {} } });
    const asked: string[] = [];
    asking.setRequestHandler(ElicitRequestSchema, async (request) => {
      asked.push(request.params.message);
      return asked.length === 1 ? { action: 'decline' as const } : { action: 'accept' as const, content: { confirm: true } };
    });
    const entry = mcpJsonEntry({ SWITCHBOARD_HOME: home, SWITCHBOARD_API_KEY: key });
    await asking.connect(new StdioClientTransport({ command: process.execPath, args: entry.args, env: { PATH: process.env.PATH ?? '', ...entry.env }, stderr: 'pipe' }));
    try {
      const persona = await callOk(asking, 'create_persona', { name: 'Short-lived', instructions: 'x' });
      expect(await callError(asking, 'delete_persona', { id: persona.id })).toBe('Not done: the user did not confirm delete_persona.');
      expect((await callOk(asking, 'delete_persona', { id: persona.id })).deleted).toBe(true);
      expect(asked).toEqual([0, 1].map(() => `Delete the persona "Short-lived" (${persona.id}) for good, with its private knowledge sources?`));
    } finally {
      await asking.close();
    }
  });

  it('exits when the client closes its input', async () => {
    const pid = transport.pid!;
    await client.close();
    const deadline = Date.now() + 10_000;
    const alive = () => {
      try {
        process.kill(pid, 0);
        return true;
      } catch {
        return false;
      }
    };
    while (alive() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    expect(alive()).toBe(false);
  });

  it('exits 1 with the reason on stderr when the key is missing, malformed or unknown', () => {
    const dataDir = tempDir();
    try {
      const missing = runMcp({ SWITCHBOARD_DATA_DIR: dataDir });
      expect(missing.status).toBe(1);
      expect(missing.stderr).toContain('needs SWITCHBOARD_API_KEY');
      expect(missing.stdout).toBe('');
      const unknown = runMcp({ SWITCHBOARD_DATA_DIR: dataDir, SWITCHBOARD_API_KEY: generateKeySecret() });
      expect(unknown.status).toBe(1);
      expect(unknown.stderr).toContain('SWITCHBOARD_API_KEY is not a valid key');
      const malformed = runMcp({ SWITCHBOARD_DATA_DIR: dataDir, SWITCHBOARD_API_KEY: 'hunter2' });
      expect(malformed.status).toBe(1);
      expect(malformed.stderr).not.toContain('hunter2');
      expect(malformed.stdout).toBe('');
    } finally {
      fs.rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
