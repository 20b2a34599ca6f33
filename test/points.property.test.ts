import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { createEngine, defineConfig, isLaurelError } from '../src/index.js';
import { awardOfRow } from '../src/core/points.js';
import { createMemoryStore } from '../src/memory.js';
import { eachGrant } from './helpers.js';
import { arbEventSequence, sequentialIds, TIME_ZONES } from '../src/testing/index.js';

const config = defineConfig({
  timeZone: 'Europe/Berlin',
  metrics: [{ key: 'lessons', name: 'Lessons' }, { key: 'cards', name: 'Cards' }],
  attributes: [{ key: 'device', name: 'Device', type: 'event' }],
  achievements: [{ key: 'ten', name: 'Ten', trigger: 'metric', metricKey: 'lessons', metricValue: 10 }],
  streak: { frequency: 'daily' },
  pointsSystems: [
    {
      key: 'xp',
      name: 'XP',
      maxPoints: 500,
      triggers: [
        { key: 'lessons', type: 'metric', metricKey: 'lessons', metricThreshold: 1.5, points: 7 },
        { key: 'device-a-cards', type: 'metric', metricKey: 'cards', metricThreshold: 2, points: -3, eventAttributes: { device: 'a' } },
        { key: 'streak', type: 'streak', streakLengthThreshold: 2, points: 11 },
        { key: 'ten-lessons', type: 'achievement', achievementKey: 'ten', points: 40 },
        { key: 'signup', type: 'user_creation', points: 3 },
      ],
      boosts: [{ key: 'b', name: 'B', multiplier: 1.5, start: '2026-01-10', end: '2026-01-20', rounding: 'nearest' }],
    },
    {
      key: 'energy',
      name: 'Energy',
      maxPoints: 5,
      triggers: [
        { key: 'signup', type: 'user_creation', points: 5 },
        { key: 'three-hourly-refill', type: 'time', timeUnit: 'hour', timeInterval: 3, points: 1 },
        { key: 'daily-refill', type: 'time', timeUnit: 'day', timeInterval: 1, points: 2 },
        { key: 'per-card', type: 'metric', metricKey: 'cards', metricThreshold: 1, points: -1, blockIfOutOfPoints: true },
      ],
    },
    { key: 'karma', name: 'Karma', allowNegative: true, triggers: [{ key: 'per-card', type: 'metric', metricKey: 'cards', metricThreshold: 1, points: -2 }, { key: 'per-lesson', type: 'metric', metricKey: 'lessons', metricThreshold: 1, points: 1 }] },
  ],
});

const START = Date.parse('2026-01-05T08:00:00Z');

async function run(events: { metricKey: string; user: { id: string }; value: number; attributes?: Record<string, string>; gapMs: number }[], tz: string) {
  let now = START;
  const store = createMemoryStore();
  const engine = createEngine({ config, store, clock: () => new Date(now), newId: sequentialIds() });
  for (const e of events) {
    now += e.gapMs;
    try {
      await engine.recordEvent(e.metricKey as 'lessons', { user: { id: e.user.id, tz }, value: e.value, attributes: e.attributes ?? {} });
    } catch (error) {
      if (!isLaurelError(error) || error.code !== 'INSUFFICIENT_POINTS') throw error;
    }
  }
  return { engine, store, now: () => now };
}

const arbRun = fc.tuple(arbEventSequence(config, { users: ['u1', 'u2'], maxLength: 25, maxGapMs: 20 * 3_600_000, attributeValues: ['a', 'b'], allowNegative: true }), fc.constantFrom(...TIME_ZONES));

describe('points invariants', () => {
  it('total = sum of recorded awards; each award\'s total is the running sum; 0 <= total <= maxPoints unless allowNegative', async () => {
    await fc.assert(
      fc.asyncProperty(arbRun, async ([events, tz]) => {
        const { store } = await run(events, tz);
        for (const userId of ['u1', 'u2']) {
          const loaded = await store.loadUser(userId);
          if (!loaded) continue;
          for (const system of config.pointsSystems) {
            const rows = await store.readLedger({ userId, kind: 'points', key: system.key, order: 'asc' });
            let running = 0;
            for (const row of rows) {
              const award = awardOfRow(system, row);
              expect(award.awarded).not.toBe(0);
              running += award.awarded;
              expect(award.total).toBe(running);
              if (!system.allowNegative) expect(award.total).toBeGreaterThanOrEqual(0);
              if (system.maxPoints !== null) expect(award.total).toBeLessThanOrEqual(system.maxPoints);
            }
            expect(loaded.state.points[system.key]?.total ?? 0).toBe(running);
          }
        }
      }),
      { numRuns: 80 },
    );
  });

  it('summary changes sum to the difference of totals', async () => {
    await fc.assert(
      fc.asyncProperty(arbRun, fc.constantFrom('daily', 'weekly', 'monthly') as fc.Arbitrary<'daily' | 'weekly' | 'monthly'>, async ([events, tz], aggregation) => {
        const { engine } = await run(events, tz);
        const user = await engine.getUser('u1').catch(() => null);
        if (!user) return;
        for (const key of ['xp', 'energy', 'karma'] as const) {
          const rows = await engine.getPointsEventSummary('u1', key, { aggregation, startDate: '2025-12-20', endDate: '2026-03-01' });
          const change = rows.reduce((s, r) => s + r.change, 0);
          // Nothing happened before the range, so the first period opens at 0.
          expect(change).toBe((rows[rows.length - 1]?.total ?? 0) - 0);
          for (let i = 1; i < rows.length; i++) expect((rows[i]?.total ?? 0) - (rows[i - 1]?.total ?? 0)).toBe(rows[i]?.change);
        }
        const metric = await engine.getMetricEventSummary('u1', 'lessons', { aggregation, startDate: '2025-12-20', endDate: '2026-03-01' });
        expect(metric[metric.length - 1]?.total).toBe((await engine.getUserMetric('u1', 'lessons')).current);
      }),
      { numRuns: 40 },
    );
  });

  it('lazily accrued time grants are the same whether the user is touched every minute or once after a week', async () => {
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...TIME_ZONES), fc.integer({ min: 0, max: 5 }), fc.integer({ min: 0, max: 3 * 3_600_000 }), async (tz, spend, offset) => {
        const outcome = async (touchEveryMs: number | null) => {
          let now = START + offset;
          const engine = createEngine({ config, store: createMemoryStore(), clock: () => new Date(now), newId: sequentialIds() });
          await engine.recordEvent('cards', { user: { id: 'u', tz }, value: spend });
          const end = now + 7 * 86_400_000;
          if (touchEveryMs !== null) {
            while (now + touchEveryMs < end) {
              now += touchEveryMs;
              await engine.accrue('u');
            }
          }
          now = end;
          await engine.accrue('u');
          const summary = await engine.getPointsSummary('u', 'energy', { awards: 100 });
          return { total: summary.total, awards: eachGrant(summary.awards, 'desc').map((a) => [a.awarded, a.total, a.date, a.trigger.id]) };
        };
        expect(await outcome(60_000)).toEqual(await outcome(null));
      }),
      { numRuns: 6 },
    );
  }, 120_000);
});
