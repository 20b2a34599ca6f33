import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { applyEvent, defineConfig, type UserState } from '../src/index.js';
import { addDays, localDateOf, periodsBetween, periodStartOf, startOfLocalDate } from '../src/core/calendar.js';
import { arbEventSequence, arbInstant, arbTimeZone, sequentialIds, TIME_ZONES } from '../src/testing/index.js';

const configs = (['daily', 'weekly', 'monthly'] as const).map((frequency) =>
  defineConfig({
    metrics: [{ key: 'lessons', name: 'Lessons' }, { key: 'words', name: 'Words' }],
    achievements: [
      { key: 'one', name: 'One', trigger: 'metric', metricKey: 'lessons', metricValue: 1 },
      { key: 's2', name: 'S2', trigger: 'streak', streakLength: 2 },
      { key: 's4', name: 'S4', trigger: 'streak', streakLength: 4 },
      { key: 'combo', name: 'Combo', trigger: 'achievement', achievementKeys: ['one', 's2'] },
    ],
    streak: { frequency, freezes: { initial: 1, max: 2, autoEarn: { everyDays: 5, amount: 1 } } },
  }),
);

const arbRun = fc.tuple(fc.constantFrom(...configs), fc.constantFrom(...TIME_ZONES)).chain(([config, tz]) =>
  arbEventSequence(config, { users: ['u1'], maxLength: 40, maxGapMs: 40 * 86_400_000, allowNegative: true }).map((events) => ({ config, tz, events })),
);

describe('streak and achievement invariants', () => {
  it('length never exceeds the periods since `started` plus one, grows by at most one per call, and only on a new qualifying period', () => {
    fc.assert(
      fc.property(arbRun, ({ config, tz, events }) => {
        const freq = config.streak?.frequency ?? 'daily';
        let state: UserState | null = null;
        let t = Date.parse('2026-01-01T00:00:00Z');
        const newId = sequentialIds();
        let lastExtendedPeriod: string | null = null;
        for (const e of events) {
          t += e.gapMs;
          const before: number = state?.streak?.length ?? 0;
          const result = applyEvent(config, state, { ...e, user: { id: 'u1', tz } }, { now: new Date(t), newId });
          state = result.state;
          const s = result.response.currentStreak;
          const today = localDateOf(t, tz);
          if (s.length > 0) {
            const started = periodStartOf(s.started as string, freq, config.weekStartsOn);
            expect(s.length).toBeLessThanOrEqual(periodsBetween(started, periodStartOf(today, freq, config.weekStartsOn), freq) + 1);
          }
          if (s.extended) {
            expect(s.length === before + 1 || s.length === 1).toBe(true);
            expect(s.periodStart).not.toBe(lastExtendedPeriod);
            lastExtendedPeriod = s.periodStart;
          } else {
            expect(s.length).toBeLessThanOrEqual(before);
          }
        }
      }),
      { numRuns: 150 },
    );
  });

  it('each achievement unlocks at most once, and stays unlocked', () => {
    fc.assert(
      fc.property(arbRun, ({ config, tz, events }) => {
        let state: UserState | null = null;
        let t = Date.parse('2026-01-01T00:00:00Z');
        const newId = sequentialIds();
        const seen = new Set<string>();
        for (const e of events) {
          t += e.gapMs;
          const result = applyEvent(config, state, { ...e, user: { id: 'u1', tz } }, { now: new Date(t), newId });
          for (const a of result.response.achievements) {
            expect(seen.has(a.key)).toBe(false);
            seen.add(a.key);
          }
          for (const k of seen) expect(result.state.achievements[k]).toBeDefined();
          state = result.state;
        }
      }),
      { numRuns: 150 },
    );
  });

  it('local days partition time: every instant is in exactly one local day, and day keys are monotone', () => {
    fc.assert(
      fc.property(arbTimeZone(), arbInstant('1990-01-01T00:00:00Z', '2040-01-01T00:00:00Z'), fc.integer({ min: 0, max: 5 * 86_400_000 }), (tz, instant, gap) => {
        const day = localDateOf(instant, tz);
        const start = startOfLocalDate(day, tz).getTime();
        const end = startOfLocalDate(addDays(day, 1), tz).getTime();
        expect(start).toBeLessThanOrEqual(instant.getTime());
        expect(instant.getTime()).toBeLessThan(end);
        expect(end - start).toBeGreaterThanOrEqual(22 * 3_600_000);
        expect(end - start).toBeLessThanOrEqual(26 * 3_600_000);
        const later = localDateOf(instant.getTime() + gap, tz);
        expect(later >= day).toBe(true);
      }),
      { numRuns: 2000 },
    );
  });
});
