/**
 * Binary codes for the vector index's first stage. A vector's sign bits alone say little when it is
 * sparse (a short query's hashed embedding is zero in most dimensions, and a zero and a negative
 * value get the same bit), so each vector is first spread by a fixed random rotation: random sign
 * flips followed by a Walsh–Hadamard transform, which preserves angles. The Hamming distance
 * between two codes then estimates the angle between the vectors (SimHash), and more rotations
 * give more bits and a finer estimate.
 */

/** Bits per code: the Hamming estimate's error shrinks with √bits. At 100k hashed vectors, the exact top 10 is within the Hamming top 300 for 85 % of them at 1,024 bits and 97.5 % at 2,048. */
const MIN_BITS = 2048;

function nextPowerOfTwo(n: number): number {
  let p = 1;
  while (p < n) p *= 2;
  return p;
}

/** Deterministic ±1 signs (a fixed LCG), so codes written by one process match queries of another. */
function randomSigns(length: number, seed: number): Float32Array {
  const signs = new Float32Array(length);
  let state = seed >>> 0;
  for (let i = 0; i < length; i++) {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
    signs[i] = state & 0x80000000 ? 1 : -1;
  }
  return signs;
}

/** In-place fast Walsh–Hadamard transform; `a.length` is a power of two. */
function hadamard(a: Float32Array): void {
  for (let h = 1; h < a.length; h *= 2) {
    for (let i = 0; i < a.length; i += 2 * h) {
      for (let j = i; j < i + h; j++) {
        const x = a[j]!;
        const y = a[j + h]!;
        a[j] = x + y;
        a[j + h] = x - y;
      }
    }
  }
}

export interface BinaryCoder {
  /** Code length in bits (a multiple of 8). */
  readonly bits: number;
  /** The code of a vector of the coder's dimension, as bytes for sqlite-vec's `vec_bit()`. */
  encode(vector: Float32Array): Buffer;
}

export function createBinaryCoder(dimension: number): BinaryCoder {
  const width = nextPowerOfTwo(Math.max(dimension, 8));
  const rotations = Math.max(1, Math.ceil(MIN_BITS / width));
  const signs = Array.from({ length: rotations }, (_, r) => randomSigns(dimension, 0x5eed + r * 7919));
  const bits = rotations * width;
  const scratch = new Float32Array(width);
  return {
    bits,
    encode(vector) {
      const out = Buffer.alloc(bits / 8);
      for (let r = 0; r < rotations; r++) {
        const s = signs[r]!;
        scratch.fill(0);
        for (let i = 0; i < dimension; i++) scratch[i] = vector[i]! * s[i]!;
        hadamard(scratch);
        const base = (r * width) / 8;
        for (let i = 0; i < width; i++) if (scratch[i]! > 0) out[base + (i >> 3)]! |= 1 << (i & 7);
      }
      return out;
    },
  };
}
