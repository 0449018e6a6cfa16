// Issue 15: the pure parts of the OAuth server — redirect URI rules, PKCE, scopes, form parsing,
// the public base URL, the consent page's escaping and headers.
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { isMetadataDocumentUrl, redirectUriMatches, redirectUriProblem, validateClientMetadata } from '../../src/core/oauth/client-metadata.js';
import { consentPage, escapeHtml, formTargetOf, pageHeaders } from '../../src/core/oauth/consent-page.js';
import { parseForm, publicBase } from '../../src/core/oauth/oauth.routes.js';
import { parseScope, pkceMatches } from '../../src/core/oauth/oauth.service.js';

describe('redirect URIs', () => {
  it('allows https, loopback http and private-use schemes; refuses the rest', () => {
    for (const ok of ['https://claude.ai/api/mcp/auth_callback', 'http://127.0.0.1:33418/', 'http://localhost/cb', 'http://[::1]:8080/cb', 'vscode://vscode.github-authentication/did-authenticate', 'cursor://anysphere.cursor-retrieval/oauth/callback']) {
      expect(redirectUriProblem(ok), ok).toBeNull();
    }
    for (const bad of ['http://example.com/cb', 'http://127.0.0.1.nip.io/cb', 'javascript:alert(1)', 'data:text/html,x', 'file:///etc/passwd', 'https://a.example/cb#f', 'https://user:pw@a.example/cb', 'not a url']) {
      expect(redirectUriProblem(bad), bad).not.toBeNull();
    }
  });

  it('matches exactly, except a loopback http port (RFC 8252 §7.3)', () => {
    expect(redirectUriMatches('https://app.example/cb', 'https://app.example/cb')).toBe(true);
    expect(redirectUriMatches('https://app.example/cb', 'https://app.example/cb/')).toBe(false);
    expect(redirectUriMatches('https://app.example/cb', 'https://app.example/cb?x=1')).toBe(false);
    expect(redirectUriMatches('https://app.example:443/cb', 'https://app.example:8443/cb')).toBe(false);
    expect(redirectUriMatches('http://127.0.0.1/cb', 'http://127.0.0.1:51234/cb')).toBe(true);
    expect(redirectUriMatches('http://127.0.0.1:1/cb', 'http://127.0.0.1:2/cb')).toBe(true);
    expect(redirectUriMatches('http://127.0.0.1/cb', 'http://localhost:51234/cb')).toBe(false);
    expect(redirectUriMatches('http://127.0.0.1/cb', 'http://127.0.0.1:5/other')).toBe(false);
    expect(redirectUriMatches('http://127.0.0.1/cb', 'http://127.0.0.1:5/cb#x')).toBe(false);
    expect(redirectUriMatches('http://[::1]/cb', 'http://[::1]:9/cb')).toBe(true);
  });

  it('validates client metadata with the SDK schema and this server\'s rules', () => {
    expect(validateClientMetadata({ redirect_uris: ['https://a.example/cb'] }, { registration: true })).toMatchObject({ token_endpoint_auth_method: 'none' });
    expect(() => validateClientMetadata({ redirect_uris: [] }, { registration: true })).toThrow(/at least one/);
    expect(() => validateClientMetadata({ redirect_uris: ['https://a.example/cb'], grant_types: ['client_credentials'] }, { registration: true })).toThrow(/grant_types/);
    expect(() => validateClientMetadata({ redirect_uris: ['https://a.example/cb'], response_types: ['token'] }, { registration: true })).toThrow(/response_types/);
    expect(() => validateClientMetadata({ redirect_uris: ['https://a.example/cb'], token_endpoint_auth_method: 'private_key_jwt' }, { registration: false })).toThrow(/none/);
    expect(() => validateClientMetadata({ redirect_uris: 'https://a.example/cb' }, { registration: true })).toThrow(/Invalid client metadata/);
  });

  it('takes only https URLs with a path and one spelling as metadata document ids', () => {
    expect(isMetadataDocumentUrl('https://app.example/oauth/client.json')).toBe(true);
    for (const bad of ['http://app.example/client.json', 'https://app.example', 'https://app.example/', 'https://app.example/a/../client.json', 'https://u:p@app.example/c', 'https://app.example/c#x', 'sbk_abc']) {
      expect(isMetadataDocumentUrl(bad), bad).toBe(false);
    }
  });
});

describe('PKCE and scopes', () => {
  it('checks S256 with the RFC 7636 Appendix B example', () => {
    const verifier = 'dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk';
    expect(pkceMatches(verifier, 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM')).toBe(true);
    expect(pkceMatches(verifier, 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cN')).toBe(false);
    // "plain" is not accepted: the verifier itself as the challenge fails.
    expect(pkceMatches(verifier, verifier)).toBe(false);
    expect(pkceMatches('short', 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM')).toBe(false);
  });

  it('parses scopes into read/write only', () => {
    expect(parseScope('write read')).toEqual(['read', 'write']);
    expect(parseScope('read')).toEqual(['read']);
    expect(parseScope('read admin')).toBeNull();
    expect(parseScope('')).toBeNull();
    expect(parseScope(undefined)).toBeNull();
  });
});

describe('forms, base URL, pages', () => {
  it('refuses a parameter sent twice or holding a NUL', () => {
    expect(parseForm('a=1&b=2+3')).toEqual({ a: '1', b: '2 3' });
    expect(() => parseForm('code=1&code=2')).toThrow(/more than once/);
    // PostgreSQL text cannot hold a NUL: refused with the parameter's name, as in a query parameter.
    expect(() => parseForm('client_id=a%00b')).toThrow('The parameter client_id must not contain the NUL character (U+0000).');
    expect(() => parseForm('a%00=1')).toThrow(/NUL character/);
    expect(Object.getPrototypeOf(parseForm('__proto__=x'))).toBe(Object.prototype);
  });

  it('takes SWITCHBOARD_PUBLIC_URL, else the listen address, never a trailing slash', () => {
    const config = loadConfig({ SWITCHBOARD_PUBLIC_URL: 'https://sb.example.com' });
    expect(publicBase(config, undefined)).toBe('https://sb.example.com');
    expect(publicBase(loadConfig({ PORT: '4000' }), undefined)).toBe('http://127.0.0.1:4000');
    expect(publicBase(loadConfig({ HOST: '0.0.0.0', PORT: '4000' }), undefined)).toBe('http://localhost:4000');
    expect(publicBase(loadConfig({ HOST: '::1', PORT: '4000' }), undefined)).toBe('http://[::1]:4000');
    for (const bad of ['https://sb.example.com/', 'ftp://sb.example.com', 'https://sb.example.com?x=1', 'sb.example.com']) {
      expect(() => loadConfig({ SWITCHBOARD_PUBLIC_URL: bad }), bad).toThrow(/SWITCHBOARD_PUBLIC_URL/);
    }
  });

  it('escapes what the client chose and sets strict headers', () => {
    expect(escapeHtml(`<a href="x">'&`)).toBe('&lt;a href=&quot;x&quot;&gt;&#39;&amp;');
    const html = consentPage({
      pendingId: 'p',
      csrf: 'c',
      clientName: '<img src=x onerror=alert(1)>',
      clientId: 'sbk_1',
      clientKind: 'registered',
      redirectUri: 'https://evil.example/"><script>',
      scopes: ['read'],
    });
    expect(html).not.toContain('<img');
    expect(html).not.toContain('<script');
    expect(html).toContain('&lt;img src=x onerror=alert(1)&gt;');
    expect(html).not.toContain('value="read write"');
    expect(formTargetOf('http://127.0.0.1:5000/cb?x')).toBe('http://127.0.0.1:5000');
    expect(formTargetOf('vscode://a/b')).toBe('vscode:');
    expect(pageHeaders('https://claude.ai')).toMatchObject({
      'content-security-policy': "default-src 'none'; style-src 'unsafe-inline'; form-action 'self' https://claude.ai; frame-ancestors 'none'; base-uri 'none'",
      'x-frame-options': 'DENY',
      'referrer-policy': 'no-referrer',
    });
  });
});
