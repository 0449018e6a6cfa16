// Issue 15: an MCP client connects to /mcp by URL with OAuth 2.1 — the SDK's own client code
// (`auth()`, `StreamableHTTPClientTransport` with an `authProvider`) against a listening server:
// discovery from the 401, metadata documents, dynamic registration, PKCE, tokens, refresh rotation.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { exchangeAuthorization, refreshAuthorization, UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js';
import { StreamableHTTPClientTransport, StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
  OAuthClientInformationFullSchema,
  OAuthMetadataSchema,
  OAuthProtectedResourceMetadataSchema,
  OAuthTokensSchema,
  type OAuthMetadata,
} from '@modelcontextprotocol/sdk/shared/auth.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { manualClock } from '../../src/lib/clock.js';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { callOk } from '../helpers/mcp.js';
import { captureLogs } from '../helpers/mcp-tools.js';
import { expectProblem } from '../helpers/problem.js';
import { authorize, codeOf, consentOverHttp, errorOf, mcpStatus, OAUTH_WAIT_MS, postForm, TestOAuthProvider } from '../helpers/oauth.js';
import { listen } from './chat-helpers.js';

describe('OAuth 2.1 for /mcp: discovery, registration, tokens', { timeout: 20_000 }, () => {
  let t: TestApp;
  let origin: string;
  const clock = manualClock(new Date());
  const logs = captureLogs();
  let metadata: OAuthMetadata;

  beforeAll(async () => {
    // Everything the server logs, through the product's logger at its most verbose level.
    t = await createTestApp({ overrides: { clock, logger: logs.logger } });
    origin = await listen(t);
    metadata = OAuthMetadataSchema.parse(await (await fetch(`${origin}/.well-known/oauth-authorization-server`)).json());
  });
  afterAll(async () => t?.close());

  it('answers /mcp without a token with 401 pointing to the protected resource metadata', async () => {
    const res = await fetch(`${origin}/mcp`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: '{}',
      signal: AbortSignal.timeout(OAUTH_WAIT_MS),
    });
    expect(res.status).toBe(401);
    expect(res.headers.get('www-authenticate')).toBe(
      `Bearer realm="switchboard", resource_metadata="${origin}/.well-known/oauth-protected-resource/mcp"`,
    );
    // REST routes keep their plain challenge.
    const rest = await t.request({ method: 'GET', url: '/personas', as: null });
    expect(rest.headers['www-authenticate']).toBe('Bearer realm="switchboard"');
  });

  it('serves metadata documents that the SDK schemas accept', async () => {
    for (const path of ['/.well-known/oauth-protected-resource/mcp', '/.well-known/oauth-protected-resource']) {
      const res = await fetch(origin + path, { signal: AbortSignal.timeout(OAUTH_WAIT_MS) });
      expect(res.status).toBe(200);
      const doc = OAuthProtectedResourceMetadataSchema.parse(await res.json());
      expect(doc).toMatchObject({ resource: `${origin}/mcp`, authorization_servers: [origin], scopes_supported: ['read', 'write'] });
    }
    const res = await fetch(`${origin}/.well-known/oauth-authorization-server`, { signal: AbortSignal.timeout(OAUTH_WAIT_MS) });
    const meta = OAuthMetadataSchema.parse(await res.json());
    expect(meta).toMatchObject({
      issuer: origin,
      authorization_endpoint: `${origin}/oauth/authorize`,
      token_endpoint: `${origin}/oauth/token`,
      registration_endpoint: `${origin}/oauth/register`,
      revocation_endpoint: `${origin}/oauth/revoke`,
      code_challenge_methods_supported: ['S256'],
      response_types_supported: ['code'],
      grant_types_supported: ['authorization_code', 'refresh_token'],
      token_endpoint_auth_methods_supported: ['none'],
      scopes_supported: ['read', 'write'],
      client_id_metadata_document_supported: true,
      authorization_response_iss_parameter_supported: true,
    });
  });

  it('registers a client (RFC 7591) and refuses bad metadata with OAuth error JSON', async () => {
    const ok = await fetch(`${origin}/oauth/register`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ client_name: 'Reg', redirect_uris: ['https://app.example/cb'], token_endpoint_auth_method: 'client_secret_post' }),
      signal: AbortSignal.timeout(OAUTH_WAIT_MS),
    });
    expect(ok.status).toBe(201);
    expect(ok.headers.get('cache-control')).toBe('no-store');
    const info = OAuthClientInformationFullSchema.parse(await ok.json());
    expect(info).toMatchObject({ client_name: 'Reg', token_endpoint_auth_method: 'none', redirect_uris: ['https://app.example/cb'] });
    expect(info.client_secret).toBeUndefined();
    for (const redirect of ['http://evil.example/cb', 'javascript:alert(1)', 'https://app.example/cb#frag']) {
      const bad = await fetch(`${origin}/oauth/register`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ redirect_uris: [redirect] }),
        signal: AbortSignal.timeout(OAUTH_WAIT_MS),
      });
      expect(bad.status, redirect).toBe(400);
      expect((await errorOf(bad))).toBe('invalid_client_metadata');
    }
  });

  it('connects the SDK client end to end: 401 → discovery → DCR → consent → tokens → tools/list and a write tool', async () => {
    const provider = new TestOAuthProvider({ clientName: 'Assistant <b>One</b>' });
    const url = new URL(`${origin}/mcp`);
    const first = new Client({ name: 'oauth-test', version: '1.0.0' });
    await expect(first.connect(new StreamableHTTPClientTransport(url, { authProvider: provider }))).rejects.toBeInstanceOf(UnauthorizedError);
    // The SDK registered itself and sent the person to the authorization page with PKCE and the resource.
    expect(provider.client?.client_id).toMatch(/^sbk_/);
    const authUrl = provider.authorizationUrl!;
    expect(authUrl.origin + authUrl.pathname).toBe(`${origin}/oauth/authorize`);
    expect(authUrl.searchParams.get('code_challenge_method')).toBe('S256');
    expect(authUrl.searchParams.get('resource')).toBe(`${origin}/mcp`);
    expect(authUrl.searchParams.get('scope')).toBe('read write');

    const page = await fetch(authUrl, { signal: AbortSignal.timeout(OAUTH_WAIT_MS) });
    const html = await page.text();
    expect(page.headers.get('content-security-policy')).toMatch(/default-src 'none'; style-src 'unsafe-inline'; form-action 'self' http:\/\/127\.0\.0\.1:7; frame-ancestors 'none'/);
    expect(page.headers.get('x-frame-options')).toBe('DENY');
    expect(page.headers.get('referrer-policy')).toBe('no-referrer');
    expect(html).toContain('Assistant &lt;b&gt;One&lt;/b&gt;');
    expect(html).not.toContain('<b>One');
    expect(html).toContain('127.0.0.1:7');
    expect(html).toContain('<label for="api_key">API key</label>');
    expect(html).not.toMatch(/<script|https?:\/\/(?!127\.0\.0\.1)/);

    const redirect = await consentOverHttp(authUrl, t.adminKey);
    const transport = new StreamableHTTPClientTransport(url, { authProvider: provider });
    await transport.finishAuth(codeOf(redirect, origin));
    expect(OAuthTokensSchema.parse(provider.saved)).toMatchObject({ token_type: 'Bearer', expires_in: 3600, scope: 'read write' });

    const client = new Client({ name: 'oauth-test', version: '1.0.0' });
    await client.connect(transport);
    expect((await client.listTools()).tools.map((x) => x.name)).toContain('create_persona');
    const persona = await callOk(client, 'create_persona', { name: 'Via OAuth', instructions: 'Answer.' });
    expect((await t.request({ method: 'GET', url: `/personas/${persona.id}` })).json().name).toBe('Via OAuth');
    await transport.terminateSession();
    await client.close();

    const grants = (await t.request({ method: 'GET', url: '/auth/oauth/grants' })).json();
    expect(grants.data[0]).toMatchObject({ clientId: provider.client!.client_id, clientName: 'Assistant <b>One</b>', scopes: ['read', 'write'] });
    expect(grants.data[0].id).toMatch(/^grt_/);
  });

  it('keeps API keys working at /mcp, and refuses OAuth tokens on every other route', async () => {
    expect((await mcpStatus(origin, t.adminKey)).status).toBe(200);
    const provider = await authorize(origin, t.adminKey);
    const token = provider.saved!.access_token;
    expect((await mcpStatus(origin, token)).status).toBe(200);
    for (const url of ['/personas', '/auth/me', '/auth/oauth/grants', '/api/personas']) {
      expectProblem(await t.request({ method: 'GET', url, as: token }), 401, 'unauthorized');
    }
  });

  it('answers a read token calling a write tool with 403 insufficient_scope', async () => {
    const provider = await authorize(origin, t.adminKey, { scope: 'read' });
    expect(provider.saved?.scope).toBe('read');
    const transport = new StreamableHTTPClientTransport(new URL(`${origin}/mcp`), { authProvider: provider });
    const client = new Client({ name: 'oauth-reader', version: '1.0.0' });
    await client.connect(transport);
    expect((await callOk(client, 'list_personas')).data).toBeInstanceOf(Array);
    const refusal = await client.callTool({ name: 'create_persona', arguments: { name: 'Nope', instructions: 'x' } }).catch((e: unknown) => e);
    expect(refusal).toBeInstanceOf(StreamableHTTPError);
    expect((refusal as StreamableHTTPError).code).toBe(403);
    const raw = await fetch(`${origin}/mcp`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${provider.saved!.access_token}`,
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'mcp-session-id': transport.sessionId!,
        'mcp-protocol-version': '2025-11-25',
      },
      body: JSON.stringify({ jsonrpc: '2.0', id: 9, method: 'tools/call', params: { name: 'create_persona', arguments: { name: 'x', instructions: 'x' } } }),
      signal: AbortSignal.timeout(OAUTH_WAIT_MS),
    });
    expect(raw.status).toBe(403);
    expect(raw.headers.get('www-authenticate')).toContain('error="insufficient_scope", scope="write"');
    await client.close();
  });

  it('rotates refresh tokens and revokes the family when an old one comes back', async () => {
    const provider = await authorize(origin, t.adminKey);
    const meta = { metadata, clientInformation: provider.client! };
    const first = provider.saved!;
    const second = await refreshAuthorization(origin, { ...meta, refreshToken: first.refresh_token!, resource: new URL(`${origin}/mcp`) });
    expect(second.refresh_token).not.toBe(first.refresh_token);
    expect((await mcpStatus(origin, second.access_token)).status).toBe(200);
    const third = await refreshAuthorization(origin, { ...meta, refreshToken: second.refresh_token! });
    // The first refresh token again: refused, and every token of its family with it.
    const reuse = await postForm(`${origin}/oauth/token`, { grant_type: 'refresh_token', refresh_token: first.refresh_token!, client_id: provider.client!.client_id });
    expect(reuse.status).toBe(400);
    expect(reuse.headers.get('cache-control')).toBe('no-store');
    expect(await errorOf(reuse)).toBe('invalid_grant');
    expect((await mcpStatus(origin, third.access_token)).status).toBe(401);
    await expect(refreshAuthorization(origin, { ...meta, refreshToken: third.refresh_token! })).rejects.toThrow(/already used|revoked/);
  });

  it('revokes a token (RFC 7009): an access token alone, a refresh token with its family', async () => {
    const provider = await authorize(origin, t.adminKey);
    const { access_token: access, refresh_token: refresh } = provider.saved!;
    const clientId = provider.client!.client_id;
    expect((await postForm(`${origin}/oauth/revoke`, { token: 'sbo_unknown', client_id: clientId })).status).toBe(200);
    expect((await postForm(`${origin}/oauth/revoke`, { token: access, client_id: clientId })).status).toBe(200);
    expect((await mcpStatus(origin, access)).status).toBe(401);
    const renewed = await refreshAuthorization(origin, { metadata, clientInformation: provider.client!, refreshToken: refresh! });
    expect((await mcpStatus(origin, renewed.access_token)).status).toBe(200);
    expect((await postForm(`${origin}/oauth/revoke`, { token: renewed.refresh_token!, token_type_hint: 'refresh_token' })).status).toBe(200);
    expect((await mcpStatus(origin, renewed.access_token)).status).toBe(401);
  });

  it('refuses a wrong PKCE verifier, and a reused code revokes what it issued', async () => {
    const provider = new TestOAuthProvider();
    await expect(authorize(origin, t.adminKey, { provider })).resolves.toBe(provider);
    // A fresh authorization by the same client, exchanged by hand.
    const { auth } = await import('@modelcontextprotocol/sdk/client/auth.js');
    provider.saved = undefined;
    expect(await auth(provider, { serverUrl: `${origin}/mcp` })).toBe('REDIRECT');
    const code = codeOf(await consentOverHttp(provider.authorizationUrl!, t.adminKey), origin);
    const exchange = (verifier: string) =>
      exchangeAuthorization(origin, {
        metadata,
        clientInformation: provider.client!,
        authorizationCode: code,
        codeVerifier: verifier,
        redirectUri: provider.redirectUrl,
        resource: new URL(`${origin}/mcp`),
      });
    await expect(exchange('x'.repeat(43))).rejects.toThrow(/code_verifier/);

    expect(await auth(provider, { serverUrl: `${origin}/mcp` })).toBe('REDIRECT');
    const code2 = codeOf(await consentOverHttp(provider.authorizationUrl!, t.adminKey), origin);
    const once = await exchangeAuthorization(origin, {
      metadata,
      clientInformation: provider.client!,
      authorizationCode: code2,
      codeVerifier: provider.verifier!,
      redirectUri: provider.redirectUrl,
      resource: new URL(`${origin}/mcp`),
    });
    expect((await mcpStatus(origin, once.access_token)).status).toBe(200);
    const again = await postForm(`${origin}/oauth/token`, {
      grant_type: 'authorization_code',
      code: code2,
      code_verifier: provider.verifier!,
      redirect_uri: provider.redirectUrl,
      client_id: provider.client!.client_id,
    });
    expect(again.status).toBe(400);
    expect((await errorOf(again))).toBe('invalid_grant');
    expect((await mcpStatus(origin, once.access_token)).status).toBe(401);
    await expect(refreshAuthorization(origin, { metadata, clientInformation: provider.client!, refreshToken: once.refresh_token! })).rejects.toThrow();
  });

  it('answers token endpoint mistakes with OAuth errors', async () => {
    const cases: Array<[Record<string, string>, number, string]> = [
      [{}, 400, 'invalid_request'],
      [{ grant_type: 'password', username: 'a', password: 'b' }, 400, 'unsupported_grant_type'],
      [{ grant_type: 'authorization_code', code: 'sbc_x', redirect_uri: 'http://127.0.0.1/cb', code_verifier: 'v'.repeat(43) }, 401, 'invalid_client'],
      [{ grant_type: 'authorization_code', client_id: 'c', code: `sbc_${'A'.repeat(43)}`, redirect_uri: 'http://127.0.0.1/cb', code_verifier: 'v'.repeat(43) }, 400, 'invalid_grant'],
      [{ grant_type: 'refresh_token', client_id: 'c', refresh_token: 'nope' }, 400, 'invalid_grant'],
    ];
    for (const [fields, status, error] of cases) {
      const res = await postForm(`${origin}/oauth/token`, fields);
      expect(res.status, JSON.stringify(fields)).toBe(status);
      expect((await errorOf(res))).toBe(error);
    }
    const twice = await fetch(`${origin}/oauth/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: 'grant_type=refresh_token&grant_type=authorization_code',
      signal: AbortSignal.timeout(OAUTH_WAIT_MS),
    });
    expect(twice.status).toBe(400);
    expect((await errorOf(twice))).toBe('invalid_request');
  });

  it('refuses a token for another resource', async () => {
    const provider = await authorize(origin, t.adminKey);
    // At the token endpoint: a refresh for another resource.
    const other = await postForm(`${origin}/oauth/token`, {
      grant_type: 'refresh_token',
      refresh_token: provider.saved!.refresh_token!,
      client_id: provider.client!.client_id,
      resource: 'https://elsewhere.example/mcp',
    });
    expect((await errorOf(other))).toBe('invalid_target');
    // At /mcp: the same server known under another public URL treats tokens for the old one as foreign.
    const token = (await authorize(origin, t.adminKey)).saved!.access_token;
    const localhost = origin.replace('127.0.0.1', 'localhost');
    t.ctx.config.publicUrl = localhost;
    try {
      const res = await mcpStatus(localhost, token);
      expect(res.status).toBe(401);
      expect(res.challenge).toContain(`resource_metadata="${localhost}/.well-known/oauth-protected-resource/mcp"`);
    } finally {
      t.ctx.config.publicUrl = undefined;
    }
    expect((await mcpStatus(origin, token)).status).toBe(200);
    // And the authorization endpoint issues nothing for another resource.
    const provider2 = new TestOAuthProvider();
    const { auth } = await import('@modelcontextprotocol/sdk/client/auth.js');
    expect(await auth(provider2, { serverUrl: `${origin}/mcp` })).toBe('REDIRECT');
    const url = new URL(provider2.authorizationUrl!);
    url.searchParams.set('resource', 'https://elsewhere.example/mcp');
    const res = await fetch(url, { redirect: 'manual', signal: AbortSignal.timeout(OAUTH_WAIT_MS) });
    expect(res.status).toBe(302);
    const back = new URL(res.headers.get('location')!);
    expect(back.searchParams.get('error')).toBe('invalid_target');
    expect(back.searchParams.get('state')).toBe('state-123');
    expect(back.searchParams.get('iss')).toBe(origin);
  });

  it('refuses an expired access token (one hour), while its refresh token still works', async () => {
    const provider = await authorize(origin, t.adminKey);
    const token = provider.saved!.access_token;
    expect((await mcpStatus(origin, token)).status).toBe(200);
    clock.advance(3_600_000 - 1_000);
    expect((await mcpStatus(origin, token)).status).toBe(200);
    clock.advance(1_000);
    expect((await mcpStatus(origin, token)).status).toBe(401);
    const renewed = await refreshAuthorization(origin, { metadata, clientInformation: provider.client!, refreshToken: provider.saved!.refresh_token! });
    expect((await mcpStatus(origin, renewed.access_token)).status).toBe(200);
  });

  it('never logs an API key, code, verifier or token', async () => {
    const provider = await authorize(origin, t.adminKey);
    await refreshAuthorization(origin, { metadata, clientInformation: provider.client!, refreshToken: provider.saved!.refresh_token! });
    const logText = logs.text();
    expect(logText).toContain('/oauth/token');
    expect(logText).not.toContain(t.adminKey);
    expect(logText).not.toMatch(/sb[ocr]_[0-9A-Za-z]{43}/);
    expect(logText).not.toContain(provider.verifier!);
  });
});
