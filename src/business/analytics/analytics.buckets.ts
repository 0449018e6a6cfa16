/**
 * The time window of an analytics request and its buckets, and nearest-rank percentiles.
 *
 * Window: `from` = now − timeframe, `to` = now, both inclusive. Buckets are UTC hours (timeframes up
 * to 48 h) or UTC days (longer), aligned to the hour or day: the first starts at `from` rounded down,
 * the last is the one holding `to`, and every bucket in between is present, empty or not. A bucket
 * counts only what falls inside the window, so the first and last are partial and the series adds
 * up to the total.
 */
import type { Timeframe } from './analytics.schemas.js';

const HOUR_MS = 3_600_000;
const DAY_MS = 86_400_000;
/** Timeframes up to this long have hourly buckets. */
export const HOURLY_UP_TO_MS = 48 * HOUR_MS;

/** One bucket: its aligned start, and the half-open range [lo, hi) of ISO times it counts. */
export interface Bucket {
  start: string;
  lo: string;
  hi: string;
}

export interface TimeWindow {
  timeframe: string;
  from: string;
  to: string;
  /** The whole window as a half-open range of ISO times: [lo, hi), hi = to + 1 ms. */
  lo: string;
  hi: string;
  unit: 'hour' | 'day';
  buckets: Bucket[];
}

export function windowOf(now: Date, timeframe: Timeframe): TimeWindow {
  const to = now.getTime();
  const from = to - timeframe.ms;
  const end = to + 1;
  const unit = timeframe.ms <= HOURLY_UP_TO_MS ? 'hour' : 'day';
  const size = unit === 'hour' ? HOUR_MS : DAY_MS;
  const iso = (ms: number) => new Date(ms).toISOString();
  const buckets: Bucket[] = [];
  for (let start = Math.floor(from / size) * size; start <= to; start += size) {
    buckets.push({ start: iso(start), lo: iso(Math.max(start, from)), hi: iso(Math.min(start + size, end)) });
  }
  return { timeframe: timeframe.label, from: iso(from), to: iso(to), lo: iso(from), hi: iso(end), unit, buckets };
}

/** Counting sort needs one slot per value up to the largest; beyond this a typed-array sort is used. */
const COUNTING_LIMIT = 1 << 22;

/**
 * Nearest-rank percentiles (the value at rank ⌈q·n⌉ of the ascending values) for each `q` in (0, 1],
 * null when there are no values. Latencies are whole milliseconds, so a counting pass answers in
 * O(n + max) without sorting; anything else is sorted as a Float64Array.
 */
export function nearestRankPercentiles(values: ArrayLike<number>, qs: readonly number[]): Array<number | null> {
  const n = values.length;
  if (n === 0) return qs.map(() => null);
  const ranks = qs.map((q) => Math.min(n, Math.max(1, Math.ceil(q * n))));
  let max = 0;
  let integral = true;
  for (let i = 0; i < n; i++) {
    const v = values[i]!;
    if (v > max) max = v;
    if (integral && !(Number.isInteger(v) && v >= 0)) integral = false;
  }
  if (integral && max < COUNTING_LIMIT) {
    const counts = new Uint32Array(max + 1);
    for (let i = 0; i < n; i++) counts[values[i]!]!++;
    const order = ranks.map((rank, i) => ({ rank, i })).sort((a, b) => a.rank - b.rank);
    const out: number[] = new Array<number>(qs.length);
    let seen = 0;
    let value = 0;
    for (const { rank, i } of order) {
      while (seen + counts[value]! < rank) seen += counts[value++]!;
      out[i] = value;
    }
    return out;
  }
  const sorted = Float64Array.from(values).sort();
  return ranks.map((rank) => sorted[rank - 1]!);
}
