import { z } from 'zod';
import { pageQuerySchema } from '../../lib/pagination.js';
import { referencedNames } from './vault.js';

/** Built-in tool names (API.md §7): a server may not take one. */
export const RESERVED_TOOL_NAMES = ['knowledge', 'slack', 'discord', 'webhook'];

/** The persona `tools` pattern's tool part, so `<server>.*` can name every server. */
export const serverNameSchema = z
  .string()
  .regex(/^[A-Za-z0-9_-]{1,64}$/, 'must be 1–64 letters, digits, "_" or "-"')
  .refine((n) => !RESERVED_TOOL_NAMES.includes(n.toLowerCase()), 'is the name of a built-in tool');

const NO_CONTROL = /^[^\u0000\r\n]*$/;
const credentialName = z.string().regex(/^[A-Za-z_][A-Za-z0-9_]{0,127}$/, 'must be a variable name (letters, digits, "_")');
const credentialValue = z.string().min(1).max(8192).regex(NO_CONTROL, 'must not contain line breaks or NUL');
export const credentialsSchema = z
  .record(credentialName, credentialValue)
  .refine((c) => Object.keys(c).length <= 50, 'at most 50 credentials')
  .describe('Write-only secrets: environment variables (stdio) or request headers (http). Never returned.');

const headersSchema = z
  .record(z.string().regex(/^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,128}$/, 'must be an HTTP header name'), z.string().max(8192).regex(NO_CONTROL, 'must not contain line breaks or NUL'))
  .refine((h) => Object.keys(h).length <= 50, 'at most 50 headers')
  .describe('http only. Write-only like credentials; a value may reference a credential as `${NAME}`.');

/** Header values that reference credentials the server does not have, as field errors. */
export function missingReferences(headers: Record<string, string>, credentials: Record<string, string>, path: (header: string) => (string | number)[]) {
  const issues: { path: (string | number)[]; message: string }[] = [];
  for (const [header, value] of Object.entries(headers)) {
    for (const name of referencedNames(value)) {
      if (!(name in credentials)) issues.push({ path: path(header), message: `references \${${name}}, which is not a credential of this server` });
    }
  }
  return issues;
}

export const createServerSchema = z
  .strictObject({
    name: serverNameSchema.describe('The tool name its actions are called by (`<name>.<tool>`).'),
    transport: z.enum(['stdio', 'http']),
    command: z.string().min(1).max(4096).optional().describe('stdio: the program to run (needs SWITCHBOARD_MCP_STDIO=1).'),
    args: z.array(z.string().max(4096)).max(100).optional().describe('stdio: its arguments.'),
    url: z.string().max(2048).optional().describe('http: the Streamable HTTP endpoint; passes the address guard.'),
    headers: headersSchema.optional(),
    credentials: credentialsSchema.optional(),
    oauth: z
      .strictObject({
        clientId: z.string().min(1).max(1024).regex(NO_CONTROL, 'must not contain line breaks or NUL'),
        clientSecret: z.string().min(1).max(8192).regex(NO_CONTROL, 'must not contain line breaks or NUL').optional(),
      })
      .optional()
      .describe(
        'http only: a client registered for Switchboard with the server’s authorization server, for one that accepts neither Client ID Metadata Documents nor dynamic registration. The secret is write-only.',
      ),
  })
  .superRefine((body, ctx) => {
    const only = (field: 'command' | 'args' | 'url' | 'headers' | 'oauth', transport: string) => {
      if (body[field] !== undefined) ctx.addIssue({ code: 'custom', path: [field], message: `is only for ${transport} servers` });
    };
    if (body.transport === 'stdio') {
      if (body.command === undefined) ctx.addIssue({ code: 'custom', path: ['command'], message: 'is required for a stdio server' });
      only('url', 'http');
      only('headers', 'http');
      only('oauth', 'http');
    } else {
      if (body.url === undefined) ctx.addIssue({ code: 'custom', path: ['url'], message: 'is required for an http server' });
      only('command', 'stdio');
      only('args', 'stdio');
    }
    for (const issue of missingReferences(body.headers ?? {}, body.credentials ?? {}, (h) => ['headers', h])) ctx.addIssue({ code: 'custom', ...issue });
  });

export const replaceCredentialsSchema = z.strictObject({ credentials: credentialsSchema });

const toolOAuthSchema = z
  .object({
    status: z
      .enum(['needs_consent', 'connected', 'error'])
      .describe('`connected` (tokens held), `needs_consent` (no tokens, a refused refresh, or a scope step-up: `requestedScope`), `error` (the last sign-in failed: `error`).'),
    error: z.string().nullable(),
    issuer: z.string().nullable().describe('The authorization server the tokens belong to.'),
    clientRegistration: z
      .enum(['metadata_document', 'dynamic', 'preregistered'])
      .nullable()
      .describe('How Switchboard identified itself: its Client ID Metadata Document, dynamic registration, or a pre-registered client.'),
    scope: z.string().nullable().describe('Granted scope.'),
    requestedScope: z.string().nullable().describe('Scope the server asked for and consent has not granted yet.'),
    expiresAt: z.string().nullable().describe('When the access token expires; it is refreshed before.'),
  })
  .meta({ id: 'ToolServerOAuth' });

export const mcpServerSchema = z
  .object({
    id: z.string(),
    name: z.string(),
    transport: z.enum(['stdio', 'http']),
    command: z.string().nullable(),
    args: z.array(z.string()),
    url: z.string().nullable(),
    status: z
      .enum(['connecting', 'connected', 'error', 'needs_consent'])
      .describe(
        '`connecting` (first connection or a reconnect under way), `connected`, `error` (`error` says why; retried with back-off), or `needs_consent` (the server asks for OAuth sign-in: an admin connects it; not retried until then).',
      ),
    error: z.string().nullable(),
    credentialNames: z.array(z.string()),
    headerNames: z.array(z.string()).describe('Names of the configured headers; their values are write-only.'),
    tools: z.array(z.string()).describe('Its tools’ names while connected.'),
    oauth: toolOAuthSchema.nullable().describe('How the server is signed in to with OAuth; null for a server that never asked.'),
    createdAt: z.string(),
  })
  .meta({ id: 'McpServer' });

export const authorizationSchema = z
  .object({
    authorizationUrl: z.string().describe('Open it in the admin’s browser: the authorization server asks for consent, then sends the browser back to Switchboard’s /oauth/callback.'),
    expiresAt: z.string().describe('The request is answered once, before this time.'),
  })
  .meta({ id: 'ToolServerAuthorization' });

export const toolDescriptorSchema = z
  .object({
    toolName: z.string(),
    action: z.string(),
    description: z.string(),
    inputSchema: z.record(z.string(), z.unknown()).describe('JSON Schema of `parameters`.'),
  })
  .meta({ id: 'ToolDescriptor' });

export const executeToolSchema = z.strictObject({
  toolName: z.string().min(1).max(64),
  action: z.string().min(1).max(128),
  parameters: z.record(z.string(), z.unknown()).default({}),
  monitorExecution: z.boolean().default(false).describe('Keep the (redacted) parameters and the progress/log notifications.'),
});

const toolEventSchema = z
  .object({
    type: z.enum(['progress', 'log']),
    at: z.string(),
    progress: z.number().optional(),
    total: z.number().optional(),
    message: z.string().optional(),
    level: z.string().optional(),
    logger: z.string().optional(),
    data: z.unknown().optional(),
  })
  .meta({ id: 'ToolEvent' });

export const executionSchema = z
  .object({
    id: z.string(),
    toolName: z.string(),
    action: z.string(),
    status: z.enum(['succeeded', 'failed']),
    result: z.unknown(),
    error: z.string().nullable(),
    durationMs: z.number().int(),
    startedAt: z.string(),
    finishedAt: z.string(),
    monitored: z.boolean(),
    parameters: z.record(z.string(), z.unknown()).optional().describe('Monitored executions only; secrets redacted.'),
    events: z.array(toolEventSchema).optional().describe('Monitored executions only: progress and log notifications.'),
  })
  .meta({ id: 'Execution' });

export const listExecutionsQuerySchema = pageQuerySchema.extend({ toolName: z.string().max(64).optional() }).strict();

export type CreateServerInput = z.infer<typeof createServerSchema>;
export type McpServer = z.infer<typeof mcpServerSchema>;
export type ExecuteToolInput = z.infer<typeof executeToolSchema>;
export type Execution = z.infer<typeof executionSchema>;
export type ToolEventRecord = z.infer<typeof toolEventSchema>;
