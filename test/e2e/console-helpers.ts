/** Shared by the console browser tests (issue 17): a listening app, Chromium, and page checks. */
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import chromium from '@sparticuz/chromium';
import { type Browser, type BrowserContext, type Page, chromium as playwright } from 'playwright-core';
import { expect } from 'vitest';
import type { Role } from '../../src/core/auth/roles.js';
import type { TestApp } from '../helpers/app.js';

/** Every wait in the browser tests is bounded by this. */
export const UI_WAIT_MS = 8_000;
export const SCREENSHOTS = path.resolve(import.meta.dirname, 'screenshots');

const require = createRequire(import.meta.url);
const AXE_SOURCE = fs.readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8');

export async function launch(): Promise<Browser> {
  // Playwright's own arguments: the package's serverless `args` crash outside Lambda.
  const executablePath = process.env.CHROMIUM_PATH || (await chromium.executablePath());
  return playwright.launch({ executablePath, headless: true, timeout: 30_000 });
}

export interface Watched {
  context: BrowserContext;
  page: Page;
  /** Console errors, page errors and failed requests (network failures and 4xx/5xx answers). */
  problems: string[];
  dialogs: string[];
  /** Answers with these statuses are expected in this test and not counted as problems. */
  allow: Set<number>;
}

/** A fresh context (1280 px wide unless told), watching the page for errors, failed requests and dialogs. */
export async function openPage(browser: Browser, opts: { width?: number; acceptDialogs?: boolean; dark?: boolean } = {}): Promise<Watched> {
  const context = await browser.newContext({ viewport: { width: opts.width ?? 1280, height: 900 }, colorScheme: opts.dark ? 'dark' : 'light' });
  const page = await context.newPage();
  page.setDefaultTimeout(UI_WAIT_MS);
  const w: Watched = { context, page, problems: [], dialogs: [], allow: new Set() };
  page.on('console', (m) => {
    if (m.type() !== 'error') return;
    if (isSignInProbe(m.location().url, 401)) return;
    const status = /status of (\d+)/.exec(m.text());
    if (status && w.allow.has(Number(status[1]))) return;
    w.problems.push(`console: ${m.text()}`);
  });
  page.on('pageerror', (e) => w.problems.push(`pageerror: ${e.message}`));
  page.on('requestfailed', (r) => {
    // A download's blob or an aborted stream the user stopped are not failures of the page.
    if (!r.url().startsWith('blob:')) w.problems.push(`requestfailed: ${r.method()} ${r.url()} ${r.failure()?.errorText}`);
  });
  page.on('response', (r) => {
    if (r.request().method() === 'GET' && isSignInProbe(r.url(), r.status())) return;
    if (r.status() >= 400 && !w.allow.has(r.status())) w.problems.push(`response: ${r.status()} ${r.request().method()} ${r.url()}`);
  });
  page.on('dialog', (d) => {
    w.dialogs.push(`${d.type()}: ${d.message()}`);
    void (opts.acceptDialogs && d.type() === 'confirm' ? d.accept() : d.dismiss());
  });
  return w;
}

/**
 * The console asks `GET /auth/me` at every load to learn whether the cookie signs someone in: its
 * 401 is the answer "no one", not a failure of the page.
 */
function isSignInProbe(url: string, status: number): boolean {
  return status === 401 && /\/api\/auth\/me$/.test(url.split('?')[0] ?? '');
}

export interface Person {
  email: string;
  name: string;
  password: string;
  role: Role;
}
let people = 0;
/**
 * A person of the default workspace with `role`, made as an admin would: an invitation
 * (`POST /members/invitations` with the admin key) accepted with a name and password
 * (`POST /auth/invitations/accept`, the token from the link's fragment).
 */
export async function addPerson(t: TestApp, role: Role, email = `person${++people}-${role}@example.com`): Promise<Person> {
  const invited = await t.request({ method: 'POST', url: '/members/invitations', body: { email, role } });
  if (invited.statusCode !== 201) throw new Error(`invite ${email}: ${invited.statusCode} ${invited.body}`);
  const token = (invited.json() as { url: string }).url.split('#')[1];
  const person = { email, name: email.split('@')[0]!, password: 'console test password', role };
  const accepted = await t.request({ method: 'POST', url: '/auth/invitations/accept', as: null, body: { token, name: person.name, password: person.password } });
  if (accepted.statusCode !== 201) throw new Error(`accept ${email}: ${accepted.statusCode} ${accepted.body}`);
  return person;
}

/** Signs in on the console's sign-in page with the person's e-mail and password. */
export async function signIn(page: Page, origin: string, person: Pick<Person, 'email' | 'password'>, at = '/console/') {
  await page.goto(origin + at);
  await page.getByLabel('E-mail').fill(person.email);
  await page.getByLabel('Password').fill(person.password);
  await page.getByRole('button', { name: 'Sign in', exact: true }).click();
  await page.getByRole('navigation').waitFor();
}

export async function goTo(page: Page, name: string) {
  await page.getByRole('navigation').getByRole('link', { name, exact: true }).click();
  await page.getByRole('heading', { level: 1, name, exact: true }).waitFor();
  await waitSettled(page);
}

/** No "Loading …" status left on the page. */
export async function waitSettled(page: Page) {
  // Page-side code as strings: the Node tsconfig has no DOM types.
  // (A function, not a string: a string predicate would need eval, which the console's CSP forbids.)
  await page.waitForFunction(
    () => {
      const doc = (globalThis as { document?: { querySelectorAll(s: string): Iterable<{ textContent: string | null }> } }).document!;
      return ![...doc.querySelectorAll('[role=status]')].some((e) => /^Loading/.test(e.textContent ?? ''));
    },
    undefined,
    { timeout: UI_WAIT_MS },
  );
}

export interface AxeViolation {
  id: string;
  impact: string | null;
  help: string;
  nodes: { target: string[] }[];
}

/** axe-core's serious and critical violations on the page as it is. */
export async function axeSerious(page: Page): Promise<AxeViolation[]> {
  // Evaluated through the DevTools protocol, so the page's CSP (no inline script) does not apply.
  await page.evaluate(AXE_SOURCE);
  const violations = await page.evaluate<AxeViolation[]>(`(async () => {
    const r = await window.axe.run(document, { resultTypes: ['violations'] });
    return r.violations.map((v) => ({ id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.map((n) => ({ target: n.target })) }));
  })()`);
  return violations.filter((v) => v.impact === 'serious' || v.impact === 'critical');
}

export async function screenshot(page: Page, name: string) {
  fs.mkdirSync(SCREENSHOTS, { recursive: true });
  await page.screenshot({ path: path.join(SCREENSHOTS, `${name}.png`), fullPage: true });
}

export function expectClean(w: Watched) {
  expect(w.problems).toEqual([]);
  expect(w.dialogs).toEqual([]);
}
