import v8 from 'node:v8';
import vm from 'node:vm';
import { describe, expect, it } from 'vitest';
import {
  addDays,
  addMonths,
  canonicalTimeZone,
  dateOfDayNumber,
  dayNumber,
  isSupportedInstant,
  isValidLocalDate,
  isValidTimeZone,
  localDateOf,
  MAX_INSTANT_MS,
  MAX_LOCAL_DATE,
  MIN_INSTANT_MS,
  MIN_LOCAL_DATE,
  periodsBetween,
  periodStartOf,
  startOfLocalDate,
} from '../src/core/calendar.js';

const HOUR = 3_600_000;
const DAY = 86_400_000;
const ZONES = Intl.supportedValuesOf('timeZone');

/** A garbage collector for memory measurements, also inside vitest workers started without --expose-gc. */
function collector(): () => void {
  const g = (globalThis as { gc?: () => void }).gc;
  if (typeof g === 'function') return g;
  v8.setFlagsFromString('--expose-gc');
  return vm.runInNewContext('gc') as () => void;
}

/** Deterministic PRNG (mulberry32). */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

/** Reference UTC offset (ms) of an instant, straight from Intl (independent of calendar.ts). */
const refFormatters = new Map<string, Intl.DateTimeFormat>();
function refOffset(ms: number, tz: string): number {
  let f = refFormatters.get(tz);
  if (!f) {
    f = new Intl.DateTimeFormat('en-US', { timeZone: tz, year: 'numeric', month: '2-digit', day: '2-digit', hour: '2-digit', minute: '2-digit', second: '2-digit', hourCycle: 'h23' });
    refFormatters.set(tz, f);
  }
  const p: Record<string, number> = {};
  for (const x of f.formatToParts(ms)) if (x.type !== 'literal') p[x.type] = Number(x.value);
  const wall = Date.UTC(p.year as number, (p.month as number) - 1, p.day as number, p.hour as number, p.minute as number, p.second as number);
  return wall - (ms - (((ms % 1000) + 1000) % 1000));
}

describe('time zone names', () => {
  it('canonicalTimeZone returns canonical names exactly, matches case-insensitively, and rejects garbage', () => {
    expect(canonicalTimeZone('Europe/Paris')).toBe('Europe/Paris');
    expect(canonicalTimeZone('europe/paris')).toBe('Europe/Paris');
    expect(canonicalTimeZone('EUROPE/PARIS')).toBe('Europe/Paris');
    expect(canonicalTimeZone('UTC')).toBe('UTC');
    expect(canonicalTimeZone('utc')).toBe('UTC');
    expect(canonicalTimeZone('America/Argentina/Buenos_Aires'.toUpperCase())).toBe(canonicalTimeZone('America/Argentina/Buenos_Aires'));
    for (const bad of ['', 'Europe/Pariss', 'Not/AZone', 'Europe/Paris ', ' UTC', 'Mars/Olympus_Mons', 'x'.repeat(101), `Europe/Paris${'x'.repeat(100)}`]) {
      expect(canonicalTimeZone(bad), bad).toBeNull();
      expect(isValidTimeZone(bad), bad).toBe(false);
    }
    expect(canonicalTimeZone(undefined as unknown as string)).toBeNull();
    expect(isValidTimeZone('europe/PARIS')).toBe(true);
  });

  it('every listed zone is its own canonical name, in every letter case', () => {
    for (const z of ZONES) {
      expect(canonicalTimeZone(z)).toBe(z);
      expect(canonicalTimeZone(z.toLowerCase())).toBe(z);
      expect(canonicalTimeZone(z.toUpperCase())).toBe(z);
    }
  });

  it('aliases outside the listed names resolve through Intl, stably and case-insensitively', () => {
    for (const alias of ['US/Pacific', 'Etc/GMT+5', 'Etc/UTC', 'GMT', 'America/Argentina/ComodRivadavia', 'Asia/Calcutta', 'Europe/Kiev']) {
      const c = canonicalTimeZone(alias);
      expect(c, alias).not.toBeNull();
      expect(canonicalTimeZone(c as string)).toBe(c);
      expect(canonicalTimeZone(alias.toLowerCase())).toBe(c);
      expect(canonicalTimeZone(alias.toUpperCase())).toBe(c);
      expect(c).toBe(new Intl.DateTimeFormat('en-US', { timeZone: alias }).resolvedOptions().timeZone);
    }
    expect(canonicalTimeZone('Etc/GMT+5')).toBe('Etc/GMT+5');
  });

  it("the tz database's current names are kept as sent, where Intl lists an older name (Asia/Kolkata, not Asia/Calcutta)", () => {
    for (const [current, older] of [['Asia/Kolkata', 'Asia/Calcutta'], ['Europe/Kyiv', 'Europe/Kiev'], ['Asia/Ho_Chi_Minh', 'Asia/Saigon'], ['America/Nuuk', 'America/Godthab'], ['America/Argentina/Buenos_Aires', 'America/Buenos_Aires']] as const) {
      expect(canonicalTimeZone(current)).toBe(current);
      expect(canonicalTimeZone(current.toLowerCase())).toBe(current);
      expect(canonicalTimeZone(older)).toBe(older);
      // The same zone under either name: the same local dates.
      for (const ms of [Date.UTC(2022, 2, 27, 0, 30), Date.UTC(2026, 9, 25, 0, 30), Date.UTC(2026, 5, 1, 22, 0)]) {
        expect(localDateOf(ms, current)).toBe(localDateOf(ms, older));
      }
    }
  });

  it('localDateOf and startOfLocalDate accept any spelling of a zone and reject unknown zones', () => {
    const t = Date.parse('2024-07-01T22:30:00Z');
    expect(localDateOf(t, 'asia/tokyo')).toBe('2024-07-02');
    expect(localDateOf(t, 'ASIA/TOKYO')).toBe(localDateOf(t, 'Asia/Tokyo'));
    expect(startOfLocalDate('2024-07-02', 'asia/TOKYO').toISOString()).toBe('2024-07-01T15:00:00.000Z');
    expect(() => localDateOf(t, 'Not/AZone')).toThrow(RangeError);
    expect(() => localDateOf(NaN, 'UTC')).toThrow(RangeError);
    expect(() => localDateOf(new Date(NaN), 'Europe/Paris')).toThrow(RangeError);
    expect(localDateOf(8.64e15, 'UTC')).toBe('275760-09-13');
    expect(localDateOf(-8.64e15, 'UTC')).toBe('-271821-04-20');
    expect(() => startOfLocalDate('2024-07-02', '')).toThrow(RangeError);
  });

  it('20 000 letter-case spellings of valid zones grow neither the heap nor RSS (was +1.1 GB RSS)', () => {
    const gc = collector();
    const bases = ['America/Argentina/ComodRivadavia', 'Europe/Paris', 'America/Los_Angeles', 'Australia/Lord_Howe', 'US/Pacific', 'America/Indiana/Indianapolis'];
    const rnd = prng(42);
    const seen = new Set<string>();
    const spell = () => {
      for (;;) {
        const base = bases[Math.floor(rnd() * bases.length)] as string;
        let s = '';
        for (const ch of base) s += rnd() < 0.5 ? ch.toLowerCase() : ch.toUpperCase();
        if (!seen.has(s)) {
          seen.add(s);
          return s;
        }
      }
    };
    const t = Date.parse('2024-03-10T12:00:00Z');
    const exercise = (n: number) => {
      for (let i = 0; i < n; i++) {
        const s = spell();
        if (!isValidTimeZone(s)) throw new Error(`rejected ${s}`);
        const d = localDateOf(t + i * 60_000, s);
        startOfLocalDate(d, s);
      }
    };
    exercise(2000); // warm-up: builds the name table, the zones and the day caches
    gc();
    gc();
    const before = process.memoryUsage();
    exercise(20_000);
    gc();
    gc();
    const after = process.memoryUsage();
    expect(seen.size).toBe(22_000);
    // A cached Intl.DateTimeFormat is mostly ICU memory outside the JS heap: the bug showed as +12 MB of heap
    // but +1.1 GB of RSS for these 20 000 spellings, so both are bounded.
    const MB = 1024 * 1024;
    const growth = `heap +${((after.heapUsed - before.heapUsed) / MB).toFixed(1)} MB, rss +${((after.rss - before.rss) / MB).toFixed(1)} MB`;
    expect(after.heapUsed - before.heapUsed, growth).toBeLessThan(20 * MB);
    expect(after.rss - before.rss, growth).toBeLessThan(64 * MB);
  });
});

describe('startOfLocalDate', () => {
  const at = (date: string, tz: string) => startOfLocalDate(date, tz).toISOString();

  it('is local midnight on ordinary days and on 23 and 25 hour days whose change is not at midnight', () => {
    expect(at('2024-03-10', 'America/New_York')).toBe('2024-03-10T05:00:00.000Z');
    expect(at('2024-03-11', 'America/New_York')).toBe('2024-03-11T04:00:00.000Z');
    expect(at('2024-10-27', 'Europe/Paris')).toBe('2024-10-26T22:00:00.000Z');
    expect(at('2024-10-28', 'Europe/Paris')).toBe('2024-10-27T23:00:00.000Z');
    expect(at('2024-01-01', 'UTC')).toBe('2024-01-01T00:00:00.000Z');
    expect(at('2024-01-01', 'Asia/Kathmandu')).toBe('2023-12-31T18:15:00.000Z');
  });

  it('starts a day whose midnight falls in a DST gap at the first valid instant (01:00 local)', () => {
    // America/Santiago 2022-09-10 24:00 -04 -> 2022-09-11 01:00 -03.
    expect(at('2022-09-11', 'America/Santiago')).toBe('2022-09-11T04:00:00.000Z');
    expect(localDateOf(Date.parse('2022-09-11T03:59:59.999Z'), 'America/Santiago')).toBe('2022-09-10');
    expect(at('2022-09-12', 'America/Santiago')).toBe('2022-09-12T03:00:00.000Z');
    expect(at('2022-09-11', 'America/Coyhaique')).toBe('2022-09-11T04:00:00.000Z');
    // Atlantic/Azores 2023-03-25 24:00 -01 -> 2023-03-26 01:00 +00.
    expect(at('2023-03-26', 'Atlantic/Azores')).toBe('2023-03-26T01:00:00.000Z');
    // Africa/Cairo 2023-04-27 24:00 +02 -> 2023-04-28 01:00 +03.
    expect(at('2023-04-28', 'Africa/Cairo')).toBe('2023-04-27T22:00:00.000Z');
    // America/Havana 2023-03-11 24:00 -05 -> 2023-03-12 01:00 -04.
    expect(at('2023-03-12', 'America/Havana')).toBe('2023-03-12T05:00:00.000Z');
    // Asia/Beirut 2023-03-25 24:00 +02 -> 2023-03-26 01:00 +03.
    expect(at('2023-03-26', 'Asia/Beirut')).toBe('2023-03-25T22:00:00.000Z');
    // America/Asuncion 2023-09-30 24:00 -04 -> 2023-10-01 01:00 -03.
    expect(at('2023-10-01', 'America/Asuncion')).toBe('2023-10-01T04:00:00.000Z');
  });

  it('when the clocks fall back at midnight, the long day keeps the repeated hour and the next day starts after it', () => {
    // America/Santiago 2023-04-02 00:00 -03 -> 2023-04-01 23:00 -04: 2023-04-01 lasts 25 hours.
    expect(at('2023-04-01', 'America/Santiago')).toBe('2023-04-01T03:00:00.000Z');
    expect(at('2023-04-02', 'America/Santiago')).toBe('2023-04-02T04:00:00.000Z');
  });

  it('when midnight repeats (a fall-back at 00:01), the day starts at its first occurrence', () => {
    // America/St_Johns 2009-11-01 00:01 -02:30 -> 2009-10-31 23:01 -03:30.
    expect(at('2009-11-01', 'America/St_Johns')).toBe('2009-11-01T02:30:00.000Z');
    expect(localDateOf(Date.parse('2009-11-01T02:29:59.999Z'), 'America/St_Johns')).toBe('2009-10-31');
  });

  it('a date the zone skipped starts where the next existing date starts', () => {
    // Pacific/Apia went from 2011-12-29 23:59:59 -10 to 2011-12-31 00:00 +14.
    expect(at('2011-12-30', 'Pacific/Apia')).toBe('2011-12-30T10:00:00.000Z');
    expect(at('2011-12-31', 'Pacific/Apia')).toBe('2011-12-30T10:00:00.000Z');
    expect(at('2011-12-29', 'Pacific/Apia')).toBe('2011-12-29T10:00:00.000Z');
  });

  it('gives an Invalid Date for a malformed date, and returns a fresh Date every time', () => {
    expect(Number.isNaN(startOfLocalDate('garbage', 'UTC').getTime())).toBe(true);
    const a = startOfLocalDate('2024-05-05', 'Europe/Paris');
    a.setTime(0);
    expect(startOfLocalDate('2024-05-05', 'Europe/Paris').toISOString()).toBe('2024-05-04T22:00:00.000Z');
  });

  it('in EVERY zone, 2000..2026: the dates around each offset change start at their first instant', () => {
    const from = Date.UTC(2000, 0, 1);
    const to = Date.UTC(2027, 0, 1);
    const STEP = 7 * DAY;
    const midnightGaps = new Map<string, number>();
    let transitions = 0;
    let checked = 0;
    for (const tz of ZONES) {
      // Offset changes, sampled weekly and located to the millisecond.
      const changes: number[] = [];
      let prev = from;
      let oPrev = refOffset(prev, tz);
      for (let t = from + STEP; t <= to; t += STEP) {
        const o = refOffset(t, tz);
        if (o !== oPrev) {
          let lo = prev;
          let hi = t;
          while (hi - lo > 1) {
            const mid = Math.floor((lo + hi) / 2);
            if (refOffset(mid, tz) === oPrev) lo = mid;
            else hi = mid;
          }
          changes.push(hi);
          oPrev = refOffset(hi, tz);
          if (oPrev !== o) t = hi; // another change before t: resume from this one
        }
        prev = t;
      }
      transitions += changes.length;
      // Reference local date, from the reference offset (years 2000..2027 only).
      const ref = (ms: number) => new Date(ms + refOffset(ms, tz)).toISOString().slice(0, 10);
      for (const T of changes) {
        const before = ref(T - 1);
        const after = ref(T);
        expect(localDateOf(T - 1, tz), `${tz} ${T - 1}`).toBe(before);
        expect(localDateOf(T, tz), `${tz} ${T}`).toBe(after);
        const wallMs = (((T + refOffset(T, tz)) % DAY) + DAY) % DAY;
        if (after > before && wallMs !== 0) midnightGaps.set(tz, (midnightGaps.get(tz) ?? 0) + 1);
        for (const d of new Set([before, after, addDays(after, 1)])) {
          const s = startOfLocalDate(d, tz).getTime();
          const where = `${tz} ${d} -> ${new Date(s).toISOString()}`;
          expect(ref(s), where).toBe(d);
          expect(ref(s - 1) < d, where).toBe(true);
          expect(localDateOf(s, tz), where).toBe(d);
          expect(localDateOf(s - 1, tz) < d, where).toBe(true);
          // No earlier instant has reached d: local dates only rise between offset changes, so it is enough
          // that the instant before every change in the preceding 40 hours, and 40 hours before, is earlier.
          expect(ref(s - 40 * HOUR) < d, where).toBe(true);
          for (const c of changes) if (c <= s && c > s - 40 * HOUR) expect(ref(c - 1) < d, `${where} (change at ${new Date(c).toISOString()})`).toBe(true);
          checked += 1;
        }
      }
    }
    expect(transitions).toBeGreaterThan(5000);
    expect(checked).toBeGreaterThan(10_000);
    // Not vacuous: the DST-at-midnight zones were found and checked.
    expect(midnightGaps.get('America/Santiago') ?? 0).toBeGreaterThan(20);
    expect(midnightGaps.get('Atlantic/Azores') ?? 0).toBeGreaterThan(20);
    for (const tz of ['Africa/Cairo', 'America/Havana', 'Asia/Beirut', 'America/Asuncion']) expect(midnightGaps.get(tz) ?? 0, tz).toBeGreaterThan(0);
  });
});

describe('supported range', () => {
  it('constants', () => {
    expect(MIN_LOCAL_DATE).toBe('1900-01-01');
    expect(MAX_LOCAL_DATE).toBe('8999-12-31');
    expect(MIN_INSTANT_MS).toBe(Date.parse('1900-01-02T00:00:00.000Z'));
    expect(MAX_INSTANT_MS).toBe(Date.parse('8999-12-30T00:00:00.000Z'));
  });

  it('isSupportedInstant', () => {
    expect(isSupportedInstant(MIN_INSTANT_MS)).toBe(true);
    expect(isSupportedInstant(MAX_INSTANT_MS)).toBe(true);
    expect(isSupportedInstant(MIN_INSTANT_MS - 1)).toBe(false);
    expect(isSupportedInstant(MAX_INSTANT_MS + 1)).toBe(false);
    expect(isSupportedInstant(new Date('2026-01-01T00:00:00Z'))).toBe(true);
    expect(isSupportedInstant(new Date(NaN))).toBe(false);
    expect(isSupportedInstant(NaN)).toBe(false);
    expect(isSupportedInstant(new Date('0050-01-01T00:00:00Z'))).toBe(false);
  });

  it('in every zone, the local dates of the first and last supported instants are inside the date range', () => {
    for (const tz of [...ZONES, 'UTC', 'Etc/GMT+12', 'Etc/GMT-14']) {
      const first = localDateOf(MIN_INSTANT_MS, tz);
      const last = localDateOf(MAX_INSTANT_MS, tz);
      expect(first >= MIN_LOCAL_DATE && isValidLocalDate(first), `${tz} ${first}`).toBe(true);
      expect(last <= MAX_LOCAL_DATE && isValidLocalDate(last), `${tz} ${last}`).toBe(true);
    }
  });

  it('isValidLocalDate accepts real dates from 1900-01-01 to 8999-12-31 only', () => {
    for (const ok of ['1900-01-01', '8999-12-31', '2024-02-29', '2000-02-29', '2023-12-31']) expect(isValidLocalDate(ok), ok).toBe(true);
    for (const bad of ['0050-03-01', '0000-01-01', '1899-12-31', '0099-12-31', '1900-02-29', '2023-02-29', '2024-02-30', '2024-13-01', '2024-00-10', '2024-01-00', '2024-04-31',
      '10000-01-01', '-0001-01-01', '2024-1-01', '2024-01-1', '2024/01/01', '2024-01-01T00', ' 2024-01-01', '2024-01-0a', '+024-01-01', '2024-+1-01', '', 'garbage!!']) {
      expect(isValidLocalDate(bad), bad).toBe(false);
    }
  });

  it('years 0000..0099 are not 1900..1999 in day arithmetic', () => {
    const ref = (y: number, m: number, d: number) => {
      const dt = new Date(0);
      dt.setUTCFullYear(y, m - 1, d);
      return Math.round(dt.getTime() / DAY);
    };
    expect(dayNumber('0050-03-01')).toBe(ref(50, 3, 1));
    expect(dayNumber('0000-01-01')).toBe(ref(0, 1, 1));
    expect(dateOfDayNumber(ref(50, 3, 1))).toBe('0050-03-01');
    expect(addDays('0004-02-28', 1)).toBe('0004-02-29'); // 4 is a leap year; 1904 is too but 1900 is not:
    expect(addDays('0000-02-28', 1)).toBe('0000-02-29'); // 0 is a leap year, 1900 is not
    expect(addMonths('0000-01-31', 1)).toBe('0000-02-29');
    expect(dayNumber('1900-01-01')).toBe(-25_567);
    expect(dayNumber('9999-12-31')).toBe(2_932_896);
  });

  it('arithmetic past the range stays exact, in an extended form that dayNumber reads back', () => {
    expect(addDays('9999-12-31', 1)).toBe('10000-01-01');
    expect(addDays('10000-01-01', -1)).toBe('9999-12-31');
    expect(addMonths('9999-12-15', 1)).toBe('10000-01-15');
    expect(periodStartOf('10000-01-15', 'monthly')).toBe('10000-01-01');
    expect(periodsBetween('9999-12-01', '10000-02-01', 'monthly')).toBe(2);
    expect(addDays('0000-01-01', -1)).toBe('-0001-12-31');
    expect(dayNumber('-0001-12-31')).toBe(dayNumber('0000-01-01') - 1);
    expect(startOfLocalDate('10000-01-01', 'UTC').getTime()).toBe(Date.parse('+010000-01-01T00:00:00Z'));
    expect(() => dateOfDayNumber(NaN)).toThrow(RangeError);
    expect(() => addMonths('2024-01-31', 1.5)).toThrow(RangeError);
  });

  it('localDateOf writes every year in full, including years <= 0 (no era ambiguity)', () => {
    expect(localDateOf(Date.parse('0050-03-01T12:00:00Z'), 'UTC')).toBe('0050-03-01');
    expect(localDateOf(Date.parse('0000-03-01T12:00:00Z'), 'UTC')).toBe('0000-03-01');
    expect(localDateOf(Date.parse('-000001-03-01T12:00:00Z'), 'UTC')).toBe('-0001-03-01');
    expect(localDateOf(Date.parse('+010000-01-01T12:00:00Z'), 'UTC')).toBe('10000-01-01');
  });
});

describe('a user keeps the zone name they sent', () => {
  it('Asia/Kolkata stays Asia/Kolkata in the user record and in change notifications', async () => {
    const { createEngine, defineConfig } = await import('../src/index.js');
    const { createMemoryStore } = await import('../src/memory.js');
    const engine = createEngine({ config: defineConfig({ metrics: [{ key: 'm', name: 'M' }], timeZone: 'europe/kyiv' }), store: createMemoryStore(), clock: () => new Date('2026-01-06T10:00:00Z') });
    expect(engine.config.timeZone).toBe('Europe/Kyiv');
    await engine.recordEvent('m', { user: { id: 'u', tz: 'asia/kolkata' }, value: 1 });
    expect((await engine.getUser('u')).tz).toBe('Asia/Kolkata');
    await engine.identifyUser({ id: 'u', tz: 'Asia/Calcutta' });
    expect((await engine.getUser('u')).tz).toBe('Asia/Calcutta');
  });
});
