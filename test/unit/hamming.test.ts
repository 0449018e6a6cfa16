import { describe, expect, it } from 'vitest';
import { CodeArray } from '../../src/core/knowledge/hamming.js';
import { prng } from '../helpers/prng.js';

const randomCode = (random: () => number, bytes: number) => Uint8Array.from({ length: bytes }, () => Math.floor(random() * 256));

/** The reference: bit by bit. */
function hamming(a: Uint8Array, b: Uint8Array): number {
  let d = 0;
  for (let i = 0; i < a.length; i++) for (let x = a[i]! ^ b[i]!; x; x >>= 1) d += x & 1;
  return d;
}

describe('CodeArray (WebAssembly Hamming scan)', () => {
  it('matches a bit-by-bit count for every code, across memory growth', () => {
    for (const bits of [64, 1024, 2048, 4096]) {
      const random = prng(bits);
      const codes = new CodeArray(bits);
      const kept: Uint8Array[] = [];
      // 300 codes of 4,096 bits need several 64 KiB pages: the memory grows while filling.
      for (let i = 0; i < 300; i++) {
        const code = randomCode(random, bits / 8);
        codes.push(code);
        kept.push(code);
      }
      expect(codes.length).toBe(300);
      for (let q = 0; q < 5; q++) {
        const query = randomCode(random, bits / 8);
        expect(Array.from(codes.distances(query))).toEqual(kept.map((c) => hamming(c, query)));
      }
      // The extremes: identical and complementary codes.
      expect(codes.distances(kept[7]!)[7]).toBe(0);
      expect(codes.distances(kept[7]!.map((x) => 255 - x))[7]).toBe(bits);
    }
  });

  it('scans an empty array and refuses codes of the wrong length', () => {
    const codes = new CodeArray(128);
    expect(codes.distances(new Uint8Array(16))).toHaveLength(0);
    expect(() => codes.push(new Uint8Array(15))).toThrow(/16/);
    expect(() => codes.distances(new Uint8Array(8))).toThrow(/16/);
    expect(() => new CodeArray(100)).toThrow(/multiple of 64/);
  });
});
