/**
 * Readable reasons for the channel's `statusDetail` (API.md §9) when Discord refuses the bridge.
 * Never includes the token.
 */
import { DiscordAPIError, DiscordjsErrorCodes } from 'discord.js';

/** Gateway close codes after which discord.js does not reconnect, in words. */
export function describeUnrecoverableClose(code: number): string {
  switch (code) {
    case 4004:
      return 'Discord rejected the bot token (gateway close 4004: authentication failed).';
    case 4013:
      return 'Discord refused the requested gateway intents (gateway close 4013: invalid intents).';
    case 4014:
      return 'Discord refused the requested gateway intents (gateway close 4014: disallowed intents); enable the Message Content intent for the bot in the Developer Portal.';
    case 4010:
    case 4011:
      return `Discord refused the gateway connection (close ${code}: sharding).`;
    case 4012:
      return 'Discord refused the gateway API version (close 4012).';
    default:
      return `Discord closed the gateway connection (close ${code}).`;
  }
}

/** Why `client.login()` failed; `closeCodes` are the unrecoverable gateway closes seen meanwhile. */
export function describeLoginFailure(err: unknown, closeCodes: readonly number[]): string {
  const code = closeCodes.at(-1);
  if (code !== undefined) return describeUnrecoverableClose(code);
  // discord.js turns a 401 on `GET /gateway/bot` into TokenInvalid.
  if (err instanceof Error && 'code' in err && err.code === DiscordjsErrorCodes.TokenInvalid) return 'Discord rejected the bot token (401 Unauthorized).';
  if (err instanceof DiscordAPIError) {
    if (err.status === 401) return 'Discord rejected the bot token (401 Unauthorized).';
    return `Discord answered ${err.status} to ${err.method.toUpperCase()} ${new URL(err.url).pathname}: ${err.message}.`;
  }
  const message = err instanceof Error ? err.message : String(err);
  return `Could not connect to Discord: ${message}.`;
}
