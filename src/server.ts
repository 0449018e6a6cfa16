import type { FastifyInstance } from 'fastify';
import { buildApp } from './app.js';
import type { Config } from './config.js';
import { type AppContext, createContext } from './context.js';
import { publicBase } from './core/oauth/oauth.routes.js';

export interface RunningServer {
  app: FastifyInstance;
  ctx: AppContext;
  url: string;
  /**
   * Drains and stops: stops accepting (new requests on open connections get 503, `GET /health/ready`
   * answers 503 `draining`), lets in-flight requests and streams finish for `drainSeconds`, then
   * closes the connections still open (their streams end as if the client had left), flushes
   * `lastUsedAt` and closes the database.
   */
  close(): Promise<void>;
}

/** The tool servers of SWITCHBOARD_MCP_CONFIG join the default workspace (every process that serves: HTTP and stdio MCP). */
export async function loadDeclaredToolServers(ctx: AppContext): Promise<void> {
  const file = ctx.config.mcpConfigPath;
  if (!file) return;
  const servers = await ctx.services.tools.loadConfigFile(file);
  ctx.logger.info({ file, servers }, 'MCP tool servers declared in SWITCHBOARD_MCP_CONFIG');
}

/**
 * Bootstraps, builds and listens. The bootstrap key, when one is made, goes to `printBanner` once;
 * while no user exists, so does a new setup link at every start.
 */
export async function startServer(config: Config, printBanner: (text: string) => void): Promise<RunningServer> {
  const ctx = await createContext(config);
  try {
    const boot = await ctx.services.auth.bootstrap(config.adminKey);
    if (boot) {
      printBanner(
        [
          '',
          '  Switchboard created the "default" workspace and its admin API key:',
          '',
          `      ${boot.key}`,
          '',
          '  It is shown this once; only its hash is stored. Use it as "Authorization: Bearer <key>".',
          '',
        ].join('\n'),
      );
    }
    // While nobody has an account, every start prints a new one-time link for the first owner (API.md §14).
    const setupLink = await ctx.services.signIn.setup.newLink();
    await loadDeclaredToolServers(ctx);
    const app = await buildApp(ctx);
    // Enabled channels connect in the background; messages a restart left unanswered are answered once.
    await ctx.services.channels.startAll();
    ctx.services.knowledge.start();
    const resumed = await ctx.services.knowledge.resumeUnfinished();
    if (resumed > 0) ctx.logger.info({ resumed }, 'resuming unfinished knowledge processing');
    // Evaluation runs a previous process left unfinished carry on from the cases they had not answered.
    await ctx.services.evaluations.start();
    const address = await app.listen({ port: config.server.port, host: config.server.host });
    if (setupLink) {
      printBanner(
        [
          '',
          '  No one has an account yet. Create the first owner (of the "default" workspace) at:',
          '',
          `      ${publicBase(config, app.server)}/console/setup#${setupLink.token}`,
          '',
          `  The link works once, until ${setupLink.expiresAt}; each start while no account exists prints a new one.`,
          '',
        ].join('\n'),
      );
    }
    ctx.logger.info(
      { url: address, model: config.model.name, provider: config.model.provider, embeddings: config.embeddings.provider },
      `Switchboard listening on ${address} (model: ${config.model.provider}/${config.model.name})`,
    );
    let closing: Promise<void> | undefined;
    return {
      app,
      ctx,
      url: address,
      close() {
        closing ??= (async () => {
          const bound = setTimeout(() => {
            ctx.logger.warn({ drainSeconds: config.drainSeconds }, 'drain bound reached: closing the connections still open');
            app.server.closeAllConnections();
          }, config.drainSeconds * 1000);
          try {
            await app.close();
          } finally {
            clearTimeout(bound);
            await ctx.close();
          }
        })();
        return closing;
      },
    };
  } catch (err) {
    await ctx.close();
    throw err;
  }
}
