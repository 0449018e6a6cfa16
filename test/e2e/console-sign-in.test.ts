// Issue 41 item 5 in real Chromium: the console signs people in with the session cookie, never a key.
// The first owner from the setup link's page, a password sign-in and sign-out, an invitation's page
// (by password, and through the OIDC provider: test/fakes/oidc-provider.ts on 127.0.0.1), the CSRF
// token kept in memory only (nothing in localStorage or sessionStorage; after a reload it comes
// from GET /auth/me), and a viewer's create buttons disabled with the reason.
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CONSOLE_DIR } from '../../src/http/console.routes.js';
import { type TestOidcProvider, startOidcProvider } from '../fakes/oidc-provider.js';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { listen } from '../integration/chat-helpers.js';
import { addPerson, axeSerious, expectClean, goTo, launch, openPage, screenshot, signIn, UI_WAIT_MS, type Watched } from './console-helpers.js';

const CLIENT = { clientId: 'switchboard-console', clientSecret: 'provider-issued-client-secret' };

/** Both browser storages as the page sees them. */
const storage = (page: Page) =>
  page.evaluate<{ local: Record<string, string>; session: Record<string, string>; cookie: string }>(
    '({ local: { ...localStorage }, session: { ...sessionStorage }, cookie: document.cookie })',
  );

async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

describe('signing in to the console, in Chromium', { timeout: 90_000 }, () => {
  /** No account yet when the tests start: the setup page makes the first owner. */
  let t: TestApp;
  let origin: string;
  /** With an OIDC provider. */
  let o: TestApp;
  let oOrigin: string;
  let idp: TestOidcProvider;
  let browser: Browser;
  const opened: Watched[] = [];
  const open = async (opts?: Parameters<typeof openPage>[1]) => {
    const w = await openPage(browser, opts);
    opened.push(w);
    return w;
  };
  const OWNER = { name: 'Olga Owner', email: 'olga@example.com', password: 'a long enough password' };

  beforeAll(async () => {
    if (!fs.existsSync(path.join(CONSOLE_DIR, 'index.html'))) throw new Error(`the console is not built (${CONSOLE_DIR}): run \`npm run build\` first (npm test does)`);
    t = await createTestApp();
    origin = await listen(t);
    // The provider needs the callback URL, the app the provider's: the app's port is chosen first.
    const port = await freePort();
    oOrigin = `http://127.0.0.1:${port}`;
    idp = await startOidcProvider({ ...CLIENT, redirectUri: `${oOrigin}/auth/oidc/callback` });
    idp.accounts.set('olivia', { email: 'olivia@example.com', email_verified: true, name: 'Olivia' });
    o = await createTestApp({
      env: { SWITCHBOARD_PUBLIC_URL: oOrigin, SWITCHBOARD_OIDC_ISSUER: idp.url, SWITCHBOARD_OIDC_CLIENT_ID: CLIENT.clientId, SWITCHBOARD_OIDC_CLIENT_SECRET: CLIENT.clientSecret },
    });
    await o.app.listen({ port, host: '127.0.0.1' });
    browser = await launch();
  }, 60_000);
  afterAll(async () => {
    for (const w of opened) await w.context.close().catch(() => undefined);
    await browser?.close();
    await Promise.all([t?.close(), o?.close()]);
    await idp?.close();
  });

  it('the setup page makes the first owner, signed in; its token goes only into POST /auth/setup', async () => {
    const token = (await t.ctx.services.signIn.setup.newLink())!.token;
    const w = await open();
    const { page } = w;
    const carried: string[] = [];
    page.on('request', (r) => {
      const headers = JSON.stringify(r.headers());
      if (r.url().includes(token) || headers.includes(token) || (r.postData() ?? '').includes(token)) carried.push(`${r.method()} ${new URL(r.url()).pathname}`);
    });
    await page.goto(`${origin}/console/setup#${token}`);
    await page.getByRole('heading', { level: 1, name: 'Create the first owner' }).waitFor();
    expect(await axeSerious(page)).toEqual([]);
    await screenshot(page, 'setup');
    await page.getByLabel('Name').fill(OWNER.name);
    await page.getByLabel('E-mail').fill(OWNER.email);
    await page.getByLabel('Password').fill(OWNER.password);
    await page.getByRole('button', { name: 'Create owner and sign in' }).click();
    await page.getByRole('navigation').waitFor();
    await expect.poll(() => page.getByRole('banner').textContent(), { timeout: UI_WAIT_MS }).toMatch(/Olga Owner \(olga@example\.com\).*workspace default.*role owner/);
    // Off the link's page: the token is out of the address bar.
    expect(page.url()).toBe(`${origin}/console/`);
    expect(carried).toEqual(['POST /api/auth/setup']);
    expect(await storage(page)).toEqual({ local: {}, session: {}, cookie: '' });
    expectClean(w);
  });

  it('signs in with a password (a wrong one shows why), keeps no key nor token in browser storage, survives a reload, and signs out', async () => {
    const w = await open();
    w.allow.add(401);
    const { page } = w;
    await page.goto(`${origin}/`);
    expect(page.url()).toBe(`${origin}/console/`);
    await page.getByLabel('E-mail').fill(OWNER.email);
    await page.getByLabel('Password').fill('not the password at all');
    await page.getByRole('button', { name: 'Sign in', exact: true }).click();
    await expect.poll(() => page.getByRole('alert').textContent(), { timeout: UI_WAIT_MS }).toMatch(/\(401\)/);
    // No OIDC provider here: no button for one, and no API-key field any more.
    expect(await page.getByRole('link', { name: /^Sign in with/ }).count()).toBe(0);
    expect(await page.getByLabel('API key').count()).toBe(0);
    expect(await axeSerious(page)).toEqual([]);
    await screenshot(page, 'sign-in');

    await page.getByLabel('Password').fill(OWNER.password);
    await page.getByRole('button', { name: 'Sign in', exact: true }).click();
    await page.getByRole('navigation').waitFor();
    expect(await page.getByRole('banner').textContent()).toMatch(/role owner/);
    // The session is the HttpOnly cookie; the CSRF token stays in memory.
    expect(await storage(page)).toEqual({ local: {}, session: {}, cookie: '' });
    const [cookie] = await w.context.cookies();
    expect(cookie).toMatchObject({ name: 'sb_session', httpOnly: true, sameSite: 'Lax' });

    // A reload asks GET /auth/me: still signed in, and a change (it needs X-CSRF-Token) works.
    await page.reload();
    await goTo(page, 'Personas');
    await page.getByRole('button', { name: 'New persona' }).click();
    await page.getByLabel('Name').fill('After reload');
    await page.getByLabel('Instructions').fill('Be kind.');
    await page.getByRole('button', { name: 'Create persona' }).click();
    await page.getByRole('heading', { name: 'After reload', level: 2 }).waitFor();
    expect(await storage(page)).toEqual({ local: {}, session: {}, cookie: '' });

    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByLabel('E-mail').waitFor();
    expect(await page.getByRole('alert').textContent()).toBe('You signed out.');
    // The session ended at the server, not only in the page.
    const me = await t.request({ method: 'GET', url: '/auth/me', as: null, headers: { cookie: `sb_session=${cookie!.value}` } });
    expect(me.statusCode).toBe(401);
    await page.reload();
    await page.getByLabel('E-mail').waitFor();
    expect(w.problems.filter((p) => !/\b401\b/.test(p))).toEqual([]);
    expect(w.dialogs).toEqual([]);
  });

  it('an invitation page: a name and a password join the workspace with the invited role', async () => {
    const invited = await t.request({ method: 'POST', url: '/members/invitations', body: { email: 'ivy@example.com', role: 'editor' } });
    expect(invited.statusCode, invited.body).toBe(201);
    const token = (invited.json() as { url: string }).url.split('#')[1]!;
    const w = await open({ width: 390 });
    const { page } = w;
    await page.goto(`${origin}/console/invite#${token}`);
    await page.getByRole('heading', { level: 1, name: 'Accept an invitation' }).waitFor();
    expect(await page.getByRole('link', { name: /^Sign in with/ }).count()).toBe(0);
    expect(await axeSerious(page)).toEqual([]);
    await screenshot(page, 'invitation-390');
    await page.getByLabel('Name').fill('Ivy');
    await page.getByLabel('Password').fill('ivy has a long password');
    await page.getByRole('button', { name: 'Join and sign in' }).click();
    await page.getByRole('navigation').waitFor();
    await expect.poll(() => page.getByRole('banner').textContent(), { timeout: UI_WAIT_MS }).toMatch(/Ivy \(ivy@example\.com\).*role editor/);
    expect(page.url()).toBe(`${origin}/console/`);
    expect(await storage(page)).toEqual({ local: {}, session: {}, cookie: '' });
    expectClean(w);
  });

  it('a viewer sees the create buttons disabled, saying which role they need', async () => {
    const viewer = await addPerson(t, 'viewer');
    const w = await open();
    await signIn(w.page, origin, viewer);
    expect(await w.page.getByRole('banner').textContent()).toMatch(/role viewer/);
    await goTo(w.page, 'Personas');
    const create = w.page.getByRole('button', { name: 'New persona' });
    expect(await create.isDisabled()).toBe(true);
    expect(await create.getAttribute('title')).toBe('Needs the editor role or above; your role in default is viewer.');
    expect(await w.page.getByText('Needs the editor role or above; your role in default is viewer.').first().isVisible()).toBe(true);
    await goTo(w.page, 'Knowledge');
    expect(await w.page.getByRole('button', { name: 'Add URL' }).isDisabled()).toBe(true);
    await goTo(w.page, 'Playground');
    await goTo(w.page, 'API keys');
    expect(await w.page.getByRole('button', { name: 'Create key' }).getAttribute('title')).toMatch(/^Needs the admin role/);
    await screenshot(w.page, 'viewer');
    expectClean(w);
  });

  it('with an OIDC provider: "Sign in with" on the sign-in and invitation pages; an invited person signs in through the provider', async () => {
    const w = await open();
    const { page } = w;
    await page.goto(`${oOrigin}/console/`);
    const host = new URL(idp.url).host;
    const button = page.getByRole('link', { name: `Sign in with ${host}` });
    await button.waitFor();
    expect(await button.getAttribute('href')).toBe('/auth/oidc/start?returnTo=%2Fconsole%2F');

    const invited = await o.request({ method: 'POST', url: '/members/invitations', body: { email: 'olivia@example.com', role: 'agent' } });
    expect(invited.statusCode, invited.body).toBe(201);
    const token = (invited.json() as { url: string }).url.split('#')[1]!;
    await page.goto(`${oOrigin}/console/invite#${token}`);
    const viaProvider = page.getByRole('link', { name: `Sign in with ${host}` });
    await viaProvider.waitFor();
    expect(await viaProvider.getAttribute('href')).toBe(`/auth/oidc/start?invitation=${encodeURIComponent(token)}&returnTo=%2Fconsole%2F`);
    await viaProvider.click();
    // The provider's own pages (oidc-provider's development login and consent).
    await page.waitForURL((url) => url.origin === idp.url);
    await page.locator('input[name=login]').fill('olivia');
    await page.locator('input[name=password]').fill('any password will do');
    await page.locator('button[type=submit]').click();
    await page.locator('button[type=submit]').filter({ hasText: /continue/i }).click();
    await page.waitForURL(`${oOrigin}/console/`);
    await page.getByRole('navigation').waitFor();
    await expect.poll(() => page.getByRole('banner').textContent(), { timeout: UI_WAIT_MS }).toMatch(/Olivia \(olivia@example\.com\).*role agent/);
    expect(await storage(page)).toEqual({ local: {}, session: {}, cookie: '' });
    // The CSRF token came from GET /auth/me (the redirect has no body): signing out, a change, works.
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByLabel('E-mail').waitFor();
    expect(await page.getByRole('alert').textContent()).toBe('You signed out.');
    // The provider's pages are not the console's: only problems at this server count.
    expect(w.problems.filter((p) => p.includes(oOrigin))).toEqual([]);
  });
});
