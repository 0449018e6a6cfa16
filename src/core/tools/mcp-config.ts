/**
 * SWITCHBOARD_MCP_CONFIG: a Claude-Desktop-style `{ "mcpServers": { name: { command, args?, env? } |
 * { url, headers?, env? } } }` file (API.md §7). Read once at start-up; a bad file stops start-up
 * with one message naming the file and every problem.
 */
import fs from 'node:fs';
import { z } from 'zod';
import { ConfigError } from '../../config.js';
import { credentialsSchema, missingReferences, serverNameSchema } from './tools.schemas.js';
import type { ServerDefinition } from './tools.service.js';

const VARIABLE = 'SWITCHBOARD_MCP_CONFIG';

const entrySchema = z
  .object({
    type: z.enum(['stdio', 'http', 'streamable-http', 'streamableHttp']).optional(),
    command: z.string().min(1).optional(),
    args: z.array(z.string()).optional(),
    url: z.string().url('must be an http(s) URL').refine((u) => /^https?:/i.test(u), 'must be an http(s) URL').optional(),
    headers: z.record(z.string().regex(/^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,128}$/, 'must be an HTTP header name'), z.string().regex(/^[^\r\n\u0000]*$/)).optional(),
    env: credentialsSchema.optional(),
  })
  .superRefine((e, ctx) => {
    const transport = e.type === undefined ? (e.url !== undefined ? 'http' : 'stdio') : e.type === 'stdio' ? 'stdio' : 'http';
    if (transport === 'stdio' && e.command === undefined) ctx.addIssue({ code: 'custom', path: ['command'], message: 'is required (or give a "url")' });
    if (transport === 'http' && e.url === undefined) ctx.addIssue({ code: 'custom', path: ['url'], message: 'is required for an http server' });
    for (const issue of missingReferences(e.headers ?? {}, e.env ?? {}, (h) => ['headers', h])) ctx.addIssue({ code: 'custom', ...issue });
  });

const fileSchema = z.object({ mcpServers: z.record(z.string(), entrySchema) });

/** The servers a config file declares; throws ConfigError (no stack trace) for a bad file. */
export function readMcpConfig(file: string): ServerDefinition[] {
  const fail = (problem: string): never => {
    throw new ConfigError([{ variable: VARIABLE, message: `${file}: ${problem}` }]);
  };
  let text = '';
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (err) {
    fail(`cannot be read (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    fail(`is not valid JSON (${(err as Error).message})`);
  }
  const parsed = fileSchema.safeParse(json);
  if (!parsed.success) {
    fail(parsed.error.issues.map((i) => `${i.path.map(String).join('.') || '(root)'}: ${i.message}`).join('; '));
  }
  const servers = Object.entries(parsed.data!.mcpServers);
  const badNames = servers.map(([name]) => [name, serverNameSchema.safeParse(name)] as const).filter(([, r]) => !r.success);
  if (badNames.length > 0) {
    fail(badNames.map(([name, r]) => `mcpServers.${name}: the name ${r.error?.issues[0]?.message ?? 'is invalid'}`).join('; '));
  }
  return servers.map(([name, e]) => {
    const http = e.type === undefined ? e.url !== undefined : e.type !== 'stdio';
    return http
      ? { name, transport: 'http', url: e.url, headers: e.headers ?? {}, credentials: e.env ?? {} }
      : { name, transport: 'stdio', command: e.command, args: e.args ?? [], credentials: e.env ?? {} };
  });
}
