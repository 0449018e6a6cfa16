import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../helpers/app.js';

const ROOT = path.resolve(import.meta.dirname, '../..');

describe('health, OpenAPI and docs (API.md §11)', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp();
  });
  afterAll(async () => t.close());

  it('GET /health needs no key', async () => {
    for (const url of ['/health', '/api/health']) {
      const res = await t.request({ method: 'GET', url, as: null });
      expect(res.statusCode).toBe(200);
      expect(res.json()).toEqual({ status: 'ok', version: expect.any(String), database: 'ok', model: { provider: 'offline', name: 'offline' } });
    }
  });

  it('GET /openapi.json is OpenAPI 3.1 documenting every route with its errors', async () => {
    const res = await t.request({ method: 'GET', url: '/openapi.json', as: null });
    expect(res.statusCode).toBe(200);
    const doc = res.json();
    expect(doc.openapi).toMatch(/^3\.1/);
    const routes = t.app.printRoutes({ commonPrefix: false });
    const expected: [string, string][] = [
      ['/health', 'get'],
      ['/v1/models', 'get'],
      ['/v1/models/{id}', 'get'],
      ['/v1/chat/completions', 'post'],
      ['/auth/api-keys', 'post'],
      ['/auth/api-keys', 'get'],
      ['/auth/api-keys/{id}', 'put'],
      ['/auth/api-keys/{id}', 'delete'],
      ['/auth/me', 'get'],
      ['/auth/oauth/grants', 'get'],
      ['/auth/oauth/grants/{id}', 'delete'],
      ['/.well-known/oauth-protected-resource/mcp', 'get'],
      ['/.well-known/oauth-authorization-server', 'get'],
      ['/oauth/authorize', 'get'],
      ['/oauth/authorize/consent', 'post'],
      ['/oauth/token', 'post'],
      ['/oauth/register', 'post'],
      ['/oauth/revoke', 'post'],
      ['/personas', 'post'],
      ['/personas', 'get'],
      ['/personas/{id}', 'get'],
      ['/personas/{id}', 'put'],
      ['/personas/{id}', 'delete'],
      ['/business/teams', 'post'],
      ['/business/teams', 'get'],
      ['/business/teams/{id}', 'get'],
      ['/business/teams/{id}/availability', 'put'],
      ['/business/teams/{id}/members', 'post'],
      ['/business/ab-tests', 'post'],
      ['/business/ab-tests', 'get'],
      ['/business/ab-tests/{id}', 'get'],
      ['/business/ab-tests/{id}/start', 'put'],
      ['/business/ab-tests/{id}/stop', 'put'],
      ['/business/ab-tests/{id}/results', 'get'],
      ['/business/channels', 'post'],
      ['/business/channels', 'get'],
      ['/business/channels/{id}', 'get'],
      ['/business/channels/{id}/settings', 'put'],
      ['/business/channels/{id}/send', 'post'],
      ['/business/channels/{id}/slack/events', 'post'],
      ['/business/channels/{id}/inbound', 'post'],
      ['/business/analytics', 'get'],
      ['/business/analytics/conversations', 'get'],
      ['/business/analytics/performance', 'get'],
      ['/business/analytics/export', 'post'],
      ['/mcp', 'post'],
      ['/mcp', 'get'],
      ['/mcp', 'delete'],
      ['/api/mcp/servers', 'post'],
      ['/api/mcp/servers', 'get'],
      ['/api/mcp/servers/{id}', 'get'],
      ['/api/mcp/servers/{id}', 'delete'],
      ['/api/mcp/servers/{id}/credentials', 'put'],
      ['/api/mcp/tools', 'get'],
      ['/api/mcp/tools/execute', 'post'],
      ['/api/mcp/executions', 'get'],
      ['/api/mcp/executions/{id}', 'get'],
    ];
    for (const [path, method] of expected) {
      const op = doc.paths[path]?.[method];
      expect(op, `${method} ${path} (${routes.length})`).toBeDefined();
      expect(op.summary).toBeTruthy();
      const codes = Object.keys(op.responses);
      expect(codes.some((c) => c.startsWith('2'))).toBe(true);
      expect(codes).toContain('500');
      // Public routes (health, signed inbound channel routes) need no key, so answer no 401-for-a-key or 403.
      if (op.security?.length !== 0) {
        expect(codes).toEqual(expect.arrayContaining(['400', '401', '403', '429']));
        expect(op.responses['401'].content[path.startsWith('/v1/') ? 'application/json' : 'application/problem+json'].schema).toBeDefined();
      }
    }
    expect(doc.paths['/health'].get.security).toEqual([]);
    expect(doc.paths['/oauth/token'].post.security).toEqual([]);
    expect(doc.paths['/personas'].post.requestBody.content['application/json'].schema).toBeDefined();
    expect(doc.paths['/personas/{id}'].delete.responses).toHaveProperty('409');
    expect(doc.components.securitySchemes.bearer).toMatchObject({ type: 'http', scheme: 'bearer' });
    expect(JSON.stringify(doc)).toContain('Persona');
  });

  it('GET /docs serves the UI from local assets', async () => {
    const res = await t.request({ method: 'GET', url: '/docs', as: null });
    expect([200, 302]).toContain(res.statusCode);
    const page = res.statusCode === 302 ? await t.request({ method: 'GET', url: res.headers.location as string, as: null }) : res;
    expect(page.statusCode).toBe(200);
    expect(page.body).toContain('swagger');
    expect(page.body).not.toMatch(/https?:\/\/(cdn|unpkg|cdnjs)/);
  });
});

describe('GET /health when the database is gone', () => {
  it('answers 503 with database "error" instead of failing', async () => {
    const t = await createTestApp();
    try {
      t.ctx.db.sqlite.close();
      const res = await t.request({ method: 'GET', url: '/health', as: null });
      expect(res.statusCode).toBe(503);
      expect(res.json()).toMatchObject({ status: 'degraded', database: 'error' });
    } finally {
      await t.close();
    }
  });
});

describe('CORS', () => {
  it('is off by default', async () => {
    const t = await createTestApp();
    try {
      const res = await t.request({ method: 'GET', url: '/health', as: null, headers: { origin: 'https://evil.example' } });
      expect(res.headers['access-control-allow-origin']).toBeUndefined();
    } finally {
      await t.close();
    }
  });

  it('allows only the configured origins, preflight included', async () => {
    const t = await createTestApp({ env: { SWITCHBOARD_CORS_ORIGINS: 'https://app.example' } });
    try {
      const ok = await t.request({ method: 'GET', url: '/personas', headers: { origin: 'https://app.example' } });
      expect(ok.headers['access-control-allow-origin']).toBe('https://app.example');
      const bad = await t.request({ method: 'GET', url: '/personas', headers: { origin: 'https://evil.example' } });
      expect(bad.headers['access-control-allow-origin']).toBeUndefined();
      const preflight = await t.request({
        method: 'OPTIONS',
        url: '/personas',
        as: null,
        headers: { origin: 'https://app.example', 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization,content-type' },
      });
      expect(preflight.statusCode).toBe(204);
      expect(preflight.headers['access-control-allow-origin']).toBe('https://app.example');
      // A browser MCP client on an allowed origin: the session header goes both ways.
      const mcp = await t.request({
        method: 'OPTIONS',
        url: '/mcp',
        as: null,
        headers: { origin: 'https://app.example', 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization,content-type,mcp-session-id,mcp-protocol-version' },
      });
      expect(mcp.statusCode).toBe(204);
      expect(mcp.headers['access-control-allow-headers']).toContain('mcp-session-id');
      const exposed = await t.request({ method: 'GET', url: '/personas', headers: { origin: 'https://app.example' } });
      expect(exposed.headers['access-control-expose-headers']).toContain('mcp-session-id');
    } finally {
      await t.close();
    }
  });
});

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens, repeats numbered. */
function headingAnchors(markdown: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  for (const line of withoutFences(markdown).split('\n')) {
    const m = /^#{1,6}\s+(.+?)\s*#*\s*$/.exec(line);
    if (!m) continue;
    const text = m[1]!.replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1');
    const base = text.trim().toLowerCase().replace(/[^\p{L}\p{N}\s_-]/gu, '').replace(/\s/g, '-');
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    anchors.add(n === 0 ? base : `${base}-${n}`);
  }
  return anchors;
}

/** The text outside fenced code blocks. */
function withoutFences(markdown: string): string {
  return markdown.replace(/^( *)(```|~~~)[^\n]*\n[\s\S]*?^\1\2[ \t]*$/gm, '');
}

/** The text outside fenced code blocks and inline code, where a `[x](y)` is a link. */
function withoutCodeBlocks(markdown: string): string {
  return withoutFences(markdown).replace(/`[^`\n]*`/g, '');
}

/** Inline links and images `[text](target "title")`, and reference definitions `[id]: target`. */
function linkTargets(markdown: string): string[] {
  const text = withoutCodeBlocks(markdown);
  const inline = [...text.matchAll(/!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)].map((m) => m[1]!);
  const defs = [...text.matchAll(/^\s*\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+"[^"]*")?\s*$/gm)].map((m) => m[1]!);
  return [...inline, ...defs];
}

describe('README.md and docs/*.md links', () => {
  const files = ['README.md', ...fs.readdirSync(path.join(ROOT, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)];

  it('every relative link points to a file that exists, and every #anchor to a heading in it', () => {
    const broken: string[] = [];
    let checked = 0;
    for (const file of files) {
      const markdown = fs.readFileSync(path.join(ROOT, file), 'utf8');
      for (const target of linkTargets(markdown)) {
        if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // http:, https:, mailto:
        checked++;
        const [rawPath, anchor] = target.split('#', 2) as [string, string | undefined];
        const resolved = rawPath === '' ? path.join(ROOT, file) : path.resolve(path.dirname(path.join(ROOT, file)), decodeURIComponent(rawPath));
        if (!resolved.startsWith(ROOT + path.sep) || !fs.existsSync(resolved)) {
          broken.push(`${file}: ${target} (no such file)`);
          continue;
        }
        if (anchor !== undefined && resolved.endsWith('.md') && !headingAnchors(fs.readFileSync(resolved, 'utf8')).has(anchor)) {
          broken.push(`${file}: ${target} (no heading with that anchor)`);
        }
      }
    }
    expect(broken).toEqual([]);
    // README links every guide, and the guides link each other: a parser that finds nothing fails here.
    expect(checked).toBeGreaterThanOrEqual(30);
  });

  it('the README links every guide in docs/', () => {
    const readme = linkTargets(fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8')).map((t) => t.split('#')[0]);
    const guides = files.filter((f) => f.startsWith('docs/'));
    expect(guides.filter((g) => !readme.includes(g))).toEqual([]);
  });

  it('finds links the way GitHub renders them', () => {
    expect(linkTargets('See [a](docs/a.md#x) and ![b](b.png "B").\n\n`[c](not-a-link.md)`\n\n```sh\n[d](code.md)\n```\n[e]: ref.md\n')).toEqual(['docs/a.md#x', 'b.png', 'ref.md']);
    expect([...headingAnchors('# Connect claude.ai / ChatGPT / VS Code (OAuth)\n## A/B tests\n## A/B tests\n## `switchboard mcp-config`\n')]).toEqual([
      'connect-claudeai--chatgpt--vs-code-oauth',
      'ab-tests',
      'ab-tests-1',
      'switchboard-mcp-config',
    ]);
  });
});
