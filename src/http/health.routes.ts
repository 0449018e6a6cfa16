import { sql } from 'kysely';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { type AppContext, VERSION } from '../context.js';
import { withErrors } from './openapi.js';

const healthSchema = z
  .object({
    status: z.enum(['ok', 'degraded']),
    version: z.string(),
    database: z.enum(['ok', 'error']),
    databaseKind: z.enum(['sqlite', 'postgres']).describe('Where the data lives: SQLite in the data directory, or PostgreSQL (SWITCHBOARD_DATABASE_URL).'),
    model: z.object({ provider: z.string(), name: z.string() }),
  })
  .meta({ id: 'Health' });

/** `GET /health` (public; API.md §11). */
export function healthRoutes(ctx: AppContext): FastifyPluginAsyncZod {
  return async (app) => {
    app.get(
      '/health',
      {
        schema: {
          tags: ['health'],
          summary: 'Liveness and readiness',
          security: [],
          response: withErrors({ 200: healthSchema, 503: healthSchema }, [], { public: true }),
        },
      },
      async (_request, reply) => {
        let database: 'ok' | 'error' = 'ok';
        try {
          await sql`SELECT 1`.execute(ctx.db.kysely);
        } catch (err) {
          ctx.logger.error({ err }, 'health check: database unavailable');
          database = 'error';
        }
        const body = {
          status: database === 'ok' ? ('ok' as const) : ('degraded' as const),
          version: VERSION,
          database,
          databaseKind: ctx.db.kind,
          model: { provider: ctx.config.model.provider, name: ctx.config.model.name },
        };
        return reply.code(database === 'ok' ? 200 : 503).send(body);
      },
    );
  };
}
