// The official MCP conformance suite (@modelcontextprotocol/conformance, issue 27 item 3) against
// /mcp over real HTTP: every server scenario (`--suite all`), with the baseline of expected failures
// in mcp-conformance.baseline.yml (each one explained there). The suite exits non-zero on a failure
// the baseline does not list and on a listed scenario that passes, so this test fails both when
// /mcp regresses and when the baseline goes stale. It sends no credentials, so it reaches /mcp
// through a proxy on 127.0.0.1 that adds the admin key (Host kept, for the DNS-rebinding scenario).
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp, tempDir } from '../helpers/app.js';
import { type RoundRobinProxy, roundRobinProxy } from '../helpers/round-robin-proxy.js';

const ROOT = path.resolve(import.meta.dirname, '../..');
const CLI = path.join(ROOT, 'node_modules/@modelcontextprotocol/conformance/dist/index.js');
const BASELINE = path.join(import.meta.dirname, 'mcp-conformance.baseline.yml');
/** The first release with MCP 2026-07-28's scenarios (an alpha, installed as `conformance-next`). */
const CLI_2026 = path.join(ROOT, 'node_modules/@modelcontextprotocol/conformance-next/dist/index.js');
const BASELINE_2026 = path.join(import.meta.dirname, 'mcp-conformance-2026.baseline.yml');

/** 2026-07-28 scenarios that must pass outright: never in its baseline. */
const MUST_PASS_2026 = [
  'tools-list',
  'resources-list',
  'prompts-list',
  'caching',
  'dns-rebinding-protection',
  'sep-2164-resource-not-found',
  'server-sse-multiple-streams',
  'input-required-result-validate-input',
  'input-required-result-unsupported-methods',
  'http-header-validation',
];

/** Scenarios that must pass outright: never in the baseline. */
const MUST_PASS = [
  'server-initialize',
  'ping',
  'tools-list',
  'resources-list',
  'prompts-list',
  'server-sse-multiple-streams',
  'dns-rebinding-protection',
];

interface Check {
  id: string;
  status: 'SUCCESS' | 'FAILURE' | 'WARNING' | 'INFO' | string;
  errorMessage?: string;
}

function run(args: string[], cwd: string, cli = CLI): Promise<{ code: number; output: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [cli, ...args], { cwd, timeout: 60_000, maxBuffer: 16 * 2 ** 20 }, (err, stdout, stderr) => {
      const code = err ? (typeof err.code === 'number' ? err.code : 1) : 0;
      resolve({ code, output: `${stdout}${stderr}` });
    });
  });
}

/** Per scenario, the checks the suite saved (`server-<scenario>-<time>/checks.json`). */
function results(dir: string): Map<string, Check[]> {
  const out = new Map<string, Check[]>();
  for (const entry of fs.readdirSync(dir)) {
    const match = /^server-(.+)-\d{4}-\d{2}-\d{2}T/.exec(entry);
    const file = path.join(dir, entry, 'checks.json');
    if (match && fs.existsSync(file)) out.set(match[1]!, JSON.parse(fs.readFileSync(file, 'utf8')) as Check[]);
  }
  return out;
}

describe('MCP conformance suite against /mcp', () => {
  let t: TestApp;
  let proxy: RoundRobinProxy;
  const work = tempDir('switchboard-conformance-');

  beforeAll(async () => {
    t = await createTestApp();
    await t.app.listen({ host: '127.0.0.1', port: 0 });
    const { port } = t.app.server.address() as AddressInfo;
    proxy = await roundRobinProxy([`http://127.0.0.1:${port}`], { headers: { authorization: `Bearer ${t.adminKey}` } });
  });

  afterAll(async () => {
    await proxy?.close();
    await t?.close();
    fs.rmSync(work, { recursive: true, force: true });
  });

  it('passes every server scenario but the explained expected failures', async () => {
    const out = path.join(work, 'results');
    const { code, output } = await run(['server', '--url', `${proxy.url}/mcp`, '--suite', 'all', '--expected-failures', BASELINE, '-o', out], work);
    expect(code, output.slice(-4_000)).toBe(0);
    expect(output).toContain('Baseline check passed');

    const scenarios = results(out);
    // Every scenario the suite lists ran, the baseline's included.
    const listed = await run(['list', '--server'], work);
    const names = [...listed.output.matchAll(/^\s+- (\S+)/gm)].map((m) => m[1]!);
    expect(names.length).toBeGreaterThan(25);
    expect([...scenarios.keys()].sort()).toEqual([...names].sort());
    for (const name of MUST_PASS) {
      const checks = scenarios.get(name) ?? [];
      expect(checks.length, name).toBeGreaterThan(0);
      expect(
        checks.filter((c) => c.status === 'FAILURE' || c.status === 'WARNING'),
        name,
      ).toEqual([]);
    }
    const baseline = fs.readFileSync(BASELINE, 'utf8');
    for (const name of MUST_PASS) expect(baseline).not.toMatch(new RegExp(`^\\s*- ${name}\\s*$`, 'm'));
  }, 90_000);

  it('passes what MCP 2026-07-28 requires but the explained expected failures (the suite’s first release with it)', async () => {
    const out = path.join(work, 'results-2026');
    const { code, output } = await run(['server', '--url', `${proxy.url}/mcp`, '--requirements', '2026-07-28', '--expected-failures', BASELINE_2026, '-o', out], work, CLI_2026);
    expect(code, output.slice(-4_000)).toBe(0);
    expect(output).toContain('Baseline check passed');
    const scenarios = results(out);
    const listed = await run(['list', '--server', '--requirements', '2026-07-28'], work, CLI_2026);
    // The listing has the server scenarios, then the client ones.
    const serverPart = listed.output.split(/Client scenarios/)[0]!;
    const names = [...serverPart.matchAll(/^\s+- (\S+)/gm)].map((m) => m[1]!);
    expect(names.length).toBeGreaterThan(30);
    for (const name of names) expect(scenarios.has(name), name).toBe(true);
    for (const name of MUST_PASS_2026) {
      const checks = scenarios.get(name) ?? [];
      expect(checks.length, name).toBeGreaterThan(0);
      expect(checks.filter((c) => c.status === 'FAILURE' || c.status === 'WARNING'), name).toEqual([]);
    }
    const baseline = fs.readFileSync(BASELINE_2026, 'utf8');
    for (const name of MUST_PASS_2026) expect(baseline).not.toMatch(new RegExp(`^\\s*- ${name}\\s*$`, 'm'));
  }, 90_000);
});
