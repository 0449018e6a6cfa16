import crypto from 'node:crypto';

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

/** Uniformly random base62 text (rejection sampling keeps it unbiased). */
export function randomBase62(length: number): string {
  let out = '';
  while (out.length < length) {
    for (const byte of crypto.randomBytes(length * 2)) {
      if (byte < 248) out += BASE62[byte % 62];
      if (out.length === length) break;
    }
  }
  return out;
}

export type IdPrefix =
  | 'per' | 'src' | 'chk' | 'ses' | 'msg' | 'key' | 'exe' | 'mcs' | 'team' | 'abt' | 'chn' | 'wsp' | 'grt';

/** Makes opaque ids with a type prefix. Injectable so tests can use fixed ids. */
export type IdGenerator = (prefix: IdPrefix) => string;

export const randomIds: IdGenerator = (prefix) => `${prefix}_${randomBase62(20)}`;

/** Deterministic ids for tests: `per_0001`, `per_0002`... */
export function sequentialIds(): IdGenerator {
  const counters = new Map<string, number>();
  return (prefix) => {
    const n = (counters.get(prefix) ?? 0) + 1;
    counters.set(prefix, n);
    return `${prefix}_${String(n).padStart(4, '0')}`;
  };
}
