/**
 * The web console's budgets (issue 17), `npm run bench -- console`:
 *  - first-load JavaScript: the scripts index.html loads (module entry and modulepreloads),
 *    gzip-compressed, summed — target ≤ 200 KB;
 *  - the console's Vite build time (what it adds to `npm install`) — target ≤ 30 s;
 *  - Playground: from the click on `Send` to the first streamed character on screen, over the
 *    offline model, in headless Chromium (a MutationObserver timestamps the first text of the new
 *    answer; the click time is taken in the page too) — target p50 ≤ 50 ms (p95 reported).
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import zlib from 'node:zlib';
import type { AddressInfo } from 'node:net';
import chromium from '@sparticuz/chromium';
import { chromium as playwright } from 'playwright-core';
import { buildApp } from '../src/app.js';
import { loadConfig } from '../src/config.js';
import { createContext } from '../src/context.js';
import { CONSOLE_DIR, repoRoot } from '../src/http/console.routes.js';
import type { BenchOptions, BenchRow } from './lib/harness.js';
import { type MetricRow, metricRow, metricTable, startWindow } from './lib/in-process.js';

export const name = 'console';
export const description = 'web console: first-load JS gzipped (≤ 200 KB), Vite build time (≤ 30 s), Playground Send → first streamed character (≤ 50 ms)';

const JS_BUDGET_KB = 200;
const BUILD_BUDGET_S = 30;
const FIRST_CHAR_MS = 50;
const ASKS = 20;
const WARMUP = 3;

/** The scripts the HTML itself loads (not the lazy chunks of later pages), gzipped. */
export function firstLoadJs(dir = CONSOLE_DIR): { files: string[]; gzipBytes: number; rawBytes: number } {
  const html = fs.readFileSync(path.join(dir, 'index.html'), 'utf8');
  const srcs = [...html.matchAll(/<script[^>]*\bsrc="([^"]+)"/g), ...html.matchAll(/<link[^>]*rel="modulepreload"[^>]*href="([^"]+)"/g)].map((m) => m[1]!);
  let gzipBytes = 0;
  let rawBytes = 0;
  for (const src of srcs) {
    const file = fs.readFileSync(path.join(dir, src.replace(/^\/console\//, '')));
    rawBytes += file.length;
    gzipBytes += zlib.gzipSync(file, { level: 9 }).length;
  }
  return { files: srcs, gzipBytes, rawBytes };
}

export async function run(_options: BenchOptions): Promise<BenchRow[]> {
  const rows: MetricRow[] = [];
  const root = repoRoot();

  const build = startWindow();
  execFileSync(path.join(root, 'node_modules/.bin/vite'), ['build', '--config', 'console/vite.config.ts'], { cwd: root, stdio: 'ignore' });
  const built = build();
  rows.push(
    metricRow({
      name: 'console build (vite)',
      metric: 'seconds',
      value: Math.round(built.elapsedMs / 100) / 10,
      target: { kind: 'max', value: BUILD_BUDGET_S },
      operations: 1,
      notes: ['`vite build --config console/vite.config.ts`, wall time (the type-check `tsc -p console/tsconfig.json` runs before it in `npm run build`)'],
    }),
  );

  const js = firstLoadJs();
  rows.push(
    metricRow({
      name: 'first-load JS (gzip)',
      metric: 'KB',
      value: Math.round(js.gzipBytes / 102.4) / 10,
      target: { kind: 'max', value: JS_BUDGET_KB },
      operations: js.files.length,
      notes: [`${js.files.join(', ')}: ${Math.round(js.rawBytes / 1024)} KB raw; uPlot is a lazy chunk loaded by the Analytics page only`],
    }),
  );

  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'switchboard-bench-console-'));
  const ctx = await createContext(loadConfig({ SWITCHBOARD_DATA_DIR: dataDir, LOG_LEVEL: 'silent', SWITCHBOARD_RATE_LIMIT: '0' }));
  const boot = await ctx.services.auth.bootstrap(undefined);
  const app = await buildApp(ctx);
  const browser = await playwright.launch({ executablePath: process.env.CHROMIUM_PATH || (await chromium.executablePath()), headless: true, timeout: 30_000 });
  try {
    await app.listen({ port: 0, host: '127.0.0.1' });
    const origin = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
    const key = boot!.key;
    const call = async (p: string, body: unknown) => {
      const res = await fetch(origin + p, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
      if (!res.ok) throw new Error(`${p}: ${res.status} ${await res.text()}`);
      return res.json() as Promise<{ id: string }>;
    };
    await call('/personas', { name: 'Support', instructions: 'Answer from the knowledge.' });
    await call('/knowledge', { kind: 'text', name: 'Refund policy', content: 'Refunds take 5 business days. Contact billing for exceptions.' });
    await ctx.services.knowledge.idle();

    const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    page.setDefaultTimeout(10_000);
    await page.goto(`${origin}/console/playground`);
    await page.getByLabel('API key').fill(key);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByLabel('Message').waitFor();
    // In the page: the click time (capture phase) and the first text of each new answer.
    // Page-side code as a string: the Node tsconfig has no DOM types.
    await page.evaluate(`(() => {
      window.__clicks = [];
      window.__firsts = [];
      document.addEventListener('click', (e) => { if (e.target.closest('button')?.textContent === 'Send') window.__clicks.push(performance.now()); }, true);
      const seen = new WeakSet();
      new MutationObserver(() => {
        for (const a of document.querySelectorAll('article[aria-label="Answer"]')) {
          if (!seen.has(a) && (a.querySelector('.md')?.textContent ?? '').length > 0) {
            seen.add(a);
            window.__firsts.push(performance.now());
          }
        }
      }).observe(document.body, { subtree: true, childList: true, characterData: true });
    })()`);
    const latencies: number[] = [];
    const measuring = startWindow();
    for (let i = 0; i < WARMUP + ASKS; i++) {
      await page.getByLabel('Message').fill(`How long do refunds take? (${i})`);
      await page.getByRole('button', { name: 'Send' }).click();
      await page.waitForFunction((n) => (globalThis as unknown as { __firsts: number[] }).__firsts.length > n, i);
      await page.getByRole('button', { name: 'Helpful' }).last().waitFor();
      if (i >= WARMUP) {
        const [click, first] = await page.evaluate<[number, number]>(`[window.__clicks[${i}], window.__firsts[${i}]]`);
        latencies.push(first - click);
      }
    }
    const measured = measuring();
    const sorted = [...latencies].sort((a, b) => a - b);
    const p50 = sorted[Math.floor((sorted.length - 1) / 2)]!;
    rows.push(
      metricRow({
        name: 'Playground Send → first character (offline model)',
        metric: 'p50 ms',
        value: Math.round(p50 * 10) / 10,
        target: { kind: 'max', value: FIRST_CHAR_MS },
        operations: latencies.length,
        latenciesMs: latencies,
        window: measured,
        notes: [`${ASKS} asks after ${WARMUP} warm-up, one conversation, headless Chromium on this machine; click → first text of the new answer in the DOM (MutationObserver), both timed in the page`],
      }),
    );
  } finally {
    await browser.close();
    await app.close();
    await ctx.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
  console.log(`\n${metricTable(rows)}`);
  return rows;
}
