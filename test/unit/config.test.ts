import os from 'node:os';
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig, SECRET_VARIABLES, stdioServerEnv } from '../../src/config.js';

describe('loadConfig (API.md §12)', () => {
  it('has the documented defaults with an empty environment', () => {
    const c = loadConfig({});
    expect(c.server).toEqual({ port: 3000, host: '127.0.0.1' });
    expect(c.dataDir).toBe('./data');
    expect(c.model).toMatchObject({ provider: 'offline', name: 'offline' });
    expect(c.embeddings).toEqual({ provider: 'hashed', model: 'text-embedding-3-small' });
    expect(c.rateLimitPerMinute).toBe(600);
    expect(c.durability).toBe('normal');
    expect(c.uploadLimitBytes).toBe(25 * 1024 * 1024);
    expect(c.corsOrigins).toEqual([]);
    expect(c.allowPrivateUrls).toBe(false);
    expect(c.logLevel).toBe('info');
    expect(c.secret).toBeUndefined();
  });

  it('uses the openai provider and gpt-4o-mini once a key is set', () => {
    const c = loadConfig({ OPENAI_API_KEY: 'sk-x', OPENAI_BASE_URL: 'http://127.0.0.1:11434/v1' });
    expect(c.model).toEqual({ provider: 'openai', name: 'gpt-4o-mini', apiKey: 'sk-x', baseUrl: 'http://127.0.0.1:11434/v1' });
    expect(loadConfig({ OPENAI_API_KEY: 'sk-x', SWITCHBOARD_MODEL: 'llama3' }).model.name).toBe('llama3');
  });

  it('parses every variable', () => {
    const hex = 'ab'.repeat(32);
    const c = loadConfig({
      PORT: '8080',
      HOST: '0.0.0.0',
      SWITCHBOARD_DATA_DIR: '/tmp/x',
      SWITCHBOARD_ADMIN_KEY: `sb_${'a'.repeat(40)}`,
      SWITCHBOARD_API_KEY: 'sb_whatever',
      SWITCHBOARD_SECRET: hex,
      OPENAI_BASE_URL: 'http://127.0.0.1:11434/v1',
      SWITCHBOARD_EMBEDDINGS: 'openai',
      SWITCHBOARD_EMBEDDING_MODEL: 'nomic',
      SWITCHBOARD_RATE_LIMIT: '0',
      SWITCHBOARD_DURABILITY: 'full',
      SWITCHBOARD_UPLOAD_LIMIT_MB: '5',
      SWITCHBOARD_KEYWORD_BUDGET: '0',
      SWITCHBOARD_VECTOR_CACHE_MB: '64',
      SWITCHBOARD_SEARCH_THREADS: '2',
      SWITCHBOARD_CORS_ORIGINS: 'https://a.example, http://localhost:5173',
      SWITCHBOARD_ALLOW_PRIVATE_URLS: '1',
      SWITCHBOARD_MCP_CONFIG: './mcp.json',
      SWITCHBOARD_SLACK_API_URL: 'http://127.0.0.1:9000/api/',
      SWITCHBOARD_DISCORD_API_URL: 'http://127.0.0.1:9001/api',
      LOG_LEVEL: 'debug',
    });
    expect(c.server).toEqual({ port: 8080, host: '0.0.0.0' });
    expect(c.secret).toEqual(Buffer.from(hex, 'hex'));
    expect(loadConfig({ SWITCHBOARD_SECRET: Buffer.alloc(32, 7).toString('base64') }).secret).toEqual(Buffer.alloc(32, 7));
    expect(c.rateLimitPerMinute).toBe(0);
    expect(c.durability).toBe('full');
    expect(c.uploadLimitBytes).toBe(5 * 1024 * 1024);
    expect(c.search).toEqual({ keywordBudget: Infinity, vectorCacheBytes: 64 * 1024 * 1024, threads: 2 });
    // One search thread beside the main one when there is a second core.
    expect(loadConfig({}).search).toEqual({ keywordBudget: 12_000, vectorCacheBytes: 256 * 1024 * 1024, threads: os.availableParallelism() > 1 ? 1 : 0 });
    expect(loadConfig({ SWITCHBOARD_SEARCH_THREADS: '0' }).search.threads).toBe(0);
    expect(() => loadConfig({ SWITCHBOARD_SEARCH_THREADS: '9' })).toThrow(/SWITCHBOARD_SEARCH_THREADS/);
    expect(c.corsOrigins).toEqual(['https://a.example', 'http://localhost:5173']);
    expect(c.allowPrivateUrls).toBe(true);
    expect(c.embeddings).toEqual({ provider: 'openai', model: 'nomic' });
    expect(c.logLevel).toBe('debug');
  });

  it('names every bad variable in one error', () => {
    let error: unknown;
    try {
      loadConfig({
        PORT: 'eighty',
        SWITCHBOARD_RATE_LIMIT: '-1',
        SWITCHBOARD_DURABILITY: 'sometimes',
        SWITCHBOARD_SECRET: 'tooshort',
        SWITCHBOARD_ADMIN_KEY: 'not-a-key',
        OPENAI_BASE_URL: 'ftp://x',
        LOG_LEVEL: 'loud',
        SWITCHBOARD_CORS_ORIGINS: 'not an origin',
        SWITCHBOARD_KEYWORD_BUDGET: 'lots',
      });
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(ConfigError);
    const vars = (error as ConfigError).problems.map((p) => p.variable).sort();
    expect(vars).toEqual(
      ['LOG_LEVEL', 'OPENAI_BASE_URL', 'PORT', 'SWITCHBOARD_ADMIN_KEY', 'SWITCHBOARD_CORS_ORIGINS', 'SWITCHBOARD_DURABILITY', 'SWITCHBOARD_KEYWORD_BUDGET', 'SWITCHBOARD_RATE_LIMIT', 'SWITCHBOARD_SECRET'].sort(),
    );
    for (const v of vars) expect((error as Error).message).toContain(v);
  });

  it('selects PostgreSQL with SWITCHBOARD_DATABASE_URL, which needs SWITCHBOARD_SECRET; SQLite without it', () => {
    expect(loadConfig({}).database).toBeUndefined();
    const secret = Buffer.alloc(32, 1).toString('base64');
    expect(loadConfig({ SWITCHBOARD_DATABASE_URL: 'postgresql://sb:pw@db.internal:5433/sb', SWITCHBOARD_SECRET: secret, SWITCHBOARD_DATABASE_POOL: '25', SWITCHBOARD_DATABASE_WAIT: '5' }).database).toEqual({
      url: 'postgresql://sb:pw@db.internal:5433/sb',
      poolSize: 25,
      waitSeconds: 5,
    });
    expect(loadConfig({ SWITCHBOARD_DATABASE_URL: 'postgres://db/sb', SWITCHBOARD_SECRET: secret }).database).toEqual({ url: 'postgres://db/sb', poolSize: 10, waitSeconds: 30 });
    const problems = (env: Record<string, string>) => {
      try {
        loadConfig(env);
      } catch (err) {
        return (err as ConfigError).problems;
      }
      return [];
    };
    expect(problems({ SWITCHBOARD_DATABASE_URL: 'postgres://db/sb' })).toEqual([
      { variable: 'SWITCHBOARD_SECRET', message: expect.stringMatching(/^is required with SWITCHBOARD_DATABASE_URL/) },
    ]);
    const bad = problems({ SWITCHBOARD_DATABASE_URL: 'mysql://u:secretpw@db/sb', SWITCHBOARD_DATABASE_POOL: '0', SWITCHBOARD_SECRET: secret });
    expect(bad.map((p) => p.variable).sort()).toEqual(['SWITCHBOARD_DATABASE_POOL', 'SWITCHBOARD_DATABASE_URL']);
    expect(JSON.stringify(bad)).not.toContain('secretpw');
  });

  it('refuses openai embeddings without a key or a base URL, alongside other bad variables', () => {
    const problems = (env: Record<string, string>) => {
      try {
        loadConfig(env);
        return [];
      } catch (err) {
        expect(err).toBeInstanceOf(ConfigError);
        return (err as ConfigError).problems;
      }
    };
    expect(problems({ SWITCHBOARD_EMBEDDINGS: 'openai' })).toEqual([
      { variable: 'SWITCHBOARD_EMBEDDINGS', message: '"openai" needs OPENAI_API_KEY or OPENAI_BASE_URL' },
    ]);
    expect(problems({ SWITCHBOARD_EMBEDDINGS: 'openai', OPENAI_API_KEY: '' }).map((p) => p.variable)).toEqual(['SWITCHBOARD_EMBEDDINGS']);
    expect(problems({ SWITCHBOARD_EMBEDDINGS: 'openai', PORT: 'eighty' }).map((p) => p.variable).sort()).toEqual(['PORT', 'SWITCHBOARD_EMBEDDINGS']);
    expect(loadConfig({ SWITCHBOARD_EMBEDDINGS: 'openai', OPENAI_API_KEY: 'sk-x' }).embeddings.provider).toBe('openai');
    expect(loadConfig({ SWITCHBOARD_EMBEDDINGS: 'openai', OPENAI_BASE_URL: 'http://127.0.0.1:11434/v1' }).embeddings.provider).toBe('openai');
  });

  it('reads empty variables as unset', () => {
    expect(loadConfig({ PORT: '', OPENAI_API_KEY: '' }).model.provider).toBe('offline');
  });

  it('reads OIDC sign-in: issuer, client id and secret together or none, roles, domains, the role claim and its map', () => {
    const problems = (env: Record<string, string>) => {
      try {
        loadConfig(env);
        return [];
      } catch (err) {
        expect(err).toBeInstanceOf(ConfigError);
        return (err as ConfigError).problems;
      }
    };
    const client = { SWITCHBOARD_OIDC_ISSUER: 'https://login.example.com/realms/team', SWITCHBOARD_OIDC_CLIENT_ID: 'switchboard', SWITCHBOARD_OIDC_CLIENT_SECRET: 'oidc-secret-value' };
    expect(loadConfig({}).oidc).toBeUndefined();
    expect(loadConfig(client).oidc).toEqual({
      issuer: 'https://login.example.com/realms/team',
      clientId: 'switchboard',
      clientSecret: 'oidc-secret-value',
      defaultRole: undefined,
      allowedDomains: [],
      roleClaim: undefined,
      roleMap: undefined,
    });
    expect(
      loadConfig({
        ...client,
        SWITCHBOARD_OIDC_DEFAULT_ROLE: 'agent',
        SWITCHBOARD_OIDC_ALLOWED_DOMAINS: 'Example.com, @example.org',
        SWITCHBOARD_OIDC_ROLE_CLAIM: 'groups',
        SWITCHBOARD_OIDC_ROLE_MAP: 'sb-admins=admin, cn=staff=editor',
      }).oidc,
    ).toMatchObject({ defaultRole: 'agent', allowedDomains: ['example.com', 'example.org'], roleClaim: 'groups', roleMap: { 'sb-admins': 'admin', 'cn=staff': 'editor' } });
    // Two of the three name the missing one; the secret's value is never in the message.
    const partial = problems({ SWITCHBOARD_OIDC_ISSUER: client.SWITCHBOARD_OIDC_ISSUER, SWITCHBOARD_OIDC_CLIENT_SECRET: 'oidc-secret-value' });
    expect(partial.map((p) => p.variable)).toEqual(['SWITCHBOARD_OIDC_CLIENT_ID']);
    expect(JSON.stringify(partial)).not.toContain('oidc-secret-value');
    expect(problems({ SWITCHBOARD_OIDC_CLIENT_ID: 'x' }).map((p) => p.variable).sort()).toEqual(['SWITCHBOARD_OIDC_CLIENT_SECRET', 'SWITCHBOARD_OIDC_ISSUER']);
    expect(
      problems({
        ...client,
        SWITCHBOARD_OIDC_ISSUER: 'ldap://x',
        SWITCHBOARD_OIDC_DEFAULT_ROLE: 'owner',
        SWITCHBOARD_OIDC_ALLOWED_DOMAINS: 'not a domain',
        SWITCHBOARD_OIDC_ROLE_CLAIM: 'two words',
        SWITCHBOARD_OIDC_ROLE_MAP: 'admins=owner',
        PORT: 'eighty',
      })
        .map((p) => p.variable)
        .sort(),
    ).toEqual(['PORT', 'SWITCHBOARD_OIDC_ALLOWED_DOMAINS', 'SWITCHBOARD_OIDC_DEFAULT_ROLE', 'SWITCHBOARD_OIDC_ISSUER', 'SWITCHBOARD_OIDC_ROLE_CLAIM', 'SWITCHBOARD_OIDC_ROLE_MAP']);
    // The client secret is a secret, and `switchboard mcp` (which signs nobody in) is never given it.
    expect(SECRET_VARIABLES).toContain('SWITCHBOARD_OIDC_CLIENT_SECRET');
    const env = { ...client, SWITCHBOARD_OIDC_DEFAULT_ROLE: 'viewer', SWITCHBOARD_MODEL: 'm' };
    expect(Object.keys(stdioServerEnv(env, loadConfig(env))).filter((k) => k.includes('OIDC'))).toEqual([]);
  });
});
