import fs from 'node:fs';
import path from 'node:path';
import { LATEST_PROTOCOL_VERSION } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { expectProblem } from '../helpers/problem.js';
import { listen } from './chat-helpers.js';

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
      expect(res.json()).toEqual({ status: 'ok', version: expect.any(String), database: 'ok', databaseKind: 'sqlite', model: { provider: 'offline', name: 'offline' } });
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
      ['/health/ready', 'get'],
      ['/v1/models', 'get'],
      ['/v1/models/{id}', 'get'],
      ['/v1/chat/completions', 'post'],
      ['/auth/api-keys', 'post'],
      ['/auth/api-keys', 'get'],
      ['/auth/api-keys/{id}', 'put'],
      ['/auth/api-keys/{id}', 'delete'],
      ['/auth/me', 'get'],
      ['/auth/sessions', 'post'],
      ['/auth/sessions', 'get'],
      ['/auth/sessions', 'delete'],
      ['/auth/sessions/current', 'delete'],
      ['/auth/sessions/{id}', 'delete'],
      ['/auth/setup', 'post'],
      ['/members', 'get'],
      ['/members/{userId}', 'put'],
      ['/members/{userId}', 'delete'],
      ['/members/invitations', 'post'],
      ['/members/invitations', 'get'],
      ['/members/invitations/{id}', 'delete'],
      ['/auth/invitations/accept', 'post'],
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
    expect(doc.paths['/auth/sessions'].post.security).toEqual([]);
    expect(doc.paths['/auth/setup'].post.security).toEqual([]);
    expect(doc.paths['/auth/invitations/accept'].post.security).toEqual([]);
    expect(doc.paths['/auth/invitations/accept'].post.responses).toHaveProperty('410');
    expect(doc.paths['/members/{userId}'].put.responses).toHaveProperty('409');
    expect(doc.components.schemas.ApiKey.properties).toHaveProperty('userId');
    expect(doc.paths['/personas'].post.requestBody.content['application/json'].schema).toBeDefined();
    expect(doc.paths['/personas/{id}'].delete.responses).toHaveProperty('409');
    expect(doc.components.securitySchemes.bearer).toMatchObject({ type: 'http', scheme: 'bearer' });
    expect(doc.components.securitySchemes.cookie).toMatchObject({ type: 'apiKey', in: 'cookie', name: 'sb_session' });
    expect(JSON.stringify(doc)).toContain('Persona');
  });

  it('lists only the query parameters a route reads (none invented from a record schema)', async () => {
    const doc = (await t.request({ method: 'GET', url: '/openapi.json', as: null })).json();
    type Parameter = { in: string; name: string; schema: unknown };
    const authorize = doc.paths['/oauth/authorize'].get.parameters as Parameter[];
    expect(authorize.map((p) => p.name).sort()).toEqual(
      ['client_id', 'code_challenge', 'code_challenge_method', 'redirect_uri', 'resource', 'response_type', 'scope', 'state'].sort(),
    );
    for (const [path, ops] of Object.entries(doc.paths as Record<string, Record<string, { parameters?: Parameter[] }>>)) {
      for (const [method, op] of Object.entries(ops)) {
        const query = (op.parameters ?? []).filter((p) => p.in === 'query');
        for (const p of query) {
          expect(typeof p.schema, `${method} ${path} ?${p.name}`).toBe('object');
          expect(['propertyNames', 'additionalProperties', 'patternProperties'], `${method} ${path}`).not.toContain(p.name);
        }
        // Every documented parameter is one the route takes: none is refused as unknown (API.md §1).
        // The two pages a browser lands on answer HTML, also for a bad request.
        if (method !== 'get' || query.length === 0 || path === '/oauth/authorize' || path === '/oauth/callback') continue;
        const url = `${path.replace(/\{[^}]+\}/g, 'x')}?${query.map((p) => `${p.name}=1`).join('&')}`;
        const res = await t.request({ method: 'GET', url, headers: { accept: 'application/json' } });
        const unknown = res.statusCode === 400 ? (res.json().errors ?? []).filter((e: { message: string }) => /unknown query parameter/.test(e.message)) : [];
        expect(unknown, `GET ${url}`).toEqual([]);
      }
    }
  });

  it('documents a record query schema as no parameters rather than its JSON Schema keywords', async () => {
    const extra = await createTestApp({
      extend: (app) => {
        app.get('/free-form', { schema: { summary: 'Any query', querystring: z.record(z.string(), z.string()), response: { 200: z.object({}) } } }, async () => ({}));
      },
    });
    try {
      const doc = (await extra.request({ method: 'GET', url: '/openapi.json', as: null })).json();
      expect(doc.paths['/free-form'].get.parameters ?? []).toEqual([]);
    } finally {
      await extra.close();
    }
  });

  it("documents /mcp's transport errors as the JSON-RPC bodies they are, and its other errors as problem+json", async () => {
    const doc = (await t.request({ method: 'GET', url: '/openapi.json', as: null })).json();
    const responses = (method: string) => doc.paths['/mcp'][method].responses as Record<string, { content: Record<string, { schema: { $ref?: string } }> }>;
    const mediaOf = (method: string, status: number) => Object.keys(responses(method)[status]?.content ?? {}).sort();
    expect(doc.components.schemas.JsonRpcError.required).toEqual(['jsonrpc', 'error', 'id']);
    expect(responses('post')['406']!.content['application/json']!.schema.$ref).toBe('#/components/schemas/JsonRpcError');
    expect(mediaOf('post', 400)).toEqual(['application/json', 'application/problem+json']);
    expect(mediaOf('post', 406)).toEqual(['application/json']);
    expect(mediaOf('post', 415)).toEqual(['application/json', 'application/problem+json']);
    expect(mediaOf('get', 406)).toEqual(['application/json']);
    expect(mediaOf('get', 409)).toEqual(['application/json']);
    for (const method of ['post', 'get', 'delete']) {
      for (const status of [401, 403, 404, 429, 500, 503]) expect(mediaOf(method, status), `${method} ${status}`).toEqual(['application/problem+json']);
    }

    // And the answers are what the document says, status by status.
    const origin = await listen(t);
    const auth = { authorization: `Bearer ${t.adminKey}` };
    const json = { ...auth, 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
    const post = (headers: Record<string, string>, body?: string) => fetch(`${origin}/mcp`, { method: 'POST', headers, ...(body === undefined ? {} : { body }) });
    const documented = async (res: Response, method: string, status: number, jsonRpc: boolean) => {
      expect(res.status).toBe(status);
      const type = (res.headers.get('content-type') ?? '').split(';')[0]!;
      expect(mediaOf(method, status)).toContain(type);
      const body = (await res.json()) as Record<string, unknown>;
      if (jsonRpc) expect(body).toMatchObject({ jsonrpc: '2.0', error: { code: expect.any(Number), message: expect.any(String) }, id: null });
      else expect(body).toMatchObject({ status, code: expect.any(String), requestId: expect.any(String) });
    };
    const init = await post(json, JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: LATEST_PROTOCOL_VERSION, capabilities: {}, clientInfo: { name: 'docs', version: '1' } } }));
    expect(init.status).toBe(200);
    await init.body?.cancel();
    const session = { 'mcp-session-id': init.headers.get('mcp-session-id')!, 'mcp-protocol-version': LATEST_PROTOCOL_VERSION };
    await documented(await post({ ...json, ...session, accept: '*/*' }, '{"jsonrpc":"2.0","id":2,"method":"tools/list"}'), 'post', 406, true);
    await documented(await post({ ...json, ...session }, '{"not":"json-rpc"}'), 'post', 400, true);
    await documented(await post({ ...auth, ...session, accept: json.accept }), 'post', 415, true);
    await documented(await post({ ...json, ...session }, '{"jsonrpc":'), 'post', 400, false);
    await documented(await post({ ...json, ...session, 'content-type': 'text/plain' }, 'hello'), 'post', 415, false);
    await documented(await post(json, '{"jsonrpc":"2.0","id":3,"method":"tools/list"}'), 'post', 400, false);
    await documented(await fetch(`${origin}/mcp`, { headers: { ...auth, ...session, accept: 'application/json' } }), 'get', 406, true);
    const stream = new AbortController();
    const first = await fetch(`${origin}/mcp`, { headers: { ...auth, ...session, accept: 'text/event-stream' }, signal: stream.signal });
    expect(first.status).toBe(200);
    try {
      await documented(await fetch(`${origin}/mcp`, { headers: { ...auth, ...session, accept: 'text/event-stream' } }), 'get', 409, true);
    } finally {
      stream.abort();
    }
  });

  it('GET /docs serves the UI from local assets', async () => {
    const res = await t.request({ method: 'GET', url: '/docs', as: null });
    expect([200, 302]).toContain(res.statusCode);
    const page = res.statusCode === 302 ? await t.request({ method: 'GET', url: res.headers.location as string, as: null }) : res;
    expect(page.statusCode).toBe(200);
    expect(page.body).toContain('swagger');
    expect(page.body).not.toMatch(/https?:\/\/(cdn|unpkg|cdnjs)/);
  });

  it('/docs serves its assets with revalidation, its JSON is the document, and a missing asset is a problem+json 404', async () => {
    const css = await t.request({ method: 'GET', url: '/api/docs/static/swagger-ui.css', as: null });
    expect(css.statusCode).toBe(200);
    expect(css.headers['content-type']).toMatch(/^text\/css/);
    expect(Number(css.headers['content-length'])).toBe(css.rawPayload.length);
    const again = await t.request({ method: 'GET', url: '/docs/static/swagger-ui.css', as: null, headers: { 'if-none-match': String(css.headers.etag) } });
    expect(again.statusCode).toBe(304);
    expect(again.body).toBe('');
    const head = await t.request({ method: 'HEAD', url: '/docs/static/swagger-ui.css', as: null });
    expect(head.statusCode).toBe(200);
    expect(head.headers['content-length']).toBe(css.headers['content-length']);
    const json = await t.request({ method: 'GET', url: '/docs/json', as: null });
    expect(json.json()).toEqual((await t.request({ method: 'GET', url: '/openapi.json', as: null })).json());
    expectProblem(await t.request({ method: 'GET', url: '/docs/static/no-such-file.js', as: null }), 404, 'not_found');
  });
});

describe('GET /health when the database is gone', () => {
  it('answers 503 with database "error" instead of failing', async () => {
    const t = await createTestApp();
    try {
      t.ctx.sqlite().sqlite.close();
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
