/** A webhook channel's outbound receiver on 127.0.0.1: records each signed delivery. */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Delivery {
  body: string;
  signature: string | undefined;
}

export interface WebhookReceiver {
  url: string;
  deliveries: Delivery[];
  /** How many deliveries were answered 429. */
  refused(): number;
  close(): Promise<void>;
}

/** Starts a receiver that answers 429 (Retry-After: 0) to the first `throttle` deliveries, then 204. */
export async function startReceiver(throttle = 0): Promise<WebhookReceiver> {
  const deliveries: Delivery[] = [];
  let refused = 0;
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (refused < throttle) {
        refused++;
        res.writeHead(429, { 'retry-after': '0' }).end();
        return;
      }
      deliveries.push({ body: Buffer.concat(chunks).toString('utf8'), signature: req.headers['x-switchboard-signature'] as string | undefined });
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`,
    deliveries,
    refused: () => refused,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}
