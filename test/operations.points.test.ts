/**
 * Issue 13, adjustPoints (docs/rules.md section 12): explicit grants and spends, on the memory store and
 * PostgreSQL, idempotent with a key, reproduced by replay; and the property that spends never take a balance
 * below zero.
 */
import fc from 'fast-check';
import { expect, it } from 'vitest';
import { defineConfig, InsufficientPointsError, type AdjustPointsResult, type GrantFreezesResult } from '../src/index.js';
import { onEachStore, setupOn } from './stores.js';

const config = defineConfig({
  metrics: [{ key: 'lessons', name: 'Lessons' }],
  pointsSystems: [
    { key: 'coins', name: 'Coins', maxPoints: 100, levels: [{ key: 'rich', name: 'Rich', points: 50 }], triggers: [{ key: 'per-lesson', type: 'metric', metricKey: 'lessons', metricThreshold: 1, points: 10 }] },
  ],
  leaderboards: [{ key: 'earners', name: 'Earners', rankBy: 'points', pointsSystemKey: 'coins', start: '2026-01-01', timeZone: 'UTC' }],
});

onEachStore('adjustPoints', (kind) => {
  it('grants and spends are awards with trigger type adjustment and the reason, in summaries and boards', async () => {
    const t = await setupOn(kind, config, '2026-03-02T09:00:00Z');
    await t.engine.recordEvent('lessons', { user: { id: 'u1' }, value: 2 });
    const grant = await t.engine.adjustPoints('u1', 'coins', 40, { reason: 'support gesture' });
    expect(grant).toMatchObject({ awarded: 40, total: 60 });
    expect(grant.points.coins).toMatchObject({ total: 60, added: 40, level: { key: 'rich' }, awards: [{ awarded: 40, trigger: { id: 'adjustment', type: 'adjustment', points: 40, reason: 'support gesture' } }] });
    const spend = await t.engine.adjustPoints('u1', 'coins', -25, { reason: 'shop' });
    expect(spend).toMatchObject({ awarded: -25, total: 35 });
    const summary = await t.engine.getPointsSummary('u1', 'coins', { awards: 5 });
    expect(summary.total).toBe(35);
    expect(summary.awards.slice(0, 2).map((a) => [a.awarded, a.trigger.type, a.trigger.reason])).toEqual([
      [-25, 'adjustment', 'shop'],
      [40, 'adjustment', 'support gesture'],
    ]);
    expect((await t.engine.getLeaderboard('earners')).rankings).toEqual([{ userId: 'u1', userName: null, rank: 1, value: 35 }]);
    await t.engine.accrue('u1');
    const report = await t.engine.replay({ policy: 'retroactive', dryRun: true, users: ['u1'] });
    expect(report.diffs.filter((d) => d.changed)).toEqual([]);
  });

  it('a spend the balance cannot cover fails whole with InsufficientPointsError; a grant stops at maxPoints', async () => {
    const t = await setupOn(kind, config, '2026-03-02T09:00:00Z');
    await t.engine.recordEvent('lessons', { user: { id: 'u1' }, value: 3 });
    const error = await t.engine.adjustPoints('u1', 'coins', -31).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(InsufficientPointsError);
    expect(error).toMatchObject({ status: 422, total: 30, required: 31 });
    expect((await t.engine.getPointsSummary('u1', 'coins')).total).toBe(30);
    expect(await t.engine.adjustPoints('u1', 'coins', 500)).toMatchObject({ awarded: 70, total: 100 });
    expect(await t.engine.adjustPoints('u1', 'coins', 1)).toMatchObject({ awarded: 0, total: 100, points: {} });
    expect(await t.engine.adjustPoints('u1', 'coins', -100)).toMatchObject({ awarded: -100, total: 0 });
  });

  it('is idempotent with a key, and refuses bad input changing nothing', async () => {
    const t = await setupOn(kind, config, '2026-03-02T09:00:00Z');
    await t.engine.identifyUser({ id: 'u1' });
    expect(await t.engine.adjustPoints('u1', 'coins', 10, { idempotencyKey: 'k1' })).toMatchObject({ awarded: 10, idempotentReplayed: false });
    expect(await t.engine.adjustPoints('u1', 'coins', 10, { idempotencyKey: 'k1' })).toMatchObject({ awarded: 10, total: 10, idempotentReplayed: true });
    expect((await t.engine.getPointsSummary('u1', 'coins')).total).toBe(10);
    await expect(t.engine.adjustPoints('u1', 'coins', 0)).rejects.toMatchObject({ code: 'VALIDATION' });
    await expect(t.engine.adjustPoints('u1', 'coins', 1.5)).rejects.toMatchObject({ code: 'VALIDATION' });
    await expect(t.engine.adjustPoints('u1', 'gems' as 'coins', 1)).rejects.toMatchObject({ code: 'NOT_FOUND' });
    await expect(t.engine.adjustPoints('nobody', 'coins', 1)).rejects.toMatchObject({ code: 'NOT_FOUND' });
    await expect(t.engine.adjustPoints('u1', 'coins', 1, { reason: '' })).rejects.toMatchObject({ code: 'VALIDATION' });
    expect((await t.engine.getPointsSummary('u1', 'coins')).total).toBe(10);
  });

  it('property: adjustPoints spends never take a balance below zero', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(fc.integer({ min: -60, max: 60 }).filter((n) => n !== 0), { minLength: 1, maxLength: 15 }), async (amounts) => {
        const t = await setupOn(kind, config, '2026-03-02T09:00:00Z');
        await t.engine.identifyUser({ id: 'u1' });
        let expected = 0;
        for (const amount of amounts) {
          const out = await t.engine.adjustPoints('u1', 'coins', amount).catch((e: unknown) => e);
          if (amount < 0 && expected + amount < 0) {
            expect(out).toBeInstanceOf(InsufficientPointsError);
          } else {
            expected = Math.min(100, expected + amount);
            expect(out).toMatchObject({ total: expected });
          }
          const total = (await t.engine.getPointsSummary('u1', 'coins')).total;
          expect(total).toBe(expected);
          expect(total).toBeGreaterThanOrEqual(0);
        }
      }),
      { numRuns: kind === 'memory' ? 60 : 5 },
    );
  }, 120_000);
});

const shop = defineConfig({
  metrics: [{ key: 'lessons', name: 'Lessons' }],
  streak: { frequency: 'daily', freezes: { initial: 0, max: 1 } },
  pointsSystems: [{ key: 'coins', name: 'Coins', triggers: [{ key: 'per-lesson', type: 'metric', metricKey: 'lessons', metricThreshold: 1, points: 10 }] }],
});

const buy = [
  { op: 'adjustPoints' as const, system: 'coins', amount: -30, reason: 'freeze' },
  { op: 'grantFreezes' as const, count: 1, requireRoom: true },
];

onEachStore('runOperations', (kind) => {
  it('buys a freeze with coins atomically and idempotently: both or neither, charged once', async () => {
    const t = await setupOn(kind, shop, '2026-03-02T09:00:00Z');
    await t.engine.recordEvent('lessons', { user: { id: 'u1' }, value: 2 });
    // Short of coins: nothing happens, not even the freeze.
    await expect(t.engine.runOperations('u1', buy, { idempotencyKey: 'order-1' })).rejects.toBeInstanceOf(InsufficientPointsError);
    expect((await t.engine.getStreak('u1')).freezes).toBe(0);
    await t.engine.recordEvent('lessons', { user: { id: 'u1' }, value: 5 });
    const [spent, granted] = (await t.engine.runOperations('u1', buy, { idempotencyKey: 'order-2' })) as [AdjustPointsResult, GrantFreezesResult];
    expect(spent).toMatchObject({ awarded: -30, total: 40, idempotentReplayed: false });
    expect(granted).toMatchObject({ granted: 1, streak: { freezes: 1 }, idempotentReplayed: false });
    const again = await t.engine.runOperations('u1', buy, { idempotencyKey: 'order-2' });
    expect(again).toMatchObject([{ awarded: -30, total: 40, idempotentReplayed: true }, { granted: 1, idempotentReplayed: true }]);
    // No room for a second freeze: the coins are not spent either.
    await expect(t.engine.runOperations('u1', buy, { idempotencyKey: 'order-3' })).rejects.toMatchObject({ code: 'VALIDATION' });
    expect((await t.engine.getPointsSummary('u1', 'coins')).total).toBe(40);
    expect((await t.engine.getStreak('u1')).freezes).toBe(1);
    await t.engine.accrue('u1');
    const report = await t.engine.replay({ policy: 'retroactive', dryRun: true, users: ['u1'] });
    expect(report.diffs.filter((d) => d.changed)).toEqual([]);
  });
});

const energy = (anchor: 'created' | 'lastSpend') =>
  defineConfig({
    metrics: [{ key: 'plays', name: 'Plays' }],
    pointsSystems: [
      {
        key: 'hearts',
        name: 'Hearts',
        maxPoints: 5,
        triggers: [
          { key: 'start', type: 'user_creation', points: 5 },
          { key: 'refill', type: 'time', timeUnit: 'hour', timeInterval: 1, points: 1, anchor },
          { key: 'play', type: 'metric', metricKey: 'plays', metricThreshold: 1, points: -1, blockIfOutOfPoints: true },
        ],
      },
    ],
  });

onEachStore('energy refills and nextGrantAt', (kind) => {
  it("anchor: 'lastSpend' refills relative to the last spend, and getPointsSummary tells when the next refill is due", async () => {
    const t = await setupOn(kind, energy('lastSpend'), '2026-03-02T09:00:00Z');
    await t.engine.identifyUser({ id: 'u1' });
    expect((await t.engine.getPointsSummary('u1', 'hearts')).nextGrantAt).toEqual({ refill: null }); // full
    t.set('2026-03-02T09:30:00Z');
    await t.engine.recordEvent('plays', { user: { id: 'u1' }, value: 1 });
    expect(await t.engine.getPointsSummary('u1', 'hearts')).toMatchObject({ total: 4, nextGrantAt: { refill: '2026-03-02T10:30:00.000Z' } });
    t.set('2026-03-02T10:00:00Z');
    await t.engine.recordEvent('plays', { user: { id: 'u1' }, value: 1 });
    // The second spend restarts the timer.
    expect(await t.engine.getPointsSummary('u1', 'hearts')).toMatchObject({ total: 3, nextGrantAt: { refill: '2026-03-02T11:00:00.000Z' } });
    t.set('2026-03-02T11:59:59Z');
    expect((await t.engine.getPointsSummary('u1', 'hearts')).total).toBe(4);
    t.set('2026-03-02T12:00:00Z');
    expect(await t.engine.getPointsSummary('u1', 'hearts')).toMatchObject({ total: 5, nextGrantAt: { refill: null } });
    await t.engine.accrue('u1');
    const report = await t.engine.replay({ policy: 'retroactive', dryRun: true, users: ['u1'] });
    expect(report.diffs.filter((d) => d.changed)).toEqual([]);
  });

  it("anchor: 'created' (the default) keeps the fixed schedule from creation", async () => {
    const t = await setupOn(kind, energy('created'), '2026-03-02T09:00:00Z');
    await t.engine.identifyUser({ id: 'u1' });
    t.set('2026-03-02T09:30:00Z');
    await t.engine.recordEvent('plays', { user: { id: 'u1' }, value: 1 });
    expect(await t.engine.getPointsSummary('u1', 'hearts')).toMatchObject({ total: 4, nextGrantAt: { refill: '2026-03-02T10:00:00.000Z' } });
    t.set('2026-03-02T10:00:00Z');
    expect((await t.engine.getPointsSummary('u1', 'hearts')).total).toBe(5);
  });
});
