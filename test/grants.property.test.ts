/**
 * Time grants made in runs: a user idle for a year gets one award and one ledger row per run of grants, and
 * totals, summaries and boards read exactly as if every grant had been its own row.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { createEngine, defineConfig } from '../src/index.js';
import { createMemoryStore } from '../src/memory.js';
import { sequentialIds } from '../src/testing/index.js';

const HOUR = 3_600_000;
const START = Date.parse('2026-01-05T07:30:00Z');

type TimeTrigger = { key: string; type: 'time'; timeUnit: 'hour' | 'day'; timeInterval: number; points: number };
const arbTrigger: fc.Arbitrary<Omit<TimeTrigger, 'key'>> = fc.record({
  type: fc.constant('time' as const),
  timeUnit: fc.constantFrom('hour' as const, 'day' as const),
  timeInterval: fc.integer({ min: 1, max: 5 }),
  points: fc.constantFrom(1, 2, 3, 5, -1),
});
/** A system's time triggers, keyed by their place in the array (`refill-0`, `refill-1`, ...): unique in it. */
const arbTriggers = (maxLength: number): fc.Arbitrary<TimeTrigger[]> =>
  fc.array(arbTrigger, { minLength: 1, maxLength }).map((ts) => ts.map((t, i) => ({ key: `refill-${i}`, ...t })));

function configOf(triggers: TimeTrigger[], maxPoints: number | null, tz: string) {
  return defineConfig({
    timeZone: tz,
    metrics: [{ key: 'm', name: 'M' }],
    pointsSystems: [{ key: 'e', name: 'E', ...(maxPoints === null ? {} : { maxPoints }), triggers: [{ key: 'signup', type: 'user_creation', points: 10 }, ...triggers, { key: 'per-m', type: 'metric', metricKey: 'm', metricThreshold: 1, points: 1 }] }],
    leaderboards: [{ key: 'wk', name: 'Weekly', rankBy: 'points', pointsSystemKey: 'e', start: '2026-01-05', runUnit: 'day', runInterval: 7, timeZone: tz }],
  });
}

describe('runs of time grants', () => {
  it('give the same totals, summaries and board values as one row per grant', async () => {
    await fc.assert(
      fc.asyncProperty(
        arbTriggers(2),
        fc.option(fc.integer({ min: 15, max: 400 }), { nil: null }),
        fc.constantFrom('UTC', 'Europe/Paris', 'America/New_York', 'Asia/Kathmandu'),
        fc.array(fc.integer({ min: 1, max: 24 * 20 }), { minLength: 1, maxLength: 5 }),
        async (triggers, maxPoints, tz, gapsHours) => {
          const config = configOf(triggers, maxPoints, tz);
          let now = START;
          const coarse = createEngine({ config, store: createMemoryStore(), clock: () => new Date(now), newId: sequentialIds('c') });
          const fine = createEngine({ config, store: createMemoryStore(), clock: () => new Date(now), newId: sequentialIds('f') });
          for (const e of [coarse, fine]) await e.recordEvent('m', { user: { id: 'u' }, value: 1 });
          for (const gap of gapsHours) {
            // `fine` is touched every hour, so it never makes two grants of a trigger at once; `coarse` only at events.
            for (let h = 0; h < gap; h++) {
              now += HOUR;
              await fine.accrue('u');
            }
            await coarse.recordEvent('m', { user: { id: 'u' }, value: 1 });
            await fine.recordEvent('m', { user: { id: 'u' }, value: 1 });
          }
          const end = new Date(now).toISOString().slice(0, 10);
          const a = await coarse.getPointsSummary('u', 'e', { awards: 100 });
          const b = await fine.getPointsSummary('u', 'e', { awards: 100 });
          expect(a.total).toBe(b.total);
          for (const aggregation of ['daily', 'weekly'] as const) {
            const opts = { aggregation, startDate: '2026-01-04', endDate: end < '2027-02-01' ? end : '2027-02-01' };
            expect(await coarse.getPointsEventSummary('u', 'e', opts)).toEqual(await fine.getPointsEventSummary('u', 'e', opts));
          }
          expect((await coarse.getUserLeaderboard('u', 'wk')).value).toBe((await fine.getUserLeaderboard('u', 'wk')).value);
          // The awards of a run add up: its `awarded` is count x points, its total the running total after it.
          const sum = a.awards.reduce((s, x) => s + (x.grants ? x.grants.count : 1), 0);
          expect(sum).toBeGreaterThan(0);
        },
      ),
      { numRuns: 60 },
    );
  }, 120_000);

  it('a summary counts a run that a zone change dated before rows already written', async () => {
    const config = defineConfig({
      timeZone: 'UTC',
      metrics: [{ key: 'm', name: 'M' }],
      pointsSystems: [{ key: 'e', name: 'E', triggers: [{ key: 'daily', type: 'time', timeUnit: 'day', timeInterval: 1, points: 1 }, { key: 'per-m', type: 'metric', metricKey: 'm', metricThreshold: 1, points: 10 }] }],
    });
    let now = Date.parse('2026-03-05T03:01:00Z');
    const engine = createEngine({ config, store: createMemoryStore(), clock: () => new Date(now), newId: sequentialIds() });
    await engine.recordEvent('m', { user: { id: 'u' }, value: 1 });
    now = Date.parse('2026-03-05T06:00:00Z');
    await engine.recordEvent('m', { user: { id: 'u' }, value: 1 });
    now = Date.parse('2026-03-08T12:00:00Z');
    // New York midnights: the grants now fall due from 2026-03-05T05:00Z, before the second event's row.
    await engine.identifyUser({ id: 'u', tz: 'America/New_York' });
    expect((await engine.getPointsSummary('u', 'e')).total).toBe(24);
    // By New York dates: 03-04 the first event (22:01), 03-05 the first grant (00:00) and the second event
    // (01:00). Totals are summed in time order, so each day's change is the difference of its total and the
    // day before's (the first grant's row was written after the second event's).
    const rows = await engine.getPointsEventSummary('u', 'e', { aggregation: 'daily', startDate: '2026-03-04', endDate: '2026-03-08' });
    expect(rows.map((r) => [r.date, r.total, r.change])).toEqual([
      ['2026-03-04', 10, 10],
      ['2026-03-05', 21, 11],
      ['2026-03-06', 22, 1],
      ['2026-03-07', 23, 1],
      ['2026-03-08', 24, 1],
    ]);
  });

  it('a year idle costs one award and one ledger row, and a small response', async () => {
    const config = configOf([{ key: 'hourly', type: 'time', timeUnit: 'hour', timeInterval: 1, points: 1 }], null, 'Europe/Paris');
    let now = START;
    const store = createMemoryStore();
    const engine = createEngine({ config, store, clock: () => new Date(now), newId: sequentialIds() });
    await engine.recordEvent('m', { user: { id: 'u' }, value: 1 });
    now += 365 * 24 * HOUR;
    const response = await engine.recordEvent('m', { user: { id: 'u' }, value: 1 });
    const awards = response.points.e?.awards ?? [];
    expect(awards).toHaveLength(2);
    expect(awards[0]?.grants).toEqual({ count: 8760, unit: 'hour', every: 1, tz: 'Europe/Paris' });
    expect(awards[0]?.awarded).toBe(8760);
    expect(response.points.e?.total).toBe(10 + 1 + 8760 + 1);
    expect(JSON.stringify(response).length).toBeLessThan(5000);
    const rows = await store.readLedger({ userId: 'u', kind: 'points', key: 'e', order: 'asc' });
    expect(rows.map((r) => r.delta)).toEqual([10, 1, 8760, 1]);
    // The weekly board counts only the grants that fell due in the current week.
    const board = await engine.getUserLeaderboard('u', 'wk');
    const monday = Date.parse('2027-01-04T00:00:00+01:00');
    const inWeek = Math.floor((now - monday) / HOUR) + 1;
    expect(board.value).toBe(inWeek + 1);
  });
});
