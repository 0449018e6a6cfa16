import os from 'node:os';
import path from 'node:path';
import { z } from 'zod';

/** Thrown when the environment holds bad values; the message names every bad variable. */
export class ConfigError extends Error {
  constructor(readonly problems: { variable: string; message: string }[]) {
    super(
      `Invalid configuration:\n${problems.map((p) => `  ${p.variable}: ${p.message}`).join('\n')}`,
    );
    this.name = 'ConfigError';
  }
}

const KEY_FORMAT = /^sb_[0-9A-Za-z]{40}$/;

const flag = z
  .enum(['0', '1', 'true', 'false', 'yes', 'no', 'on', 'off', ''])
  .transform((v) => ['1', 'true', 'yes', 'on'].includes(v));

const optionalString = z
  .string()
  .transform((v) => (v.trim() === '' ? undefined : v.trim()))
  .optional();

const httpUrl = z
  .string()
  .trim()
  .refine((v) => {
    try {
      const u = new URL(v);
      return u.protocol === 'http:' || u.protocol === 'https:';
    } catch {
      return false;
    }
  }, 'must be an http(s) URL');

const int = (min: number, max: number) =>
  z
    .string()
    .trim()
    .regex(/^\d+$/, 'must be a whole number')
    .transform(Number)
    .pipe(z.number().int().min(min).max(max));

/** 32 raw bytes given as base64 (44 chars) or hex (64 chars). */
const secretKey = z
  .string()
  .trim()
  .transform((v, ctx) => {
    const buf = /^[0-9a-fA-F]{64}$/.test(v) ? Buffer.from(v, 'hex') : Buffer.from(v, 'base64');
    if (buf.length !== 32) {
      ctx.addIssue({ code: 'custom', message: 'must be 32 bytes, base64 or hex encoded' });
      return z.NEVER;
    }
    return buf;
  });

/** A comma-separated list; blanks dropped. */
const commaList = z
  .string()
  .default('')
  .transform((v) =>
    v
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean),
  );

/** Roles OIDC may give: an owner is made by setup or by an owner, never by a provider's claim. */
const OIDC_ROLES = ['viewer', 'agent', 'editor', 'admin'] as const;
export type OidcRole = (typeof OIDC_ROLES)[number];

/** `value=role,value=role` (SWITCHBOARD_OIDC_ROLE_MAP): a claim value → the role it gives. */
const roleMap = z
  .string()
  .trim()
  .transform((v, ctx) => {
    const map: Record<string, OidcRole> = {};
    for (const pair of v.split(',').map((s) => s.trim()).filter(Boolean)) {
      const eq = pair.lastIndexOf('=');
      const value = eq > 0 ? pair.slice(0, eq).trim() : '';
      const role = eq > 0 ? pair.slice(eq + 1).trim() : '';
      if (value === '' || !(OIDC_ROLES as readonly string[]).includes(role)) {
        ctx.addIssue({ code: 'custom', message: `must be value=role pairs separated by commas, each role one of ${OIDC_ROLES.join(', ')} (e.g. switchboard-admins=admin,staff=editor)` });
        return z.NEVER;
      }
      map[value] = role as OidcRole;
    }
    return map;
  });

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

const envSchema = z.object({
  PORT: int(0, 65535).default(3000),
  HOST: z.string().trim().min(1).default('127.0.0.1'),
  SWITCHBOARD_DATA_DIR: z.string().trim().min(1).default('./data'),
  SWITCHBOARD_DATABASE_URL: z
    .string()
    .trim()
    .refine((v) => {
      if (!URL.canParse(v)) return false;
      const u = new URL(v);
      return (u.protocol === 'postgres:' || u.protocol === 'postgresql:') && u.hostname !== '';
    }, 'must be a PostgreSQL URL such as postgres://user:password@host:5432/switchboard')
    .optional(),
  SWITCHBOARD_DATABASE_POOL: int(1, 1_000).default(10),
  SWITCHBOARD_DATABASE_WAIT: int(0, 3_600).default(30),
  SWITCHBOARD_DRAIN_SECONDS: int(0, 3_600).default(10),
  SWITCHBOARD_LEASE_SECONDS: int(3, 3_600).default(30),
  SWITCHBOARD_ADMIN_KEY: z
    .string()
    .trim()
    .regex(KEY_FORMAT, 'must be "sb_" followed by 40 letters or digits')
    .optional(),
  SWITCHBOARD_API_KEY: optionalString,
  SWITCHBOARD_SECRET: secretKey.optional(),
  OPENAI_API_KEY: optionalString,
  OPENAI_BASE_URL: httpUrl.optional(),
  SWITCHBOARD_MODEL: optionalString,
  SWITCHBOARD_EMBEDDINGS: z.enum(['hashed', 'openai']).default('hashed'),
  SWITCHBOARD_EMBEDDING_MODEL: z.string().trim().min(1).default('text-embedding-3-small'),
  SWITCHBOARD_RATE_LIMIT: int(0, 1_000_000_000).default(600),
  SWITCHBOARD_DURABILITY: z.enum(['normal', 'full']).default('normal'),
  SWITCHBOARD_UPLOAD_LIMIT_MB: int(1, 4096).default(25),
  SWITCHBOARD_KEYWORD_BUDGET: int(0, 1_000_000_000).default(12_000),
  SWITCHBOARD_VECTOR_CACHE_MB: int(0, 1_048_576).default(256),
  SWITCHBOARD_SEARCH_THREADS: int(0, 8).optional(),
  SWITCHBOARD_CORS_ORIGINS: commaList
    .refine(
      (list) => list.every((o) => o === '*' || /^https?:\/\/[^/\s]+$/.test(o)),
      'must be comma-separated origins such as https://app.example.com',
    ),
  SWITCHBOARD_ALLOW_PRIVATE_URLS: flag.default(false),
  SWITCHBOARD_MCP_CONFIG: optionalString,
  SWITCHBOARD_MCP_STDIO: flag.default(false),
  SWITCHBOARD_MCP_ALLOWED_HOSTS: commaList
    .transform((list) => list.map((h) => h.toLowerCase()))
    .refine((list) => list.every((h) => /^[a-z0-9.:[\]-]+$/.test(h)), 'must be comma-separated host names, e.g. mcp.example.com'),
  SWITCHBOARD_PUBLIC_URL: httpUrl
    .refine((v) => {
      if (!URL.canParse(v)) return true; // reported by httpUrl
      const u = new URL(v);
      return !v.endsWith('/') && u.search === '' && u.hash === '' && !v.includes('#') && u.username === '' && u.password === '';
    }, 'must be the public http(s) base URL without a trailing slash, query or fragment, e.g. https://switchboard.example.com')
    .optional(),
  SWITCHBOARD_SLACK_API_URL: httpUrl.optional(),
  SWITCHBOARD_DISCORD_API_URL: httpUrl.optional(),
  SWITCHBOARD_SESSION_IDLE_MINUTES: int(5, 525_600).default(720),
  SWITCHBOARD_SESSION_MAX_HOURS: int(1, 8_760).default(168),
  SWITCHBOARD_AUDIT_RETENTION_DAYS: int(1, 36_500).default(365),
  SWITCHBOARD_OIDC_ISSUER: httpUrl.optional(),
  SWITCHBOARD_OIDC_CLIENT_ID: optionalString,
  SWITCHBOARD_OIDC_CLIENT_SECRET: optionalString,
  SWITCHBOARD_OIDC_DEFAULT_ROLE: z.enum(OIDC_ROLES).optional(),
  SWITCHBOARD_OIDC_ALLOWED_DOMAINS: commaList
    .transform((list) => list.map((d) => d.toLowerCase().replace(/^@/, '')))
    .refine((list) => list.every((d) => /^[a-z0-9.-]+\.[a-z0-9-]+$/.test(d)), 'must be comma-separated e-mail domains, e.g. example.com,example.org'),
  SWITCHBOARD_OIDC_ROLE_CLAIM: z.string().trim().regex(/^[A-Za-z0-9_:./-]{1,200}$/, 'must be a claim name such as groups or roles').optional(),
  SWITCHBOARD_OIDC_ROLE_MAP: roleMap.optional(),
  LOG_LEVEL: z.enum(LOG_LEVELS).default('info'),
});

const OIDC_CLIENT = ['SWITCHBOARD_OIDC_ISSUER', 'SWITCHBOARD_OIDC_CLIENT_ID', 'SWITCHBOARD_OIDC_CLIENT_SECRET'] as const;

export type LogLevel = (typeof LOG_LEVELS)[number];

export interface Config {
  server: { port: number; host: string };
  dataDir: string;
  /**
   * PostgreSQL (SWITCHBOARD_DATABASE_URL) with its pool size and how long start-up waits for it to
   * answer, or undefined for SQLite in dataDir.
   */
  database: { url: string; poolSize: number; waitSeconds: number } | undefined;
  durability: 'normal' | 'full';
  /** SWITCHBOARD_DRAIN_SECONDS: how long a stopping server lets requests and streams finish before it closes them. */
  drainSeconds: number;
  /** SWITCHBOARD_LEASE_SECONDS: with PostgreSQL, how long work an instance holds (a knowledge source's processing) stays its own without renewal. */
  leaseSeconds: number;
  adminKey: string | undefined;
  apiKey: string | undefined;
  /** 32-byte key for AES-256-GCM; undefined = use (or create) the key file in dataDir. */
  secret: Buffer | undefined;
  model: {
    provider: 'openai' | 'offline';
    name: string;
    apiKey: string | undefined;
    baseUrl: string | undefined;
  };
  embeddings: { provider: 'hashed' | 'openai'; model: string };
  rateLimitPerMinute: number;
  uploadLimitBytes: number;
  /** Search tuning: chunks a keyword query's terms may match before its commonest are dropped (Infinity = exact), and the codes cache. */
  search: {
    keywordBudget: number;
    vectorCacheBytes: number;
    /** Worker threads that run searches (and so chat retrieval) off the main thread; 0 = on it. */
    threads: number;
  };
  corsOrigins: string[];
  allowPrivateUrls: boolean;
  mcpConfigPath: string | undefined;
  /** SWITCHBOARD_MCP_STDIO: admin keys may register stdio tool servers (commands on this host). */
  mcpStdio: boolean;
  /** Host names `/mcp` answers to besides the loopback ones (DNS-rebinding protection). */
  mcpAllowedHosts: string[];
  /** SWITCHBOARD_PUBLIC_URL: the base URL clients reach this server at (OAuth issuer, `<base>/mcp`); undefined = the listen address. */
  publicUrl: string | undefined;
  slackApiUrl: string | undefined;
  discordApiUrl: string | undefined;
  /** Sign-in sessions (API.md §14): idle lifetime (SWITCHBOARD_SESSION_IDLE_MINUTES) and absolute one (SWITCHBOARD_SESSION_MAX_HOURS), in ms. */
  signIn: { idleMs: number; maxMs: number };
  /** SWITCHBOARD_AUDIT_RETENTION_DAYS: audit events older than this are deleted. */
  auditRetentionDays: number;
  /** Sign-in with an OpenID Connect provider (SWITCHBOARD_OIDC_*, docs/people.md#oidc); undefined = off. */
  oidc: OidcConfig | undefined;
  logLevel: LogLevel;
}

export interface OidcConfig {
  /** The provider's issuer identifier (its discovery document is `<issuer>/.well-known/openid-configuration`). */
  issuer: string;
  clientId: string;
  clientSecret: string;
  /** The role of a first sign-in without an invitation, in the default workspace; undefined = invitations only. */
  defaultRole: OidcRole | undefined;
  /** With `defaultRole`: the e-mail domains (lower-cased) that may join so; empty = any. */
  allowedDomains: string[];
  /** The claim whose values give the role in the default workspace at every sign-in; undefined = roles are not synced. */
  roleClaim: string | undefined;
  /** Claim value → role; undefined: a value that is a role's name gives that role. */
  roleMap: Record<string, OidcRole> | undefined;
}

/**
 * Parses the environment into a Config. The only place that reads environment variables.
 * Throws ConfigError naming every bad variable at once.
 */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  // Empty strings mean "unset" for every variable, as shells and .env files often leave them.
  const present = Object.fromEntries(
    Object.keys(envSchema.shape)
      .filter((k) => env[k] !== undefined && env[k] !== '')
      .map((k) => [k, env[k]]),
  );
  const parsed = envSchema
    .refine((e) => e.SWITCHBOARD_EMBEDDINGS !== 'openai' || e.OPENAI_API_KEY !== undefined || e.OPENAI_BASE_URL !== undefined, {
      path: ['SWITCHBOARD_EMBEDDINGS'],
      message: '"openai" needs OPENAI_API_KEY or OPENAI_BASE_URL',
      // Reported next to every other bad variable, even when those fail parsing.
      when: (payload) => payload.value !== null && typeof payload.value === 'object',
    })
    // Every instance on a shared database seals and opens credentials with the same key: a key file
    // in one machine's data directory would make the others' credentials unreadable.
    .refine((e) => e.SWITCHBOARD_DATABASE_URL === undefined || e.SWITCHBOARD_SECRET !== undefined, {
      path: ['SWITCHBOARD_SECRET'],
      message: 'is required with SWITCHBOARD_DATABASE_URL (every instance must use the same key): 32 bytes, base64 or hex, e.g. from `openssl rand -base64 32`',
      when: (payload) => payload.value !== null && typeof payload.value === 'object',
    })
    // The client is its issuer, id and secret together: two of three is a mistake, not "off".
    .superRefine((e, ctx) => {
      const set = OIDC_CLIENT.filter((name) => e[name] !== undefined);
      if (set.length === 0 || set.length === OIDC_CLIENT.length) return;
      for (const name of OIDC_CLIENT.filter((n) => e[n] === undefined)) {
        ctx.addIssue({ code: 'custom', path: [name], message: `is required with ${set.join(' and ')} (OIDC sign-in needs the issuer, client id and client secret)` });
      }
    }, { when: (payload) => payload.value !== null && typeof payload.value === 'object' })
    .safeParse(present);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => ({
      variable: String(i.path[0] ?? 'environment'),
      message: i.message,
    }));
    throw new ConfigError(problems);
  }
  const e = parsed.data;
  const online = e.OPENAI_API_KEY !== undefined;
  return {
    server: { port: e.PORT, host: e.HOST },
    dataDir: e.SWITCHBOARD_DATA_DIR,
    database: e.SWITCHBOARD_DATABASE_URL === undefined ? undefined : { url: e.SWITCHBOARD_DATABASE_URL, poolSize: e.SWITCHBOARD_DATABASE_POOL, waitSeconds: e.SWITCHBOARD_DATABASE_WAIT },
    durability: e.SWITCHBOARD_DURABILITY,
    drainSeconds: e.SWITCHBOARD_DRAIN_SECONDS,
    leaseSeconds: e.SWITCHBOARD_LEASE_SECONDS,
    adminKey: e.SWITCHBOARD_ADMIN_KEY,
    apiKey: e.SWITCHBOARD_API_KEY,
    secret: e.SWITCHBOARD_SECRET,
    model: {
      provider: online ? 'openai' : 'offline',
      name: e.SWITCHBOARD_MODEL ?? (online ? 'gpt-4o-mini' : 'offline'),
      apiKey: e.OPENAI_API_KEY,
      baseUrl: e.OPENAI_BASE_URL,
    },
    embeddings: { provider: e.SWITCHBOARD_EMBEDDINGS, model: e.SWITCHBOARD_EMBEDDING_MODEL },
    rateLimitPerMinute: e.SWITCHBOARD_RATE_LIMIT,
    uploadLimitBytes: e.SWITCHBOARD_UPLOAD_LIMIT_MB * 1024 * 1024,
    search: {
      keywordBudget: e.SWITCHBOARD_KEYWORD_BUDGET === 0 ? Infinity : e.SWITCHBOARD_KEYWORD_BUDGET,
      vectorCacheBytes: e.SWITCHBOARD_VECTOR_CACHE_MB * 1024 * 1024,
      // One thread beside the main one when there is a second core: retrieval is ~40 % of an answer's CPU (issue 18).
      threads: e.SWITCHBOARD_SEARCH_THREADS ?? (os.availableParallelism() > 1 ? 1 : 0),
    },
    corsOrigins: e.SWITCHBOARD_CORS_ORIGINS,
    allowPrivateUrls: e.SWITCHBOARD_ALLOW_PRIVATE_URLS,
    mcpConfigPath: e.SWITCHBOARD_MCP_CONFIG,
    mcpStdio: e.SWITCHBOARD_MCP_STDIO,
    mcpAllowedHosts: e.SWITCHBOARD_MCP_ALLOWED_HOSTS,
    publicUrl: e.SWITCHBOARD_PUBLIC_URL,
    slackApiUrl: e.SWITCHBOARD_SLACK_API_URL,
    discordApiUrl: e.SWITCHBOARD_DISCORD_API_URL,
    signIn: { idleMs: e.SWITCHBOARD_SESSION_IDLE_MINUTES * 60_000, maxMs: e.SWITCHBOARD_SESSION_MAX_HOURS * 3_600_000 },
    auditRetentionDays: e.SWITCHBOARD_AUDIT_RETENTION_DAYS,
    oidc:
      e.SWITCHBOARD_OIDC_ISSUER !== undefined && e.SWITCHBOARD_OIDC_CLIENT_ID !== undefined && e.SWITCHBOARD_OIDC_CLIENT_SECRET !== undefined
        ? {
            issuer: e.SWITCHBOARD_OIDC_ISSUER,
            clientId: e.SWITCHBOARD_OIDC_CLIENT_ID,
            clientSecret: e.SWITCHBOARD_OIDC_CLIENT_SECRET,
            defaultRole: e.SWITCHBOARD_OIDC_DEFAULT_ROLE,
            allowedDomains: e.SWITCHBOARD_OIDC_ALLOWED_DOMAINS,
            roleClaim: e.SWITCHBOARD_OIDC_ROLE_CLAIM,
            roleMap: e.SWITCHBOARD_OIDC_ROLE_MAP,
          }
        : undefined,
    logLevel: e.LOG_LEVEL,
  };
}

/**
 * Variables `switchboard mcp` never takes from the configuration that generates its client entry:
 * the listener's own (address, rate limit, CORS, `/mcp` hosts, public URL, log level) and the keys,
 * which `switchboard mcp-config` chooses itself.
 */
const NOT_FOR_STDIO = new Set([
  'PORT',
  'HOST',
  'SWITCHBOARD_ADMIN_KEY',
  'SWITCHBOARD_API_KEY',
  'SWITCHBOARD_RATE_LIMIT',
  'SWITCHBOARD_CORS_ORIGINS',
  'SWITCHBOARD_MCP_ALLOWED_HOSTS',
  'SWITCHBOARD_PUBLIC_URL',
  'LOG_LEVEL',
  // Sign-in is the listener's: `switchboard mcp` signs nobody in, and its client entry must not hold the secret.
  ...Object.keys(envSchema.shape).filter((name) => name.startsWith('SWITCHBOARD_OIDC_')),
]);

/** Variables whose values are secrets: a client config that holds them must be kept private. */
export const SECRET_VARIABLES = ['SWITCHBOARD_SECRET', 'OPENAI_API_KEY', 'SWITCHBOARD_DATABASE_URL', 'SWITCHBOARD_OIDC_CLIENT_SECRET'] as const;

/**
 * The environment an MCP client must give `switchboard mcp` so it acts on the same data, the same
 * way, as this configuration: every Switchboard variable set in `env` except the listener's and the
 * keys, with SWITCHBOARD_DATA_DIR (always) and SWITCHBOARD_MCP_CONFIG made absolute, since a client
 * starts the command from a directory of its own. A different embedder, model or secret would make
 * the stdio server refuse the index or fail to decrypt credentials, so they are carried too.
 */
export function stdioServerEnv(env: NodeJS.ProcessEnv, config: Config): Record<string, string> {
  const out: Record<string, string> = { SWITCHBOARD_DATA_DIR: path.resolve(config.dataDir) };
  for (const name of Object.keys(envSchema.shape)) {
    const value = env[name];
    if (value === undefined || value.trim() === '' || NOT_FOR_STDIO.has(name) || name in out) continue;
    out[name] = name === 'SWITCHBOARD_MCP_CONFIG' && config.mcpConfigPath ? path.resolve(config.mcpConfigPath) : value;
  }
  return out;
}
