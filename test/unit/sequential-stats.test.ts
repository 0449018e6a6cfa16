// The mSPRT of src/business/ab-tests/sequential.ts: simulations of the claim it exists for (peeking
// keeps its false-positive rate at alpha, where a peeked Welch test does not), its power and the
// coverage of its confidence sequence, then the formulas against values computed independently in
// Python 3 (plain floats, variances recomputed from scratch at every look, no Welford), written
// here as literals. Every simulation uses a fixed seed (test/helpers/prng.ts), printed with its
// figures, so a failure reproduces exactly.
import { describe, expect, it } from 'vitest';
import {
  breaches,
  createMeanSequence,
  createTwoSampleSequence,
  logMixtureRatio,
  type MeanSequenceState,
  mixtureHalfWidth,
  normalEquivalent,
  type SequentialState,
  studentEquivalent,
} from '../../src/business/ab-tests/sequential.js';
import { welchTest } from '../../src/business/ab-tests/stats.js';
import { prng } from '../helpers/prng.js';

/** P(rating = 1..5) of arm A in every simulation: mean 3.6, variance 1.64. */
const BASE = [0.1, 0.1, 0.2, 0.3, 0.3];
/** Arm B under a real difference: mean 3.9, i.e. exactly +0.3 rating points. */
const SHIFTED = [0.06, 0.08, 0.16, 0.3, 0.4];
const SHIFT = 0.3;

/** Simulated A/B tests per scenario: at a true rate near 4 %, 2,000 runs put 5 % about 2.5
 * standard errors away, so the assertions test the method rather than the seed. */
const EXPERIMENTS = 2_000;
const RATINGS = 2_000;
const PEEK_EVERY = 10;

/** Inverse-CDF draw of a 1–5 rating. */
function rater(probabilities: number[]): (u: number) => number {
  const cumulative: number[] = [];
  let total = 0;
  for (const p of probabilities) cumulative.push((total += p));
  return (u) => {
    for (let i = 0; i < cumulative.length; i++) if (u < cumulative[i]!) return i + 1;
    return cumulative.length;
  };
}

/** Running sums for Welch's test at a peek, O(1) per rating (exact: ratings are small integers). */
interface Sums {
  n: number;
  sum: number;
  sumSq: number;
}

function welchPValue(a: Sums, b: Sums): number {
  const moments = (s: Sums) => ({ n: s.n, mean: s.sum / s.n, variance: (s.sumSq - (s.sum * s.sum) / s.n) / (s.n - 1) });
  return welchTest(moments(a), moments(b))!.pValue;
}

interface Experiment {
  /** The mSPRT (default, small-sample corrected) at the end; its running minimum and running
   * intersection make "significant at the end" the same as "significant at some look". */
  final: SequentialState;
  /** The same data through the uncorrected formulas (smallSampleCorrection: false). */
  plain: SequentialState;
  /** Ratings seen at the first peek where the mSPRT was significant, or null. */
  detectedAt: number | null;
  /** Ever p < 0.05 for Welch's test read at every peek. */
  welch: boolean;
}

/**
 * One simulated A/B test: RATINGS ratings, each assigned to A or B by a fair coin; Welch's test is
 * read every PEEK_EVERY ratings once both arms have 10, while the accumulators look at every
 * rating, which is more peeking, not less.
 */
function simulate(rand: () => number, drawA: (u: number) => number, drawB: (u: number) => number): Experiment {
  const sequence = createTwoSampleSequence();
  const plain = createTwoSampleSequence({ smallSampleCorrection: false });
  const sums = { A: { n: 0, sum: 0, sumSq: 0 }, B: { n: 0, sum: 0, sumSq: 0 } };
  let welch = false;
  let detectedAt: number | null = null;
  for (let i = 1; i <= RATINGS; i++) {
    const variant = rand() < 0.5 ? 'A' : 'B';
    const value = variant === 'A' ? drawA(rand()) : drawB(rand());
    sequence.add(variant, value);
    plain.add(variant, value);
    const s = sums[variant];
    s.n += 1;
    s.sum += value;
    s.sumSq += value * value;
    if (i % PEEK_EVERY !== 0 || sums.A.n < 10 || sums.B.n < 10) continue;
    if (!welch && welchPValue(sums.A, sums.B) < 0.05) welch = true;
    if (detectedAt === null && sequence.state().significant) detectedAt = i;
  }
  return { final: sequence.state(), plain: plain.state(), detectedAt, welch };
}

function runSimulation(seed: number, probabilitiesB: number[]): Experiment[] {
  const rand = prng(seed);
  const drawA = rater(BASE);
  const drawB = rater(probabilitiesB);
  const experiments: Experiment[] = [];
  for (let e = 0; e < EXPERIMENTS; e++) experiments.push(simulate(rand, drawA, drawB));
  return experiments;
}

const rate = (count: number, total: number) => `${count}/${total} = ${((100 * count) / total).toFixed(1)} %`;
const excludes = (interval: [number, number] | null, value: number) => interval !== null && (interval[0] > value || interval[1] < value);

describe('the mSPRT under daily peeking (simulation)', () => {
  it('keeps the false-positive rate at most 5 % where a peeked Welch test inflates it', () => {
    const SEED = 20240601;
    const runs = runSimulation(SEED, BASE);
    const sequential = runs.filter((r) => r.final.significant).length;
    const plain = runs.filter((r) => r.plain.significant).length;
    const welch = runs.filter((r) => r.welch).length;
    console.log(
      `[seed ${SEED}] no true difference, ${EXPERIMENTS} experiments × ${RATINGS} ratings (Welch peeked every ${PEEK_EVERY}, ` +
        `mSPRT looking at every rating): false positives mSPRT ${rate(sequential, EXPERIMENTS)}, ` +
        `mSPRT without small-sample correction ${rate(plain, EXPERIMENTS)}, Welch peeked ${rate(welch, EXPERIMENTS)}`,
    );
    expect(sequential / EXPERIMENTS).toBeLessThanOrEqual(0.05);
    expect(welch / EXPERIMENTS).toBeGreaterThan(0.1);
    // The correction only ever weakens evidence: each corrected false positive is a plain one.
    expect(runs.every((r) => !r.final.significant || r.plain.significant)).toBe(true);
  });

  // One simulation under a real +0.3 shift serves the power and the coverage checks.
  let shifted: Experiment[] | undefined;
  const SHIFT_SEED = 777;
  const shiftedRuns = () => (shifted ??= runSimulation(SHIFT_SEED, SHIFTED));

  it('detects a +0.3 shift by 2,000 ratings in at least 80 % of experiments, naming B', () => {
    const runs = shiftedRuns();
    const detected = runs.filter((r) => r.final.winner === 'B').length;
    const wrong = runs.filter((r) => r.final.winner === 'A').length;
    const welch = runs.filter((r) => r.welch).length;
    const times = runs
      .map((r) => r.detectedAt)
      .filter((t): t is number => t !== null)
      .sort((x, y) => x - y);
    console.log(
      `[seed ${SHIFT_SEED}] B +${SHIFT}: mSPRT power by ${RATINGS} ratings ${rate(detected, EXPERIMENTS)}, wrong winner (A) ` +
        `${rate(wrong, EXPERIMENTS)}, median ratings to detection ${times[Math.floor(times.length / 2)] ?? 'none'} ` +
        `(Welch peeked ever significant: ${rate(welch, EXPERIMENTS)})`,
    );
    expect(detected / EXPERIMENTS).toBeGreaterThanOrEqual(0.8);
    // Naming A needs the interval to miss +0.3 by more than its width: far rarer than α/2.
    expect(wrong / EXPERIMENTS).toBeLessThanOrEqual(0.005);
  });

  it('has a confidence sequence that ever excludes the true difference in at most 5 % of experiments', () => {
    const runs = shiftedRuns();
    // The running interval is the intersection of every look's, so it excludes the truth at the
    // end exactly when some look's interval did.
    const misses = runs.filter((r) => excludes(r.final.interval, SHIFT)).length;
    const plainMisses = runs.filter((r) => excludes(r.plain.interval, SHIFT)).length;
    console.log(
      `[seed ${SHIFT_SEED}] B +${SHIFT}: confidence sequence ever misses the true difference in ${rate(misses, EXPERIMENTS)} ` +
        `(without small-sample correction ${rate(plainMisses, EXPERIMENTS)})`,
    );
    expect(runs.every((r) => r.final.interval !== null)).toBe(true);
    expect(misses / EXPERIMENTS).toBeLessThanOrEqual(0.05);
  });
});

describe('the mixture formulas', () => {
  it('give Λ and the half-width computed by hand (Python) for Δ̂ = 2/3, V = 4/9, τ = 0.5, α = 0.05', () => {
    expect(Math.exp(logMixtureRatio(2 / 3, 4 / 9, 0.5))).toBeCloseTo(0.9577738904974483, 12);
    expect(mixtureHalfWidth(4 / 9, 0.5, 0.05)).toBeCloseTo(2.819191647065599, 12);
  });

  it('put the interval’s ends exactly where Λ reaches 1/α (the inversion {δ : Λ(δ) < 1/α})', () => {
    for (const [variance, tau, alpha] of [
      [0.001, 0.5, 0.05],
      [0.05, 0.2, 0.01],
      [2, 1, 0.1],
      [1e-6, 0.5, 0.05],
    ] as const) {
      const half = mixtureHalfWidth(variance, tau, alpha);
      expect(logMixtureRatio(half, variance, tau)).toBeCloseTo(Math.log(1 / alpha), 9);
      expect(logMixtureRatio(-half, variance, tau)).toBeCloseTo(Math.log(1 / alpha), 9);
      expect(logMixtureRatio(0.99 * half, variance, tau)).toBeLessThan(Math.log(1 / alpha));
    }
  });
});

/** 24 ratings in time order: B clearly better. */
const SEQUENCE: Array<['A' | 'B', number]> = [
  ['A', 3], ['B', 4], ['A', 4], ['B', 5], ['A', 5], ['B', 5], ['A', 2], ['B', 4], ['A', 3], ['B', 5], ['A', 4], ['B', 5],
  ['A', 3], ['B', 4], ['A', 2], ['B', 5], ['A', 4], ['B', 5], ['A', 3], ['B', 4], ['A', 3], ['B', 5], ['A', 4], ['B', 5],
];

describe('the small-sample correction (Wallace’s t → z)', () => {
  // SciPy: −norm.ppf(t.sf(t, ν)), the exact normal equivalent.
  const EXACT: Array<[number, number, number]> = [
    [9, 1.5, 1.379143039571537],
    [9, 3, 2.433433949564479],
    [9, 5, 3.3746977942210634],
    [18, 3, 2.665586657917257],
    [40, 5, 4.38051221119151],
    [200, 5, 4.8475114598509625],
  ];

  it('is within 0.03 of the exact normal equivalent for ν ≥ 9, and never above it', () => {
    for (const [df, t, z] of EXACT) {
      expect(Math.abs(normalEquivalent(t, df) - z)).toBeLessThan(0.03);
      expect(normalEquivalent(t, df)).toBeLessThanOrEqual(z);
      expect(normalEquivalent(-t, df)).toBeCloseTo(-normalEquivalent(t, df), 14);
    }
  });

  it('inverts exactly, and fades as ν grows', () => {
    for (const [df, t] of EXACT) expect(studentEquivalent(normalEquivalent(t, df), df)).toBeCloseTo(t, 12);
    expect(normalEquivalent(3, 1e7)).toBeCloseTo(3, 5);
    expect(normalEquivalent(0, 9)).toBe(0);
  });
});

describe('the two-sample accumulator', () => {
  it('matches an independent computation of the brief’s formulas at its first look and after 19 looks', () => {
    const sequence = createTwoSampleSequence({ minPerArm: 3, smallSampleCorrection: false });
    for (const [variant, value] of SEQUENCE.slice(0, 6)) sequence.add(variant, value);
    // First look: A = 3, 4, 5 and B = 4, 5, 5; Δ̂ = 2/3, V = 1/3 + (1/3)/3 = 4/9.
    const first = sequence.state();
    expect(first.difference).toBeCloseTo(2 / 3, 14);
    expect(first.pValue).toBe(1); // Λ = 0.9578 < 1
    expect(first.interval![0]).toBeCloseTo(-2.152524980398932, 12);
    expect(first.interval![1]).toBeCloseTo(3.485858313732266, 12);
    expect(first.significant).toBe(false);

    for (const [variant, value] of SEQUENCE.slice(6)) sequence.add(variant, value);
    const last = sequence.state();
    expect(last).toMatchObject({ method: 'msprt', alpha: 0.05, tau: 0.5, nA: 12, nB: 12, significant: true, winner: 'B' });
    expect(last.difference).toBeCloseTo(1.3333333333333335, 12);
    expect(last.pValue).toBeCloseTo(0.0008899632988688211, 14);
    expect(last.interval![0]).toBeCloseTo(0.41223752579051254, 12);
    expect(last.interval![1]).toBeCloseTo(2.242248012926096, 12);
  });

  it('matches an independent computation with the small-sample correction (the default)', () => {
    const sequence = createTwoSampleSequence({ minPerArm: 3 });
    for (const [variant, value] of SEQUENCE.slice(0, 6)) sequence.add(variant, value);
    // First look: Welch df 3.2, so the interval is ten times wider than the normal one.
    const first = sequence.state();
    expect(first.pValue).toBe(1);
    expect(first.interval![0]).toBeCloseTo(-32.0225714142825, 9);
    expect(first.interval![1]).toBeCloseTo(33.35590474761583, 9);
    for (const [variant, value] of SEQUENCE.slice(6)) sequence.add(variant, value);
    const last = sequence.state();
    expect(last).toMatchObject({ nA: 12, nB: 12, significant: true, winner: 'B' });
    expect(last.pValue).toBeCloseTo(0.014583897663606602, 12);
    expect(last.interval![0]).toBeCloseTo(0.2414196524648644, 12);
    expect(last.interval![1]).toBeCloseTo(2.4114418200684127, 12);
  });

  it('is symmetric: swapping the arms flips the difference, the interval and the winner', () => {
    const sequence = createTwoSampleSequence({ minPerArm: 3 });
    for (const [variant, value] of SEQUENCE) sequence.add(variant === 'A' ? 'B' : 'A', value);
    const state = sequence.state();
    expect(state.difference).toBeCloseTo(-1.3333333333333335, 12);
    expect(state.pValue).toBeCloseTo(0.014583897663606602, 12);
    expect(state.interval![0]).toBeCloseTo(-2.4114418200684127, 12);
    expect(state.interval![1]).toBeCloseTo(-0.2414196524648644, 12);
    expect(state.winner).toBe('A');
  });

  it('gives nulls until both arms have minPerArm observations', () => {
    const sequence = createTwoSampleSequence();
    for (let i = 0; i < 100; i++) sequence.add('B', 1 + (i % 5));
    for (let i = 0; i < 9; i++) sequence.add('A', 5);
    expect(sequence.state()).toEqual({
      method: 'msprt',
      alpha: 0.05,
      tau: 0.5,
      nA: 9,
      nB: 100,
      difference: null,
      pValue: null,
      interval: null,
      significant: false,
      winner: null,
    });
    sequence.add('A', 5);
    const state = sequence.state();
    expect(state.pValue).not.toBeNull();
    expect(state.interval).not.toBeNull();
  });

  it('only lowers its p-value and narrows its interval, look after look', () => {
    const SEED = 4242;
    const rand = prng(SEED);
    const drawA = rater(BASE);
    const drawB = rater(SHIFTED);
    const sequence = createTwoSampleSequence();
    let previous = sequence.state();
    let narrowed = 0;
    for (let i = 0; i < 3_000; i++) {
      if (rand() < 0.5) sequence.add('A', drawA(rand()));
      else sequence.add('B', drawB(rand()));
      const state = sequence.state();
      if (previous.pValue !== null) {
        expect(state.pValue!).toBeLessThanOrEqual(previous.pValue);
        expect(state.interval![0]).toBeGreaterThanOrEqual(previous.interval![0]);
        expect(state.interval![1]).toBeLessThanOrEqual(previous.interval![1]);
        expect(state.interval![0]).toBeLessThanOrEqual(state.interval![1]);
        if (previous.significant) expect(state.significant).toBe(true);
        if (state.interval![1] - state.interval![0] < previous.interval![1] - previous.interval![0]) narrowed++;
      }
      previous = state;
    }
    console.log(`[seed ${SEED}] monotonicity over 3,000 adds: the interval narrowed at ${narrowed} looks`);
    expect(narrowed).toBeGreaterThan(100);
  });

  it('stays finite on constant ratings (variance floor): equal arms p = 1, 5s against 1s a certain A', () => {
    const same = createTwoSampleSequence();
    const apart = createTwoSampleSequence();
    for (let i = 0; i < 50; i++) {
      same.add('A', 5);
      same.add('B', 5);
      apart.add('A', 5);
      apart.add('B', 1);
    }
    const s = same.state();
    expect(s.difference).toBe(0);
    expect(s.pValue).toBe(1);
    expect(s.interval![0]).toBeLessThan(0);
    expect(s.interval![1]).toBeGreaterThan(0);
    expect(s.winner).toBeNull();
    const t = apart.state();
    expect(t.difference).toBe(-4);
    expect(t.pValue).toBeLessThan(1e-50);
    expect(t).toMatchObject({ significant: true, winner: 'A' });
    expect(t.interval![1]).toBeLessThan(-3);
    for (const state of [s, t]) {
      assertFiniteNumbers(state);
      expect(JSON.parse(JSON.stringify(state))).toEqual(state);
    }
  });

  it('floors each arm’s variance separately: ten 5s against ten ratings that vary', () => {
    // Without the per-arm floor V would be B's share alone and A's ten 5s would count as certain.
    const sequence = createTwoSampleSequence({ smallSampleCorrection: false });
    for (const value of [5, 5, 5, 5, 5, 5, 5, 5, 5, 5]) sequence.add('A', value);
    for (const value of [5, 4, 5, 5, 4, 5, 4, 5, 4, 5]) sequence.add('B', value);
    // B: mean 4.6, sample variance 0.24 / 0.9 = 4/15; A: 0 raised to 1/12.
    const half = mixtureHalfWidth(1 / 12 / 10 + 4 / 15 / 10, 0.5, 0.05);
    const [lo, hi] = sequence.state().interval!;
    expect(lo).toBeCloseTo(-0.4 - half, 12);
    expect(hi).toBeCloseTo(-0.4 + half, 12);
  });

  it('refuses invalid input', () => {
    const sequence = createTwoSampleSequence();
    expect(() => sequence.add('A', Number.NaN)).toThrow(RangeError);
    expect(() => sequence.add('A', Number.POSITIVE_INFINITY)).toThrow(RangeError);
    expect(() => sequence.add('C' as 'A', 3)).toThrow(/variant/);
    expect(() => createTwoSampleSequence({ tau: 0 })).toThrow(/tau/);
    expect(() => createTwoSampleSequence({ alpha: 1 })).toThrow(/alpha/);
    expect(() => createTwoSampleSequence({ minPerArm: 1 })).toThrow(/minPerArm/);
  });

  it('takes 100,000 adds in well under a second', () => {
    const rand = prng(99);
    const sequence = createTwoSampleSequence();
    const started = performance.now();
    for (let i = 0; i < 100_000; i++) sequence.add(rand() < 0.5 ? 'A' : 'B', 1 + Math.floor(rand() * 5));
    const elapsed = performance.now() - started;
    expect(sequence.state().nA + sequence.state().nB).toBe(100_000);
    expect(elapsed).toBeLessThan(1_000);
  });
});

/** Every number in a state is finite (JSON would turn NaN and ±Infinity into null). */
function assertFiniteNumbers(value: unknown): void {
  if (typeof value === 'number') expect(Number.isFinite(value)).toBe(true);
  else if (Array.isArray(value)) for (const item of value) assertFiniteNumbers(item);
  else if (value !== null && typeof value === 'object') for (const item of Object.values(value)) assertFiniteNumbers(item);
}

describe('the one-sample sequence and guardrails', () => {
  it('matches an independent computation on a 0/1 sequence, with and without the correction', () => {
    const corrected = createMeanSequence();
    const plain = createMeanSequence({ smallSampleCorrection: false });
    const values = [0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    for (const [i, value] of values.entries()) {
      corrected.add(value);
      plain.add(value);
      if (i === 8) expect(corrected.state()).toEqual({ n: 9, mean: expect.closeTo(2 / 9, 14), interval: null });
    }
    const state = corrected.state();
    expect(state.n).toBe(25);
    expect(state.mean).toBeCloseTo(0.12, 14);
    expect(state.interval![0]).toBeCloseTo(-0.11993708277321949, 12);
    expect(state.interval![1]).toBeCloseTo(0.35993708277321945, 12);
    expect(plain.state().interval![0]).toBeCloseTo(-0.09211495719775736, 12);
    expect(plain.state().interval![1]).toBeCloseTo(0.33211495719775735, 12);
  });

  it('gives a run of zeros a nonzero width (rule-of-succession floor): ±0.038 after 100', () => {
    const sequence = createMeanSequence();
    for (let i = 0; i < 100; i++) sequence.add(0);
    const state = sequence.state();
    expect(state.mean).toBe(0);
    expect(state.interval![0]).toBeCloseTo(-0.038093055770159985, 12);
    expect(state.interval![1]).toBeCloseTo(0.038093055770159985, 12);
    assertFiniteNumbers(state);
    expect(breaches(state, 0.1, 'above')).toBe(false);
    expect(breaches(state, 0.05, 'below')).toBe(true);
  });

  it('reads breaches off the whole interval', () => {
    const state = (lo: number, hi: number): MeanSequenceState => ({ n: 50, mean: (lo + hi) / 2, interval: [lo, hi] });
    expect(breaches(state(0.12, 0.3), 0.1, 'above')).toBe(true);
    expect(breaches(state(0.08, 0.3), 0.1, 'above')).toBe(false);
    expect(breaches(state(2.9, 3.4), 3.5, 'below')).toBe(true);
    expect(breaches(state(2.9, 3.6), 3.5, 'below')).toBe(false);
    expect(breaches({ n: 3, mean: 1, interval: null }, 0.1, 'above')).toBe(false);
    expect(() => createMeanSequence({ minN: 0 })).toThrow(/minN/);
  });

  const GUARDRAIL_RUNS = 400;

  /** GUARDRAIL_RUNS Bernoulli(p) streams of up to maxN observations, checked after every one. */
  function guardrailRuns(seed: number, p: number, limit: number, maxN: number): Array<number | null> {
    const rand = prng(seed);
    const breachedAt: Array<number | null> = [];
    for (let e = 0; e < GUARDRAIL_RUNS; e++) {
      const sequence = createMeanSequence();
      let at: number | null = null;
      for (let i = 1; i <= maxN && at === null; i++) {
        sequence.add(rand() < p ? 1 : 0);
        if (breaches(sequence.state(), limit, 'above')) at = i;
      }
      breachedAt.push(at);
    }
    return breachedAt;
  }

  it('flags an error rate of 0.3 against a limit of 0.1 within 200 answers', () => {
    const SEED = 31337;
    const at = guardrailRuns(SEED, 0.3, 0.1, 200);
    const flagged = at.filter((n): n is number => n !== null).sort((x, y) => x - y);
    console.log(
      `[seed ${SEED}] error rate 0.3 vs limit 0.1: breached within 200 in ${rate(flagged.length, GUARDRAIL_RUNS)}, ` +
        `median answers to breach ${flagged[Math.floor(flagged.length / 2)] ?? 'none'}`,
    );
    expect(flagged.length / GUARDRAIL_RUNS).toBeGreaterThanOrEqual(0.95);
  });

  it('almost never flags an error rate of 0.05 against a limit of 0.1, checked after every answer', () => {
    const SEED = 8675309;
    const at = guardrailRuns(SEED, 0.05, 0.1, RATINGS);
    const flagged = at.filter((n) => n !== null).length;
    console.log(`[seed ${SEED}] error rate 0.05 vs limit 0.1, ${RATINGS} answers peeked at every one: false breaches ${rate(flagged, GUARDRAIL_RUNS)}`);
    expect(flagged / GUARDRAIL_RUNS).toBeLessThanOrEqual(0.05);
  });

  it('flags a mean rating of 3.0 below a floor of 3.5, and not one of 3.9', () => {
    const SEED = 5;
    const rand = prng(SEED);
    const low = createMeanSequence({ varianceFloor: 1 / 12 });
    const fine = createMeanSequence({ varianceFloor: 1 / 12 });
    const drawLow = rater([0.2, 0.2, 0.2, 0.2, 0.2]); // mean 3.0
    const drawFine = rater(SHIFTED); // mean 3.9
    for (let i = 0; i < 1_000; i++) {
      low.add(drawLow(rand()));
      fine.add(drawFine(rand()));
    }
    expect(breaches(low.state(), 3.5, 'below')).toBe(true);
    expect(breaches(fine.state(), 3.5, 'below')).toBe(false);
  });
});
