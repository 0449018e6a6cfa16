/**
 * A TCP relay between a server under test and PostgreSQL that counts what crosses it (issue 26,
 * item 9: database round trips, bytes and connections per answer). It reads the protocol's framing
 * only: after the startup packet, every message is a type byte and a 32-bit length. A round trip is
 * a frontend Sync (`S`, the end of an extended-protocol query: Parse/Bind/Execute) or a simple
 * Query (`Q`); the backend answers each with ReadyForQuery (`Z`), and the time from the one to the
 * other is how long the query kept its connection busy (PostgreSQL's work plus this loopback hop).
 * SSL requests are refused (`N`), so the client goes on in plain text, as it does on loopback.
 */
import net from 'node:net';

export interface WireCounts {
  /** Frontend Sync or Query messages: one round trip each. */
  roundTrips: number;
  bytesToServer: number;
  bytesFromServer: number;
  /** Sum over round trips of the time to ReadyForQuery, in ms. */
  busyMs: number;
  /** Connections opened so far, and open now. */
  connectionsOpened: number;
  connectionsOpen: number;
  /** The most connections open at once. */
  connectionsPeak: number;
}

export interface WireCounter {
  /** A URL like `target` that goes through the counter. */
  url: string;
  counts(): WireCounts;
  close(): Promise<void>;
}

/** Splits a stream into protocol messages; `startup` once for the first, untyped packet. */
function framer(startupFirst: boolean, onMessage: (type: string) => void) {
  let buffer: Buffer = Buffer.alloc(0);
  let awaitingStartup = startupFirst;
  return (chunk: Buffer) => {
    buffer = buffer.length === 0 ? chunk : Buffer.concat([buffer, chunk]);
    for (;;) {
      if (awaitingStartup) {
        if (buffer.length < 8) return;
        const length = buffer.readInt32BE(0);
        if (buffer.length < length) return;
        const code = buffer.readInt32BE(4);
        buffer = buffer.subarray(length);
        // SSLRequest / GSSENCRequest come before the real startup packet.
        if (code === 80877103 || code === 80877104) onMessage('ssl');
        else awaitingStartup = false;
        continue;
      }
      if (buffer.length < 5) return;
      const length = buffer.readInt32BE(1);
      if (buffer.length < 1 + length) return;
      onMessage(String.fromCharCode(buffer[0]!));
      buffer = buffer.subarray(1 + length);
    }
  };
}

export async function startWireCounter(target: string): Promise<WireCounter> {
  const upstream = new URL(target);
  const totals: WireCounts = { roundTrips: 0, bytesToServer: 0, bytesFromServer: 0, busyMs: 0, connectionsOpened: 0, connectionsOpen: 0, connectionsPeak: 0 };
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    totals.connectionsOpened++;
    totals.connectionsOpen++;
    totals.connectionsPeak = Math.max(totals.connectionsPeak, totals.connectionsOpen);
    const pg = net.connect(Number(upstream.port || 5432), upstream.hostname);
    sockets.add(client);
    sockets.add(pg);
    const sent: number[] = [];
    let answeredHere = false;
    const fromClient = framer(true, (type) => {
      if (type === 'ssl') {
        answeredHere = true;
        client.write('N');
        return;
      }
      if (type === 'S' || type === 'Q') {
        totals.roundTrips++;
        sent.push(performance.now());
      }
    });
    const fromServer = framer(false, (type) => {
      if (type !== 'Z') return;
      const at = sent.shift();
      if (at !== undefined) totals.busyMs += performance.now() - at;
    });
    client.on('data', (chunk: Buffer) => {
      totals.bytesToServer += chunk.length;
      answeredHere = false;
      fromClient(chunk);
      // An SSLRequest (a packet of its own: the client waits for the answer) is answered here, not passed on.
      if (!answeredHere) pg.write(chunk);
    });
    pg.on('data', (chunk: Buffer) => {
      totals.bytesFromServer += chunk.length;
      fromServer(chunk);
      client.write(chunk);
    });
    const end = () => {
      if (!sockets.has(client)) return;
      sockets.delete(client);
      sockets.delete(pg);
      totals.connectionsOpen--;
      client.destroy();
      pg.destroy();
    };
    client.on('close', end).on('error', end);
    pg.on('close', end).on('error', end);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = new URL(target);
  url.hostname = '127.0.0.1';
  url.port = String((server.address() as net.AddressInfo).port);
  return {
    url: url.toString(),
    counts: () => ({ ...totals }),
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}
