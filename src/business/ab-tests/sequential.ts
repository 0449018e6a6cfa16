/**
 * Always-valid inference for A/B tests that are watched while they run.
 *
 * A fixed-horizon test (Welch's, stats.ts) holds its 5 % false-positive rate only when it is read
 * once, at a sample size fixed in advance. Live tests are read every day, and stopping at the first
 * p < 0.05 inflates the false-positive rate several-fold. The mixture sequential probability ratio
 * test (mSPRT; Johari, Koomen, Pekelis & Walsh, "Always valid inference", Operations Research 2022)
 * fixes that: its p-value and confidence sequence stay valid however often, and whenever, they are
 * read, including after every single observation.
 *
 * The test statistic. Let Δ̂ be the estimate of the quantity of interest (mean(B) − mean(A), or a
 * single mean) and V its variance estimate (s²_A/n_A + s²_B/n_B, or s²/n). Treating Δ̂ as
 * N(δ, V) (the central limit theorem, with plug-in variances, as Optimizely's deployment does and
 * as the "asymptotic confidence sequences" of Waudby-Smith et al. justify), and mixing the
 * alternative over δ ~ N(δ₀, τ²), the likelihood ratio against H₀: δ = δ₀ is
 *
 *   Λ(δ₀) = ∫ φ_V(Δ̂ − δ) dN(δ₀, τ²)(δ) / φ_V(Δ̂ − δ₀)
 *         = sqrt(V / (V + τ²)) · exp( τ² (Δ̂ − δ₀)² / (2 V (V + τ²)) ).
 *
 * Under H₀, Λ is a nonnegative martingale with mean 1 (exactly for normal data with known V,
 * approximately with plug-in variances as n grows), so Ville's inequality bounds the chance it
 * ever reaches 1/α by α: that is what makes every look free. Hence
 *   - the always-valid p-value is the running minimum of min(1, 1/Λ(0));
 *   - the confidence sequence is { δ₀ : Λ(δ₀) < 1/α }, solved for δ₀:
 *       τ² (Δ̂ − δ₀)² / (2V(V + τ²)) < ln(1/α) − ½ ln(V / (V + τ²))
 *       ⇔ |Δ̂ − δ₀| < sqrt( (2V(V + τ²) / τ²) · (ln(1/α) + ½ ln((V + τ²) / V)) ),
 *     and since every look's interval is valid simultaneously, their running intersection is too.
 *
 * Small-sample correction (on by default; `smallSampleCorrection: false` gives the formulas above
 * exactly). Δ̂/√V with a plug-in V is Student-t-like, not normal: with ten ratings per arm, beyond
 * the first look's threshold (about 3.9), its tail is ten times the normal tail the mixture
 * assumes, which is where the early looks' false positives come from (the house rule of stats.ts: no normal approximation at
 * a handful of ratings). So the statistic t = Δ̂/√V, with the Welch–Satterthwaite degrees of
 * freedom ν, is first mapped to the normal deviate with (nearly) the same tail probability,
 * Wallace's (1959) z² = (ν − ½) · ln(1 + t²/ν), and Λ is evaluated at Δ̂ = z√V. The map is
 * increasing and closed-form both ways, so the interval is Δ̂ ± t_c √V with t_c its inverse at
 * the uncorrected threshold c = halfWidth/√V: t_c = sqrt(ν · (exp(c²/(ν − ½)) − 1)). It
 * vanishes as ν grows (z → t); against SciPy's exact t → z map its error is below 0.06 in z for
 * ν ≥ 9 (t ≤ 20), and it errs on the conservative side for every ν checked (1.2 to 1,000). In
 * simulations of 1–5 ratings with no true difference (a look at every rating, 2,000 ratings,
 * minPerArm 10, 6,000 runs) it lowers the false-positive rate from 4.9 % to 3.9 %; over 10,000
 * ratings, from 5.9 % to 4.9 % (3,000 runs). The validity is asymptotic, and the mSPRT spends
 * its α over an unbounded horizon, so the margin below α is thin however long a test runs.
 *
 * All of this is O(1) per observation: means and variances are kept with Welford's updates.
 */

export interface SequentialOptions {
  /** Error rate of the whole sequence of looks; default 0.05. */
  alpha?: number;
  /**
   * Standard deviation of the normal mixing distribution on the mean difference, in rating points;
   * default 0.5. See DEFAULT_TAU for why.
   */
  tau?: number;
  /** No evidence is computed before each arm has this many observations; default 10, at least 2. */
  minPerArm?: number;
  /**
   * Floor on each arm's per-observation variance, in squared units of the data; default 1/12 (see
   * RATING_VARIANCE_FLOOR). Pass another value for data that are not 1–5 ratings.
   */
  varianceFloor?: number;
  /** Map the plug-in t statistic to its normal equivalent first (see the header); default true. */
  smallSampleCorrection?: boolean;
}

export interface SequentialState {
  method: 'msprt';
  alpha: number;
  tau: number;
  nA: number;
  nB: number;
  /** mean(B) − mean(A), null until minPerArm each */
  difference: number | null;
  /** always-valid p-value: running minimum of min(1, 1/Λ_n) over every look so far; null before minPerArm */
  pValue: number | null;
  /** (1−alpha) confidence sequence for mean(B) − mean(A): the running intersection of every interval so far; null before minPerArm */
  interval: [number, number] | null;
  /** pValue < alpha (equivalently interval excludes 0) */
  significant: boolean;
  /** 'A' | 'B' by the sign of the interval when significant, else null */
  winner: 'A' | 'B' | null;
}

export interface MeanSequenceState {
  n: number;
  /** The sample mean, null before the first observation. */
  mean: number | null;
  /** (1−alpha) confidence sequence for the mean: running intersection, null before minN */
  interval: [number, number] | null;
}

export interface MeanSequenceOptions {
  alpha?: number;
  /**
   * Mixing standard deviation on the mean, in the data's units; default 0.5 (see DEFAULT_TAU),
   * suited to mean ratings. For 0/1 rates near 0.1, τ = 0.1 moves the tightest point from a few
   * observations to about 75; the width depends on τ only logarithmically, so either is valid.
   */
  tau?: number;
  /** No interval before this many observations; default 10, at least 2. */
  minN?: number;
  /**
   * Floor on the per-observation variance; by default the rule-of-succession floor of
   * successionVarianceFloor, which suits 0/1 data.
   */
  varianceFloor?: number;
  /** As in SequentialOptions, with n − 1 degrees of freedom; default true. */
  smallSampleCorrection?: boolean;
}

const DEFAULT_ALPHA = 0.05;

/**
 * τ only shapes where the boundary is tightest: the half-width is sqrt(2V · (1 + 1/r) ·
 * (ln(1/α) + ½ ln(1 + r))) with r = τ²/V, smallest at r ≈ 2 ln(1/α) + ln(1 + r) ≈ 8 for α = 0.05,
 * and it grows only logarithmically away from there. Ratings vary by about 1.5 point² per
 * observation, so V ≈ 3/n with n ratings per arm, and τ = 0.5 (τ² = 0.25 ≈ 8 · 3/n) puts that
 * optimum near n = 100 per arm: where a half-point difference, the largest shift a change plausibly
 * makes on a 1–5 scale, gets decided. Smaller effects, decided later, pay some width (about 7 %
 * at 1,000 per arm), never validity, which holds for every τ.
 */
const DEFAULT_TAU = 0.5;

const DEFAULT_MIN_PER_ARM = 10;

/**
 * Ratings are whole points: a rating is an opinion rounded to a 1-point grid, and rounding alone
 * adds variance 1/12 (a uniform error on a unit interval; Sheppard's correction). An arm whose
 * sample variance is below that, typically ten 5s in a row, has not shown that its ratings are
 * that consistent, only that its sample is small; plugging in 0 would give a zero-width interval
 * and a certain "winner" from a handful of identical ratings.
 */
export const RATING_VARIANCE_FLOOR = 1 / 12;

/**
 * The default variance floor of the one-sample sequence after n observations: the variance
 * p(1 − p) of a 0/1 outcome whose rate is Laplace's rule-of-succession estimate p = 1/(n + 2),
 * which is what n identical 0/1 outcomes support. So a run of zeros (no errors yet) gives an
 * interval of half-width a few times 1/n (0.038 after 100), of the order of the exact "rule of
 * three" bound 3/n, instead of the point [0, 0];
 * the floor fades as n grows and is far below the variance of any sample that does vary.
 */
export function successionVarianceFloor(n: number): number {
  const p = 1 / (n + 2);
  return p * (1 - p);
}

/**
 * ln Λ: the log of the normal-mixture likelihood ratio for an estimate `estimate` − δ₀ (the
 * distance from the null value) with variance `variance`. Logs, because Λ overflows a double once
 * the evidence is overwhelming (the exponent grows with n).
 */
export function logMixtureRatio(estimate: number, variance: number, tau: number): number {
  const tau2 = tau * tau;
  return 0.5 * Math.log(variance / (variance + tau2)) + (tau2 * estimate * estimate) / (2 * variance * (variance + tau2));
}

/** Half-width of the look's interval { δ₀ : Λ(δ₀) < 1/α } (derivation in the header). */
export function mixtureHalfWidth(variance: number, tau: number, alpha: number): number {
  const tau2 = tau * tau;
  const vt = variance + tau2;
  return Math.sqrt(((2 * variance * vt) / tau2) * (Math.log(1 / alpha) + 0.5 * Math.log(vt / variance)));
}

/**
 * Wallace's (1959) normal equivalent of Student's t with `df` degrees of freedom: the z with
 * (nearly) the same tail probability, z = sqrt((ν − ½) · ln(1 + t²/ν)), sign kept. Never larger
 * than |t|, so it only ever weakens the evidence.
 */
export function normalEquivalent(t: number, df: number): number {
  return Math.sign(t) * Math.sqrt((df - 0.5) * Math.log1p((t * t) / df));
}

/** The inverse of normalEquivalent: the t whose normal equivalent is z. */
export function studentEquivalent(z: number, df: number): number {
  return Math.sign(z) * Math.sqrt(df * Math.expm1((z * z) / (df - 0.5)));
}

/**
 * One look's evidence against δ₀ = 0 and half-width, for an estimate with variance `variance` and
 * (when corrected) `df` degrees of freedom behind that variance.
 */
function lookAt(
  estimate: number,
  variance: number,
  df: number | null,
  tau: number,
  alpha: number,
): { pValue: number; halfWidth: number } {
  const se = Math.sqrt(variance);
  const normalHalf = mixtureHalfWidth(variance, tau, alpha);
  if (df === null) {
    return { pValue: Math.min(1, Math.exp(-logMixtureRatio(estimate, variance, tau))), halfWidth: normalHalf };
  }
  const equivalent = normalEquivalent(estimate / se, df) * se;
  return {
    pValue: Math.min(1, Math.exp(-logMixtureRatio(equivalent, variance, tau))),
    halfWidth: studentEquivalent(normalHalf / se, df) * se,
  };
}

/** Welford's running mean and sum of squared deviations: O(1) per value and no cancellation. */
interface Running {
  n: number;
  mean: number;
  m2: number;
}

function push(r: Running, value: number): void {
  r.n += 1;
  const d = value - r.mean;
  r.mean += d / r.n;
  r.m2 += d * (value - r.mean);
}

/** Sample variance (n − 1 denominator), raised to the floor. */
function flooredVariance(r: Running, floor: number): number {
  return Math.max(r.m2 / (r.n - 1), floor);
}

/**
 * Narrows the running interval by a look's interval. The two are disjoint only when the
 * normal approximation has failed (under the model that has probability ≤ α); the result then
 * is the point of the old interval nearest to the new one, so intervals stay nested and never
 * empty (an empty interval has no JSON form, and no reader knows what to do with it).
 */
function intersect(running: [number, number] | null, lo: number, hi: number): [number, number] {
  // Only a tau far too small for the data's scale overflows a bound; JSON has no Infinity.
  lo = Math.max(lo, -Number.MAX_VALUE);
  hi = Math.min(hi, Number.MAX_VALUE);
  if (running === null) return [lo, hi];
  const [rLo, rHi] = running;
  if (lo > rHi) return [rHi, rHi];
  if (hi < rLo) return [rLo, rLo];
  return [Math.max(rLo, lo), Math.min(rHi, hi)];
}

function checkAlphaTau(alpha: number, tau: number): void {
  if (!(alpha > 0 && alpha < 1)) throw new RangeError(`alpha must lie strictly between 0 and 1, got ${alpha}`);
  if (!(tau > 0 && Number.isFinite(tau))) throw new RangeError(`tau must be a positive number, got ${tau}`);
}

/** At least 2: a sample variance needs two values. */
function checkMinimum(name: string, value: number): void {
  if (!(Number.isInteger(value) && value >= 2)) throw new RangeError(`${name} must be an integer of at least 2, got ${value}`);
}

function checkValue(value: number): void {
  if (!Number.isFinite(value)) throw new RangeError(`observations must be finite numbers, got ${value}`);
}

/**
 * Two-sample mSPRT on mean(B) − mean(A). Observations arrive in time order; every add() is a
 * look: once both arms have minPerArm observations, each add() lowers the running p-value and
 * narrows the running interval if that look's evidence says so.
 */
export function createTwoSampleSequence(options: SequentialOptions = {}): {
  add(variant: 'A' | 'B', value: number): void;
  state(): SequentialState;
} {
  const alpha = options.alpha ?? DEFAULT_ALPHA;
  const tau = options.tau ?? DEFAULT_TAU;
  const minPerArm = options.minPerArm ?? DEFAULT_MIN_PER_ARM;
  const floor = options.varianceFloor ?? RATING_VARIANCE_FLOOR;
  const corrected = options.smallSampleCorrection ?? true;
  checkAlphaTau(alpha, tau);
  checkMinimum('minPerArm', minPerArm);
  if (!(floor > 0 && Number.isFinite(floor))) throw new RangeError(`varianceFloor must be a positive number, got ${floor}`);

  const a: Running = { n: 0, mean: 0, m2: 0 };
  const b: Running = { n: 0, mean: 0, m2: 0 };
  let difference: number | null = null;
  let pValue: number | null = null;
  let interval: [number, number] | null = null;

  function look(): void {
    const estimate = b.mean - a.mean;
    const va = flooredVariance(a, floor) / a.n;
    const vb = flooredVariance(b, floor) / b.n;
    const variance = va + vb;
    // Welch–Satterthwaite, as in stats.ts's welchTest, on the floored variances.
    const df = corrected ? (variance * variance) / ((va * va) / (a.n - 1) + (vb * vb) / (b.n - 1)) : null;
    const evidence = lookAt(estimate, variance, df, tau, alpha);
    difference = estimate;
    pValue = pValue === null ? evidence.pValue : Math.min(pValue, evidence.pValue);
    interval = intersect(interval, estimate - evidence.halfWidth, estimate + evidence.halfWidth);
  }

  return {
    add(variant, value) {
      checkValue(value);
      if (variant === 'A') push(a, value);
      else if (variant === 'B') push(b, value);
      else throw new RangeError(`variant must be 'A' or 'B', got ${String(variant)}`);
      if (a.n >= minPerArm && b.n >= minPerArm) look();
    },
    state() {
      const significant = pValue !== null && pValue < alpha;
      return {
        method: 'msprt',
        alpha,
        tau,
        nA: a.n,
        nB: b.n,
        difference,
        pValue,
        interval: interval === null ? null : [interval[0], interval[1]],
        significant,
        winner: significant && interval !== null ? winnerOf(interval) : null,
      };
    },
  };
}

/**
 * The side the interval lies on. A significant p-value means some look's interval excluded 0, so
 * the running one does too; only at a rounding tie (an endpoint equal to 0) does the midpoint
 * decide.
 */
function winnerOf([lo, hi]: [number, number]): 'A' | 'B' {
  if (lo > 0) return 'B';
  if (hi < 0) return 'A';
  return lo + hi > 0 ? 'B' : 'A';
}

/**
 * One-sample confidence sequence for a mean (guardrails: an error rate, a mean rating, the share
 * of slow answers). Same mixture with V = s²/n, the variance floored (successionVarianceFloor by
 * default) so that a run of identical 0/1 outcomes never gives a zero-width interval.
 */
export function createMeanSequence(options: MeanSequenceOptions = {}): { add(value: number): void; state(): MeanSequenceState } {
  const alpha = options.alpha ?? DEFAULT_ALPHA;
  const tau = options.tau ?? DEFAULT_TAU;
  const minN = options.minN ?? DEFAULT_MIN_PER_ARM;
  const fixedFloor = options.varianceFloor;
  const corrected = options.smallSampleCorrection ?? true;
  checkAlphaTau(alpha, tau);
  checkMinimum('minN', minN);
  if (fixedFloor !== undefined && !(fixedFloor > 0 && Number.isFinite(fixedFloor))) {
    throw new RangeError(`varianceFloor must be a positive number, got ${fixedFloor}`);
  }

  const r: Running = { n: 0, mean: 0, m2: 0 };
  let interval: [number, number] | null = null;

  return {
    add(value) {
      checkValue(value);
      push(r, value);
      if (r.n < minN) return;
      const variance = flooredVariance(r, fixedFloor ?? successionVarianceFloor(r.n)) / r.n;
      const { halfWidth } = lookAt(0, variance, corrected ? r.n - 1 : null, tau, alpha);
      interval = intersect(interval, r.mean - halfWidth, r.mean + halfWidth);
    },
    state() {
      return { n: r.n, mean: r.n === 0 ? null : r.mean, interval: interval === null ? null : [interval[0], interval[1]] };
    },
  };
}

/**
 * Whether a guardrail is broken with sequential evidence: the whole interval lies beyond the limit
 * ('above': the metric, e.g. an error rate, is above its ceiling; 'below': e.g. a mean rating is
 * below its floor). No interval yet means no evidence.
 */
export function breaches(state: MeanSequenceState, limit: number, direction: 'above' | 'below'): boolean {
  if (state.interval === null) return false;
  return direction === 'above' ? state.interval[0] > limit : state.interval[1] < limit;
}
