// A tool server of MCP 2026-07-28, built with the SDK's v2 server (`@modelcontextprotocol/server`),
// for the tool hub's tests of the newer era (issue 27 item 4). Plain JavaScript, like
// mcp-test-server.mjs, so a test spawns it as a stdio child with `process.execPath`.
//   node test/fakes/mcp-modern-test-server.mjs   → serves stdio (both eras, as `serveStdio` does)
// The http variant answers the 2026-07-28 revision only (`legacy: 'reject'`): a client that falls
// back to `initialize` fails against it. Tools: whoami (the era that served the call and the SHA-256
// of the credential it received), echo, fail, hang (answers only once cancelled), progress.
import { createHash } from 'node:crypto';
import { createServer } from 'node:http';
import { pathToFileURL } from 'node:url';
import { getRequestListener } from '@hono/node-server';
import { createMcpHandler, McpServer } from '@modelcontextprotocol/server';
import { serveStdio, StdioServerTransport } from '@modelcontextprotocol/server/stdio';
import { z } from 'zod';

const sha256 = (text) => createHash('sha256').update(text).digest('hex');
const hashOf = (value) => (typeof value === 'string' && value !== '' ? sha256(value) : null);
const text = (t) => ({ content: [{ type: 'text', text: t }] });

/** One server for one request (2026-07-28) or one connection (2025 over stdio); `state` is shared. */
export function createModernTestServer(transport, rc, state) {
  const server = new McpServer({ name: 'switchboard-modern-test-server', version: '1.0.0' }, { capabilities: { tools: {}, logging: {} } });
  const credential = transport === 'stdio' ? process.env.API_TOKEN : rc.authInfo?.extra?.apiToken;
  server.registerTool('whoami', { description: 'Reports the era and which credential arrived, as a SHA-256 hash.', inputSchema: z.object({}) }, async () =>
    text(JSON.stringify({ transport, era: rc.era, pid: process.pid, API_TOKEN: hashOf(credential) })),
  );
  server.registerTool('echo', { description: 'Echoes its text.', inputSchema: z.object({ text: z.string() }) }, async ({ text: t }) => text(t));
  server.registerTool('fail', { description: 'Always reports an error.', inputSchema: z.object({}) }, async () => ({ ...text('the modern fake failed on purpose'), isError: true }));
  server.registerTool('hang', { description: 'Never answers until cancelled.', inputSchema: z.object({}) }, async (_args, ctx) => {
    await new Promise((resolve) => ctx.mcpReq.signal.addEventListener('abort', resolve, { once: true }));
    state.cancelled++;
    return text('cancelled');
  });
  server.registerTool('progress', { description: 'Reports progress and a log line, then answers.', inputSchema: z.object({}) }, async (_args, ctx) => {
    const token = ctx.mcpReq._meta?.progressToken;
    for (const progress of [1, 2]) {
      if (token !== undefined) await ctx.mcpReq.notify({ method: 'notifications/progress', params: { progressToken: token, progress, total: 2, message: `step ${progress}` } });
    }
    await ctx.mcpReq.notify({ method: 'notifications/message', params: { level: 'info', logger: 'modern', data: 'halfway there' } });
    return text('progress done');
  });
  return server;
}

/** The http variant on 127.0.0.1 (port 0), 2026-07-28 only; `requests` records each request's JSON-RPC method. */
export async function startModernHttpTestServer() {
  const state = { cancelled: 0 };
  const requests = [];
  const handler = createMcpHandler((rc) => createModernTestServer('http', rc, state), { legacy: 'reject' });
  const listener = getRequestListener(async (request) => {
    const body = request.method === 'POST' ? await request.clone().json().catch(() => undefined) : undefined;
    requests.push({ method: request.method, rpc: body?.method ?? null, headers: Object.fromEntries(request.headers) });
    const apiToken = request.headers.get('api_token');
    return handler.fetch(request, { authInfo: { token: 'none', clientId: 'test', scopes: [], extra: { apiToken } } });
  });
  const http = createServer(listener);
  await new Promise((resolve, reject) => {
    http.once('error', reject);
    http.listen(0, '127.0.0.1', resolve);
  });
  const { port } = http.address();
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    state,
    requests,
    close: () =>
      new Promise((resolve) => {
        http.closeAllConnections();
        http.close(() => resolve());
      }),
  };
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const state = { cancelled: 0 };
  serveStdio((rc) => createModernTestServer('stdio', rc, state), { transport: new StdioServerTransport() });
}
