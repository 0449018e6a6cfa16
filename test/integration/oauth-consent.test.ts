// Issue 15: the consent step and what ends a grant — the page's refusals (unregistered redirect,
// CSRF, wrong key, Deny), keys revoked or rotated, and the grants API for people.
import { auth } from '@modelcontextprotocol/sdk/client/auth.js';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport, StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { callOk } from '../helpers/mcp.js';
import { expectProblem } from '../helpers/problem.js';
import { authorize, codeOf, errorOf, mcpStatus, OAUTH_WAIT_MS, openConsent, postForm, submitConsent, TestOAuthProvider } from '../helpers/oauth.js';
import { listen } from './chat-helpers.js';

describe('OAuth consent and grants', { timeout: 20_000 }, () => {
  let t: TestApp;
  let origin: string;

  beforeAll(async () => {
    t = await createTestApp();
    origin = await listen(t);
  });
  afterAll(async () => t?.close());

  /** A registered client's authorization URL, as the SDK builds it. */
  async function authorizationUrl(provider = new TestOAuthProvider()): Promise<URL> {
    expect(await auth(provider, { serverUrl: `${origin}/mcp` })).toBe('REDIRECT');
    return provider.authorizationUrl!;
  }

  async function newKey(name: string, scopes: string[] = ['read', 'write']) {
    const res = await t.request({ method: 'POST', url: '/auth/api-keys', body: { name, scopes } });
    expect(res.statusCode).toBe(201);
    return res.json() as { id: string; key: string };
  }

  it('shows an error page, never a redirect, for an unknown client or an unregistered redirect URI', async () => {
    const url = await authorizationUrl();
    for (const redirect of ['https://evil.example/callback', 'http://127.0.0.1:7/other', 'http://localhost:7/callback', 'http://127.0.0.1:7/callback#x']) {
      const bad = new URL(url);
      bad.searchParams.set('redirect_uri', redirect);
      const res = await fetch(bad, { redirect: 'manual', signal: AbortSignal.timeout(OAUTH_WAIT_MS) });
      expect(res.status, redirect).toBe(400);
      expect(res.headers.get('location')).toBeNull();
      expect(res.headers.get('content-type')).toMatch(/^text\/html/);
      expect(await res.text()).toContain('Unregistered redirect URI');
    }
    const unknown = new URL(url);
    unknown.searchParams.set('client_id', 'sbk_doesnotexist');
    const res = await fetch(unknown, { redirect: 'manual', signal: AbortSignal.timeout(OAUTH_WAIT_MS) });
    expect(res.status).toBe(400);
    expect(res.headers.get('location')).toBeNull();
    // A loopback redirect may use any port (RFC 8252 §7.3).
    const otherPort = new URL(url);
    otherPort.searchParams.set('redirect_uri', 'http://127.0.0.1:54321/callback');
    expect((await fetch(otherPort, { redirect: 'manual', signal: AbortSignal.timeout(OAUTH_WAIT_MS) })).status).toBe(200);
  });

  it('redirects the other request errors back to the client with error, state and iss', async () => {
    const url = await authorizationUrl();
    const cases: Array<[string, string | null, string]> = [
      ['code_challenge_method', 'plain', 'invalid_request'],
      ['code_challenge', null, 'invalid_request'],
      ['response_type', 'token', 'unsupported_response_type'],
      ['scope', 'admin', 'invalid_scope'],
      ['resource', null, 'invalid_target'],
    ];
    for (const [name, value, error] of cases) {
      const bad = new URL(url);
      if (value === null) bad.searchParams.delete(name);
      else bad.searchParams.set(name, value);
      const res = await fetch(bad, { redirect: 'manual', signal: AbortSignal.timeout(OAUTH_WAIT_MS) });
      expect(res.status, name).toBe(302);
      const back = new URL(res.headers.get('location')!);
      expect(back.origin + back.pathname).toBe('http://127.0.0.1:7/callback');
      expect(back.searchParams.get('error'), name).toBe(error);
      expect(back.searchParams.get('state')).toBe('state-123');
      expect(back.searchParams.get('iss')).toBe(origin);
    }
  });

  it('refuses a consent POST without its CSRF token or cookie (403), then accepts the real one', async () => {
    const url = await authorizationUrl();
    const form = await openConsent(url);
    expect(form.cookie).toMatch(/^sb_oauth_[0-9A-Za-z]{32}=[0-9A-Za-z]{43}$/);
    const setCookie = form.headers.getSetCookie().join('\n');
    expect(setCookie).toMatch(/HttpOnly/);
    expect(setCookie).toMatch(/SameSite=Strict/);
    const attempts = [
      submitConsent(url, form, { api_key: t.adminKey, csrf_token: null }),
      submitConsent(url, form, { api_key: t.adminKey, csrf_token: 'A'.repeat(43) }),
      submitConsent(url, form, { api_key: t.adminKey }, { cookie: null }),
      submitConsent(url, form, { api_key: t.adminKey }, { cookie: `${form.cookie.split('=')[0]}=${'B'.repeat(43)}` }),
      submitConsent(url, form, { api_key: t.adminKey, request_id: 'C'.repeat(32) }),
    ];
    for (const res of await Promise.all(attempts)) {
      expect(res.status).toBe(403);
      expect(res.headers.get('location')).toBeNull();
      expect(await res.text()).toContain('This form cannot be used');
    }
    const ok = await submitConsent(url, form, { api_key: t.adminKey });
    expect(ok.status).toBe(303);
    codeOf(new URL(ok.headers.get('location')!), origin);
    // Answered once: the same form again is refused.
    expect((await submitConsent(url, form, { api_key: t.adminKey })).status).toBe(403);
  });

  it('asks again for a wrong API key, and Deny sends access_denied back', async () => {
    const url = await authorizationUrl();
    const form = await openConsent(url);
    for (const key of ['', 'sb_wrong', `sb_${'x'.repeat(40)}`]) {
      const res = await submitConsent(url, form, { api_key: key });
      expect(res.status).toBe(400);
      const page = await res.text();
      expect(page).toContain('That API key is not valid');
      expect(page).toContain(`value="${form.csrf}"`);
    }
    const denied = await submitConsent(url, form, { decision: 'deny' });
    expect(denied.status).toBe(303);
    const back = new URL(denied.headers.get('location')!);
    expect(back.searchParams.get('error')).toBe('access_denied');
    expect(back.searchParams.get('state')).toBe('state-123');
    expect(back.searchParams.get('iss')).toBe(origin);
    expect(back.searchParams.get('code')).toBeNull();
  });

  it('never grants more than the key may do: a read key gets a read grant even when write is chosen', async () => {
    /** An MCP client at /mcp with the provider's token; answers whether create_persona went through. */
    const tryWrite = async (provider: TestOAuthProvider, name: string) => {
      const client = new Client({ name: 'oauth-scopes', version: '1.0.0' });
      await client.connect(new StreamableHTTPClientTransport(new URL(`${origin}/mcp`), { authProvider: provider }));
      try {
        expect((await callOk(client, 'list_personas')).data).toBeInstanceOf(Array);
        return await client.callTool({ name: 'create_persona', arguments: { name, instructions: 'Answer.' } }).catch((e: unknown) => e);
      } finally {
        await client.close();
      }
    };
    const personasNamed = async (name: string) => (await t.request({ method: 'GET', url: `/personas?q=${encodeURIComponent(name)}` })).json().data.map((p: { name: string }) => p.name);

    const reader = await newKey('reader', ['read']);
    const readOnly = await authorize(origin, reader.key, { scope: 'read write' });
    expect(readOnly.saved?.scope).toBe('read');
    const refused = await tryWrite(readOnly, 'Scope reader');
    expect(refused).toBeInstanceOf(StreamableHTTPError);
    expect((refused as StreamableHTTPError).code).toBe(403);
    expect(await personasNamed('Scope reader')).toEqual([]);

    // The same consent with a key that may write: the token writes.
    const writer = await newKey('writer', ['read', 'write']);
    const readWrite = await authorize(origin, writer.key, { scope: 'read write' });
    expect(readWrite.saved?.scope).toBe('read write');
    const done = (await tryWrite(readWrite, 'Scope writer')) as CallToolResult;
    expect(done.isError ?? false, JSON.stringify(done)).toBe(false);
    expect(await personasNamed('Scope writer')).toEqual(['Scope writer']);
  });

  it("ends a revoked key's grants at once: /mcp answers 401 and refresh fails", async () => {
    const key = await newKey('to revoke');
    const provider = await authorize(origin, key.key);
    expect((await mcpStatus(origin, provider.saved!.access_token)).status).toBe(200);
    expect((await t.request({ method: 'DELETE', url: `/auth/api-keys/${key.id}` })).statusCode).toBe(204);
    expect((await mcpStatus(origin, provider.saved!.access_token)).status).toBe(401);
    const refresh = await postForm(`${origin}/oauth/token`, { grant_type: 'refresh_token', refresh_token: provider.saved!.refresh_token!, client_id: provider.client!.client_id });
    expect((await errorOf(refresh))).toBe('invalid_grant');
  });

  it("ends a rotated key's grants, even with a grace period; the new secret can grant again", async () => {
    const key = await newKey('to rotate');
    const provider = await authorize(origin, key.key);
    expect((await mcpStatus(origin, provider.saved!.access_token)).status).toBe(200);
    const rotated = await t.request({ method: 'PUT', url: `/auth/api-keys/${key.id}`, body: { gracePeriodSeconds: 3600 } });
    expect(rotated.statusCode).toBe(200);
    expect((await mcpStatus(origin, provider.saved!.access_token)).status).toBe(401);
    const refresh = await postForm(`${origin}/oauth/token`, { grant_type: 'refresh_token', refresh_token: provider.saved!.refresh_token!, client_id: provider.client!.client_id });
    expect((await errorOf(refresh))).toBe('invalid_grant');
    // The old secret still authenticates REST calls during its grace period, but cannot consent.
    const url = await authorizationUrl();
    const form = await openConsent(url);
    expect((await submitConsent(url, form, { api_key: key.key })).status).toBe(400);
    const again = await authorize(origin, rotated.json().key as string);
    expect((await mcpStatus(origin, again.saved!.access_token)).status).toBe(200);
  });

  it('lists and disconnects grants per workspace (admin scope, 404 across workspaces)', async () => {
    const provider = await authorize(origin, t.adminKey, { provider: new TestOAuthProvider({ clientName: 'Grant Lister' }) });
    const token = provider.saved!.access_token;
    const list = await t.request({ method: 'GET', url: '/auth/oauth/grants?limit=100' });
    expect(list.statusCode).toBe(200);
    const grant = list.json().data.find((g: { clientName: string }) => g.clientName === 'Grant Lister');
    expect(grant).toMatchObject({ clientId: provider.client!.client_id, scopes: ['read', 'write'], createdAt: expect.any(String) });
    expect(grant.lastUsedAt).not.toBeNull();

    const other = await t.ctx.services.auth.createWorkspace('other-oauth');
    const otherList = await t.request({ method: 'GET', url: '/auth/oauth/grants', as: other.key.key });
    expect(otherList.json().data).toEqual([]);
    expectProblem(await t.request({ method: 'DELETE', url: `/auth/oauth/grants/${grant.id}`, as: other.key.key }), 404, 'not_found');
    expect((await mcpStatus(origin, token)).status).toBe(200);

    const writer = await newKey('writer only');
    expectProblem(await t.request({ method: 'GET', url: '/auth/oauth/grants', as: writer.key }), 403, 'forbidden');

    expect((await t.request({ method: 'DELETE', url: `/auth/oauth/grants/${grant.id}` })).statusCode).toBe(204);
    expect((await mcpStatus(origin, token)).status).toBe(401);
    const refresh = await postForm(`${origin}/oauth/token`, { grant_type: 'refresh_token', refresh_token: provider.saved!.refresh_token!, client_id: provider.client!.client_id });
    expect((await errorOf(refresh))).toBe('invalid_grant');
    const after = (await t.request({ method: 'GET', url: '/auth/oauth/grants?limit=100' })).json().data;
    expect(after.map((g: { id: string }) => g.id)).not.toContain(grant.id);
    expectProblem(await t.request({ method: 'DELETE', url: `/auth/oauth/grants/${grant.id}` }), 404, 'not_found');
  });
});
