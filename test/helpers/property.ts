import fc from 'fast-check';

/**
 * fast-check for every property test. Each test file runs under one seed, printed before its tests,
 * so a failure seen once can be replayed: `FC_SEED=<seed> npx vitest run <file>` runs the same
 * cases (fast-check's own failure message adds the seed and the path of the shrunk case).
 * Import `fc` from here, never from 'fast-check' directly.
 */
const fromEnv = process.env.FC_SEED?.trim();
if (fromEnv && !/^-?\d+$/.test(fromEnv)) throw new Error(`FC_SEED must be an integer, got ${JSON.stringify(fromEnv)}`);
export const seed = fromEnv ? Number(fromEnv) | 0 : (Math.random() * 0x1_0000_0000) | 0;
fc.configureGlobal({ seed });
console.log(`fast-check seed ${seed} (replay with FC_SEED=${seed})`);

export default fc;
