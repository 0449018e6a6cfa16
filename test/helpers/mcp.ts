/** MCP clients for the tests: the SDK's own `Client`, connected to Switchboard's server in process. */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { expect } from 'vitest';
import { createMcpServer } from '../../src/mcp/server.js';
import type { TestApp } from './app.js';
import { createPersona } from './factories.js';

/** A client connected through `InMemoryTransport` to a server acting as the key `secret`. */
export async function connectInMemory(t: TestApp, secret = t.adminKey): Promise<Client> {
  const actor = await t.ctx.services.auth.authenticate(secret);
  if (!actor) throw new Error('unknown key');
  const server = createMcpServer(t.ctx, actor);
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

/** What the user of a client that can ask answers a confirmation (`asked` collects the questions). */
export interface AskedUser {
  asked: string[];
  answer: { action: 'accept' | 'decline'; content?: Record<string, boolean> };
}

/**
 * A client that can ask its user, and `delete_persona` (which cannot be undone): asked first, with
 * the persona's name; nothing done when declined or unticked; deleted once confirmed; an id not there
 * is not found, without asking. `persona` makes one, `exists` looks it up, outside MCP.
 */
export async function expectConfirmations(client: ToolClient, user: AskedUser, persona: { make(name: string): Promise<string>; exists(id: string): Promise<boolean> }): Promise<void> {
  const id = await persona.make('Doomed');
  user.answer = { action: 'decline' };
  const declined = (await client.callTool({ name: 'delete_persona', arguments: { id } })) as CallToolResult;
  expect(user.asked.at(-1)).toBe(`Delete the persona "Doomed" (${id}) for good, with its private knowledge sources?`);
  expect(declined.isError).toBe(true);
  expect((declined.content[0] as { text: string }).text).toBe('Not done: the user did not confirm delete_persona.');
  expect(await persona.exists(id)).toBe(true);

  user.answer = { action: 'accept', content: { confirm: false } };
  expect(((await client.callTool({ name: 'delete_persona', arguments: { id } })) as CallToolResult).isError).toBe(true);
  expect(await persona.exists(id)).toBe(true);

  user.answer = { action: 'accept', content: { confirm: true } };
  const done = (await client.callTool({ name: 'delete_persona', arguments: { id } })) as CallToolResult;
  expect(done.structuredContent).toEqual({ id, deleted: true });
  expect(await persona.exists(id)).toBe(false);
  // Nothing to confirm for an id that is not there: not found, without asking.
  const count = user.asked.length;
  expect(((await client.callTool({ name: 'delete_persona', arguments: { id } })) as CallToolResult).isError).toBe(true);
  expect(user.asked.length).toBe(count);
}

/** `expectConfirmations`' persona access through an in-process app's API. */
export const personasOf = (t: TestApp) => ({
  make: async (name: string) => (await createPersona(t, { name })).id,
  exists: async (id: string) => (await t.request({ method: 'GET', url: `/personas/${id}` })).statusCode === 200,
});
