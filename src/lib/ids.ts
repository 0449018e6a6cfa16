import crypto from 'node:crypto';

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

/**
 * Uniformly random base62 text (rejection sampling keeps it unbiased), after `head` when given.
 * Written into one buffer: a string grown a character at a time (or glued to its prefix) is a
 * tree of rope nodes, ~290 bytes of heap per id instead of ~40 for as long as it is kept (each
 * open chat stream keeps two; issue 18).
 */
export function randomBase62(length: number, head = ''): string {
  const out = Buffer.allocUnsafe(head.length + length);
  let n = out.write(head, 'latin1');
  while (n < out.length) {
    const byte = randomByte();
    if (byte < 248) out[n++] = BASE62.charCodeAt(byte % 62);
  }
  return out.toString('latin1');
}

/**
 * Random bytes drawn from a pool refilled 4 KiB at a time: one `randomFillSync` per ~100 ids
 * instead of one per id (a chat answer makes three; issue 18). Each byte is used once.
 */
const pool = Buffer.alloc(4096);
let poolAt = pool.length;
function randomByte(): number {
  if (poolAt === pool.length) {
    crypto.randomFillSync(pool);
    poolAt = 0;
  }
  return pool[poolAt++]!;
}

export type IdPrefix =
  | 'per' | 'src' | 'chk' | 'ses' | 'msg' | 'key' | 'exe' | 'mcs' | 'team' | 'abt' | 'chn' | 'wsp' | 'grt';

/** Makes opaque ids with a type prefix. Injectable so tests can use fixed ids. */
export type IdGenerator = (prefix: IdPrefix) => string;

export const randomIds: IdGenerator = (prefix) => randomBase62(20, `${prefix}_`);

/** Deterministic ids for tests: `per_0001`, `per_0002`... */
export function sequentialIds(): IdGenerator {
  const counters = new Map<string, number>();
  return (prefix) => {
    const n = (counters.get(prefix) ?? 0) + 1;
    counters.set(prefix, n);
    return `${prefix}_${String(n).padStart(4, '0')}`;
  };
}
