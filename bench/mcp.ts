/**
 * MCP overhead. (1) `tools/call list_personas` over Streamable HTTP at `/mcp` against `GET /personas`
 * over REST on the same server (20 personas): calls/s and latency, the ratio reported (no target).
 * REST is measured twice, answered from the response cache and read from SQLite (`no-cache`), since
 * the MCP tool always reads through the service. Every MCP call carries a new JSON-RPC id (ids must
 * not repeat within a session). The same call in the 2026-07-28 revision: no session, the revision
 * and the client named in each request's `_meta`, a server per request. (2) The tool hub's overhead
 * per external tool call: see hub rows.
 */
import { CLIENT_CAPABILITIES_META_KEY, CLIENT_INFO_META_KEY, PROTOCOL_VERSION_META_KEY } from '@modelcontextprotocol/server';
import { type BenchOptions, type BenchRow, expectResponse, measure, round } from './lib/harness.js';
import { measureHubOverhead } from './lib/mcp-hub-overhead.js';
import { type ServerProcess, startServerProcess } from './lib/server-process.js';
import { PERSONA_COUNT } from './lib/server-protocol.js';

export const name = 'mcp';
export const description = `tools/call list_personas over /mcp vs GET /personas (${PERSONA_COUNT}) over REST; the tool hub's added latency per external call`;

const PROTOCOL_VERSION = '2025-11-25';
const MODERN_VERSION = '2026-07-28';
const MCP_ACCEPT = 'application/json, text/event-stream';

/** Opens an MCP session the way a client does (initialize, then initialized); answers its id. */
async function openSession(server: ServerProcess, key: string): Promise<string> {
  const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json', accept: MCP_ACCEPT };
  const init = await fetch(`${server.origin}/mcp`, {
    method: 'POST',
    headers,
    body: JSON.stringify({ jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: PROTOCOL_VERSION, capabilities: {}, clientInfo: { name: 'bench', version: '1' } } }),
  });
  const sessionId = init.headers.get('mcp-session-id');
  const text = await init.text();
  if (init.status !== 200 || !sessionId || !text.includes('"serverInfo"')) throw new Error(`MCP initialize failed: ${init.status} ${text.slice(0, 300)}`);
  const initialized = await fetch(`${server.origin}/mcp`, {
    method: 'POST',
    headers: { ...headers, 'mcp-session-id': sessionId, 'mcp-protocol-version': PROTOCOL_VERSION },
    body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }),
  });
  if (initialized.status !== 202) throw new Error(`MCP initialized notification: ${initialized.status}`);
  return sessionId;
}

/** The data line of a one-event SSE answer (after the priming event, whose data is empty), parsed. */
function sseData(text: string): unknown {
  const line = text.split('\n').find((l) => l.startsWith('data: ') && l.length > 'data: '.length);
  return line ? JSON.parse(line.slice('data: '.length)) : JSON.parse(text);
}

export async function run(options: BenchOptions): Promise<BenchRow[]> {
  const server = await startServerProcess('switchboard', { cpuProfileDir: options.cpuProfileDir, cpu: options.pinning?.server });
  const rows: BenchRow[] = [];
  try {
    const key = server.key;
    if (!key) throw new Error('the switchboard server reported no API key');
    const auth = { authorization: `Bearer ${key}` };
    const personas = `${server.origin}/personas`;
    await expectResponse('GET /personas', personas, { headers: auth }, (status, body) =>
      status === 200 && (body as { data?: unknown[] }).data?.length === PERSONA_COUNT ? undefined : `expected ${PERSONA_COUNT} personas`,
    );
    const rest = await measure({ name: `REST GET /personas (${PERSONA_COUNT}, cached)`, target: { url: personas, headers: auth, serverCpu: server.cpuUsage } }, options);
    const restDb = await measure(
      { name: `REST GET /personas (${PERSONA_COUNT}, no-cache)`, target: { url: personas, headers: { ...auth, 'cache-control': 'no-cache' }, serverCpu: server.cpuUsage } },
      options,
    );

    const sessionId = await openSession(server, key);
    const mcpHeaders = { ...auth, 'content-type': 'application/json', accept: MCP_ACCEPT, 'mcp-session-id': sessionId, 'mcp-protocol-version': PROTOCOL_VERSION };
    let id = 0;
    const call = () => JSON.stringify({ jsonrpc: '2.0', id: ++id, method: 'tools/call', params: { name: 'list_personas', arguments: { limit: PERSONA_COUNT } } });
    const check = await fetch(`${server.origin}/mcp`, { method: 'POST', headers: mcpHeaders, body: call() });
    const answer = sseData(await check.text()) as { result?: { structuredContent?: { data?: unknown[] } } };
    if (answer.result?.structuredContent?.data?.length !== PERSONA_COUNT) throw new Error(`tools/call list_personas: ${JSON.stringify(answer).slice(0, 300)}`);
    const mcp = await measure(
      { name: `MCP tools/call list_personas (${PERSONA_COUNT})`, target: { url: `${server.origin}/mcp`, method: 'POST', headers: mcpHeaders, nextBody: call, serverCpu: server.cpuUsage } },
      options,
    );

    // 2026-07-28: each request stands alone.
    const modernHeaders = { ...auth, 'content-type': 'application/json', accept: MCP_ACCEPT, 'mcp-protocol-version': MODERN_VERSION, 'mcp-method': 'tools/call', 'mcp-name': 'list_personas' };
    const envelope = { [PROTOCOL_VERSION_META_KEY]: MODERN_VERSION, [CLIENT_INFO_META_KEY]: { name: 'bench', version: '1' }, [CLIENT_CAPABILITIES_META_KEY]: {} };
    const modernCall = () =>
      JSON.stringify({ jsonrpc: '2.0', id: ++id, method: 'tools/call', params: { name: 'list_personas', arguments: { limit: PERSONA_COUNT }, _meta: envelope } });
    const modernCheck = await fetch(`${server.origin}/mcp`, { method: 'POST', headers: modernHeaders, body: modernCall() });
    const modernAnswer = sseData(await modernCheck.text()) as { result?: { structuredContent?: { data?: unknown[] } } };
    if (modernAnswer.result?.structuredContent?.data?.length !== PERSONA_COUNT) throw new Error(`2026-07-28 tools/call list_personas: ${JSON.stringify(modernAnswer).slice(0, 300)}`);
    const modern = await measure(
      { name: `MCP 2026-07-28 tools/call list_personas (${PERSONA_COUNT})`, target: { url: `${server.origin}/mcp`, method: 'POST', headers: modernHeaders, nextBody: modernCall, serverCpu: server.cpuUsage } },
      options,
    );

    for (const row of [rest, restDb]) row.ratioToCeiling = null;
    // The ratio column reads "MCP as a share of REST": against the uncached REST read, the same work.
    for (const row of [mcp, modern]) row.ratioToCeiling = restDb.requestsPerSecond > 0 ? round(row.requestsPerSecond / restDb.requestsPerSecond, 3) : null;
    rows.push(rest, restDb, mcp, modern);
  } finally {
    await server.stop();
  }
  rows.push(...(await measureHubOverhead(options)));
  return rows;
}
