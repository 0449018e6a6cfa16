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

const readinessSchema = z
  .object({
    status: z
      .enum(['ready', 'draining', 'unavailable'])
      .describe('ready: send traffic here; draining: the instance is stopping (SIGTERM); unavailable: its database does not answer.'),
    database: z.enum(['ok', 'error']),
    databaseKind: z.enum(['sqlite', 'postgres']),
  })
  .meta({ id: 'Readiness' });

/** The path the shutdown hook in app.ts still lets through while the server drains. */
export const READINESS_PATH = '/health/ready';

/** `GET /health` and `GET /health/ready` (public; API.md §11, §13). `draining`: the server is stopping. */
export function healthRoutes(ctx: AppContext, draining: () => boolean): FastifyPluginAsyncZod {
  const databaseAnswers = async (): Promise<'ok' | 'error'> => {
    try {
      await sql`SELECT 1`.execute(ctx.db.kysely);
      return 'ok';
    } catch (err) {
      ctx.logger.error({ err }, 'health check: database unavailable');
      return 'error';
    }
  };
  return async (app) => {
    app.get(
      '/health',
      {
        schema: {
          tags: ['health'],
          summary: 'Liveness',
          description: 'Whether the process answers, and its database. For a load balancer, use `GET /health/ready`.',
          security: [],
          response: withErrors({ 200: healthSchema, 503: healthSchema }, [], { public: true }),
        },
      },
      async (_request, reply) => {
        const database = await databaseAnswers();
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
    app.get(
      READINESS_PATH,
      {
        schema: {
          tags: ['health'],
          summary: 'Readiness',
          description:
            '200 while this instance can serve: its database answers and it is not stopping. 503 while it drains after SIGTERM ' +
            '(it answers this route, and only this one, until it exits) or while its database does not answer. Never cached.',
          security: [],
          response: withErrors({ 200: readinessSchema, 503: readinessSchema }, [], { public: true }),
        },
      },
      async (_request, reply) => {
        reply.header('cache-control', 'no-store');
        const database = draining() ? ('ok' as const) : await databaseAnswers();
        const status = draining() ? ('draining' as const) : database === 'ok' ? ('ready' as const) : ('unavailable' as const);
        return reply.code(status === 'ready' ? 200 : 503).send({ status, database, databaseKind: ctx.db.kind });
      },
    );
  };
}
