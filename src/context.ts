import path from 'node:path';
import pino, { type Logger } from 'pino';
import type { Config } from './config.js';
import { createAuthService } from './core/auth/auth.service.js';
import { createAuthStore } from './core/auth/auth.store.js';
import { createIdempotencyService } from './core/idempotency/idempotency.service.js';
import { createPersonaService } from './core/personas/personas.service.js';
import { createPersonaStore } from './core/personas/personas.store.js';
import { type Db, migrate, openDatabase } from './db/database.js';
import { type Cipher, createCipher, loadSecretKey } from './lib/cipher.js';
import { type Clock, systemClock } from './lib/clock.js';
import { type IdGenerator, randomIds } from './lib/ids.js';

export const VERSION = '0.1.0';

/** Paths pino must never print: bearer keys, secrets, credentials. */
export const REDACT_PATHS = [
  'req.headers.authorization',
  'req.headers["x-slack-signature"]',
  'req.headers["x-switchboard-signature"]',
  'headers.authorization',
  '*.key',
  '*.secret',
  '*.credentials',
  '*.botToken',
  '*.appToken',
  '*.signingSecret',
  '*.password',
];

export interface AppContext {
  config: Config;
  logger: Logger;
  db: Db;
  clock: Clock;
  ids: IdGenerator;
  cipher: Cipher;
  services: {
    auth: ReturnType<typeof createAuthService>;
    personas: ReturnType<typeof createPersonaService>;
    idempotency: ReturnType<typeof createIdempotencyService>;
  };
  /** Flushes what is kept in memory and closes the database. Safe to call twice. */
  close(): Promise<void>;
}

export interface ContextOverrides {
  clock?: Clock;
  ids?: IdGenerator;
  logger?: Logger;
  /** Database file; defaults to `<dataDir>/switchboard.db`. ':memory:' for throwaway tests. */
  databaseFile?: string;
}

export function databaseFile(config: Config): string {
  return path.join(config.dataDir, 'switchboard.db');
}

/** The one composition root: everything the transports need, built from config plus test overrides. */
export async function createContext(config: Config, overrides: ContextOverrides = {}): Promise<AppContext> {
  const logger =
    overrides.logger ?? pino({ level: config.logLevel, redact: { paths: REDACT_PATHS, censor: '[redacted]' } });
  const clock = overrides.clock ?? systemClock;
  const ids = overrides.ids ?? randomIds;
  const db = openDatabase({ filename: overrides.databaseFile ?? databaseFile(config), durability: config.durability });
  try {
    await migrate(db);
  } catch (err) {
    await db.close();
    throw err;
  }
  const cipher = createCipher(loadSecretKey(config.secret, config.dataDir));

  const auth = createAuthService({ store: createAuthStore(db.kysely), clock, ids });
  const personas = createPersonaService({ store: createPersonaStore(db.kysely), clock, ids });
  const idempotency = createIdempotencyService({ db: db.kysely, cipher, clock });

  // lastUsedAt may lag by up to a minute (API.md §2); expired idempotency records go hourly.
  const timers = [
    setInterval(() => void auth.flushUsage().catch((err) => logger.error({ err }, 'lastUsedAt flush failed')), 60_000),
    setInterval(() => void idempotency.purgeExpired().catch((err) => logger.error({ err }, 'purge failed')), 3_600_000),
  ];
  for (const t of timers) t.unref();

  let closing: Promise<void> | undefined;
  return {
    config,
    logger,
    db,
    clock,
    ids,
    cipher,
    services: { auth, personas, idempotency },
    close() {
      closing ??= (async () => {
        for (const t of timers) clearInterval(t);
        try {
          await auth.flushUsage();
        } finally {
          await db.close();
        }
      })();
      return closing;
    },
  };
}
