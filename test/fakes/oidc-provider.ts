/**
 * A real OpenID Connect provider for tests (panva's `oidc-provider`, the certified one), on
 * 127.0.0.1 at a port of its own, with accounts the test may change between sign-ins, and a
 * "browser" that goes through its own login and consent pages over HTTP (a cookie jar, redirects
 * followed by hand) until the provider sends it back to the relying party.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Provider } from 'oidc-provider';

export interface OidcAccount {
  email: string;
  email_verified: boolean;
  name?: string;
  groups?: string[];
}

export interface TestOidcProvider {
  /** The issuer the provider names itself with (its discovery document's `issuer`). */
  issuer: string;
  /** Where it is reached: `http://127.0.0.1:<port>`. */
  url: string;
  /** Accounts by login (= subject): changed between sign-ins, read at each one. */
  accounts: Map<string, OidcAccount>;
  /**
   * Goes from the authorization URL through the provider's login (as `login`) and consent pages,
   * in a new browser (no provider session), and returns the URL it redirects to under `returnPrefix`.
   */
  signIn(authorizationUrl: string, login: string, returnPrefix: string): Promise<string>;
  close(): Promise<void>;
}

const TIMEOUT_MS = 5_000;

function decodeHtml(text: string): string {
  return text.replace(/&(#x[0-9a-f]+|#\d+|amp|quot|lt|gt|#39);/gi, (_, e: string) => {
    if (e[0] === '#') return String.fromCodePoint(e[1] === 'x' || e[1] === 'X' ? parseInt(e.slice(2), 16) : parseInt(e.slice(1), 10));
    return ({ amp: '&', quot: '"', lt: '<', gt: '>' } as Record<string, string>)[e.toLowerCase()] ?? '';
  });
}

/**
 * Starts a provider with one confidential client (`clientId`/`clientSecret`, redirecting to
 * `redirectUri`). `issuerHost` other than 127.0.0.1 makes it name itself by a host it is not reached
 * at (an issuer mismatch for a relying party configured with the 127.0.0.1 one).
 */
export async function startOidcProvider(options: { clientId: string; clientSecret: string; redirectUri: string; issuerHost?: string }): Promise<TestOidcProvider> {
  const server = http.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const url = `http://127.0.0.1:${port}`;
  const issuer = `http://${options.issuerHost ?? '127.0.0.1'}:${port}`;
  const accounts = new Map<string, OidcAccount>();
  const provider = new Provider(issuer, {
    clients: [
      {
        client_id: options.clientId,
        client_secret: options.clientSecret,
        redirect_uris: [options.redirectUri],
        grant_types: ['authorization_code'],
        response_types: ['code'],
      },
    ],
    // `email` and `groups` reach the relying party through userinfo (the ID token of a code flow holds only what it must).
    claims: { openid: ['sub'], email: ['email', 'email_verified'], profile: ['name', 'groups'] },
    async findAccount(_ctx: unknown, id: string) {
      if (!accounts.has(id)) return undefined;
      return { accountId: id, claims: async () => ({ sub: id, ...accounts.get(id) }) };
    },
    cookies: { keys: ['test-cookie-key-not-a-secret'] },
    features: { devInteractions: { enabled: true } },
  });
  server.on('request', provider.callback());

  async function signIn(authorizationUrl: string, login: string, returnPrefix: string): Promise<string> {
    const jar = new Map<string, string>();
    let next = authorizationUrl;
    let form: URLSearchParams | undefined;
    for (let step = 0; step < 20; step++) {
      const res = await fetch(next, {
        method: form ? 'POST' : 'GET',
        redirect: 'manual',
        signal: AbortSignal.timeout(TIMEOUT_MS),
        headers: { cookie: [...jar].map(([k, v]) => `${k}=${v}`).join('; '), ...(form ? { 'content-type': 'application/x-www-form-urlencoded' } : {}) },
        ...(form ? { body: form.toString() } : {}),
      });
      for (const line of res.headers.getSetCookie()) {
        const [pair = ''] = line.split(';');
        const eq = pair.indexOf('=');
        const name = pair.slice(0, eq).trim();
        const value = pair.slice(eq + 1).trim();
        if (value === '' || /max-age=0\b|expires=thu, 01 jan 1970/i.test(line)) jar.delete(name);
        else jar.set(name, value);
      }
      form = undefined;
      if (res.status >= 300 && res.status < 400) {
        await res.arrayBuffer();
        const location = new URL(res.headers.get('location') ?? '', next).href;
        if (location.startsWith(returnPrefix)) return location;
        next = location;
        continue;
      }
      const html = await res.text();
      if (res.status !== 200) throw new Error(`the provider answered ${res.status} at ${next}: ${html.slice(0, 500)}`);
      const action = /<form[^>]*\saction="([^"]*)"/i.exec(html)?.[1];
      if (action === undefined) throw new Error(`no form on the provider's page at ${next}: ${html.slice(0, 500)}`);
      form = new URLSearchParams();
      for (const input of html.matchAll(/<input[^>]*type="hidden"[^>]*>/gi)) {
        const name = /name="([^"]*)"/.exec(input[0])?.[1];
        const value = /value="([^"]*)"/.exec(input[0])?.[1];
        if (name !== undefined) form.set(decodeHtml(name), decodeHtml(value ?? ''));
      }
      if (/name="login"/.test(html)) {
        form.set('login', login);
        form.set('password', 'any password will do');
      }
      next = new URL(decodeHtml(action), next).href;
    }
    throw new Error('the provider did not send the browser back within 20 steps');
  }

  return {
    issuer,
    url,
    accounts,
    signIn,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
