/**
 * `switchboard mcp`: the MCP server on stdin/stdout for desktop assistants (API.md §10), in both eras
 * of the protocol (2026-07-28, and 2025-11-25 and before). It acts as the key in
 * SWITCHBOARD_API_KEY; stdout carries only MCP messages, so logs go to stderr.
 */
import type { Readable, Writable } from 'node:stream';
import { serveStdio, StdioServerTransport } from '@modelcontextprotocol/server/stdio';
import pino from 'pino';
import type { Config } from '../config.js';
import { createContext } from '../context.js';
import { createLogger } from '../lib/logger.js';
import { loadDeclaredToolServers } from '../server.js';
import { createModernMcpServer } from './server-modern.js';

export interface StdioIo {
  stdin: Readable;
  stdout: Writable;
  /** Human-readable failures (a missing or bad key). */
  stderr: (text: string) => void;
  /** Called once serving, with a way to stop (signals). */
  onServing?: (server: { url: string; stop: () => Promise<void>; drainSeconds: number }) => void;
}

/** Serves MCP over stdio until stdin closes or `stop` is called; resolves to the exit code. */
export async function runMcpStdio(config: Config, io: StdioIo): Promise<number> {
  if (!config.apiKey) {
    io.stderr('switchboard mcp needs SWITCHBOARD_API_KEY: the API key (sb_…) whose workspace and scopes the MCP client acts with.\n');
    return 1;
  }
  const logger = createLogger(config.logLevel, pino.destination(2));
  const ctx = await createContext(config, { logger });
  try {
    // A scripted deployment names its admin key; without one, nothing is created here (no banner on stdio).
    if (config.adminKey) await ctx.services.auth.bootstrap(config.adminKey);
    const actor = await ctx.services.auth.authenticate(config.apiKey);
    if (!actor) {
      io.stderr('SWITCHBOARD_API_KEY is not a valid key of this database: it is malformed, unknown, revoked or expired.\n');
      return 1;
    }
    // ask_persona with enableMCPTools reaches the operator's declared tool servers here too.
    await loadDeclaredToolServers(ctx);
    // Nothing listens here: links a tool hands out (invite_member) need SWITCHBOARD_PUBLIC_URL.
    const publicUrl = config.publicUrl;
    const publicBase = publicUrl ? () => publicUrl : undefined;
    // Both eras from one factory (the SDK's v2): a connection that opens with `initialize` is
    // served 2025-11-25 and before by one server for its life; a 2026-07-28 one, request by request.
    let done!: () => void;
    const closed = new Promise<void>((resolve) => (done = resolve));
    const handle = serveStdio(() => createModernMcpServer(ctx, actor, publicBase), { transport: new StdioServerTransport(io.stdin, io.stdout) });
    // A client that closes stdin is done.
    let stopping: Promise<void> | undefined;
    const stop = () => (stopping ??= handle.close().finally(done));
    io.stdin.once('end', () => void stop());
    io.stdin.once('close', () => void stop());
    logger.info({ workspaceId: actor.workspaceId, keyId: actor.id }, 'Switchboard MCP server on stdio');
    io.onServing?.({ url: 'stdio', stop, drainSeconds: config.drainSeconds });
    await closed;
    return 0;
  } finally {
    await ctx.close();
  }
}
