import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';

export declare function sha256(text: string): string;
export declare function createTestMcpServer(transport: 'stdio' | 'http', state?: { cancelled: number; whoami: number }): McpServer;
export interface HttpTestServer {
  port: number;
  /** `http://127.0.0.1:<port>/mcp` */
  url: string;
  state: { cancelled: number; whoami: number };
  requests: Array<{ method: string | undefined; url: string | undefined; headers: Record<string, string | string[] | undefined> }>;
  dropSessions(): void;
  close(): Promise<void>;
}
export declare function startHttpTestServer(): Promise<HttpTestServer>;
