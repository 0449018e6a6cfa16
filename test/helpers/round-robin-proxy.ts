// A load balancer as plain as they come, for the many-instances tests (issue 26, API.md §13): each
// request goes to the next upstream in turn, whatever its headers, cookies or session ids (nothing
// sticky), with its Host header kept (as `proxy_set_header Host $host` does), and the answer
// streamed back as it comes (event streams included). An upstream that cannot be reached answers
// 502, as a balancer without health checks does; the client retries and reaches the next one.
// `headers` are set on every request it forwards: with one upstream, a client that cannot send
// credentials (the MCP conformance suite) reaches an endpoint that needs them.
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface RoundRobinProxy {
  url: string;
  /** Where requests go, in turn; may be filled after the proxy listens (instances told its URL as their public one). */
  upstreams: string[];
  /** Requests sent to each upstream, by its URL. */
  counts: Map<string, number>;
  /** Which upstream each request went to, in order: `${method} ${path} → upstream`. */
  log: string[];
  close(): Promise<void>;
}

export async function roundRobinProxy(upstreams: string[] = [], options: { headers?: Record<string, string> } = {}): Promise<RoundRobinProxy> {
  let next = 0;
  const counts = new Map<string, number>();
  const log: string[] = [];
  const server = http.createServer((req, res) => {
    if (upstreams.length === 0) return void res.writeHead(503).end('no upstream yet');
    const upstream = upstreams[next++ % upstreams.length]!;
    counts.set(upstream, (counts.get(upstream) ?? 0) + 1);
    log.push(`${req.method} ${req.url} → ${upstream}`);
    const target = new URL(upstream);
    const forward = http.request(
      { host: target.hostname, port: target.port, method: req.method, path: req.url, headers: { ...req.headers, ...options.headers } },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
        // The client went away (an event stream closed): so does the upstream request.
        res.once('close', () => answer.destroy());
      },
    );
    forward.once('error', () => {
      if (!res.headersSent) res.writeHead(502, { 'content-type': 'text/plain' }).end(`upstream ${upstream} unreachable`);
      else res.destroy();
    });
    req.pipe(forward);
  });
  server.keepAliveTimeout = 1_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    upstreams,
    counts,
    log,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
