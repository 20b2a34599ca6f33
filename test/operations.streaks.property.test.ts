/**
 * Issue 13, streak operations: for any days of activity and any pauses and freeze grants, the streak with
 * them is never shorter, day after day, than the same history without them (memory store; PostgreSQL with
 * fewer runs).
 */
import fc from 'fast-check';
import { expect, it } from 'vitest';
import { addDays } from '../src/core/calendar.js';
import { defineConfig } from '../src/index.js';
import { onEachStore, setupOn, type StoreName } from './stores.js';

const DAY = 86_400_000;
const START = '2026-03-02';

const config = defineConfig({
  metrics: [{ key: 'lessons', name: 'Lessons' }],
  streak: { frequency: 'daily', freezes: { initial: 0, max: 2 } },
});

type Op = { kind: 'pause'; offset: number; days: number } | { kind: 'freeze'; count: number } | { kind: 'none' };

const arbDay = fc.record({
  acts: fc.boolean(),
  op: fc.oneof(
    { weight: 3, arbitrary: fc.constant<Op>({ kind: 'none' }) },
    { weight: 1, arbitrary: fc.record({ kind: fc.constant('pause' as const), offset: fc.integer({ min: 0, max: 3 }), days: fc.integer({ min: 1, max: 4 }) }) },
    { weight: 1, arbitrary: fc.record({ kind: fc.constant('freeze' as const), count: fc.integer({ min: 1, max: 3 }) }) },
  ),
});

/** Streak length read at the end of each day, with the operations applied or not. */
async function lengths(kind: StoreName, days: { acts: boolean; op: Op }[], withOps: boolean): Promise<number[]> {
  const t = await setupOn(kind, config, `${START}T12:00:00Z`);
  await t.engine.identifyUser({ id: 'u' });
  const out: number[] = [];
  for (const [i, d] of days.entries()) {
    t.set(`${addDays(START, i)}T12:00:00Z`);
    if (withOps && d.op.kind === 'freeze') await t.engine.grantFreezes('u', d.op.count);
    if (withOps && d.op.kind === 'pause') {
      const start = addDays(START, i + d.op.offset);
      // An overlapping pause is refused; the history goes on without it.
      await t.engine.pauseStreak('u', { start, end: addDays(start, d.op.days - 1) }).catch((e: { code?: string }) => {
        if (e.code !== 'VALIDATION') throw e;
      });
    }
    if (d.acts) await t.engine.recordEvent('lessons', { user: { id: 'u' }, value: 1 });
    t.set(new Date(Date.parse(`${addDays(START, i)}T12:00:00Z`) + DAY / 2 - 1).toISOString());
    out.push((await t.engine.getStreak('u')).length);
  }
  return out;
}

onEachStore('streak operations (property)', (kind) => {
  it('a pause or a freeze never shortens a streak', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(arbDay, { minLength: 1, maxLength: 25 }), async (days) => {
        const plain = await lengths(kind, days, false);
        const helped = await lengths(kind, days, true);
        for (const [i, n] of plain.entries()) expect(helped[i]).toBeGreaterThanOrEqual(n);
      }),
      { numRuns: kind === 'memory' ? 60 : 5 },
    );
  }, 120_000);
});
