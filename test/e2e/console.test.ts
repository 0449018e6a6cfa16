// Issue 17: the web console at /console in real Chromium (playwright-core + @sparticuz/chromium):
// (signed in with a password: test/e2e/console-sign-in.test.ts covers signing in and out), every page clean (no console error, no failed request, no serious axe violation), the
// whole flow a new user follows, A/B results, API keys, a 401 mid-session, and untrusted text
// staying inert.
import fs from 'node:fs';
import path from 'node:path';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CONSOLE_DIR } from '../../src/http/console.routes.js';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { listen } from '../integration/chat-helpers.js';
import { addPerson, axeSerious, expectClean, goTo, launch, openPage, type Person, screenshot, signIn, UI_WAIT_MS, waitSettled, type Watched } from './console-helpers.js';

const PAGES = ['Personas', 'Knowledge', 'Playground', 'Inbox', 'Analytics', 'A/B tests', 'Evaluations', 'Channels', 'Tools', 'API keys'];
const REFUNDS = '# Refunds\n\nRefunds take 5 business days. Contact billing for exceptions.\n';

describe('web console in Chromium', { timeout: 90_000 }, () => {
  let t: TestApp;
  let origin: string;
  let browser: Browser;
  /** The person every test signs in as. */
  let owner: Person;
  const opened: Watched[] = [];
  const open = async (opts?: Parameters<typeof openPage>[1]) => {
    const w = await openPage(browser, opts);
    opened.push(w);
    return w;
  };

  beforeAll(async () => {
    if (!fs.existsSync(path.join(CONSOLE_DIR, 'index.html'))) throw new Error(`the console is not built (${CONSOLE_DIR}): run \`npm run build\` first (npm test does)`);
    t = await createTestApp();
    origin = await listen(t);
    owner = await addPerson(t, 'owner');
    browser = await launch();
  }, 60_000);
  afterAll(async () => {
    for (const w of opened) await w.context.close().catch(() => undefined);
    await browser?.close();
    await t?.close();
  });

  const api = async (method: string, url: string, body?: unknown, as?: string) => {
    const res = await t.request({ method: method as 'GET', url, body, ...(as ? { as } : {}) });
    if (res.statusCode >= 300) throw new Error(`${method} ${url}: ${res.statusCode} ${res.body}`);
    return res.statusCode === 204 ? null : res.json();
  };

  it('loads every page with no console error, no failed request and no serious axe violation, at 1280 and 390 px, light and dark', async () => {
    for (const [width, dark] of [[1280, false], [390, false], [1280, true]] as const) {
      const w = await open({ width, dark });
      await signIn(w.page, origin, owner);
      for (const name of PAGES) {
        await goTo(w.page, name);
        const violations = await axeSerious(w.page);
        expect(violations, `${name} at ${width}px${dark ? ' dark' : ''}: ${JSON.stringify(violations)}`).toEqual([]);
        await screenshot(w.page, `page-${name.replace(/\W+/g, '-').toLowerCase()}-${width}${dark ? '-dark' : ''}`);
      }
      // A page opened by its URL (deep link) lands on that page after sign-in.
      await w.page.goto(`${origin}/console/analytics`);
      await w.page.getByRole('heading', { level: 1, name: 'Analytics' }).waitFor();
      expectClean(w);
    }
  });

  it('the whole flow: create a persona, upload a file until ready, ask it, see the streamed answer and its source, rate it, see the rating in Analytics', async () => {
    const w = await open();
    const { page } = w;
    await signIn(page, origin, owner);

    await goTo(page, 'Personas');
    await page.getByRole('button', { name: 'New persona' }).click();
    await page.getByLabel('Name').fill('Support');
    await page.getByLabel('Instructions').fill('Answer from the knowledge.');
    await page.getByLabel('Tools allow-list').fill('knowledge.*');
    await page.getByRole('button', { name: 'Create persona' }).click();
    await page.getByRole('heading', { name: 'Support', level: 2 }).waitFor();

    await goTo(page, 'Knowledge');
    await page.getByLabel('Upload files').setInputFiles({ name: 'refunds.md', mimeType: 'text/markdown', buffer: Buffer.from(REFUNDS) });
    const row = page.getByRole('row').filter({ hasText: 'refunds.md' });
    await row.locator('[data-status=ready]').waitFor();
    await row.getByRole('button', { name: 'Chunks of refunds.md' }).click();
    await page.getByText('Refunds take 5 business days.', { exact: false }).first().waitFor();
    await page.getByLabel('Search query').fill('refunds business days');
    await page.getByLabel('Mode').selectOption('keyword');
    await page.getByRole('button', { name: 'Search', exact: true }).click();
    await page.getByText(/score \d/).first().waitFor();

    await goTo(page, 'Playground');
    await page.getByLabel('Persona').selectOption({ label: 'Support' });
    await page.getByLabel('Message').fill('How long do refunds take?');
    await page.getByRole('button', { name: 'Send' }).click();
    const answer = page.getByRole('article', { name: 'Answer' }).last();
    await answer.getByText(/Refunds take 5 business days/).first().waitFor();
    await answer.getByRole('heading', { name: 'Sources' }).waitFor();
    expect(await answer.locator('.sources').textContent()).toContain('refunds.md');
    await answer.getByRole('button', { name: 'Show passage of refunds.md' }).click();
    await answer.locator('.sources').getByText(/Refunds take 5 business days/).waitFor();
    await answer.getByRole('button', { name: 'Helpful', exact: true }).click();
    await answer.getByText('Rated Helpful').waitFor();
    // Tool calls and their results as they happen (the offline model calls a tool on `/tool ...`).
    await page.getByLabel('Message').fill('/tool knowledge.search {"query":"refunds"}');
    await page.getByRole('button', { name: 'Send' }).click();
    const toolAnswer = page.getByRole('article', { name: 'Answer' }).nth(1);
    await toolAnswer.getByText('Tool knowledge.search').waitFor();
    await toolAnswer.getByText(/^result: /).waitFor();
    await toolAnswer.getByRole('button', { name: 'Helpful', exact: true }).waitFor();
    await page.getByRole('complementary', { name: 'Session history' }).getByRole('button').first().waitFor();
    await screenshot(page, 'playground');

    const sessions = await api('GET', '/sessions');
    expect(sessions.data).toHaveLength(1);

    await goTo(page, 'Analytics');
    await expect.poll(() => page.getByTestId('satisfaction').textContent(), { timeout: UI_WAIT_MS }).toBe('5.00 / 5 (1 rating)');
    expect(await page.getByTestId('conversations-total').textContent()).toBe('1');
    await page.locator('.chart canvas').first().waitFor();
    await screenshot(page, 'analytics');
    const [download] = await Promise.all([page.waitForEvent('download', { timeout: UI_WAIT_MS }), page.getByRole('button', { name: 'Export conversations as CSV' }).click()]);
    expect(download.suggestedFilename()).toBe('switchboard-conversations-7d.csv');
    const csv = fs.readFileSync(await download.path(), 'utf8');
    expect(csv.split('\n')[0]).toMatch(/\w+,\w+/);
    expect(csv).toContain(sessions.data[0].id);
    expectClean(w);
  });

  it('creates and starts an A/B test and shows its results with the intervals and the rule in words', async () => {
    const a = await api('POST', '/personas', { name: 'Brief', instructions: 'Be brief.' });
    const b = await api('POST', '/personas', { name: 'Thorough', instructions: 'Be thorough.' });
    const w = await open();
    const { page } = w;
    await signIn(page, origin, owner);
    await goTo(page, 'A/B tests');
    await page.getByLabel('Test name').fill('Tone');
    await page.getByLabel('Persona A').selectOption({ label: 'Brief' });
    await page.getByLabel('Persona B').selectOption({ label: 'Thorough' });
    await page.getByRole('button', { name: 'Create test' }).click();
    await page.getByRole('button', { name: 'Start Tone' }).click();
    await page.getByRole('button', { name: 'Stop Tone' }).waitFor();

    // Traffic through the API, as users' apps would send it: ratings for each variant.
    const [test] = (await api('GET', '/business/ab-tests')).data;
    expect(test).toMatchObject({ status: 'running', personaA: a.id, personaB: b.id });
    for (let i = 0; i < 10; i++) {
      const r = await api('POST', '/query', { abTestId: test.id, userId: `user-${i}`, message: 'Hello' });
      await api('POST', `/sessions/${r.sessionId}/feedback`, { rating: r.variant === 'A' ? 4 + (i % 2) : 2 + (i % 3), messageId: r.messageId });
    }
    await page.getByRole('button', { name: 'Results of Tone' }).click();
    const verdict = page.getByTestId('verdict');
    await verdict.waitFor();
    const results = await api('GET', `/business/ab-tests/${test.id}/results`);
    const text = (await verdict.textContent()) ?? '';
    if (results.significance.pValue === null) expect(text).toMatch(/^Not enough ratings yet: \d+ of 2 for [AB]/);
    else if (!results.significance.significant) expect(text).toMatch(/^No winner: the difference is not significant \(p = /);
    else expect(text).toMatch(/not enough ratings yet: \d+ of 10 for [AB]|^Variant [AB] wins/);
    expect(await page.getByRole('img', { name: /Average rating with 95 % intervals/ }).count()).toBe(1);
    expect(await page.locator('svg.intervals line.ci').count()).toBeGreaterThan(0);
    expect(await page.locator('.results').textContent()).toContain('p-value');
    await screenshot(page, 'ab-test');
    expect(await axeSerious(page)).toEqual([]);
    expectClean(w);
  });

  it('creates an API key shown once (and working), then revokes it', async () => {
    const w = await open({ acceptDialogs: true });
    const { page } = w;
    await signIn(page, origin, owner);
    await goTo(page, 'API keys');
    await page.getByLabel('Key name').fill('ci-bot');
    await page.getByRole('button', { name: 'Create key' }).click();
    const secret = (await page.getByTestId('new-secret').textContent()) ?? '';
    expect(secret).toMatch(/^sb_[A-Za-z0-9]{40}$/);
    expect((await t.request({ method: 'GET', url: '/auth/me', as: secret })).statusCode).toBe(200);
    await screenshot(page, 'api-key-created');
    await page.getByRole('button', { name: 'I have saved it' }).click();
    await page.getByRole('button', { name: 'Revoke ci-bot' }).click();
    await page.getByRole('row').filter({ hasText: 'ci-bot' }).getByText('revoked').waitFor();
    expect(await page.content()).not.toContain(secret);
    expect((await t.request({ method: 'GET', url: '/auth/me', as: secret })).statusCode).toBe(401);
    expect(w.dialogs).toEqual(['confirm: Revoke key “ci-bot”? Anything using it stops working at once.']);
    expect(w.problems).toEqual([]);
  });

  it('a 401 mid-session (the person signed out everywhere, elsewhere) returns to sign-in with the reason', async () => {
    const w = await open();
    w.allow.add(401);
    await signIn(w.page, origin, owner);
    // The landing page's own requests must be done first, or one of them meets the 401 before the click.
    await waitSettled(w.page);
    // Elsewhere (another browser, through the API): "sign out everywhere" ends this page's session too.
    const other = await t.request({ method: 'POST', url: '/auth/sessions', as: null, body: { email: owner.email, password: owner.password } });
    expect(other.statusCode, other.body).toBe(201);
    const cookie = /sb_session=[^;]+/.exec(String(other.headers['set-cookie']))![0];
    const ended = await t.request({ method: 'DELETE', url: '/auth/sessions', as: null, headers: { cookie, 'x-csrf-token': other.json().csrfToken } });
    expect(ended.statusCode, ended.body).toBe(204);
    await w.page.getByRole('navigation').getByRole('link', { name: 'Knowledge', exact: true }).click();
    await w.page.getByLabel('E-mail').waitFor();
    expect(await w.page.getByRole('alert').textContent()).toMatch(/^Signed out: .+/);
    expect(await w.page.evaluate<number>('sessionStorage.length + localStorage.length')).toBe(0);
    await screenshot(w.page, 'signed-out-401');
  });

  it('shows problems readably: a persona in use cannot be deleted (409 explained), a refused URL names its field', async () => {
    const used = await api('POST', '/personas', { name: 'Webhook bot', instructions: 'Reply.' });
    await api('POST', '/business/channels', { type: 'webhook', name: 'hook', personaId: used.id, credentials: { secret: 's3cret-s3cret-s3cret' } });
    const w = await open({ acceptDialogs: true });
    w.allow.add(409).add(400);
    const { page } = w;
    await signIn(page, origin, owner);
    await goTo(page, 'Personas');
    await page.getByRole('button', { name: 'Delete Webhook bot' }).click();
    const alert = page.getByRole('alert');
    await expect.poll(() => alert.textContent(), { timeout: UI_WAIT_MS }).toMatch(/\(409\).*A running A\/B test or a channel uses this persona/);
    expect(await page.getByRole('heading', { name: 'Webhook bot' }).count()).toBe(1);

    await goTo(page, 'Channels');
    await page.getByRole('heading', { name: 'hook (webhook)' }).waitFor();
    expect(await page.locator('.card').first().textContent()).toMatch(/connected|connecting|error|disabled/);

    await goTo(page, 'Knowledge');
    await page.getByLabel('Web page URL').fill('http://127.0.0.1/private');
    await page.getByRole('button', { name: 'Add URL' }).click();
    await expect.poll(() => page.getByRole('alert').textContent(), { timeout: UI_WAIT_MS }).toMatch(/\(400\)/);
    expect(await page.getByRole('alert').locator('code').allTextContents()).toContain('url');
    await screenshot(page, 'problem-shown');
    expect(w.problems.filter((p) => !/\b(400|409)\b/.test(p))).toEqual([]);
  });

  it('runs a tool from a form built from its input schema and lists the execution', async () => {
    const w = await open();
    const { page } = w;
    await signIn(page, origin, owner);
    await goTo(page, 'Tools');
    await page.getByLabel('Tool', { exact: true }).selectOption('knowledge.search');
    await page.getByLabel(/^query/).fill('refunds');
    await page.getByRole('button', { name: 'Run tool' }).click();
    await page.getByRole('form', { name: 'Run knowledge.search' }).getByText('succeeded').waitFor();
    await page.locator('details summary').filter({ hasText: 'knowledge.search' }).first().waitFor();
    await screenshot(page, 'tools-run');
    expectClean(w);
  });

  it('keeps untrusted text inert: HTML and a javascript: link in a passage quoted by the answer', async () => {
    const evil = await api('POST', '/personas', { name: 'Quoter', instructions: 'Quote the knowledge.' });
    const payload = 'Shipping policy: <img src=x onerror=alert(1)> see [x](javascript:alert(1)) and [docs](https://example.com/ship) <script>alert(2)</script>';
    await api('POST', '/knowledge', { kind: 'text', name: 'Shipping <b>policy</b>', content: payload, personaId: evil.id });
    await t.ctx.services.knowledge.idle();
    const w = await open();
    const { page } = w;
    await signIn(page, origin, owner);
    await goTo(page, 'Playground');
    await page.getByLabel('Persona').selectOption({ label: 'Quoter' });
    await page.getByLabel('Message').fill('What is the shipping policy?');
    await page.getByRole('button', { name: 'Send' }).click();
    const answer = page.getByRole('article', { name: 'Answer' }).last();
    await answer.getByText('<img src=x onerror=alert(1)>', { exact: false }).first().waitFor();
    await answer.getByRole('button', { name: /^Show passage of / }).first().click();
    await answer.locator('.sources .md').first().waitFor();
    await page.waitForTimeout(300);

    const report = await page.evaluate<{ handlers: string[]; imgs: number; scripts: number; hrefs: string[]; external: (string | null)[] }>(`(() => {
      const all = [...document.querySelectorAll('*')];
      return {
        handlers: all.flatMap((e) => [...e.attributes].filter((a) => a.name.toLowerCase().startsWith('on')).map((a) => e.tagName + '[' + a.name + ']')),
        imgs: document.querySelectorAll('main img').length,
        scripts: document.querySelectorAll('main script').length,
        hrefs: [...document.querySelectorAll('a[href]')].map((a) => a.getAttribute('href')),
        external: [...document.querySelectorAll('main a[href^="http"]')].map((a) => a.getAttribute('rel')),
      };
    })()`);
    expect(report.handlers).toEqual([]);
    expect(report.imgs).toBe(0);
    expect(report.scripts).toBe(0);
    expect(report.hrefs.filter((h) => !/^(https?:|mailto:|\/console\/)/i.test(h))).toEqual([]);
    expect(report.external.length).toBeGreaterThan(0);
    expect(report.external.every((r) => r === 'noopener noreferrer')).toBe(true);
    expect(await answer.textContent()).toContain('[x](javascript:alert(1))');
    await screenshot(page, 'untrusted-text');
    expectClean(w);
  });
});
