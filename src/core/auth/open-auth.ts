import type { Config } from '../../config.js';
import { openBackend } from '../../db/open.js';
import { systemClock } from '../../lib/clock.js';
import { randomIds } from '../../lib/ids.js';
import { createLogger } from '../../lib/logger.js';
import { createAuthService } from './auth.service.js';
import { createAuthStore } from './auth.store.js';

export interface OpenedAuth {
  auth: ReturnType<typeof createAuthService>;
  /** Flushes what the service holds in memory and closes the database. */
  close(): Promise<void>;
}

/**
 * The auth service alone on the configured database (migrated as `serve` would), for the CLI's key
 * commands (`keys create`, `workspaces create`, `mcp-config`): they need keys and workspaces, not
 * the HTTP server, the other features or their background work (issue 40 item 19). Without the
 * rest of the context, they also leave a running server's instance state alone (its MCP tasks, its
 * lease heartbeat).
 */
export async function openAuth(config: Config): Promise<OpenedAuth> {
  const backend = await openBackend(config, createLogger(config.logLevel));
  const auth = createAuthService({ store: createAuthStore(backend.db.kysely), clock: systemClock, ids: randomIds, signals: backend.signals });
  return {
    auth,
    async close() {
      try {
        await auth.flushUsage();
      } finally {
        await backend.close();
      }
    },
  };
}
