// A real MCP tool server built with the SDK's McpServer, for the tool hub tests. Plain JavaScript
// so a test can spawn it as a stdio child with `process.execPath` (no build, no loader); the http
// variant is imported by the tests and listens on 127.0.0.1.
//   node test/fakes/mcp-test-server.mjs          → serves stdio
// Tools: whoami (SHA-256 of the credential it received, never the value), echo, fail (isError),
// hang (answers only once cancelled), hold (whoami once the test releases it), progress (progress +
// log notifications), add_tool (a new tool at run time → notifications/tools/list_changed), stats
// (the counters below).
import { createHash, randomUUID } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { createServer } from 'node:http';
import { pathToFileURL } from 'node:url';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { z } from 'zod';

export const sha256 = (text) => createHash('sha256').update(text).digest('hex');
const hashOf = (value) => (typeof value === 'string' && value !== '' ? sha256(value) : null);
const text = (t) => ({ content: [{ type: 'text', text: t }] });
/** `hold` calls started in this process (every session of the http variant shares it). */
let held = 0;

/** One McpServer; `state` counts cancelled hangs and whoami calls (shared by every session of the http variant). */
export function createTestMcpServer(transport, state = { cancelled: 0, whoami: 0 }) {
  const server = new McpServer({ name: 'switchboard-test-server', version: '1.0.0' }, { capabilities: { logging: {} } });
  const whoami = (extra) => {
    const headers = extra.requestInfo?.headers ?? {};
    return text(
      JSON.stringify({
        transport,
        pid: process.pid,
        // stdio: the environment variable; http: the header a credential of that name becomes.
        API_TOKEN: hashOf(transport === 'stdio' ? process.env.API_TOKEN : headers.api_token),
        authorization: hashOf(headers.authorization),
      }),
    );
  };
  server.registerTool('whoami', { description: 'Reports which credential arrived, as SHA-256 hashes.', inputSchema: {} }, async (_args, extra) => {
    state.whoami++;
    return whoami(extra);
  });
  server.registerTool(
    'hold',
    {
      description: 'Writes a marker file `started-<pid>-<n>` into `dir`, then answers like whoami once `dir/release` exists (or says "cancelled").',
      inputSchema: { dir: z.string() },
    },
    async ({ dir }, extra) => {
      fs.writeFileSync(path.join(dir, `started-${process.pid}-${++held}`), '');
      // The test process decides when the call ends: poll for its release file, stop when cancelled.
      while (!fs.existsSync(path.join(dir, 'release'))) {
        if (extra.signal.aborted) return text('cancelled');
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
      return whoami(extra);
    },
  );
  server.registerTool(
    'echo',
    { description: 'Echoes its text.', inputSchema: { text: z.string(), times: z.number().int().min(1).optional() } },
    async ({ text: t, times }) => text(Array(times ?? 1).fill(t).join(' ')),
  );
  server.registerTool('fail', { description: 'Always reports an error.', inputSchema: {} }, async () => ({ ...text('the fake tool failed on purpose'), isError: true }));
  server.registerTool('hang', { description: 'Never answers until cancelled.', inputSchema: {} }, async (_args, extra) => {
    await new Promise((resolve) => extra.signal.addEventListener('abort', resolve, { once: true }));
    state.cancelled++;
    return text('cancelled');
  });
  server.registerTool('progress', { description: 'Reports progress and logs, then answers.', inputSchema: {} }, async (_args, extra) => {
    const token = extra._meta?.progressToken;
    for (const progress of [1, 2]) {
      if (token !== undefined) await extra.sendNotification({ method: 'notifications/progress', params: { progressToken: token, progress, total: 2, message: `step ${progress}` } });
    }
    await extra.sendNotification({ method: 'notifications/message', params: { level: 'info', logger: 'fake', data: 'halfway there' } });
    return text('progress done');
  });
  server.registerTool('add_tool', { description: 'Registers a new tool at run time.', inputSchema: { name: z.string() } }, async ({ name }) => {
    server.registerTool(name, { description: `Added at run time: ${name}.`, inputSchema: {} }, async () => text(`hello from ${name}`));
    return text(`added ${name}`);
  });
  server.registerTool('stats', { description: 'Counters of this process.', inputSchema: {} }, async () => text(JSON.stringify(state)));
  return server;
}

/** The http variant on 127.0.0.1 (port 0): one session per client, like a real Streamable HTTP server. */
export async function startHttpTestServer() {
  const state = { cancelled: 0, whoami: 0 };
  const sessions = new Map();
  const requests = [];
  const http = createServer(async (req, res) => {
    requests.push({ method: req.method, url: req.url, headers: req.headers });
    if (req.url === '/redirect') return void res.writeHead(307, { location: '/mcp' }).end();
    if (req.url !== '/mcp') return void res.writeHead(404).end();
    const sessionId = req.headers['mcp-session-id'];
    let transport = typeof sessionId === 'string' ? sessions.get(sessionId) : undefined;
    if (!transport) {
      if (sessionId !== undefined) {
        res.writeHead(404, { 'content-type': 'application/json' });
        return void res.end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32001, message: 'Session not found' }, id: null }));
      }
      const created = new StreamableHTTPServerTransport({ sessionIdGenerator: () => randomUUID(), onsessioninitialized: (id) => sessions.set(id, created) });
      created.onclose = () => created.sessionId && sessions.delete(created.sessionId);
      await createTestMcpServer('http', state).connect(created);
      transport = created;
    }
    await transport.handleRequest(req, res);
  });
  await new Promise((resolve, reject) => {
    http.once('error', reject);
    http.listen(0, '127.0.0.1', resolve);
  });
  const port = http.address().port;
  return {
    port,
    url: `http://127.0.0.1:${port}/mcp`,
    state,
    requests,
    /** Ends every session (as a restarted server would) without stopping the listener. */
    dropSessions() {
      for (const t of sessions.values()) void t.close();
      sessions.clear();
    },
    close: () =>
      new Promise((resolve) => {
        for (const t of sessions.values()) void t.close();
        http.closeAllConnections();
        http.close(() => resolve());
      }),
  };
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  await createTestMcpServer('stdio').connect(new StdioServerTransport());
}
