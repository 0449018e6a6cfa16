// The README's "First steps" section, run as a reader runs it: its ```sh blocks, in order, in one
// bash against the built server (a temp data directory, a known admin key), with the ```text block
// after a command block as what that block must print. The first block only sets SB and KEY, which
// this test sets itself. curl is made to fail on an HTTP error status (--fail-with-body), so a
// refused request fails its block instead of passing a problem body on to jq.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateKeySecret } from '../../src/core/auth/keys.js';
import { tempDir } from '../helpers/app.js';
import { type BuiltServer, builtServers, MAIN, ROOT } from '../helpers/built-server.js';

const SECTION = '## First steps';
const SCRIPT_TIMEOUT_MS = 60_000;

interface WalkthroughStep {
  /** The shell code, as the README shows it. */
  code: string;
  /** What the README says it prints (a line `...` stands for any lines), if it says. */
  expected?: string;
  /** 1-based line of the block's opening fence in README.md. */
  line: number;
}

/** The fenced blocks of the section: `sh` blocks are steps, a `text` block is the output of the step before it. */
function walkthroughSteps(readme: string): { setup: WalkthroughStep; steps: WalkthroughStep[] } {
  const lines = readme.split('\n');
  const start = lines.findIndex((l) => l.trim() === SECTION);
  if (start < 0) throw new Error(`README.md has no "${SECTION}" section`);
  const endOffset = lines.slice(start + 1).findIndex((l) => /^## /.test(l));
  const end = endOffset < 0 ? lines.length : start + 1 + endOffset;
  const steps: WalkthroughStep[] = [];
  for (let i = start + 1; i < end; i++) {
    const open = /^```(\w*)\s*$/.exec(lines[i]!);
    if (!open) continue;
    const close = lines.findIndex((l, j) => j > i && l.trim() === '```');
    if (close < 0 || close >= end) throw new Error(`README.md:${i + 1}: unclosed code block`);
    const body = lines.slice(i + 1, close).join('\n');
    const lang = open[1];
    if (lang === 'sh') steps.push({ code: body, line: i + 1 });
    else if (lang === 'text') {
      const last = steps.at(-1);
      if (!last || last.expected !== undefined) throw new Error(`README.md:${i + 1}: a text block must follow a sh block, one per block`);
      last.expected = body;
    } else throw new Error(`README.md:${i + 1}: the walk-through has only sh and text blocks, not "${lang}"`);
    i = close;
  }
  const [setup, ...rest] = steps;
  if (!setup || !/^export SB=/m.test(setup.code) || !/^export KEY=/m.test(setup.code)) {
    throw new Error(`the first sh block of "${SECTION}" must set SB and KEY (the test sets them itself)`);
  }
  const setupOnly = setup.code.split('\n').every((l) => /^export (SB|KEY)=\S*(\s+#.*)?$/.test(l.trim()) || l.trim() === '');
  if (!setupOnly) throw new Error('the first sh block must only export SB and KEY, since the test skips it');
  return { setup, steps: rest };
}

/** Exact match line by line (trailing spaces ignored); a line `...` in `expected` matches any lines. */
function matchesOutput(actual: string, expected: string): boolean {
  const lines = (s: string) => s.split('\n').map((l) => l.trimEnd()).join('\n').trim().split('\n');
  const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  // Each expected line matches one whole line; `...` matches any number of whole lines.
  const pattern = lines(expected)
    .map((l) => (l === '...' ? '(?:.*\n)*' : `${escape(l)}\n`))
    .join('');
  return new RegExp(`^${pattern}$`).test(`${lines(actual).join('\n')}\n`);
}

const MARK = '@@walkthrough-step';

function script(steps: WalkthroughStep[]): string {
  return [
    'set -Eeuo pipefail',
    // -q: no ~/.curlrc; the reader's commands unchanged, but an HTTP error status fails the command.
    'curl() { command curl -q --fail-with-body "$@"; }',
    `trap 'echo "failed (exit $?): $BASH_COMMAND" >&2' ERR`,
    ...steps.flatMap((s, i) => [`printf '\\n${MARK} ${i}\\n'`, s.code]),
    `printf '\\n${MARK} end\\n'`,
  ].join('\n');
}

function runBash(text: string, env: Record<string, string>): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = execFile('bash', ['--noprofile', '--norc', '-c', text], { env, timeout: SCRIPT_TIMEOUT_MS, maxBuffer: 16 * 1024 * 1024 }, (err, stdout, stderr) => {
      resolve({ code: err ? ((err as { code?: number }).code ?? null) : 0, stdout, stderr });
    });
    child.stdin?.end();
  });
}

/** Each step's stdout, by the markers the script prints between steps. */
function outputsOf(stdout: string, count: number): (string | undefined)[] {
  const outputs: (string | undefined)[] = [];
  for (let i = 0; i < count; i++) {
    const begin = stdout.indexOf(`\n${MARK} ${i}\n`);
    const next = stdout.indexOf(`\n${MARK} ${i + 1 < count ? i + 1 : 'end'}\n`);
    outputs.push(begin < 0 || next < 0 ? undefined : stdout.slice(begin + `\n${MARK} ${i}\n`.length, next));
  }
  return outputs;
}

describe('the README walk-through ("First steps") against the built server', { timeout: 90_000 }, () => {
  const dataDir = tempDir('switchboard-readme-');
  const key = generateKeySecret();
  const { serve, killAll } = builtServers({ dataDir, adminKey: key });
  let server: BuiltServer;

  beforeAll(async () => {
    expect(fs.existsSync(MAIN), 'dist/ is built by npm test (or npx tsc -p tsconfig.json)').toBe(true);
    server = await serve();
  });

  afterAll(() => {
    killAll();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  it('runs every command block with exit 0 and prints what the README says', async () => {
    const readme = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8');
    const { steps } = walkthroughSteps(readme);
    // The walk-through persona, knowledge, query and session: enough steps that a lost block shows.
    expect(steps.length).toBeGreaterThanOrEqual(6);
    expect(steps.filter((s) => s.expected !== undefined).length).toBeGreaterThanOrEqual(5);
    // The reader is told both ways to get the key the commands use.
    expect(readme).toContain('SWITCHBOARD_ADMIN_KEY=sb_... npm start');

    const run = await runBash(script(steps), {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      LANG: 'C.UTF-8',
      SB: server.url,
      KEY: key,
    });
    const outputs = outputsOf(run.stdout, steps.length);
    const failedAt = outputs.findIndex((o) => o === undefined);
    const where = failedAt >= 0 ? `README.md:${steps[failedAt]!.line}` : 'after the last block';
    expect(run.code, `the walk-through failed at ${where}:\n${run.stderr}\n${run.stdout.slice(-2000)}`).toBe(0);

    steps.forEach((step, i) => {
      if (step.expected === undefined) return;
      const actual = outputs[i]!;
      expect(matchesOutput(actual, step.expected), `README.md:${step.line} prints:\n${actual}\n\nThe README says:\n${step.expected}`).toBe(true);
    });
  });
});

describe('walk-through parsing', () => {
  it('matches output exactly, with ... standing for any lines', () => {
    expect(matchesOutput('a\nb\nc\n', 'a\nb\nc')).toBe(true);
    expect(matchesOutput('a\nb\nc', 'a\n...\nc')).toBe(true);
    expect(matchesOutput('a\nc', 'a\n...\nc')).toBe(true);
    expect(matchesOutput('a\nb\nd', 'a\n...\nc')).toBe(false);
    expect(matchesOutput('a.b', 'a\\b')).toBe(false);
    expect(matchesOutput('{"x":1}', '{"x":2}')).toBe(false);
    expect(matchesOutput('a\nb', 'a')).toBe(false);
    expect(matchesOutput('a\nb\nc', 'a\n...')).toBe(true);
  });

  it('refuses a walk-through whose first block does not set SB and KEY', () => {
    const readme = '## First steps\n\n```sh\ncurl -s "$SB/health"\n```\n\n## Next\n';
    expect(() => walkthroughSteps(readme)).toThrow(/must set SB and KEY/);
  });
});
