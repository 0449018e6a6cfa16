/**
 * Team schedules (API.md §8): the local weekday and time of an instant in an IANA time zone, and
 * whether a team is available then. Pure: the caller passes the instant (from the injected clock).
 */

export type Weekday = 'mon' | 'tue' | 'wed' | 'thu' | 'fri' | 'sat' | 'sun';
export type Status = 'available' | 'busy' | 'offline';

/** A weekly window in local time: `start` inclusive, `end` exclusive (`24:00` = until midnight). */
export interface Window {
  day: Weekday;
  start: string;
  end: string;
}

export interface Schedule {
  status: Status;
  timezone: string;
  weekly: Window[];
}

const WEEKDAY: Record<string, Weekday> = { Mon: 'mon', Tue: 'tue', Wed: 'wed', Thu: 'thu', Fri: 'fri', Sat: 'sat', Sun: 'sun' };

// A formatter per zone: building one costs far more than using it.
const formatters = new Map<string, Intl.DateTimeFormat>();

function formatterFor(timeZone: string): Intl.DateTimeFormat {
  let f = formatters.get(timeZone);
  if (!f) {
    f = new Intl.DateTimeFormat('en-US', { timeZone, weekday: 'short', hour: '2-digit', minute: '2-digit', hourCycle: 'h23' });
    if (formatters.size >= 1000) formatters.clear();
    formatters.set(timeZone, f);
  }
  return f;
}

/**
 * `name` as the team keeps it, or null when it is not a time zone. Kept as given, only its case
 * corrected (`america/new_york` → `America/New_York`): Intl would also swap a current name for an
 * older alias its ICU calls canonical (`Asia/Kolkata` → `Asia/Calcutta` on Node 20). Offsets
 * (`+05:30`), which newer Node versions accept, are refused: the contract asks for a name, and a
 * fixed offset has no DST.
 */
export function canonicalTimeZone(name: string): string | null {
  if (!/^[A-Za-z][A-Za-z0-9_+\-/]*$/.test(name)) return null;
  try {
    const resolved = new Intl.DateTimeFormat('en-US', { timeZone: name }).resolvedOptions().timeZone;
    return resolved.toLowerCase() === name.toLowerCase() ? resolved : name;
  } catch {
    return null;
  }
}

export const isTimeZone = (name: string): boolean => canonicalTimeZone(name) !== null;

/** `HH:MM` → minutes since local midnight (`24:00` → 1440). */
export function minutesOf(hhmm: string): number {
  return Number(hhmm.slice(0, 2)) * 60 + Number(hhmm.slice(3, 5));
}

/** The wall-clock weekday and minutes since midnight of `instant` in `timeZone`. */
export function localTime(instant: Date, timeZone: string): { day: Weekday; minutes: number } {
  let weekday = '';
  let hour = 0;
  let minute = 0;
  for (const part of formatterFor(timeZone).formatToParts(instant)) {
    if (part.type === 'weekday') weekday = part.value;
    else if (part.type === 'hour') hour = Number(part.value) % 24; // some ICU versions say "24" at midnight
    else if (part.type === 'minute') minute = Number(part.value);
  }
  const day = WEEKDAY[weekday];
  if (!day) throw new Error(`unexpected weekday "${weekday}" for ${timeZone}`);
  return { day, minutes: hour * 60 + minute };
}

/** Inside a weekly window at `instant` (always, when there are none). */
export function inSchedule(schedule: Pick<Schedule, 'timezone' | 'weekly'>, instant: Date): boolean {
  if (schedule.weekly.length === 0) return true;
  const { day, minutes } = localTime(instant, schedule.timezone);
  return schedule.weekly.some((w) => w.day === day && minutesOf(w.start) <= minutes && minutes < minutesOf(w.end));
}

/** Available now: status `available`, inside the schedule, and at least one member `available`. */
export function isAvailableNow(schedule: Schedule, members: ReadonlyArray<{ status: Status }>, instant: Date): boolean {
  return schedule.status === 'available' && members.some((m) => m.status === 'available') && inSchedule(schedule, instant);
}

const DAYS: Weekday[] = ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'];
const MINUTE_MS = 60_000;

/**
 * The first instant at or after `instant` inside a weekly window of the schedule (`instant` itself
 * when there are no windows), or null when it has none that ever opens. Status and members are the
 * caller's to check. Jumps by the local minutes to the next window's start, then checks again: a
 * DST change in between moves the wall clock by its offset, which the next jump takes up.
 */
export function nextOpening(schedule: Pick<Schedule, 'timezone' | 'weekly'>, instant: Date): Date | null {
  const windows = schedule.weekly.filter((w) => minutesOf(w.start) < minutesOf(w.end));
  if (schedule.weekly.length === 0) return instant;
  if (windows.length === 0) return null;
  // Whole minutes: windows start on them.
  let t = Math.ceil(instant.getTime() / MINUTE_MS) * MINUTE_MS;
  for (let step = 0; step < 16; step++) {
    const { day, minutes } = localTime(new Date(t), schedule.timezone);
    const inside = windows.find((w) => w.day === day && minutesOf(w.start) <= minutes && minutes < minutesOf(w.end));
    if (inside) {
      if (step === 0) return new Date(t);
      // A jump over a DST change can land past the window's start: back to it, when that is inside too.
      const back = t - (minutes - minutesOf(inside.start)) * MINUTE_MS;
      return back >= instant.getTime() && inSchedule(schedule, new Date(back)) ? new Date(back) : new Date(t);
    }
    const today = DAYS.indexOf(day);
    let wait = Number.POSITIVE_INFINITY;
    for (const w of windows) {
      const ahead = ((DAYS.indexOf(w.day) - today + 7) % 7) * 1440 + minutesOf(w.start) - minutes;
      wait = Math.min(wait, ahead > 0 ? ahead : ahead + 7 * 1440);
    }
    t += wait * MINUTE_MS;
  }
  return null;
}
