// Issue 27 item 5 in real Chromium: an admin registers a tool server that accepts only OAuth in the
// console's Tools page, clicks Connect, consents on the authorization server's own page (a real form
// on another origin), comes back to the Tools page connected, runs one of its tools, and signs out
// (the tokens revoked at the authorization server). The server and its authorization server are
// test/fakes/oauth-tool-server.ts on 127.0.0.1.
import fs from 'node:fs';
import path from 'node:path';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CONSOLE_DIR } from '../../src/http/console.routes.js';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { LOOPBACK_ONLY } from '../helpers/mcp-tools.js';
import { listen } from '../integration/chat-helpers.js';
import { type OAuthToolServer, startOAuthToolServer } from '../fakes/oauth-tool-server.js';
import { addPerson, expectClean, goTo, launch, openPage, screenshot, type Person, signIn, type Watched } from './console-helpers.js';

describe('connecting an OAuth tool server from the console, in Chromium', { timeout: 90_000 }, () => {
  let t: TestApp;
  let origin: string;
  let browser: Browser;
  /** The person who signs in to the console (an owner, made through an invitation). */
  let owner: Person;
  let fake: OAuthToolServer;
  let w: Watched | undefined;

  beforeAll(async () => {
    if (!fs.existsSync(path.join(CONSOLE_DIR, 'index.html'))) throw new Error(`the console is not built (${CONSOLE_DIR}): run \`npm run build\` first (npm test does)`);
    fake = await startOAuthToolServer();
    // HOST: the public URL (client id, callback) is the loopback address the test listens on.
    t = await createTestApp({ env: { HOST: '127.0.0.1' }, overrides: { fetch: LOOPBACK_ONLY } });
    origin = await listen(t);
    owner = await addPerson(t, 'owner');
    browser = await launch();
  }, 60_000);
  afterAll(async () => {
    await w?.context.close().catch(() => undefined);
    await browser?.close();
    await t?.close();
    await fake?.close();
  });

  it('registers, connects through the consent page, runs a tool, and signs out', async () => {
    w = await openPage(browser);
    const { page } = w;
    await signIn(page, origin, owner);
    await goTo(page, 'Tools');

    const register = page.getByRole('form', { name: 'Register a tool server' });
    await register.getByLabel('Server name').fill('notes');
    await register.getByLabel('Server URL').fill(fake.url);
    await register.getByRole('button', { name: 'Register server' }).click();
    const card = page.locator('li.card').filter({ hasText: 'notes' });
    await card.getByText('needs_consent').first().waitFor();

    // Connect: off to the authorization server's consent page, and back.
    await card.getByRole('button', { name: 'Connect notes' }).click();
    await page.waitForURL((url) => url.origin === fake.origin);
    await page.getByRole('heading', { name: `Allow ${origin}/oauth/client.json to use the tools?` }).waitFor();
    await page.getByRole('button', { name: 'Allow' }).click();
    await page.waitForURL(`${origin}/console/tools`);
    await page.getByRole('status').filter({ hasText: 'Connected notes' }).waitFor();
    await card.locator('.status.connected').first().waitFor();
    await card.getByText(`scope ${'tools:read'}`).waitFor();
    await screenshot(page, 'tools-oauth-connected');

    await page.getByLabel('Tool', { exact: true }).selectOption('notes.whoami');
    await page.getByRole('button', { name: 'Run tool' }).click();
    const ran = page.getByRole('form', { name: 'Run notes.whoami' });
    await ran.getByText('succeeded').waitFor();
    expect(await ran.locator('pre').textContent()).toContain('tools:read');

    await card.getByRole('button', { name: 'Sign out of notes' }).click();
    await card.getByRole('button', { name: 'Connect notes' }).waitFor();
    // Waiting for consent as before the first sign-in; a clean sign-out shows no error of its own.
    await card.getByText(/needs an admin to connect it/).waitFor();
    expect(await card.textContent()).not.toContain('Signed out');
    expect(fake.seen.revoked).toEqual(['refresh_token', 'access_token']);
    // No token reached the page.
    const html = await page.content();
    for (const token of fake.seen.issuedAccessTokens) expect(html).not.toContain(token);
    expectClean(w);
  });
});
