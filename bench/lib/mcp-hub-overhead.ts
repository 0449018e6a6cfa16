/**
 * The tool hub's overhead per external tool call: the same `echo` tool of the same MCP test server
 * (test/fakes/mcp-test-server.mjs) called through the hub (`ctx.tools.call`: lookup, parameter
 * check against the tool's JSON Schema, concurrency gate, time-out, scrubbing) and through a bare
 * SDK `Client`, sequentially, in alternating blocks so drift hits both alike. Over stdio and over
 * Streamable HTTP (the hub's guarded fetch against the SDK's default fetch). Target: ≤ 1 ms p50 added.
 */
import { systemActor } from '../../src/core/auth/actor.js';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { loadConfig } from '../../src/config.js';
import { createContext } from '../../src/context.js';
import { type BenchOptions, type BenchRow, nearestRank, plainRow, round } from './harness.js';

const FAKE_SERVER = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../test/fakes/mcp-test-server.mjs');
const TARGET_ADDED_P50_MS = 1;
const BLOCK = 100;

interface HttpTestServer {
  url: string;
  close(): Promise<void>;
}

/** Times `calls` sequential calls of each function, in alternating blocks; answers ms per call. */
async function alternate(fns: Array<() => Promise<unknown>>, calls: number): Promise<number[][]> {
  const samples = fns.map(() => [] as number[]);
  for (let done = 0; done < calls; done += BLOCK) {
    for (const [i, fn] of fns.entries()) {
      for (let k = 0; k < BLOCK; k++) {
        const t0 = performance.now();
        await fn();
        samples[i]!.push(performance.now() - t0);
      }
    }
  }
  return samples;
}

function p50(latencies: number[]): number {
  return nearestRank(latencies.slice().sort((a, b) => a - b), 0.5);
}

export async function measureHubOverhead(options: BenchOptions): Promise<BenchRow[]> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'switchboard-bench-mcp-'));
  const config = loadConfig({ SWITCHBOARD_DATA_DIR: dataDir, LOG_LEVEL: 'silent', SWITCHBOARD_MCP_STDIO: '1', SWITCHBOARD_ALLOW_PRIVATE_URLS: '1' });
  const ctx = await createContext(config);
  const { startHttpTestServer } = (await import(pathToFileURL(FAKE_SERVER).href)) as { startHttpTestServer(): Promise<HttpTestServer> };
  const http = await startHttpTestServer();
  const bare: Client[] = [];
  try {
    const boot = await ctx.services.auth.bootstrap(undefined);
    if (!boot) throw new Error('bench database was not empty');
    const ws = boot.workspace.id;
    const credentials = { API_TOKEN: 'bench-token-value' };
    for (const server of [
      await ctx.services.tools.createServer(systemActor(ws), { name: 'stdio_echo', transport: 'stdio', command: process.execPath, args: [FAKE_SERVER], credentials }),
      await ctx.services.tools.createServer(systemActor(ws), { name: 'http_echo', transport: 'http', url: http.url, credentials }),
    ]) {
      if (server.status !== 'connected') throw new Error(`${server.name}: ${server.status} ${server.error}`);
    }

    const stdioClient = new Client({ name: 'bench', version: '1' });
    await stdioClient.connect(new StdioClientTransport({ command: process.execPath, args: [FAKE_SERVER], env: credentials }));
    const httpClient = new Client({ name: 'bench', version: '1' });
    await httpClient.connect(new StreamableHTTPClientTransport(new URL(http.url), { requestInit: { headers: { API_TOKEN: credentials.API_TOKEN } } }));
    bare.push(stdioClient, httpClient);

    // Calls per side scale with --duration (default 10 s → 3,000), after a tenth as warm-up.
    const calls = Math.max(BLOCK, Math.round((options.durationSeconds * 300) / BLOCK) * BLOCK);
    const rows: BenchRow[] = [];
    for (const [transport, client, toolName] of [
      ['stdio', stdioClient, 'stdio_echo'],
      ['http', httpClient, 'http_echo'],
    ] as const) {
      const args = { text: 'hello' };
      const viaClient = async () => {
        const r = await client.callTool({ name: 'echo', arguments: args });
        if (r.isError) throw new Error('echo failed');
      };
      const viaHub = async () => {
        const r = await ctx.tools.call(ws, toolName, 'echo', args);
        if (r.isError) throw new Error('echo failed through the hub');
      };
      await alternate([viaClient, viaHub], Math.max(BLOCK, calls / 10));
      process.stdout.write(`  hub vs bare SDK client over ${transport}: ${calls} sequential calls each... `);
      const cpuBefore = process.cpuUsage();
      const started = performance.now();
      const [bareMs, hubMs] = await alternate([viaClient, viaHub], calls);
      const elapsedMs = performance.now() - started;
      const cpuUs = process.cpuUsage(cpuBefore);
      const added = round(p50(hubMs!) - p50(bareMs!), 3);
      process.stdout.write(`+${added} ms p50\n`);
      // Calls/s of one side: its calls over the time its own calls took.
      const side = (latencies: number[]) => ({ requests: calls, elapsedMs: latencies.reduce((a, b) => a + b, 0), serverCpuUs: null, latencies });
      rows.push(plainRow(`bare SDK Client → echo over ${transport} (sequential)`, side(bareMs!)));
      const failures = added > TARGET_ADDED_P50_MS ? [`hub adds ${added} ms p50, target ≤ ${TARGET_ADDED_P50_MS} ms`] : [];
      rows.push({
        ...plainRow(`tool hub → echo over ${transport} (sequential), +${added} ms p50`, side(hubMs!)),
        // This process did both sides: its CPU over the whole run, as a share of one core.
        loadCpuPercent: Math.round(((cpuUs.user + cpuUs.system) / (elapsedMs * 1000)) * 100),
        pass: failures.length === 0,
        failures,
      });
    }
    return rows;
  } finally {
    await Promise.all(bare.map((c) => c.close().catch(() => {})));
    await http.close();
    await ctx.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}
