/**
 * The floor of the start-up bench (bench/startup.ts): the project's fastify with one GET /health
 * route and nothing else, on HOST:PORT. Started with the same node as the server it is held against.
 */
import Fastify from 'fastify';

const app = Fastify();
app.get('/health', async () => ({ status: 'ok' }));
await app.listen({ port: Number(process.env.PORT ?? 0), host: process.env.HOST ?? '127.0.0.1' });
process.on('SIGTERM', () => {
  app.close().then(
    () => process.exit(0),
    () => process.exit(1),
  );
});
