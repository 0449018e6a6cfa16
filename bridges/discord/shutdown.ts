/**
 * Destroying a discord.js client for good. `client.destroy()` alone is not enough while the gateway
 * is reconnecting: @discordjs/ws reconnects a dropped shard 500 ms after the drop even when its
 * manager was destroyed in that gap (the shard is idle, so destroy() skips it), and then keeps
 * retrying forever during an outage. So, before destroying, each shard's reconnect entry point is
 * disabled and its socket gets an error listener (a socket still connecting fails after destroy()
 * removed discord.js's own). Reaches into @discordjs/ws internals (`_ws.strategy.shards`,
 * `internalConnect`); if they change, this degrades to a plain `client.destroy()`.
 */
import type { Client } from 'discord.js';

interface ShardInternals {
  internalConnect?: () => Promise<void>;
  connection?: { on?: (event: string, listener: () => void) => unknown } | null;
}

export async function destroyClient(client: Client): Promise<void> {
  const manager = (client.ws as unknown as { _ws?: { strategy?: { shards?: Map<number, ShardInternals> } } })._ws;
  const shards = [...(manager?.strategy?.shards?.values() ?? [])];
  for (const shard of shards) {
    if (typeof shard.internalConnect === 'function') shard.internalConnect = async () => undefined;
    shard.connection?.on?.('error', () => undefined);
  }
  await client.destroy();
}
