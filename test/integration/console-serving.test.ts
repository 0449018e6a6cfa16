// Issue 17: how the API process serves the built web console (static files, caching, CSP, SPA
// fallback, redirects, and a readable 503 when it has not been built).
import fs from 'node:fs';
import path from 'node:path';
import Fastify from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CONSOLE_CSP, CONSOLE_DIR, consoleRoutes } from '../../src/http/console.routes.js';
import { createTestApp, type TestApp, tempDir } from '../helpers/app.js';

describe('web console serving', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp();
  });
  afterAll(() => t?.close());

  it('needs a build to run: dist/console/index.html exists (npm run build)', () => {
    expect(fs.existsSync(path.join(CONSOLE_DIR, 'index.html'))).toBe(true);
  });

  it('redirects / and /console to /console/', async () => {
    for (const url of ['/', '/console']) {
      const res = await t.request({ method: 'GET', url, as: null });
      expect(res.statusCode, url).toBe(302);
      expect(res.headers.location).toBe('/console/');
    }
  });

  it('serves index.html no-cache with the CSP, without a key', async () => {
    const res = await t.request({ method: 'GET', url: '/console/', as: null });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toMatch(/text\/html/);
    expect(res.headers['cache-control']).toBe('no-cache');
    expect(res.headers['content-security-policy']).toBe(CONSOLE_CSP);
    expect(res.headers['content-security-policy']).not.toMatch(/script-src[^;]*unsafe-inline/);
    expect(res.body).toContain('<div id="root"></div>');
    // No inline script: every <script> has a src on our own origin.
    for (const m of res.body.matchAll(/<script\b([^>]*)>([\s\S]*?)<\/script>/g)) {
      expect(m[1]).toMatch(/src="\/console\/assets\//);
      expect(m[2]!.trim()).toBe('');
    }
  });

  it('serves hashed assets immutably, also with a query string', async () => {
    const html = (await t.request({ method: 'GET', url: '/console/', as: null })).body;
    const asset = /src="(\/console\/assets\/[^"]+\.js)"/.exec(html)![1]!;
    for (const url of [asset, `${asset}?v=1`]) {
      const res = await t.request({ method: 'GET', url, as: null });
      expect(res.statusCode, url).toBe(200);
      expect(res.headers['content-type']).toMatch(/javascript/);
      expect(res.headers['cache-control']).toBe('public, max-age=31536000, immutable');
      expect(res.headers['content-security-policy']).toBe(CONSOLE_CSP);
    }
  });

  it('answers the app for its own routes (SPA fallback), 404 for a missing asset or a path escape', async () => {
    const page = await t.request({ method: 'GET', url: '/console/playground', as: null });
    expect(page.statusCode).toBe(200);
    expect(page.body).toContain('<div id="root"></div>');
    const missing = await t.request({ method: 'GET', url: '/console/assets/nope-123.js', as: null });
    expect(missing.statusCode).toBe(404);
    expect(missing.headers['content-type']).toMatch(/problem\+json/);
    const escape = await t.request({ method: 'GET', url: '/console/..%2f..%2fpackage.json', as: null });
    expect(escape.body).not.toContain('"devDependencies"');
  });

  it('keeps the console out of the OpenAPI document', async () => {
    const doc = (await t.request({ method: 'GET', url: '/openapi.json', as: null })).json();
    expect(Object.keys(doc.paths).filter((p) => p === '/' || p.startsWith('/console'))).toEqual([]);
  });

  it('answers a readable 503 problem when the console is not built', async () => {
    const empty = tempDir('switchboard-console-');
    const app = Fastify();
    await app.register(consoleRoutes(empty));
    try {
      const res = await app.inject({ method: 'GET', url: '/console/' });
      expect(res.statusCode).toBe(503);
      expect(res.headers['content-type']).toMatch(/problem\+json/);
      expect(res.json().detail).toMatch(/npm run build/);
    } finally {
      await app.close();
      fs.rmSync(empty, { recursive: true, force: true });
    }
  });
});
