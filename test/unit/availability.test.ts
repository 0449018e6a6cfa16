import { describe, expect, it } from 'vitest';
import { canonicalTimeZone, inSchedule, isAvailableNow, localTime, nextOpening, type Schedule, type Window } from '../../src/business/teams/availability.js';

const nineToFive = (day: Window['day']): Window => ({ day, start: '09:00', end: '17:00' });
const at = (iso: string) => new Date(iso);
const schedule = (timezone: string, weekly: Window[], status: Schedule['status'] = 'available'): Schedule => ({ status, timezone, weekly });
const someoneIn = [{ status: 'busy' as const }, { status: 'available' as const }];

describe('localTime', () => {
  it('gives the wall-clock weekday and minutes, across DST and non-hour offsets', () => {
    expect(localTime(at('2026-03-08T06:59:00Z'), 'America/New_York')).toEqual({ day: 'sun', minutes: 60 + 59 }); // EST
    expect(localTime(at('2026-03-08T07:00:00Z'), 'America/New_York')).toEqual({ day: 'sun', minutes: 3 * 60 }); // 02:00 skipped
    expect(localTime(at('2026-11-01T05:30:00Z'), 'America/New_York')).toEqual({ day: 'sun', minutes: 90 }); // EDT
    expect(localTime(at('2026-11-01T06:30:00Z'), 'America/New_York')).toEqual({ day: 'sun', minutes: 90 }); // EST, the repeat
    expect(localTime(at('2026-03-08T22:30:00Z'), 'Asia/Kolkata')).toEqual({ day: 'mon', minutes: 4 * 60 }); // next day locally
    expect(localTime(at('2026-04-04T15:00:00Z'), 'Australia/Lord_Howe')).toEqual({ day: 'sun', minutes: 90 }); // 02:00 → 01:30
    expect(localTime(at('2026-01-05T00:00:00Z'), 'UTC')).toEqual({ day: 'mon', minutes: 0 }); // midnight is 0, never 24
  });
});

describe('inSchedule', () => {
  // Sun 09:00–17:00 local, checked one minute either side of both edges on each DST-change day.
  const edges: [string, string, string, string, string][] = [
    // zone, last minute before 09:00, 09:00, 16:59, 17:00 (all UTC)
    ['America/New_York', '2026-03-08T12:59:00Z', '2026-03-08T13:00:00Z', '2026-03-08T20:59:00Z', '2026-03-08T21:00:00Z'], // spring forward (EDT)
    ['America/New_York', '2026-11-01T13:59:00Z', '2026-11-01T14:00:00Z', '2026-11-01T21:59:00Z', '2026-11-01T22:00:00Z'], // fall back (EST)
    ['Europe/Berlin', '2026-03-29T06:59:00Z', '2026-03-29T07:00:00Z', '2026-03-29T14:59:00Z', '2026-03-29T15:00:00Z'], // CEST
    ['Europe/Berlin', '2026-10-25T07:59:00Z', '2026-10-25T08:00:00Z', '2026-10-25T15:59:00Z', '2026-10-25T16:00:00Z'], // CET
  ];
  for (const [zone, before, start, last, end] of edges) {
    it(`${zone} ${start.slice(0, 10)}: inside from 09:00 up to, not including, 17:00`, () => {
      const s = schedule(zone, [nineToFive('sun')]);
      expect(inSchedule(s, at(before))).toBe(false);
      expect(inSchedule(s, at(start))).toBe(true);
      expect(inSchedule(s, at(last))).toBe(true);
      expect(inSchedule(s, at(end))).toBe(false);
    });
  }

  it('a window in the skipped hour never matches; one in the repeated hour matches twice', () => {
    const spring = schedule('America/New_York', [{ day: 'sun', start: '02:00', end: '03:00' }]);
    for (let m = 0; m <= 120; m += 1) expect(inSchedule(spring, new Date(Date.parse('2026-03-08T06:00:00Z') + m * 60_000))).toBe(false);
    const fall = schedule('America/New_York', [{ day: 'sun', start: '01:00', end: '02:00' }]);
    expect(inSchedule(fall, at('2026-11-01T04:59:00Z'))).toBe(false);
    expect(inSchedule(fall, at('2026-11-01T05:30:00Z'))).toBe(true); // 01:30 EDT
    expect(inSchedule(fall, at('2026-11-01T06:30:00Z'))).toBe(true); // 01:30 EST
    expect(inSchedule(fall, at('2026-11-01T07:00:00Z'))).toBe(false); // 02:00 EST
  });

  it('non-hour offsets: Asia/Kolkata (+05:30) and Australia/Lord_Howe (+11 / +10:30)', () => {
    const kolkata = schedule('Asia/Kolkata', [nineToFive('mon')]);
    expect(inSchedule(kolkata, at('2026-03-09T03:29:00Z'))).toBe(false);
    expect(inSchedule(kolkata, at('2026-03-09T03:30:00Z'))).toBe(true);
    expect(inSchedule(kolkata, at('2026-03-09T11:29:00Z'))).toBe(true);
    expect(inSchedule(kolkata, at('2026-03-09T11:30:00Z'))).toBe(false);
    const lordHowe = schedule('Australia/Lord_Howe', [nineToFive('mon')]);
    expect(inSchedule(lordHowe, at('2026-01-04T21:59:00Z'))).toBe(false); // summer, +11
    expect(inSchedule(lordHowe, at('2026-01-04T22:00:00Z'))).toBe(true);
    expect(inSchedule(lordHowe, at('2026-07-05T22:29:00Z'))).toBe(false); // winter, +10:30
    expect(inSchedule(lordHowe, at('2026-07-05T22:30:00Z'))).toBe(true);
  });

  it('uses the local weekday, and 24:00 runs to midnight', () => {
    // Sun 23:30 UTC is Mon 05:00 in Kolkata.
    const mondayEarly = schedule('Asia/Kolkata', [{ day: 'mon', start: '04:00', end: '06:00' }]);
    expect(inSchedule(mondayEarly, at('2026-03-08T23:30:00Z'))).toBe(true);
    expect(inSchedule(schedule('UTC', [{ day: 'sun', start: '04:00', end: '06:00' }]), at('2026-03-08T23:30:00Z'))).toBe(false);
    const lateShift = schedule('UTC', [{ day: 'sun', start: '22:00', end: '24:00' }]);
    expect(inSchedule(lateShift, at('2026-03-08T23:59:00Z'))).toBe(true);
    expect(inSchedule(lateShift, at('2026-03-09T00:00:00Z'))).toBe(false);
  });

  it('no windows means always', () => {
    expect(inSchedule(schedule('Asia/Kolkata', []), at('2026-03-08T03:00:00Z'))).toBe(true);
  });
});

describe('isAvailableNow', () => {
  const now = at('2026-03-09T12:00:00Z'); // Monday
  it('needs status available, the schedule, and an available member', () => {
    expect(isAvailableNow(schedule('UTC', []), someoneIn, now)).toBe(true);
    expect(isAvailableNow(schedule('UTC', [], 'busy'), someoneIn, now)).toBe(false);
    expect(isAvailableNow(schedule('UTC', [], 'offline'), someoneIn, now)).toBe(false);
    expect(isAvailableNow(schedule('UTC', []), [{ status: 'busy' }, { status: 'offline' }], now)).toBe(false);
    expect(isAvailableNow(schedule('UTC', []), [], now)).toBe(false);
    expect(isAvailableNow(schedule('UTC', [nineToFive('mon')]), someoneIn, now)).toBe(true);
    expect(isAvailableNow(schedule('UTC', [nineToFive('tue')]), someoneIn, now)).toBe(false);
  });
});

describe('canonicalTimeZone', () => {
  it('accepts IANA names (kept as given, case corrected) and UTC, refuses offsets and nonsense', () => {
    expect(canonicalTimeZone('UTC')).toBe('UTC');
    expect(canonicalTimeZone('america/new_york')).toBe('America/New_York');
    expect(canonicalTimeZone('Asia/Kolkata')).toBe('Asia/Kolkata');
    expect(canonicalTimeZone('utc')).toBe('UTC');
    expect(canonicalTimeZone('Etc/GMT+5')).toBe('Etc/GMT+5');
    for (const bad of ['Mars/Olympus', '+05:30', '-0800', '', 'Local', '../etc', 'Europe/Berlin ']) expect(canonicalTimeZone(bad), bad).toBeNull();
  });
});

describe('nextOpening', () => {
  const berlinWeekdays = schedule('Europe/Berlin', (['mon', 'tue', 'wed', 'thu', 'fri'] as const).map(nineToFive));
  it('is now inside a window, or without windows', () => {
    expect(nextOpening(berlinWeekdays, at('2026-11-25T10:00:00Z'))).toEqual(at('2026-11-25T10:00:00Z'));
    expect(nextOpening(schedule('UTC', []), at('2026-11-25T03:07:30Z'))).toEqual(at('2026-11-25T03:07:30Z'));
  });
  it('is the next window’s start in the team’s zone: later today, tomorrow, after a weekend', () => {
    expect(nextOpening(berlinWeekdays, at('2026-11-25T06:30:00Z'))).toEqual(at('2026-11-25T08:00:00Z')); // Wed 07:30 CET → 09:00
    expect(nextOpening(berlinWeekdays, at('2026-11-25T16:00:00Z'))).toEqual(at('2026-11-26T08:00:00Z')); // Wed 17:00 → Thu 09:00
    expect(nextOpening(berlinWeekdays, at('2026-11-27T17:00:00Z'))).toEqual(at('2026-11-30T08:00:00Z')); // Fri evening → Mon
    expect(nextOpening(schedule('Asia/Kolkata', [{ day: 'mon', start: '09:30', end: '10:00' }]), at('2026-11-25T00:00:00Z'))).toEqual(at('2026-11-30T04:00:00Z'));
  });
  it('follows a DST change between now and the opening', () => {
    // Sat 28 March 2026 12:00 UTC; Berlin moves to CEST on Sunday: Monday 09:00 is 07:00 UTC.
    expect(nextOpening(berlinWeekdays, at('2026-03-28T12:00:00Z'))).toEqual(at('2026-03-30T07:00:00Z'));
    expect(nextOpening(schedule('America/New_York', [{ day: 'sun', start: '09:00', end: '17:00' }]), at('2026-11-01T04:00:00Z'))).toEqual(at('2026-11-01T14:00:00Z'));
  });
  it('is null for windows that never open', () => {
    expect(nextOpening(schedule('UTC', [{ day: 'mon', start: '10:00', end: '10:00' }]), at('2026-11-25T00:00:00Z'))).toBeNull();
  });
});
