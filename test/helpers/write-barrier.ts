// Makes a race real on either backend: the writers at one point of the product (src/lib/write-gate.ts)
// are held between their read and their write until `n` of them have read, then all go at once. On
// SQLite two requests otherwise run read-then-write one after the other, so a test of "two at once"
// would pass with the product's guard removed.
import type { WriteGate, WritePoint } from '../../src/lib/write-gate.js';

/** How long the first writer waits for the others before its request fails (a test that never brings them). */
const MEET_MS = 5_000;

/** A gate that lets everything through until `arm(point, n)`; then the next `n` writers there meet, once. */
export function writeBarrier() {
  let armed: { point: WritePoint; n: number; arrived: number; met: Promise<void>; meet: () => void } | null = null;
  const state = { held: 0 };
  const gate: WriteGate = async (point) => {
    const a = armed;
    if (!a || a.point !== point) return;
    a.arrived++;
    state.held++;
    if (a.arrived === a.n) {
      armed = null;
      a.meet();
      return;
    }
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${a.arrived} of ${a.n} writers reached ${point} within ${MEET_MS} ms`)), MEET_MS);
    });
    try {
      await Promise.race([a.met, late]);
    } finally {
      clearTimeout(timer);
    }
  };
  return {
    gate,
    state,
    /** The next `n` writers at `point` wait for each other (each has read what it will write over). */
    arm(point: WritePoint, n = 2): void {
      let meet!: () => void;
      const met = new Promise<void>((resolve) => (meet = resolve));
      armed = { point, n, arrived: 0, met, meet };
    },
  };
}
