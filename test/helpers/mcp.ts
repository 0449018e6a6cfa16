/** MCP clients for the tests: the SDK's own `Client`, connected to Switchboard's server in process. */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { expect } from 'vitest';
import { createMcpServer } from '../../src/mcp/server.js';
import type { TestApp } from './app.js';

/** A client connected through `InMemoryTransport` to a server acting as the key `secret`. */
export async function connectInMemory(t: TestApp, secret = t.adminKey): Promise<Client> {
  const principal = await t.ctx.services.auth.authenticate(secret);
  if (!principal) throw new Error('unknown key');
  const server = createMcpServer(t.ctx, principal);
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  await server.connect(serverSide);
  const client = new Client({ name: 'switchboard-test', version: '1.0.0' });
  await client.connect(clientSide);
  return client;
}

/** Calls a tool expecting success; returns its structured content (and checks the text says the same). */
export async function callOk<T = Record<string, any>>(client: Client, name: string, args: Record<string, unknown> = {}): Promise<T> {
  const result = (await client.callTool({ name, arguments: args })) as CallToolResult;
  expect(result.isError ?? false, JSON.stringify(result.content)).toBe(false);
  const text = result.content[0];
  expect(text?.type).toBe('text');
  expect(JSON.parse((text as { text: string }).text)).toEqual(result.structuredContent);
  return result.structuredContent as T;
}

/** Calls a tool expecting an `isError` result; returns its text. */
export async function callError(client: Client, name: string, args: Record<string, unknown> = {}): Promise<string> {
  const result = (await client.callTool({ name, arguments: args })) as CallToolResult;
  expect(result.isError, JSON.stringify(result)).toBe(true);
  expect(result.structuredContent).toBeUndefined();
  return (result.content[0] as { text: string }).text;
}
