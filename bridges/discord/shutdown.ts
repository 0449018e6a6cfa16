/**
 * Destroying a discord.js client for good. `client.destroy()` alone is not enough while the gateway
 * is reconnecting: @discordjs/ws reconnects a dropped shard 500 ms after the drop even when its
 * manager was destroyed in that gap (the shard is idle, so destroy() skips it), and then keeps
 * retrying forever during an outage. So, before destroying, each shard's reconnect entry point is
 * disabled and its socket gets an error listener (a socket still connecting fails after destroy()
 * removed discord.js's own). Reaches into @discordjs/ws internals (`_ws.strategy.shards`,
 * `internalConnect`, `connection`); if they change, this degrades to a plain `client.destroy()`.
 *
 * `client.destroy()` can also never settle: destroying a shard whose new connection is open while it
 * waits for HELLO aborts that wait, whose handler destroys the shard a second time, and the second
 * destroy clears the close listener the first one awaits (seen about once in 15 runs of the outage
 * test on a loaded machine). So the wait is bounded, and a connection still there is terminated.
 */
import type { Client } from 'discord.js';

interface ShardInternals {
  internalConnect?: () => Promise<void>;
  connection?: { on?: (event: string, listener: () => void) => unknown; terminate?: () => void } | null;
}

/** How long `client.destroy()` may take before its shards' connections are terminated instead. */
const DESTROY_WAIT_MS = 2_000;

export async function destroyClient(client: Client): Promise<void> {
  const manager = (client.ws as unknown as { _ws?: { strategy?: { shards?: Map<number, ShardInternals> } } })._ws;
  const shards = [...(manager?.strategy?.shards?.values() ?? [])];
  for (const shard of shards) {
    if (typeof shard.internalConnect === 'function') shard.internalConnect = async () => undefined;
    shard.connection?.on?.('error', () => undefined);
  }
  let timer: NodeJS.Timeout | undefined;
  const settled = await Promise.race([
    client.destroy().then(() => true),
    new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), DESTROY_WAIT_MS))),
  ]).finally(() => clearTimeout(timer));
  if (!settled) for (const shard of shards) shard.connection?.terminate?.();
}
