// Issue 28's console pages in real Chromium: a persona's versions (the diff of two, restore), datasets
// (import with a readable error for a bad line, export), evaluation runs watched to completion with
// their per-case results, two versions compared, an A/B test between two versions with the
// sequential interval over time and promotion, and a badly rated Playground answer made a
// regression case in one click.
import fs from 'node:fs';
import path from 'node:path';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CONSOLE_DIR } from '../../src/http/console.routes.js';
import type { Clock } from '../../src/lib/clock.js';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { listen } from '../integration/chat-helpers.js';
import { addPerson, axeSerious, expectClean, goTo, launch, openPage, screenshot, type Person, signIn, UI_WAIT_MS, type Watched } from './console-helpers.js';

const REFUNDS = 'Refunds are paid within five working days. A refund needs the order number and the receipt.';
const DAY = 86_400_000;
/** Eight cases the persona's first version passes and its second (answers cut to eight words) fails. */
const CASES = Array.from({ length: 8 }, (_, i) =>
  i % 2 === 0 ? { input: 'How long do refunds take?', mustContain: ['five working days'], tags: ['refunds'] } : { input: 'What does a refund need?', mustContain: ['order number'] },
);

describe('evaluations, versions and sequential A/B results in the console, in Chromium', { timeout: 90_000 }, () => {
  let t: TestApp;
  let origin: string;
  let browser: Browser;
  /** The person who signs in to the console (an owner, made through an invitation). */
  let owner: Person;
  /** The app's clock runs this far behind the real one: A/B ratings are given on three days. */
  let offsetMs = 0;
  const clock: Clock = { now: () => new Date(Date.now() + offsetMs) };
  const opened: Watched[] = [];
  const open = async (opts?: Parameters<typeof openPage>[1]) => {
    const w = await openPage(browser, opts);
    opened.push(w);
    await signIn(w.page, origin, owner);
    return w;
  };
  let helpdesk: string;

  beforeAll(async () => {
    if (!fs.existsSync(path.join(CONSOLE_DIR, 'index.html'))) throw new Error(`the console is not built (${CONSOLE_DIR}): run \`npm run build\` first (npm test does)`);
    // The clock goes two days back and forth while a person stays signed in: a session idle for a week
    // would still be open (by default it ends after 12 idle hours, and a jump of two days would end it).
    t = await createTestApp({ env: { SWITCHBOARD_SESSION_IDLE_MINUTES: String(7 * 24 * 60) }, overrides: { clock } });
    origin = await listen(t);
    owner = await addPerson(t, 'owner');
    await api('POST', '/knowledge', { kind: 'text', name: 'Refund policy', content: REFUNDS });
    await t.ctx.services.knowledge.idle();
    helpdesk = (await api('POST', '/personas', { name: 'Helpdesk', instructions: 'Answer from the knowledge.\nQuote the policy.' })).id;
    browser = await launch();
  }, 60_000);
  afterAll(async () => {
    for (const w of opened) await w.context.close().catch(() => undefined);
    await browser?.close();
    await t?.close();
  });

  const api = async (method: string, url: string, body?: unknown) => {
    const res = await t.request({ method: method as 'GET', url, body });
    if (res.statusCode >= 300) throw new Error(`${method} ${url}: ${res.statusCode} ${res.body}`);
    return res.statusCode === 204 ? null : res.json();
  };

  it('edits a persona into version 2, shows the diff of the two versions, and restores version 1', async () => {
    const w = await open({ acceptDialogs: true });
    const { page } = w;
    await goTo(page, 'Personas');
    await page.getByRole('button', { name: 'Edit Helpdesk' }).click();
    await page.getByLabel('Instructions').fill('Answer from the knowledge.\nQuote the policy word for word.\nBe brief.');
    await page.getByLabel('Max tokens').fill('8');
    await page.getByRole('button', { name: 'Save persona' }).click();
    await page.getByText(/ · version 2 · /).waitFor();

    await page.getByRole('button', { name: 'Versions of Helpdesk' }).click();
    const versions = page.getByRole('region', { name: 'Versions of Helpdesk' });
    const diff = versions.getByTestId('version-diff');
    await diff.getByText('2 fields changed.', { exact: false }).waitFor();
    expect(await diff.locator('.line-diff ins').allTextContents()).toEqual(['+ Quote the policy word for word.', '+ Be brief.']);
    expect(await diff.locator('.line-diff del').allTextContents()).toEqual(['− Quote the policy.']);
    expect(await diff.locator('.line-diff .same').allTextContents()).toEqual(['  Answer from the knowledge.']);
    expect(await diff.getByRole('row', { name: /^Max tokens/ }).textContent()).toBe('Max tokensserver default → 8');
    expect(await diff.textContent()).toContain('Unchanged: Name, Traits, Model, Temperature, Tools allow-list.');
    expect(await versions.getByRole('button', { name: /^Restore this version/ }).count()).toBe(1);
    await versions.getByText('No answers in this timeframe', { exact: false }).waitFor();
    expect(await axeSerious(page)).toEqual([]);
    await screenshot(page, 'persona-versions-diff');

    await versions.getByRole('button', { name: 'Restore this version (v1)' }).click();
    await page.getByText(/ · version 3 · /).waitFor();
    // The view opens on what the new version changed: version 1's fields back.
    await versions.getByTestId('version-diff').getByText('From version 2', { exact: false }).waitFor();
    expect(await versions.getByTestId('version-diff').locator('.line-diff del').allTextContents()).toEqual(['− Quote the policy word for word.', '− Be brief.']);
    const persona = await api('GET', `/personas/${helpdesk}`);
    expect(persona).toMatchObject({ version: 3, maxTokens: null, instructions: 'Answer from the knowledge.\nQuote the policy.' });
    expect(w.dialogs).toEqual(['confirm: Restore version 1 of “Helpdesk”? Its fields become current again as version 3; no version is lost.']);
    expect(w.problems).toEqual([]);
  });

  it('creates a dataset, refuses a bad file naming line and field, imports and exports, runs two versions to completion and compares them', async () => {
    const w = await open();
    w.allow.add(400);
    const { page } = w;
    await goTo(page, 'Evaluations');
    await page.getByLabel('Dataset name').fill('Refunds');
    await page.getByRole('button', { name: 'Create dataset' }).click();
    const ds = page.getByRole('region', { name: 'Dataset Refunds' });
    await ds.getByRole('heading', { name: 'Refunds' }).waitFor();
    await ds.getByText('No cases yet', { exact: false }).waitFor();

    // A bad line: nothing imported, and the line and field said plainly.
    const file = ds.getByLabel('Import a JSONL or CSV file');
    await file.setInputFiles({ name: 'bad.jsonl', mimeType: 'application/x-ndjson', buffer: Buffer.from('{"input":"fine"}\n{"input":"x","regex":"("}\n') });
    const errors = ds.getByTestId('import-errors');
    await errors.waitFor();
    expect(await errors.textContent()).toMatch(/^Nothing was imported from bad\.jsonl: .*Line 2, field regex: must compile/);
    expect((await api('GET', '/datasets')).data[0].caseCount).toBe(0);
    expect(w.problems.filter((p) => !/\b400\b/.test(p))).toEqual([]);
    w.problems.length = 0;

    await file.setInputFiles({ name: 'refunds.jsonl', mimeType: 'application/x-ndjson', buffer: Buffer.from(CASES.map((c) => JSON.stringify(c)).join('\n') + '\n') });
    await ds.getByText('Imported 8 cases from refunds.jsonl; the dataset now holds 8.').waitFor();
    expect(await errors.count()).toBe(0);
    // One more by hand.
    const add = ds.getByRole('form', { name: 'Add a case' });
    await add.getByLabel('Question').fill('When is a refund paid?');
    await add.getByLabel('Must contain', { exact: true }).fill('five working days');
    await add.getByRole('button', { name: 'Add case' }).click();
    const cases = ds.getByTestId('cases');
    const added = cases.locator('tbody tr', { hasText: 'When is a refund paid?' });
    await added.waitFor();
    expect(await added.textContent()).toMatch(/^9When is a refund paid\?must contain: five working days/);
    expect(await cases.locator('tbody tr').count()).toBe(9);

    const [download] = await Promise.all([page.waitForEvent('download', { timeout: UI_WAIT_MS }), ds.getByRole('button', { name: 'Export JSONL of Refunds' }).click()]);
    const exported = fs.readFileSync(await download.path(), 'utf8').trim().split('\n').map((l) => JSON.parse(l));
    expect(exported).toEqual([...CASES, { input: 'When is a refund paid?', mustContain: ['five working days'] }]);

    // Version 1, then version 2 (answers cut short), each watched until completed.
    const start = ds.getByRole('form', { name: 'Start a run' });
    const runs = ds.getByTestId('runs');
    for (const version of ['1', '2']) {
      await start.getByLabel('Persona to run').selectOption({ label: 'Helpdesk' });
      await start.getByLabel('Persona version').selectOption(version);
      await start.getByLabel('Cases at once (1–16)').fill('2');
      await start.getByRole('button', { name: 'Start run' }).click();
      await runs.locator('tr', { hasText: `Helpdesk v${version}` }).locator('[data-status=completed]').waitFor();
    }
    expect(await runs.locator('tr', { hasText: 'Helpdesk v1' }).textContent()).toContain('9 / 9');
    const list = (await api('GET', '/evaluations/runs')).data as { id: string; personaVersion: number; status: string; concurrency: number }[];
    const v1 = list.find((r) => r.personaVersion === 1)!;
    const v2 = list.find((r) => r.personaVersion === 2)!;
    expect([v1.status, v2.status, v1.concurrency]).toEqual(['completed', 'completed', 2]);

    // Per-case results: the answer, its source, each score; failing only.
    await runs.getByRole('button', { name: `Results of Helpdesk v1 run ${v1.id}` }).click();
    const results = ds.getByRole('region', { name: 'Results of Helpdesk v1 run' });
    expect(await results.getByTestId('run-passed').textContent()).toBe('9 of 9 (100 %)');
    const first = results.getByRole('article', { name: 'Case 1' });
    await first.getByText('five working days', { exact: false }).first().waitFor();
    expect(await first.textContent()).toContain('Question: How long do refunds take?');
    expect(await first.textContent()).toContain('Sources: Refund policy');
    expect(await first.locator('tr', { hasText: 'must_contain' }).textContent()).toMatch(/^must_contain1\.000pass/);
    await results.getByLabel('Failing cases only').check();
    await results.getByText('No failing case.').waitFor();
    await runs.getByRole('button', { name: `Results of Helpdesk v2 run ${v2.id}` }).click();
    const failing = ds.getByRole('region', { name: 'Results of Helpdesk v2 run' });
    await failing.getByRole('article', { name: 'Case 1' }).getByText('failed', { exact: true }).first().waitFor();
    expect(await failing.getByRole('article', { name: 'Case 1' }).locator('tr', { hasText: 'must_contain' }).textContent()).toMatch(/^must_contain0\.000fail/);

    const compare = ds.getByRole('form', { name: 'Compare two runs' });
    await compare.getByLabel('Run A (baseline)').selectOption(v1.id);
    await compare.getByLabel('Run B').selectOption(v2.id);
    await compare.getByRole('button', { name: 'Compare' }).click();
    const winner = compare.getByTestId('compare-winner');
    await winner.waitFor();
    expect(await winner.textContent()).toMatch(/^(Winner: [AB] \(Helpdesk v[12]\)|No clear winner)$/);
    expect(await winner.textContent()).toBe('Winner: A (Helpdesk v1)');
    expect(await compare.getByTestId('compare-verdict').textContent()).toMatch(/wins over 9 cases/);
    expect(await compare.textContent()).toMatch(/B better in 0, worse in 9, tied in 0; p = /);
    expect(await compare.textContent()).toMatch(/95 % paired-bootstrap interval.* to .*\(excludes 0\)/);
    expect(await compare.getByTestId('changed-cases').locator('tbody tr').count()).toBe(9);
    expect(await axeSerious(page)).toEqual([]);
    await screenshot(page, 'evaluations');
    expectClean(w);
  });

  it('creates an A/B test between two versions with a guardrail; its results show the sequential test, the interval over time and the guardrail; the winner is promoted', async () => {
    const tone = await api('POST', '/personas', { name: 'Tone', instructions: 'Be brief.' });
    await api('PUT', `/personas/${tone.id}`, { instructions: 'Be thorough.' });
    offsetMs = -2 * DAY;
    const w = await open({ acceptDialogs: true });
    const { page } = w;
    await goTo(page, 'A/B tests');
    await page.getByLabel('Test name').fill('Tone versions');
    await page.getByLabel('Persona A').selectOption({ label: 'Tone' });
    await page.getByLabel('Version A').selectOption('1');
    await page.getByLabel('Persona B').selectOption({ label: 'Tone' });
    await page.getByLabel('Version B').selectOption('2');
    await page.getByLabel('Max error rate (%)').fill('50');
    await page.getByRole('button', { name: 'Create test' }).click();
    await page.getByRole('button', { name: 'Start Tone versions' }).click();
    await page.getByRole('button', { name: 'Stop Tone versions' }).waitFor();
    const [test] = (await api('GET', '/business/ab-tests')).data;
    expect(test).toMatchObject({ status: 'running', personaA: `${tone.id}@1`, personaB: `${tone.id}@2`, guardrails: { maxErrorRate: 0.5 } });

    // Ratings on three days: A is rated higher than B.
    let user = 0;
    const rate = async (each: number) => {
      const given = { A: 0, B: 0 };
      while ((given.A < each || given.B < each) && user < 400) {
        const r = await api('POST', '/query', { abTestId: test.id, userId: `user-${user++}`, message: 'Hello' });
        const v = r.variant as 'A' | 'B';
        if (given[v] >= each) continue;
        given[v]++;
        await api('POST', `/sessions/${r.sessionId}/feedback`, { rating: v === 'A' ? 4 + (given.A % 2) : 2 + (given.B % 3), messageId: r.messageId });
      }
      expect(given).toEqual({ A: each, B: each });
    };
    await rate(12);
    offsetMs = -DAY;
    await rate(6);
    offsetMs = 0;
    await rate(6);

    const card = page.locator('li.card', { hasText: 'Tone versions' });
    await card.getByRole('button', { name: 'Results of Tone versions' }).click();
    const sequential = card.getByTestId('sequential-verdict');
    await sequential.waitFor();
    const results = await api('GET', `/business/ab-tests/${test.id}/results`);
    expect(results.sequential.series).toHaveLength(3);
    expect(await sequential.textContent()).toMatch(/(wins|No winner yet): B − A lies between [+-]?\d\.\d\d and [+-]?\d\.\d\d \(95 % confidence sequence, which (ex|in)cludes 0; p (= \d\.\d{4}|< 0\.0001)\)\. Safe to read at any time/);
    expect(await card.getByTestId('sequential-interval').textContent()).toMatch(/ to .*\(95 % confidence sequence\)$/);
    const p = results.sequential.pValue as number;
    expect(await card.getByTestId('sequential-p').textContent()).toBe(p < 0.0001 ? '< 0.0001' : p.toFixed(4));
    expect(await card.getByTestId('verdict').textContent()).toMatch(/^(Variant [AB] wins|No winner|Significant)/);
    await card.getByRole('img', { name: /^B − A over time .*: 3 days with ratings; latest 95 % interval for B − A / }).waitFor();
    await card.locator('.chart canvas').waitFor();
    expect(await card.getByTestId('guardrail-maxErrorRate').textContent()).toBe('holding');
    const promote = card.getByRole('button', { name: 'Promote winner' });
    expect(await promote.isDisabled()).toBe(true);
    await card.getByText('Stop the test first: only a completed test can be promoted.').waitFor();
    expect(await axeSerious(page)).toEqual([]);
    await screenshot(page, 'ab-test-sequential');

    await card.getByRole('button', { name: 'Stop Tone versions' }).click();
    await card.getByText('Stopped: by hand').waitFor();
    const winner = results.sequential.winner as 'A' | 'B' | null;
    if (winner === null) await card.getByLabel(/^Variant A/).check();
    await expect.poll(() => promote.isEnabled(), { timeout: UI_WAIT_MS }).toBe(true);
    await promote.click();
    const promoted = winner ?? 'A';
    await card.getByText(`Promoted variant ${promoted}`).first().waitFor();
    expect((await api('GET', `/business/ab-tests/${test.id}`)).promoted).toBe(promoted);
    expect(w.dialogs).toEqual([
      `confirm: Promote variant ${promoted} (Tone v${promoted === 'A' ? 1 : 2})? New conversations through “Tone versions” go to it, and channels routed through the test move to it. Version ${promoted === 'A' ? 1 : 2} becomes the current version of Tone.`,
    ]);
    expect(w.problems).toEqual([]);
  });

  it('rates a Playground answer Not helpful and adds it to a new "Regressions" dataset in one click', async () => {
    const w = await open();
    const { page } = w;
    await goTo(page, 'Playground');
    await page.getByLabel('Persona').selectOption({ label: 'Helpdesk' });
    await page.getByLabel('Message').fill('How long do refunds take?');
    await page.getByRole('button', { name: 'Send' }).click();
    const answer = page.getByRole('article', { name: 'Answer' }).last();
    await answer.getByText(/five working days/).first().waitFor();
    await answer.getByRole('button', { name: 'Not helpful' }).click();
    await answer.getByText('Rated Not helpful').waitFor();
    const offer = answer.getByRole('group', { name: 'Add this answer to a dataset' });
    await expect.poll(() => offer.getByLabel('Dataset').inputValue(), { timeout: UI_WAIT_MS }).toBe('new');
    expect(await offer.getByLabel('Dataset').locator('option:checked').textContent()).toBe('New dataset “Regressions”');
    await offer.getByRole('button', { name: 'Add to dataset' }).click();
    const made = answer.getByTestId('made-case');
    await made.waitFor();
    expect(await made.textContent()).toMatch(/^Added as case 1 of “Regressions”: How long do refunds take\?/);
    expect(await made.textContent()).toContain('Tags: from-session, rating-1');

    const [session] = (await api('GET', `/sessions?personaId=${helpdesk}`)).data;
    const regressions = (await api('GET', '/datasets')).data.find((d: { name: string }) => d.name === 'Regressions');
    const [c] = (await api('GET', `/datasets/${regressions.id}/cases`)).data;
    expect(c).toMatchObject({ sessionId: session.id, case: { input: 'How long do refunds take?', tags: ['from-session', 'rating-1'] } });
    expect(await axeSerious(page)).toEqual([]);
    await screenshot(page, 'playground-regression-case');
    expectClean(w);
  });

  it('the Evaluations page with a dataset open is clean at 390 px in dark mode', async () => {
    const w = await open({ width: 390, dark: true });
    const { page } = w;
    await goTo(page, 'Evaluations');
    await page.getByRole('button', { name: 'Open Refunds' }).click();
    const ds = page.getByRole('region', { name: 'Dataset Refunds' });
    await ds.getByTestId('runs').waitFor();
    await ds.getByRole('button', { name: /^Results of Helpdesk v2 run/ }).click();
    await ds.getByRole('region', { name: 'Results of Helpdesk v2 run' }).getByRole('article', { name: 'Case 1' }).waitFor();
    expect(await axeSerious(page)).toEqual([]);
    await screenshot(page, 'evaluations-390-dark');
    expectClean(w);
  });
});
