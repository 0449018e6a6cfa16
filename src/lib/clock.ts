/** The time source; injectable so tests can move time. */
export interface Clock {
  now(): Date;
}

export const systemClock: Clock = { now: () => new Date() };

/** A clock tests move by hand. */
export function manualClock(start = new Date('2026-01-01T00:00:00.000Z')) {
  let t = start.getTime();
  return {
    now: () => new Date(t),
    advance(ms: number) {
      t += ms;
    },
    set(d: Date) {
      t = d.getTime();
    },
  };
}
