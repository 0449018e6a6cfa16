/**
 * Comparing two evaluation runs case by case. Both runs score the same cases, so the question is
 * about the per-case differences d_i = b_i − a_i, not about two independent samples: pairing
 * removes the case-to-case spread (easy vs hard cases), which usually dwarfs the difference
 * between runs. Two complementary tests on the differences:
 *
 * - a paired bootstrap percentile interval for mean(B − A): how large the difference is, with no
 *   normality assumption (scores are often bounded and lumpy, e.g. 0/1 or 1–5);
 * - an exact two-sided sign test on the cases that differ: whether B beats A on more cases than
 *   chance allows, immune to a few extreme cases and exact at any n.
 */
import { incompleteBeta } from '../ab-tests/stats.js';

export interface PairedComparison {
  /** Pairs used: both scores finite. */
  n: number;
  meanA: number | null;
  meanB: number | null;
  /** mean(B − A) */
  meanDifference: number | null;
  /**
   * (1 − alpha) percentile paired-bootstrap interval of mean(B − A), null below two pairs;
   * `resamples` is the number actually drawn (see resampleCount; 0 without an interval), `seed`
   * the PRNG seed used.
   */
  bootstrap: { interval: [number, number] | null; resamples: number; seed: number };
  /**
   * Exact two-sided binomial sign test on the non-tied pairs (wins: B > A); pValue null when every
   * pair is tied (there is nothing to test, and p = 1 would read as "tested, no difference").
   */
  signTest: { wins: number; losses: number; ties: number; pValue: number | null };
  /**
   * B (A) when the bootstrap interval lies entirely above (below) 0 AND the sign test rejects at
   * alpha with more wins (losses); otherwise null. Why both: see winnerOf.
   */
  winner: 'A' | 'B' | null;
}

export interface PairedOptions {
  /** Bootstrap resamples requested; default 10 000 (capped for large n, see resampleCount). */
  resamples?: number;
  /** Seed of the bootstrap's PRNG; default 1, so the same runs always give the same interval. */
  seed?: number;
  /** Level of both tests; default 0.05 (a 95 % interval). */
  alpha?: number;
}

const DEFAULT_RESAMPLES = 10_000;
const DEFAULT_SEED = 1;
const DEFAULT_ALPHA = 0.05;

/**
 * The bootstrap's cost is resamples × n draws, a few nanoseconds each. Past WORK_BUDGET draws
 * (some 50 ms) fewer resamples are drawn, but never fewer than MIN_RESAMPLES: with 1 000 the
 * 2.5 % endpoint is the 25th order statistic, whose Monte Carlo error is under a tenth of the
 * standard error of the mean difference, while at such n that standard error is already small.
 * So the default costs at most max(2·10⁷, 1 000 · n) draws: 10⁸, a quarter to half a second,
 * at 100 000 pairs; a caller in a hurry passes fewer resamples.
 */
const WORK_BUDGET = 20_000_000;
const MIN_RESAMPLES = 1_000;

/** The resamples actually drawn for n pairs. */
export function resampleCount(requested: number, n: number): number {
  return Math.min(requested, Math.max(MIN_RESAMPLES, Math.floor(WORK_BUDGET / Math.max(n, 1))));
}

/**
 * Exact two-sided sign-test p-value for `wins` against `losses` (ties dropped): twice the smaller
 * binomial tail under p = ½, capped at 1, which is what R's binom.test gives for p = ½ (the
 * distribution is symmetric). The tail P(X ≤ k) for X ~ Bin(n, ½) is the regularized incomplete
 * beta I_½(n − k, k + 1), whose prefactor is computed in log space, so it stays accurate (about
 * 1e-10 relative) for n in the hundreds of thousands, where a direct sum of 2^−n-sized terms
 * underflows. Null when there are no non-tied pairs.
 */
export function signTestPValue(wins: number, losses: number): number | null {
  const n = wins + losses;
  if (n === 0) return null;
  const k = Math.min(wins, losses);
  if (2 * k >= n) return 1;
  return Math.min(1, 2 * incompleteBeta(0.5, n - k, k + 1));
}

/**
 * Percentile interval of the bootstrap distribution of the mean of `d`. The endpoints are the
 * order statistics at (B + 1)·α/2 from each end (Davison & Hinkley's convention), which is
 * symmetric in the two tails.
 *
 * The indices come from mulberry32 (the generator of test/helpers/prng.ts): tiny and seedable
 * (Math.random is not), so the same seed gives the same interval on every machine. Its step is
 * written inline because this loop is the whole cost, and a closure call per draw doubles it.
 */
function bootstrapInterval(d: Float64Array, resamples: number, seed: number, alpha: number): [number, number] {
  const n = d.length;
  let state = seed >>> 0;
  const means = new Float64Array(resamples);
  for (let r = 0; r < resamples; r++) {
    let sum = 0;
    for (let i = 0; i < n; i++) {
      state = (state + 0x6d2b79f5) >>> 0;
      let t = state;
      t = Math.imul(t ^ (t >>> 15), t | 1);
      t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
      const u = ((t ^ (t >>> 14)) >>> 0) / 4294967296;
      sum += d[Math.floor(u * n)]!;
    }
    means[r] = sum / n;
  }
  means.sort();
  const k = Math.max(0, Math.floor(((resamples + 1) * alpha) / 2) - 1);
  return [means[k]!, means[resamples - 1 - k]!];
}

/**
 * The winner rule: B (or A) only when both tests agree, i.e. the bootstrap interval lies entirely
 * above (below) 0 AND the sign test rejects at alpha with more wins (losses). Requiring both is an
 * intersection–union test, so its false-positive rate is no higher than either test's; it backs
 * the percentile bootstrap, known to under-cover with few cases, by an exact test; and when the
 * mean and the majority of cases disagree (a few large gains, many small losses) it names no
 * winner, because "B is better" would be misleading either way.
 */
function winnerOf(interval: [number, number] | null, sign: PairedComparison['signTest'], alpha: number): 'A' | 'B' | null {
  if (interval === null || sign.pValue === null || sign.pValue >= alpha) return null;
  if (interval[0] > 0 && sign.wins > sign.losses) return 'B';
  if (interval[1] < 0 && sign.losses > sign.wins) return 'A';
  return null;
}

/**
 * Compares run B against run A on the same cases (a[i] and b[i] score case i). Pairs where either
 * score is not finite (a case that failed or was not scored) are dropped. Throws when the lengths
 * differ, since the pairing would then be meaningless.
 */
export function comparePaired(a: readonly number[], b: readonly number[], options: PairedOptions = {}): PairedComparison {
  if (a.length !== b.length) throw new Error(`comparePaired needs one score per case in each run: got ${a.length} scores for A and ${b.length} for B`);
  const requested = options.resamples ?? DEFAULT_RESAMPLES;
  const seed = options.seed ?? DEFAULT_SEED;
  const alpha = options.alpha ?? DEFAULT_ALPHA;
  if (!(Number.isInteger(requested) && requested >= 1)) throw new RangeError(`resamples must be a positive integer, got ${requested}`);
  if (!Number.isInteger(seed)) throw new RangeError(`seed must be an integer, got ${seed}`);
  if (!(alpha > 0 && alpha < 1)) throw new RangeError(`alpha must lie strictly between 0 and 1, got ${alpha}`);

  const diffs: number[] = [];
  let sumA = 0;
  let sumB = 0;
  let wins = 0;
  let losses = 0;
  let ties = 0;
  for (let i = 0; i < a.length; i++) {
    const x = a[i]!;
    const y = b[i]!;
    if (!Number.isFinite(x) || !Number.isFinite(y)) continue;
    sumA += x;
    sumB += y;
    diffs.push(y - x);
    if (y > x) wins++;
    else if (y < x) losses++;
    else ties++;
  }
  const n = diffs.length;
  const resamples = resampleCount(requested, n);
  const interval = n >= 2 ? bootstrapInterval(Float64Array.from(diffs), resamples, seed, alpha) : null;
  const signTest = { wins, losses, ties, pValue: signTestPValue(wins, losses) };
  return {
    n,
    meanA: n === 0 ? null : sumA / n,
    meanB: n === 0 ? null : sumB / n,
    // The mean of the differences, not meanB − meanA: the same number up to rounding, but this is
    // the quantity the bootstrap resamples.
    meanDifference: n === 0 ? null : diffs.reduce((s, d) => s + d, 0) / n,
    bootstrap: { interval, resamples: interval === null ? 0 : resamples, seed },
    signTest,
    winner: winnerOf(interval, signTest, alpha),
  };
}
