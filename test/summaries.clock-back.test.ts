/**
 * A summary's `total` is the total at the end of the period and `change` its net change (docs/rules.md,
 * section 6), whatever order the rows were written in. Rows carry running totals in commit order; after a
 * clock stepped back (an NTP correction), that is not time order, and a summary that took each period's
 * closing total from its latest row put changes in the wrong days (03-02: 111 / +111, 03-03: 11 / -100).
 * Totals are now summed by instant. Found by a time-zone fuzz.
 */
import { expect, it } from 'vitest';
import { createEngine, defineConfig } from '../src/index.js';
import { createMemoryStore } from '../src/memory.js';
import { sequentialIds } from '../src/testing/index.js';

it('a clock stepping back: metric and points summaries count each change in the day it is dated', async () => {
  const config = defineConfig({
    timeZone: 'UTC',
    metrics: [{ key: 'm', name: 'M' }],
    pointsSystems: [{ key: 'xp', name: 'XP', triggers: [{ key: 'per', type: 'metric', metricKey: 'm', metricThreshold: 1, points: 1 }] }],
  });
  let now = Date.parse('2026-03-02T23:55:00Z');
  const engine = createEngine({ config, store: createMemoryStore(), clock: () => new Date(now), newId: sequentialIds() });
  await engine.recordEvent('m', { user: { id: 'u' }, value: 1 });
  now = Date.parse('2026-03-03T00:05:00Z');
  await engine.recordEvent('m', { user: { id: 'u' }, value: 10 });
  now = Date.parse('2026-03-02T23:56:00Z'); // the clock stepped back
  await engine.recordEvent('m', { user: { id: 'u' }, value: 100 });
  now = Date.parse('2026-03-04T12:00:00Z');
  const range = { aggregation: 'daily', startDate: '2026-03-02', endDate: '2026-03-04' } as const;
  expect((await engine.getMetricEventSummary('u', 'm', range)).map((r) => [r.date, r.total, r.change])).toEqual([
    ['2026-03-02', 101, 101],
    ['2026-03-03', 111, 10],
    ['2026-03-04', 111, 0],
  ]);
  expect((await engine.getPointsEventSummary('u', 'xp', range)).map((r) => [r.date, r.total, r.change])).toEqual([
    ['2026-03-02', 101, 101],
    ['2026-03-03', 111, 10],
    ['2026-03-04', 111, 0],
  ]);
});
