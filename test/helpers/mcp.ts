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

/** What a tool call needs of a client: the SDK's 1.x `Client` and its v2 one (`@modelcontextprotocol/client`) both fit. */
export interface ToolClient {
  callTool(params: { name: string; arguments?: Record<string, unknown> }): Promise<unknown>;
}

/** Calls a tool expecting success; returns its structured content (and checks the text says the same). */
export async function callOk<T = Record<string, any>>(client: ToolClient, name: string, args: Record<string, unknown> = {}): Promise<T> {
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

/** What every client does over every transport: a persona answering from a knowledge source, both made through the tools. */
export async function expectHandbookAnswer(client: ToolClient): Promise<void> {
  const persona = await callOk(client, 'create_persona', { name: 'Desk', instructions: 'Answer from the handbook.' });
  const source = await callOk(client, 'add_knowledge', { name: 'Handbook', content: 'The office opens at nine and closes at five.' });
  expect(source.status).toBe('ready');
  const answer = await callOk(client, 'ask_persona', { personaId: persona.id, message: 'When does the office open?' });
  expect(answer.response).toContain('The office opens at nine');
  expect(answer.sources[0].sourceName).toBe('Handbook');
}
