/**
 * The credential vault: a server's credentials and header values are sealed together with
 * AES-256-GCM (bound to the server id) and only ever opened to build its connection. Everything a
 * server says back — errors, results, notifications — passes `scrub` before it is kept or logged.
 */
import type { Cipher } from '../../lib/cipher.js';

export interface ServerSecrets {
  /** Injected as environment variables (stdio) or headers (http). */
  credentials: Record<string, string>;
  /** http request headers; values may reference credentials as `${NAME}`. */
  headers: Record<string, string>;
}

const REDACTED = '[redacted]';

export function createVault(cipher: Cipher) {
  const context = (serverId: string) => `mcp-server:${serverId}`;
  return {
    seal: (serverId: string, secrets: ServerSecrets): string => cipher.encrypt(JSON.stringify(secrets), context(serverId)),
    open(serverId: string, sealed: string): ServerSecrets {
      const value = JSON.parse(cipher.decrypt(sealed, context(serverId))) as Partial<ServerSecrets>;
      return { credentials: value.credentials ?? {}, headers: value.headers ?? {} };
    },
  };
}

export type Vault = ReturnType<typeof createVault>;

const REFERENCE = /\$\{([A-Za-z_][A-Za-z0-9_]*)\}/g;

/** Credential names a header value references as `${NAME}`. */
export function referencedNames(value: string): string[] {
  return [...value.matchAll(REFERENCE)].map((m) => m[1]!);
}

/**
 * The headers an http server receives: every `headers` entry with its `${NAME}` references filled
 * in, plus each credential no header references, sent as a header of its own name.
 */
export function resolveHeaders(secrets: ServerSecrets): Record<string, string> {
  const used = new Set<string>();
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(secrets.headers)) {
    out[name] = value.replace(REFERENCE, (_m, ref: string) => {
      used.add(ref);
      return secrets.credentials[ref] ?? '';
    });
  }
  for (const [name, value] of Object.entries(secrets.credentials)) {
    if (!used.has(name) && !Object.keys(out).some((h) => h.toLowerCase() === name.toLowerCase())) out[name] = value;
  }
  return out;
}

/** Every value worth hiding: credentials, literal header values and the resolved headers. Longest first. */
export function secretValues(secrets: ServerSecrets): string[] {
  const values = new Set<string>();
  for (const v of Object.values(secrets.credentials)) if (v.length >= 3) values.add(v);
  for (const v of Object.values(resolveHeaders(secrets))) {
    if (v.length >= 3) values.add(v);
    // "Bearer <token>": the token alone may surface too.
    for (const part of v.split(/\s+/)) if (part.length >= 6) values.add(part);
  }
  return [...values].sort((a, b) => b.length - a.length);
}

/** The text with every secret value replaced by "[redacted]". */
export function scrubText(text: string, secrets: readonly string[]): string {
  let out = text;
  for (const s of secrets) if (out.includes(s)) out = out.split(s).join(REDACTED);
  return out;
}

/** A deep copy of a JSON value with every secret value inside its strings replaced. */
export function scrub<T>(value: T, secrets: readonly string[]): T {
  if (secrets.length === 0) return value;
  const walk = (v: unknown): unknown => {
    if (typeof v === 'string') return scrubText(v, secrets);
    if (Array.isArray(v)) return v.map(walk);
    if (v !== null && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [scrubText(k, secrets), walk(x)]));
    return v;
  };
  return walk(value) as T;
}

const SECRET_KEY = /pass(word|phrase)?|secret|token|api[-_]?key|auth|credential|private[-_]?key|cookie|session/i;

/**
 * Parameters as an execution record keeps them: a value under a key that looks secret, and any
 * value equal to (or containing) a credential, becomes "[redacted]".
 */
export function redactParameters(parameters: Record<string, unknown>, secrets: readonly string[]): Record<string, unknown> {
  const walk = (v: unknown): unknown => {
    if (typeof v === 'string') return secrets.some((s) => v.includes(s)) ? REDACTED : v;
    if (Array.isArray(v)) return v.map(walk);
    if (v !== null && typeof v === 'object') {
      return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, SECRET_KEY.test(k) ? REDACTED : walk(x)]));
    }
    return v;
  };
  return walk(parameters) as Record<string, unknown>;
}
