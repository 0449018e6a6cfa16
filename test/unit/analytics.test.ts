// Analytics windows, buckets, nearest-rank percentiles and the CSV/JSON/NDJSON encoders.
import { parse } from 'csv-parse/sync';
import { describe, expect, it } from 'vitest';
import { nearestRankPercentiles, windowOf } from '../../src/business/analytics/analytics.buckets.js';
import { csvCell, encodeRows } from '../../src/business/analytics/analytics.export.js';
import { timeframeSchema } from '../../src/business/analytics/analytics.schemas.js';

const NOW = new Date('2026-03-10T15:30:00.000Z');
const tf = (label: string) => timeframeSchema.parse(label);

describe('timeframe', () => {
  it('parses hours, days and weeks up to 366 days', () => {
    expect(tf('24h')).toEqual({ label: '24h', ms: 86_400_000 });
    expect(tf('2w').ms).toBe(14 * 86_400_000);
    expect(tf('366d').ms).toBe(366 * 86_400_000);
    expect(tf('52w').ms).toBe(364 * 86_400_000);
    expect(timeframeSchema.parse(undefined)).toEqual({ label: '7d', ms: 7 * 86_400_000 });
    for (const bad of ['7x', '0d', '367d', '53w', '8785h', '-1d', '1.5d', 'd', '07d', '']) expect(timeframeSchema.safeParse(bad).success, bad).toBe(false);
  });
});

describe('windowOf', () => {
  it('has hourly buckets up to 48h, aligned to the hour, the partial ends clipped to the window', () => {
    const w = windowOf(NOW, tf('47h'));
    expect(w.unit).toBe('hour');
    expect(w.from).toBe('2026-03-08T16:30:00.000Z');
    expect(w.to).toBe(NOW.toISOString());
    expect(w.buckets).toHaveLength(48);
    expect(w.buckets[0]).toEqual({ start: '2026-03-08T16:00:00.000Z', lo: '2026-03-08T16:30:00.000Z', hi: '2026-03-08T17:00:00.000Z' });
    expect(w.buckets[1]).toEqual({ start: '2026-03-08T17:00:00.000Z', lo: '2026-03-08T17:00:00.000Z', hi: '2026-03-08T18:00:00.000Z' });
    expect(w.buckets.at(-1)).toEqual({ start: '2026-03-10T15:00:00.000Z', lo: '2026-03-10T15:00:00.000Z', hi: '2026-03-10T15:30:00.001Z' });
    expect(windowOf(NOW, tf('48h')).unit).toBe('hour');
    expect(windowOf(NOW, tf('2d')).buckets).toHaveLength(49);
  });

  it('has daily buckets beyond 48h, one per UTC day touched', () => {
    const w = windowOf(NOW, tf('49h'));
    expect(w.unit).toBe('day');
    expect(w.buckets.map((b) => b.start)).toEqual(['2026-03-08T00:00:00.000Z', '2026-03-09T00:00:00.000Z', '2026-03-10T00:00:00.000Z']);
    expect(w.buckets[0]!.lo).toBe('2026-03-08T14:30:00.000Z');
    const d3 = windowOf(NOW, tf('3d'));
    expect(d3.buckets).toHaveLength(4);
    expect(windowOf(new Date('2026-03-10T00:00:00.000Z'), tf('3d')).buckets.map((b) => b.start)).toEqual([
      '2026-03-07T00:00:00.000Z',
      '2026-03-08T00:00:00.000Z',
      '2026-03-09T00:00:00.000Z',
      '2026-03-10T00:00:00.000Z',
    ]);
    expect(windowOf(NOW, tf('366d')).buckets).toHaveLength(367);
  });
});

describe('nearestRankPercentiles', () => {
  const reference = (values: number[], q: number) => [...values].sort((a, b) => a - b)[Math.max(1, Math.ceil(q * values.length)) - 1];

  it('answers the value at rank ⌈q·n⌉, by counting or by sorting', () => {
    expect(nearestRankPercentiles([], [0.5])).toEqual([null]);
    expect(nearestRankPercentiles([7], [0.5, 0.99])).toEqual([7, 7]);
    expect(nearestRankPercentiles([15, 20, 35, 40, 50], [0.3, 0.4, 0.5, 1])).toEqual([20, 20, 35, 50]);
    let seed = 42;
    const rnd = () => (seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31;
    const ints = Array.from({ length: 5_001 }, () => Math.floor(rnd() * 3_000));
    const big = Array.from({ length: 999 }, () => Math.floor(rnd() * 2 ** 30));
    const fractions = Array.from({ length: 1_000 }, () => rnd() * 100);
    for (const values of [ints, big, fractions]) {
      const qs = [0.99, 0.5, 0.95, 0.01];
      expect(nearestRankPercentiles(values, qs)).toEqual(qs.map((q) => reference(values, q)));
    }
  });
});

describe('export encoders', () => {
  const collect = async (format: 'csv' | 'json' | 'ndjson', rows: Array<Record<string, unknown>>) => {
    let out = '';
    for await (const chunk of encodeRows(format, ['a', 'b'], (async function* () { yield rows.slice(0, 1); yield []; yield rows.slice(1); })())) out += chunk;
    return out;
  };
  const rows = [
    { a: '=HYPERLINK("x")', b: 1 },
    { a: 'say "hi"\nthen, go', b: null },
    { a: -3, b: '@sum' },
  ];

  it('neutralises formula-like text cells, quotes as RFC 4180 and round-trips through a CSV parser', async () => {
    expect(csvCell('+1')).toBe("'+1");
    expect(csvCell('\tx')).toBe("'\tx");
    expect(csvCell(-5)).toBe('-5');
    expect(csvCell(null)).toBe('');
    const text = await collect('csv', rows);
    expect(text.startsWith('a,b\r\n')).toBe(true);
    expect(parse(text, { columns: true })).toEqual([
      { a: `'=HYPERLINK("x")`, b: '1' },
      { a: 'say "hi"\nthen, go', b: '' },
      { a: '-3', b: "'@sum" },
    ]);
  });

  it('writes one JSON array, or one object a line', async () => {
    expect(JSON.parse(await collect('json', rows))).toEqual([
      { a: '=HYPERLINK("x")', b: 1 },
      { a: 'say "hi"\nthen, go', b: null },
      { a: -3, b: '@sum' },
    ]);
    expect(JSON.parse(await collect('json', []))).toEqual([]);
    const lines = (await collect('ndjson', rows)).split('\n');
    expect(lines.pop()).toBe('');
    expect(lines.map((l) => JSON.parse(l))).toEqual(JSON.parse(await collect('json', rows)));
  });
});
