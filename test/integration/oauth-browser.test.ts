// Issue 15: the consent form submitted by a person in a real browser (headless Chromium through
// playwright-core): fill the field labelled "API key", press Allow, land on the client's loopback
// redirect URI with a code the SDK then exchanges.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import chromium from '@sparticuz/chromium';
import { auth } from '@modelcontextprotocol/sdk/client/auth.js';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { type Browser, chromium as playwright } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { codeOf, OAUTH_WAIT_MS, TestOAuthProvider } from '../helpers/oauth.js';
import { listen } from './chat-helpers.js';

describe('OAuth consent in a real browser', { timeout: 60_000 }, () => {
  let t: TestApp;
  let origin: string;
  let browser: Browser | undefined;
  let callback: Server;
  let callbackUrl: string;
  let received: (url: URL) => void = () => undefined;

  beforeAll(async () => {
    t = await createTestApp();
    origin = await listen(t);
    // The client's loopback redirect URI: records where the browser lands.
    callback = createServer((req, res) => {
      received(new URL(req.url ?? '/', callbackUrl));
      res.writeHead(200, { 'content-type': 'text/html' }).end('<p id="done">You can close this window.</p>');
    });
    await new Promise<void>((resolve) => callback.listen(0, '127.0.0.1', resolve));
    callbackUrl = `http://127.0.0.1:${(callback.address() as AddressInfo).port}/callback`;
    // Playwright's own arguments: the package's serverless `args` crash outside Lambda.
    browser = await playwright.launch({ executablePath: await chromium.executablePath(), headless: true, timeout: 30_000 });
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    callback?.closeAllConnections();
    await new Promise((resolve) => callback?.close(resolve));
    await t?.close();
  });

  it('fills "API key", presses Allow, and the client gets a working code', async () => {
    const provider = new TestOAuthProvider({ redirectUrl: callbackUrl, clientName: 'Browser Client' });
    const serverUrl = `${origin}/mcp`;
    expect(await auth(provider, { serverUrl })).toBe('REDIRECT');

    const landed = new Promise<URL>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('the browser never reached the redirect URI')), OAUTH_WAIT_MS * 2);
      received = (url) => {
        clearTimeout(timer);
        resolve(url);
      };
    });
    const context = await browser!.newContext();
    try {
      const page = await context.newPage();
      page.setDefaultTimeout(OAUTH_WAIT_MS * 2);
      await page.goto(provider.authorizationUrl!.href);
      expect(await page.getByRole('heading').textContent()).toBe('Browser Client wants to connect to your Switchboard workspace');
      await page.getByLabel('API key').fill(t.adminKey);
      await page.getByRole('button', { name: 'Allow' }).click();
      const redirect = await landed;
      await page.waitForSelector('#done');
      expect(page.url().startsWith(callbackUrl)).toBe(true);
      expect(redirect.pathname).toBe('/callback');

      expect(await auth(provider, { serverUrl, authorizationCode: codeOf(redirect, origin) })).toBe('AUTHORIZED');
      const client = new Client({ name: 'browser-test', version: '1.0.0' });
      await client.connect(new StreamableHTTPClientTransport(new URL(serverUrl), { authProvider: provider }));
      expect((await client.listTools()).tools.map((x) => x.name)).toContain('list_personas');
      await client.close();
    } finally {
      await context.close();
    }
  });
});
