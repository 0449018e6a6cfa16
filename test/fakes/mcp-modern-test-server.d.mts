import type { McpServer } from '@modelcontextprotocol/server';

export declare function createModernTestServer(transport: 'stdio' | 'http', rc: { era: 'legacy' | 'modern' }, state: { cancelled: number }): McpServer;
export interface ModernHttpTestServer {
  /** `http://127.0.0.1:<port>/mcp` */
  url: string;
  state: { cancelled: number };
  /** Each request: its HTTP method, its JSON-RPC method (null for a GET or a batch), its headers. */
  requests: Array<{ method: string; rpc: string | null; headers: Record<string, string> }>;
  close(): Promise<void>;
}
export declare function startModernHttpTestServer(): Promise<ModernHttpTestServer>;
