/**
 * The statistics A/B results rest on (API.md §8): sample moments, Student's t distribution through
 * the regularized incomplete beta function (continued fraction, Numerical Recipes §6.4), and
 * Welch's unequal-variance t-test with the Welch–Satterthwaite degrees of freedom. No normal
 * approximation: with a handful of ratings per variant the difference matters.
 */

export interface Moments {
  n: number;
  mean: number;
  /** Sample variance (n − 1 in the denominator); NaN below two values. */
  variance: number;
}

export function moments(values: readonly number[]): Moments {
  const n = values.length;
  if (n === 0) return { n, mean: Number.NaN, variance: Number.NaN };
  const mean = values.reduce((a, b) => a + b, 0) / n;
  if (n < 2) return { n, mean, variance: Number.NaN };
  const ss = values.reduce((a, v) => a + (v - mean) ** 2, 0);
  return { n, mean, variance: ss / (n - 1) };
}

/** ln Γ(x) for x > 0 (Lanczos, g = 7, n = 9: about 15 significant digits). */
function logGamma(x: number): number {
  const c = [
    0.99999999999980993, 676.5203681218851, -1259.1392167224028, 771.32342877765313, -176.61502916214059, 12.507343278686905,
    -0.13857109526572012, 9.9843695780195716e-6, 1.5056327351493116e-7,
  ];
  if (x < 0.5) return Math.log(Math.PI / Math.sin(Math.PI * x)) - logGamma(1 - x);
  const z = x - 1;
  let sum = c[0]!;
  for (let i = 1; i < 9; i++) sum += c[i]! / (z + i);
  const t = z + 7.5;
  return 0.5 * Math.log(2 * Math.PI) + (z + 0.5) * Math.log(t) - t + Math.log(sum);
}

/** Continued fraction of the incomplete beta function (modified Lentz). */
function betaContinuedFraction(a: number, b: number, x: number): number {
  const TINY = 1e-300;
  const qab = a + b;
  const qap = a + 1;
  const qam = a - 1;
  let c = 1;
  let d = 1 - (qab * x) / qap;
  if (Math.abs(d) < TINY) d = TINY;
  d = 1 / d;
  let h = d;
  for (let m = 1; m <= 300; m++) {
    const m2 = 2 * m;
    let aa = (m * (b - m) * x) / ((qam + m2) * (a + m2));
    d = 1 + aa * d;
    if (Math.abs(d) < TINY) d = TINY;
    c = 1 + aa / c;
    if (Math.abs(c) < TINY) c = TINY;
    d = 1 / d;
    h *= d * c;
    aa = (-(a + m) * (qab + m) * x) / ((a + m2) * (qap + m2));
    d = 1 + aa * d;
    if (Math.abs(d) < TINY) d = TINY;
    c = 1 + aa / c;
    if (Math.abs(c) < TINY) c = TINY;
    d = 1 / d;
    const delta = d * c;
    h *= delta;
    if (Math.abs(delta - 1) < 1e-15) break;
  }
  return h;
}

/** The regularized incomplete beta function I_x(a, b). */
export function incompleteBeta(x: number, a: number, b: number): number {
  if (x <= 0) return 0;
  if (x >= 1) return 1;
  const front = Math.exp(logGamma(a + b) - logGamma(a) - logGamma(b) + a * Math.log(x) + b * Math.log(1 - x));
  // The fraction converges fast only on one side of the mean; use the symmetry on the other.
  return x < (a + 1) / (a + b + 2) ? (front * betaContinuedFraction(a, b, x)) / a : 1 - (front * betaContinuedFraction(b, a, 1 - x)) / b;
}

/** P(|T| ≥ |t|) for Student's t with `df` degrees of freedom (df may be fractional). */
export function twoSidedP(t: number, df: number): number {
  if (!Number.isFinite(t)) return 0;
  return incompleteBeta(df / (df + t * t), df / 2, 0.5);
}

/** The t value with P(T ≤ t) = p (0.5 < p < 1), by bisection on the distribution function. */
export function tQuantile(p: number, df: number): number {
  const tail = 2 * (1 - p);
  let lo = 0;
  let hi = 1;
  while (twoSidedP(hi, df) > tail) hi *= 2;
  for (let i = 0; i < 200 && hi - lo > 1e-12; i++) {
    const mid = (lo + hi) / 2;
    if (twoSidedP(mid, df) > tail) lo = mid;
    else hi = mid;
  }
  return (lo + hi) / 2;
}

/** The 95 % confidence interval of a mean (t distribution, n − 1 df); nulls below two values. */
export function confidenceInterval95(m: Moments): [number | null, number | null] {
  if (m.n < 2) return [null, null];
  const half = tQuantile(0.975, m.n - 1) * Math.sqrt(m.variance / m.n);
  return [m.mean - half, m.mean + half];
}

export interface WelchResult {
  t: number;
  df: number;
  pValue: number;
}

/**
 * Welch's two-sided t-test; null below two values on either side. Two constant samples: equal
 * means give p = 1, different means p = 0 (the difference is certain, the t statistic infinite).
 */
export function welchTest(a: Moments, b: Moments): WelchResult | null {
  if (a.n < 2 || b.n < 2) return null;
  const va = a.variance / a.n;
  const vb = b.variance / b.n;
  const se2 = va + vb;
  if (se2 === 0) return { t: a.mean === b.mean ? 0 : Math.sign(a.mean - b.mean) * Infinity, df: a.n + b.n - 2, pValue: a.mean === b.mean ? 1 : 0 };
  const t = (a.mean - b.mean) / Math.sqrt(se2);
  const df = (se2 * se2) / ((va * va) / (a.n - 1) + (vb * vb) / (b.n - 1));
  return { t, df, pValue: twoSidedP(t, df) };
}

/** Nearest-rank percentile of unsorted values; null when there are none. */
export function percentile(values: readonly number[], q: number): number | null {
  if (values.length === 0) return null;
  const sorted = [...values].sort((x, y) => x - y);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))]!;
}
