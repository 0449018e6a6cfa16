/** The SDK transport for a server (stdio child or Streamable HTTP through the guard), and its tool list. */
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import type { AddressGuardOptions } from '../../lib/address-guard.js';
import { guardedFetch } from '../../lib/guarded-fetch.js';
import type { ServerSpec } from './mcp-clients.js';
import { resolveHeaders } from './vault.js';

const MAX_TOOL_PAGES = 20;

/** `onStderr` receives a stdio child's stderr (kept, scrubbed, for its status error). */
export function createTransport(spec: ServerSpec, guard: AddressGuardOptions, onStderr: (text: string) => void): Transport {
  if (spec.transport === 'stdio') {
    const transport = new StdioClientTransport({
      command: spec.command ?? '',
      args: spec.args,
      env: spec.secrets.credentials, // added to the SDK's safe default environment (PATH, HOME...)
      stderr: 'pipe',
    });
    transport.stderr?.on('data', (chunk: Buffer) => onStderr(chunk.toString('utf8')));
    return transport;
  }
  return new StreamableHTTPClientTransport(new URL(spec.url ?? ''), {
    fetch: guardedFetch(guard),
    requestInit: { headers: resolveHeaders(spec.secrets) },
    // Left to our fetch, which never follows: a 3xx fails the connection (a redirect could lead past the guard's vetting).
    redirectPolicy: 'follow',
    reconnectionOptions: { initialReconnectionDelay: 1_000, maxReconnectionDelay: 10_000, reconnectionDelayGrowFactor: 2, maxRetries: 2 },
  });
}

export async function listAllTools(client: Client, timeoutMs: number): Promise<Tool[]> {
  const tools: Tool[] = [];
  let cursor: string | undefined;
  for (let page = 0; page < MAX_TOOL_PAGES; page++) {
    const result = await client.listTools(cursor ? { cursor } : {}, { timeout: timeoutMs });
    tools.push(...result.tools);
    cursor = result.nextCursor;
    if (!cursor) break;
  }
  return tools;
}
