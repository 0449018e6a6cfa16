import { describe, expect, it } from 'vitest';
import { randomBase62, randomIds, sequentialIds } from '../../src/lib/ids.js';

describe('ids', () => {
  it('are the prefix and 20 base62 characters, all distinct', () => {
    const seen = new Set<string>();
    for (let i = 0; i < 20_000; i++) {
      const id = randomIds('msg');
      expect(id).toMatch(/^msg_[0-9A-Za-z]{20}$/);
      seen.add(id);
    }
    expect(seen.size).toBe(20_000);
  });

  it('draws every base62 character about equally often across pool refills (no bias, no repeated pool)', () => {
    const counts = new Map<string, number>();
    const text = Array.from({ length: 2_000 }, () => randomBase62(31)).join('');
    for (const ch of text) counts.set(ch, (counts.get(ch) ?? 0) + 1);
    expect(counts.size).toBe(62);
    const expected = text.length / 62;
    // Chi-square with 61 degrees of freedom: 120 is far beyond p = 0.0001 for a uniform draw.
    const chi = [...counts.values()].reduce((s, c) => s + (c - expected) ** 2 / expected, 0);
    expect(chi).toBeLessThan(120);
    // Consecutive ids never share their random part, even across a refill of the byte pool.
    const ids = Array.from({ length: 500 }, () => randomBase62(20));
    expect(new Set(ids).size).toBe(500);
  });

  it('sort by creation: 8 characters of milliseconds, then 12 random ones', async () => {
    const first = randomIds('ses');
    await new Promise((r) => setTimeout(r, 5));
    const later = Array.from({ length: 50 }, () => randomIds('ses'));
    for (const id of later) expect(id > first).toBe(true);
    // The time part decodes to now; the random part differs between ids of the same millisecond.
    const decode = (id: string) => [...id.slice(4, 12)].reduce((n, c) => n * 62 + '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz'.indexOf(c), 0);
    expect(Math.abs(decode(later[0]!) - Date.now())).toBeLessThan(5_000);
    expect(new Set(later.map((id) => id.slice(12))).size).toBe(50);
  });

  it('are sequential in tests', () => {
    const ids = sequentialIds();
    expect([ids('per'), ids('per'), ids('ses')]).toEqual(['per_0001', 'per_0002', 'ses_0001']);
  });
});
