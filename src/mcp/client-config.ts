/**
 * `switchboard mcp-config`: the entry an MCP client needs to reach Switchboard, in that client's own
 * config format, with nothing left to edit (absolute paths, a key). Shapes as each client documents
 * them: Claude Desktop, Cursor and Claude Code read `{ "mcpServers": { name: entry } }`, a command
 * entry without `type` (Claude Code refuses a URL entry without `"type": "http"`; Cursor knows one
 * by its `url`); VS Code reads `{ "servers": { name: entry } }` with a required `type`.
 */
import type { Config } from '../config.js';

export const MCP_CLIENTS = ['claude-desktop', 'claude-code', 'cursor', 'vscode'] as const;
export type McpClient = (typeof MCP_CLIENTS)[number];

/** The name the entry goes by in the client (its tools show as `switchboard`'s). */
export const SERVER_NAME = 'switchboard';

/** Stands where the key goes when none was given or created: clearly not a key (stdio refuses it as malformed). */
export const KEY_PLACEHOLDER = '<paste an sb_ API key here>';

export type ClientServer =
  | { transport: 'stdio'; command: string; args: string[]; env: Record<string, string> }
  | { transport: 'http'; url: string; headers: Record<string, string> };

/** Where each client reads the printed object from. */
export const CLIENT_FILES: Record<McpClient, string> = {
  'claude-desktop':
    'Merge "switchboard" into the "mcpServers" of claude_desktop_config.json (macOS: ~/Library/Application Support/Claude/, Windows: %APPDATA%\\Claude\\, Linux: ~/.config/Claude/; Settings → Developer → Edit Config opens it), then restart Claude Desktop.',
  'claude-code':
    'Merge "switchboard" into the "mcpServers" of .mcp.json at the root of a project (shared with everyone who opens it), or add it for yourself alone with: claude mcp add-json --scope user switchboard \'<the "switchboard" object>\'',
  cursor: 'Merge "switchboard" into the "mcpServers" of ~/.cursor/mcp.json (every project) or .cursor/mcp.json in one project.',
  vscode:
    'Merge "switchboard" into the "servers" of .vscode/mcp.json in a workspace, or of your user mcp.json (command "MCP: Open User Configuration").',
};

/**
 * Why `--client claude-desktop --http` has no entry: Claude Desktop's config file starts local
 * commands only. Remote servers are custom connectors, which sign in with OAuth (no static header)
 * and are reached from Anthropic's cloud, so a loopback URL cannot work there.
 */
export function claudeDesktopHttpRefusal(config: Config): string {
  const url = config.publicUrl ? `${config.publicUrl}/mcp` : 'https://<your public host>/mcp (SWITCHBOARD_PUBLIC_URL)';
  return (
    'Claude Desktop cannot take Streamable HTTP from its config file: claude_desktop_config.json starts local (stdio) servers only, ' +
    'with no URL or Authorization header. Leave out --http for the stdio entry (same tools, same database), or add Switchboard in ' +
    `Claude Desktop under Settings → Connectors → Add custom connector with the URL ${url}: a connector signs in with OAuth ` +
    "and is reached from Anthropic's cloud, so it needs a public HTTPS address."
  );
}

const WILDCARD_HOSTS = new Set(['0.0.0.0', '::', '[::]']);

/**
 * The Streamable HTTP endpoint a client on this machine reaches: `<SWITCHBOARD_PUBLIC_URL>/mcp`, else
 * HOST:PORT (a wildcard HOST is reached on 127.0.0.1, which `/mcp` always answers). Null when PORT
 * is 0: the port is chosen at start, so no URL can be printed ahead of it.
 */
export function mcpUrl(config: Config): string | null {
  if (config.publicUrl) return `${config.publicUrl}/mcp`;
  if (config.server.port === 0) return null;
  const host = WILDCARD_HOSTS.has(config.server.host) ? '127.0.0.1' : config.server.host;
  const literal = host.includes(':') && !host.startsWith('[') ? `[${host}]` : host;
  return `http://${literal}:${config.server.port}/mcp`;
}

/** The whole object to paste: one server, named `switchboard`, in the client's format. */
export function clientConfig(client: McpClient, server: ClientServer): Record<string, unknown> {
  const launch = server.transport === 'stdio' ? { command: server.command, args: server.args, env: server.env } : { url: server.url, headers: server.headers };
  if (client === 'vscode') return { servers: { [SERVER_NAME]: { type: server.transport, ...launch } } };
  if (server.transport === 'http' && client === 'claude-desktop') throw new Error('Claude Desktop has no Streamable HTTP entry');
  // Claude Code refuses a URL entry without `"type": "http"`; Cursor knows one by its `url`.
  const entry = server.transport === 'http' && client === 'claude-code' ? { type: 'http', ...launch } : launch;
  return { mcpServers: { [SERVER_NAME]: entry } };
}
