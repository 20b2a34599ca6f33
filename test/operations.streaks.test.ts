/**
 * Issue 13, streak operations (docs/rules.md, "Operations"): grantFreezes, restoreStreak, pauses, each on the
 * memory store and PostgreSQL, idempotent with a key, and reproduced by replay.
 */
import { expect, it } from 'vitest';
import { defineConfig } from '../src/index.js';
import { onEachStore, setupOn } from './stores.js';

const DAY = 86_400_000;

const config = defineConfig({
  metrics: [{ key: 'lessons', name: 'Lessons' }],
  achievements: [{ key: 'week', name: 'Week', trigger: 'streak', streakLength: 7 }],
  streak: { frequency: 'daily', freezes: { initial: 0, max: 3 } },
  leaderboards: [{ key: 'streaks', name: 'Streaks', rankBy: 'streak', start: '2026-01-01' }],
});

const noFreezes = defineConfig({ metrics: [{ key: 'lessons', name: 'Lessons' }], streak: { frequency: 'daily' } });

/** Acts on each of `days` consecutive days from the clock's day. */
async function actDays(t: Awaited<ReturnType<typeof setupOn>>, userId: string, days: number) {
  for (let i = 0; i < days; i++) {
    if (i > 0) t.advance(DAY);
    await t.engine.recordEvent('lessons', { user: { id: userId }, value: 1 });
  }
}

/** What a retroactive replay of the user would change (nothing, when the ledger reproduces the state). */
async function replayChanges(t: Awaited<ReturnType<typeof setupOn>>, userId: string) {
  // Replay compares against the stored state: materialise the lazy maintenance due by now first.
  await t.engine.accrue(userId);
  const report = await t.engine.replay({ policy: 'retroactive', dryRun: true, users: [userId] });
  return report.diffs.filter((d) => d.changed);
}

onEachStore('grantFreezes', (kind) => {
  it('adds freezes up to the configured maximum and reports the excess', async () => {
    const t = await setupOn(kind, config, '2026-03-02T09:00:00Z');
    await t.engine.identifyUser({ id: 'u1' });
    const first = await t.engine.grantFreezes('u1', 2);
    expect(first).toMatchObject({ granted: 2, excess: 0, streak: { freezes: 2, maxFreezes: 3 } });
    expect(first.warning).toBeUndefined();
    const second = await t.engine.grantFreezes('u1', 2);
    expect(second).toMatchObject({ granted: 1, excess: 1, warning: 'Would exceed maximum freeze limit', streak: { freezes: 3 } });
    expect((await t.engine.getStreak('u1')).freezes).toBe(3);
    expect(await replayChanges(t, 'u1')).toEqual([]);
  });

  it('is idempotent with a key: a repeat returns the first result and adds nothing', async () => {
    const t = await setupOn(kind, config, '2026-03-02T09:00:00Z');
    await t.engine.identifyUser({ id: 'u1' });
    expect(await t.engine.grantFreezes('u1', 1, { idempotencyKey: 'order-1' })).toMatchObject({ granted: 1, idempotentReplayed: false });
    expect(await t.engine.grantFreezes('u1', 1, { idempotencyKey: 'order-1' })).toMatchObject({ granted: 1, excess: 0, idempotentReplayed: true, streak: { freezes: 1 } });
    expect((await t.engine.getStreak('u1')).freezes).toBe(1);
    expect(await t.engine.grantFreezes('u1', 1, { idempotencyKey: 'order-2' })).toMatchObject({ granted: 1, idempotentReplayed: false, streak: { freezes: 2 } });
  });

  it('refuses bad input and unknown users, changing nothing', async () => {
    const t = await setupOn(kind, config, '2026-03-02T09:00:00Z');
    await t.engine.identifyUser({ id: 'u1' });
    await expect(t.engine.grantFreezes('u1', 0)).rejects.toMatchObject({ code: 'VALIDATION' });
    await expect(t.engine.grantFreezes('u1', 1.5)).rejects.toMatchObject({ code: 'VALIDATION' });
    await expect(t.engine.grantFreezes('nobody', 1)).rejects.toMatchObject({ code: 'NOT_FOUND' });
    const bare = await setupOn(kind, noFreezes, '2026-03-02T09:00:00Z');
    await bare.engine.identifyUser({ id: 'u1' });
    await expect(bare.engine.grantFreezes('u1', 1)).rejects.toMatchObject({ code: 'VALIDATION' });
    expect((await t.engine.getStreak('u1')).freezes).toBe(0);
  });
});

onEachStore('restoreStreak', (kind) => {
  it('restores a lost streak to the length it had, then continues as if never lost', async () => {
    const t = await setupOn(kind, config, '2026-03-02T09:00:00Z');
    await actDays(t, 'u1', 5);
    t.advance(3 * DAY);
    expect((await t.engine.getStreak('u1')).length).toBe(0);
    const out = await t.engine.restoreStreak('u1');
    expect(out).toMatchObject({ restored: true, streak: { length: 5, started: '2026-03-02', expires: '2026-03-09' } });
    expect(out.warning).toBeUndefined();
    const r = await t.engine.recordEvent('lessons', { user: { id: 'u1' }, value: 1 });
    expect(r.currentStreak).toMatchObject({ length: 6, started: '2026-03-02', extended: true });
    expect((await t.engine.getLeaderboard('streaks')).rankings).toEqual([{ userId: 'u1', userName: null, rank: 1, value: 6 }]);
    expect(await replayChanges(t, 'u1')).toEqual([]);
  });

  it('a streak begun since the loss continues the restored one', async () => {
    const t = await setupOn(kind, config, '2026-03-02T09:00:00Z');
    await actDays(t, 'u1', 5);
    t.advance(3 * DAY);
    await actDays(t, 'u1', 2);
    const out = await t.engine.restoreStreak('u1');
    expect(out).toMatchObject({ restored: true, streak: { length: 7, started: '2026-03-02' } });
    // The streak achievement the restored length reaches unlocks.
    expect((await t.engine.getUserAchievements('u1')).map((a) => a.key)).toEqual(['week']);
  });

  it('answers a warning when there is nothing to restore or the loss is outside the window', async () => {
    const t = await setupOn(kind, config, '2026-03-02T09:00:00Z');
    await actDays(t, 'u1', 2);
    expect(await t.engine.restoreStreak('u1')).toMatchObject({ restored: false, warning: 'No lost streak to restore', streak: { length: 2 } });
    t.advance(93 * DAY);
    expect(await t.engine.restoreStreak('u1')).toMatchObject({ restored: false, warning: 'The lost streak is outside the restore window', streak: { length: 0 } });
    // Restored once, the loss is spent.
    const u = await setupOn(kind, config, '2026-03-02T09:00:00Z');
    await actDays(u, 'u2', 2);
    u.advance(5 * DAY);
    expect((await u.engine.restoreStreak('u2')).restored).toBe(true);
    expect((await u.engine.restoreStreak('u2')).warning).toBe('No lost streak to restore');
  });
});

onEachStore('streak pauses', (kind) => {
  it('a paused period keeps the streak without adding to its length or using a freeze', async () => {
    const t = await setupOn(kind, config, '2026-03-02T09:00:00Z');
    await actDays(t, 'u1', 3); // 2..4 March
    await t.engine.grantFreezes('u1', 1);
    const { pause } = await t.engine.pauseStreak('u1', { start: '2026-03-05', end: '2026-03-07' });
    expect(pause).toEqual({ id: expect.any(String), start: '2026-03-05', end: '2026-03-07' });
    expect(await t.engine.getStreak('u1')).toMatchObject({ length: 3, expires: '2026-03-08', pauses: [pause] });
    t.set('2026-03-08T09:00:00Z');
    const read = await t.engine.getStreak('u1', { historyPeriods: 7 });
    expect(read).toMatchObject({ length: 3, freezes: 1 });
    expect(read.streakHistory.map((h) => [h.periodStart, h.length, h.usedPause, h.usedFreeze])).toEqual([
      ['2026-03-02', 1, false, false],
      ['2026-03-03', 2, false, false],
      ['2026-03-04', 3, false, false],
      ['2026-03-05', 3, true, false],
      ['2026-03-06', 3, true, false],
      ['2026-03-07', 3, true, false],
      ['2026-03-08', 3, false, false],
    ]);
    const r = await t.engine.recordEvent('lessons', { user: { id: 'u1' }, value: 1 });
    expect(r.currentStreak).toMatchObject({ length: 4, freezes: 1 });
    expect((await t.engine.getStreak('u1')).pauses).toEqual([]);
    expect(await replayChanges(t, 'u1')).toEqual([]);
  });

  it('deletePause removes a pause; the streak then needs activity or a freeze', async () => {
    const t = await setupOn(kind, config, '2026-03-02T09:00:00Z');
    await actDays(t, 'u1', 2);
    const { pause } = await t.engine.pauseStreak('u1', { start: '2026-03-04', end: '2026-03-05' });
    expect(await t.engine.deletePause('u1', pause.id)).toMatchObject({ deleted: true, streak: { pauses: [] } });
    expect(await t.engine.deletePause('u1', pause.id)).toMatchObject({ deleted: false, warning: 'No such pause' });
    t.set('2026-03-06T09:00:00Z');
    expect((await t.engine.getStreak('u1')).length).toBe(0);
    expect(await replayChanges(t, 'u1')).toEqual([]);
  });

  it('refuses a pause starting before today, ending before it starts, or overlapping another', async () => {
    const t = await setupOn(kind, config, '2026-03-02T09:00:00Z');
    await t.engine.identifyUser({ id: 'u1', tz: 'Pacific/Auckland' });
    // 09:00 UTC is 22:00 in Auckland: today there is 2 March; 1 March is in the past.
    await expect(t.engine.pauseStreak('u1', { start: '2026-03-01', end: '2026-03-03' })).rejects.toMatchObject({ code: 'VALIDATION' });
    await expect(t.engine.pauseStreak('u1', { start: '2026-03-05', end: '2026-03-04' })).rejects.toMatchObject({ code: 'VALIDATION' });
    await expect(t.engine.pauseStreak('u1', { start: 'tomorrow', end: '2026-03-04' })).rejects.toMatchObject({ code: 'VALIDATION' });
    await t.engine.pauseStreak('u1', { start: '2026-03-02', end: '2026-03-04' });
    await expect(t.engine.pauseStreak('u1', { start: '2026-03-04', end: '2026-03-06' })).rejects.toMatchObject({ code: 'VALIDATION' });
    expect((await t.engine.getStreak('u1')).pauses).toHaveLength(1);
  });
});

const custom = defineConfig({
  metrics: [
    { key: 'lessons', name: 'Lessons' },
    { key: 'words', name: 'Words' },
  ],
  streak: { frequency: 'daily', metrics: [{ key: 'lessons', threshold: 1 }], customization: { metrics: ['lessons', 'words'], minThreshold: 1, maxThreshold: 1000 } },
  leaderboards: [{ key: 'streaks', name: 'Streaks', rankBy: 'streak', start: '2026-01-01' }],
});

onEachStore('preferences', (kind) => {
  it('notification preferences are stored and returned, with every channel by default', async () => {
    const t = await setupOn(kind, custom, '2026-03-02T09:00:00Z');
    await t.engine.identifyUser({ id: 'u1' });
    expect(await t.engine.getPreferences('u1')).toEqual({
      notifications: { achievement_completed: ['email', 'push'], recap: ['email', 'push'], reactivation: ['email', 'push'], streak_reminder: ['email', 'push'] },
      streak: { enabled: true, mode: 'any', metrics: [{ key: 'lessons', threshold: 1 }] },
    });
    await t.engine.updatePreferences('u1', { notifications: { streak_reminder: [], recap: ['email'] } });
    expect((await t.engine.getPreferences('u1')).notifications).toEqual({ achievement_completed: ['email', 'push'], recap: ['email'], reactivation: ['email', 'push'], streak_reminder: [] });
    await expect(t.engine.updatePreferences('u1', { notifications: { recap: ['sms' as 'email'] } })).rejects.toMatchObject({ code: 'VALIDATION' });
    await expect(t.engine.updatePreferences('u1', { notifications: { digest: ['email'] } as never })).rejects.toMatchObject({ code: 'VALIDATION' });
    await expect(t.engine.getPreferences('nobody')).rejects.toMatchObject({ code: 'NOT_FOUND' });
  });

  it("a user's own streak rule applies within the guardrails; enabled: false keeps the streak at 0", async () => {
    const t = await setupOn(kind, custom, '2026-03-02T09:00:00Z');
    await t.engine.recordEvent('lessons', { user: { id: 'u1' }, value: 1 });
    expect((await t.engine.getStreak('u1')).length).toBe(1);
    // Words instead of lessons, at least 500 a day.
    await t.engine.updatePreferences('u1', { streak: { metrics: [{ key: 'words', threshold: 500 }] } });
    t.advance(DAY);
    expect((await t.engine.recordEvent('lessons', { user: { id: 'u1' }, value: 3 })).currentStreak.length).toBe(1);
    expect((await t.engine.recordEvent('words', { user: { id: 'u1' }, value: 499 })).currentStreak.length).toBe(1);
    expect((await t.engine.recordEvent('words', { user: { id: 'u1' }, value: 1 })).currentStreak).toMatchObject({ length: 2, extended: true });
    await expect(t.engine.updatePreferences('u1', { streak: { metrics: [{ key: 'words', threshold: 5000 }] } })).rejects.toMatchObject({ code: 'VALIDATION' });
    await expect(t.engine.updatePreferences('u1', { streak: { metrics: [{ key: 'nope', threshold: 5 }] } })).rejects.toMatchObject({ code: 'VALIDATION' });
    // Off: the streak reads 0, events do not extend it, and boards follow.
    const off = await t.engine.updatePreferences('u1', { streak: { enabled: false } });
    expect(off.streak.length).toBe(0);
    expect((await t.engine.getLeaderboard('streaks')).rankings).toEqual([]);
    t.advance(DAY);
    expect((await t.engine.recordEvent('words', { user: { id: 'u1' }, value: 900 })).currentStreak.length).toBe(0);
    // On again, back to the configuration's rule: it starts from 0.
    await t.engine.updatePreferences('u1', { streak: { enabled: null, metrics: null } });
    expect((await t.engine.recordEvent('lessons', { user: { id: 'u1' }, value: 1 })).currentStreak.length).toBe(1);
    expect(await t.engine.getPreferences('u1')).toMatchObject({ streak: { enabled: true, metrics: [{ key: 'lessons', threshold: 1 }] } });
    expect(await replayChanges(t, 'u1')).toEqual([]);
  });

  it('a streak turned off is not restored while off', async () => {
    const t = await setupOn(kind, custom, '2026-03-02T09:00:00Z');
    await actDays(t, 'u1', 3);
    t.advance(3 * DAY);
    await t.engine.updatePreferences('u1', { streak: { enabled: false } });
    expect(await t.engine.restoreStreak('u1')).toMatchObject({ restored: false, warning: "The user's streak is turned off", streak: { length: 0 } });
  });

  it('mode and metrics need streak.customization in the configuration', async () => {
    const t = await setupOn(kind, config, '2026-03-02T09:00:00Z');
    await t.engine.identifyUser({ id: 'u1' });
    await expect(t.engine.updatePreferences('u1', { streak: { mode: 'all' } })).rejects.toMatchObject({ code: 'VALIDATION' });
    expect((await t.engine.updatePreferences('u1', { streak: { enabled: false } })).preferences.streak).toMatchObject({ enabled: false });
  });
});
