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

/**
 * In-place fast Walsh–Hadamard transform; `a.length` is a power of two and `a[nonZero..]` is zero.
 * Blocks lying wholly in that zero tail stay zero through the early stages and are skipped (a
 * quarter of the work for 384 dimensions in 512), and stages go two at a time (radix 4).
 * Every sum is rounded to float32 as it would be stored, so the result is bit-identical to the plain
 * radix-2 transform over a Float32Array.
 */
function hadamard(a: Float32Array, nonZero: number): void {
  const n = a.length;
  let h = 1;
  // Two stages (h and 2h) per pass over blocks of 4h.
  for (; 4 * h <= n; h *= 4) {
    for (let i = 0; i < nonZero; i += 4 * h) {
      for (let j = i; j < i + h; j++) {
        const x0 = a[j]!;
        const x1 = a[j + h]!;
        const x2 = a[j + 2 * h]!;
        const x3 = a[j + 3 * h]!;
        const s01 = Math.fround(x0 + x1);
        const d01 = Math.fround(x0 - x1);
        const s23 = Math.fround(x2 + x3);
        const d23 = Math.fround(x2 - x3);
        a[j] = s01 + s23;
        a[j + h] = d01 + d23;
        a[j + 2 * h] = s01 - s23;
        a[j + 3 * h] = d01 - d23;
      }
    }
  }
  if (h < n) {
    for (let j = 0; j < h; j++) {
      const x = a[j]!;
      const y = a[j + h]!;
      a[j] = x + y;
      a[j + h] = x - y;
    }
  }
}

export interface BinaryCoder {
  /** Code length in bits (a multiple of 8). */
  readonly bits: number;
  /** The code of a vector of the coder's dimension, as bytes for sqlite-vec's `vec_bit()`. */
  encode(vector: Float32Array): Buffer;
  /** The same code written to `out` from `offset` (`bits / 8` bytes). */
  encodeInto(vector: Float32Array, out: Uint8Array, offset: number): void;
}

export function createBinaryCoder(dimension: number): BinaryCoder {
  const width = nextPowerOfTwo(Math.max(dimension, 8));
  const rotations = Math.max(1, Math.ceil(MIN_BITS / width));
  const signs = Array.from({ length: rotations }, (_, r) => randomSigns(dimension, 0x5eed + r * 7919));
  const bits = rotations * width;
  const scratch = new Float32Array(width);
  const bitsOf = new Int32Array(scratch.buffer);
  const encodeInto = (vector: Float32Array, out: Uint8Array, offset: number) => {
    for (let r = 0; r < rotations; r++) {
      const s = signs[r]!;
      let magnitude = 0;
      for (let i = 0; i < dimension; i++) magnitude += Math.abs((scratch[i] = vector[i]! * s[i]!));
      // No output of the transform exceeds the sum of the magnitudes: below float32's largest, none overflows into a NaN.
      const finite = magnitude <= 3.4e38;
      scratch.fill(0, dimension);
      hadamard(scratch, dimension);
      const base = (r * width) / 8;
      // A bit per value above zero. From the float's bits without a branch when every value is a
      // number (the signs are random, so a branch mispredicts half the time): an int32 above
      // zero is a float above zero; ±0 and negatives are not. A NaN (a non-finite input, or an
      // overflow) has either sign bit, so then the comparison decides, as it always did.
      for (let i = 0; i < width; i += 8) {
        let byte = 0;
        if (finite) {
          for (let k = 0; k < 8; k++) {
            const x = bitsOf[i + k]!;
            byte |= (~(x | (x - 1)) >>> 31) << k;
          }
        } else {
          for (let k = 0; k < 8; k++) if (scratch[i + k]! > 0) byte |= 1 << k;
        }
        out[offset + base + (i >> 3)] = byte;
      }
    }
  };
  return {
    bits,
    encodeInto,
    encode(vector) {
      const out = Buffer.alloc(bits / 8);
      encodeInto(vector, out, 0);
      return out;
    },
  };
}
