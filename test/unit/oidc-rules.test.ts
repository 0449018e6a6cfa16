// The two rules of OIDC sign-in that are plain functions: which role a claim's values give, and
// where a sign-in may send the browser back to (API.md §14).
import { describe, expect, it } from 'vitest';
import { sameOriginReturn } from '../../src/core/people/oidc.routes.js';
import { roleFromClaim } from '../../src/core/people/oidc.service.js';

describe('roleFromClaim', () => {
  const map = { 'sb-admins': 'admin', 'sb-editors': 'editor', support: 'agent' } as const;

  it('gives the highest role the values map to, or null when none does', () => {
    expect(roleFromClaim(['support', 'sb-admins', 'sb-editors'], map)).toBe('admin');
    expect(roleFromClaim(['support'], map)).toBe('agent');
    expect(roleFromClaim('sb-editors', map)).toBe('editor');
    expect(roleFromClaim(['admin', 'other'], map)).toBeNull();
    expect(roleFromClaim([], map)).toBeNull();
    expect(roleFromClaim(undefined, map)).toBeNull();
    expect(roleFromClaim([42, { role: 'admin' }, null], map)).toBeNull();
    // Not a map key of an ordinary object's prototype.
    expect(roleFromClaim(['constructor', 'toString'], map)).toBeNull();
  });

  it('without a map, takes values that are role names, never owner', () => {
    expect(roleFromClaim(['viewer', 'editor'], undefined)).toBe('editor');
    expect(roleFromClaim(['owner'], undefined)).toBeNull();
    expect(roleFromClaim(['Admin'], undefined)).toBeNull();
  });
});

describe('sameOriginReturn', () => {
  const base = 'https://switchboard.example.com';

  it('takes a path here, or a URL on the public origin', () => {
    expect(sameOriginReturn('/console/', base)).toBe('/console/');
    expect(sameOriginReturn('/console/members?tab=1#x', base)).toBe('/console/members?tab=1#x');
    expect(sameOriginReturn('https://switchboard.example.com/console/', base)).toBe('https://switchboard.example.com/console/');
  });

  it('refuses another origin, in every spelling a browser reads as one', () => {
    for (const bad of [
      'https://evil.example/',
      'http://switchboard.example.com/console/', // another scheme is another origin
      'https://switchboard.example.com:8443/',
      '//evil.example/',
      '/\\evil.example',
      '/\t/evil.example',
      'javascript:alert(1)',
      'console/',
      '',
      `/${'a'.repeat(2_000)}`,
    ]) {
      expect(sameOriginReturn(bad, base), bad).toBeNull();
    }
  });
});
