// The A/B statistics against values computed independently: SciPy 1.17
// (`scipy.stats.ttest_ind(a, b, equal_var=False)`, `scipy.stats.t.ppf`, `scipy.special.betainc`),
// written here as literals.
import { describe, expect, it } from 'vitest';
import { confidenceInterval95, incompleteBeta, moments, percentile, tQuantile, welchTest } from '../../src/business/ab-tests/stats.js';

const CASES: Array<{ name: string; a: number[]; b: number[]; t: number; df: number; p: number }> = [
  {
    name: 'Welch’s example (Wikipedia, sample 1)',
    a: [27.5, 21.0, 19.0, 23.6, 17.0, 17.9, 16.9, 20.1, 21.9, 22.6, 23.1, 19.6, 19.0, 21.7, 21.4],
    b: [27.1, 22.0, 20.8, 23.4, 23.4, 23.5, 25.8, 22.0, 24.8, 20.2, 21.9, 22.1, 22.9, 20.5, 24.4],
    t: -2.455356398286006,
    df: 24.988529290231416,
    p: 0.021378001462866992,
  },
  { name: 'few ratings, unequal sizes', a: [5, 4, 5], b: [2, 3, 1, 4, 2], t: 3.7207944551191634, df: 5.969072716571245, p: 0.009935826331245923 },
  { name: 'two ratings each', a: [5, 3], b: [4, 4.5], t: -0.24253562503633297, df: 1.1245136186770428, p: 0.8450283873936709 },
  {
    name: 'a dozen against eighteen',
    a: [5, 5, 4, 5, 4, 5, 5, 3, 5, 4, 5, 4],
    b: [3, 4, 2, 5, 3, 3, 4, 2, 3, 1, 4, 3, 2, 4, 3, 3, 5, 2],
    t: 4.337905105601141,
    df: 27.936134307749022,
    p: 0.00016950572481744654,
  },
];

describe('Welch’s t-test', () => {
  for (const c of CASES) {
    it(`matches SciPy: ${c.name}`, () => {
      const result = welchTest(moments(c.a), moments(c.b))!;
      expect(result.t).toBeCloseTo(c.t, 10);
      expect(result.df).toBeCloseTo(c.df, 9);
      expect(result.pValue).toBeCloseTo(c.p, 10);
    });
  }

  it('is undefined below two values on either side', () => {
    expect(welchTest(moments([5]), moments([1, 2, 3]))).toBeNull();
    expect(welchTest(moments([]), moments([1, 2]))).toBeNull();
  });

  it('treats two constant samples as certain: different means p = 0, equal means p = 1', () => {
    expect(welchTest(moments([5, 5, 5]), moments([4, 4]))!.pValue).toBe(0);
    expect(welchTest(moments([4, 4, 4]), moments([4, 4]))!.pValue).toBe(1);
  });

  it('is symmetric: swapping the samples flips t and keeps p', () => {
    const c = CASES[1]!;
    const ab = welchTest(moments(c.a), moments(c.b))!;
    const ba = welchTest(moments(c.b), moments(c.a))!;
    expect(ba.t).toBeCloseTo(-ab.t, 12);
    expect(ba.pValue).toBeCloseTo(ab.pValue, 12);
  });
});

describe('the t distribution', () => {
  it('gives SciPy’s 97.5 % quantiles', () => {
    const ppf: Array<[number, number]> = [
      [1, 12.706204736174694],
      [2, 4.302652729749462],
      [5, 2.5705818356363146],
      [11, 2.200985160091639],
      [30, 2.0422724563012378],
    ];
    for (const [df, value] of ppf) expect(tQuantile(0.975, df)).toBeCloseTo(value, 8);
  });

  it('gives SciPy’s regularized incomplete beta', () => {
    expect(incompleteBeta(0.3, 2.5, 0.5)).toBeCloseTo(0.018927124071945658, 12);
    expect(incompleteBeta(0.9, 10, 0.5)).toBeCloseTo(0.15164090963470994, 12);
    expect(incompleteBeta(0, 2, 3)).toBe(0);
    expect(incompleteBeta(1, 2, 3)).toBe(1);
  });

  it('gives the 95 % interval of a mean (SciPy: 4.0716… to 4.9284…)', () => {
    const [lo, hi] = confidenceInterval95(moments([5, 5, 4, 5, 4, 5, 5, 3, 5, 4, 5, 4]));
    expect(lo).toBeCloseTo(4.071633844188369, 9);
    expect(hi).toBeCloseTo(4.928366155811631, 9);
    expect(confidenceInterval95(moments([4]))).toEqual([null, null]);
  });
});

describe('percentile', () => {
  it('is nearest-rank', () => {
    expect(percentile([], 0.5)).toBeNull();
    expect(percentile([30, 10, 20], 0.5)).toBe(20);
    expect(percentile([1, 2, 3, 4], 0.5)).toBe(2);
    expect(percentile([1, 2, 3, 4], 0.75)).toBe(3);
    expect(percentile([7], 0.99)).toBe(7);
  });
});
