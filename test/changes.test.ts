/**
 * Issue 15: one example per change-notification rule (docs/rules.md section 15), on the memory store and
 * PostgreSQL: what each type means, when it is dated, reminders honouring preferences and the control group,
 * sweeps, board runs, boosts, erasure and retention.
 */
import { expect, it } from 'vitest';
import { createSweeper, defineConfig, isLaurelErrorCode, type ConfigInput, type StoredChange } from '../src/index.js';
import { allChanges, DAY, HOUR } from './helpers.js';
import { onEachStore, setupOn } from './stores.js';

const raw = {
  metrics: [{ key: 'lessons', name: 'Lessons' }],
  achievements: [{ key: 'first', name: 'First', trigger: 'metric', metricKey: 'lessons', metricValue: 1 }],
  streak: { frequency: 'daily', freezes: { initial: 1, max: 3 } },
  pointsSystems: [
    {
      key: 'xp',
      name: 'XP',
      triggers: [{ key: 'per-lesson', type: 'metric', metricKey: 'lessons', metricThreshold: 1, points: 10 }],
      levels: [{ key: 'one', name: 'One', points: 20 }],
      boosts: [{ key: 'launch', name: 'Launch', multiplier: 2, start: '2026-01-10', end: '2026-01-11' }],
    },
  ],
  leaderboards: [{ key: 'daily', name: 'Daily', rankBy: 'metric', metricKey: 'lessons', start: '2026-01-01', runUnit: 'day', runInterval: 1, timeZone: 'UTC', maxParticipants: 10 }],
  experiment: { controlRatio: 0 },
  notifications: { streakReminder: { hoursBefore: 3 }, reactivation: { days: [2, 4] }, recap: { frequency: 'weekly' }, achievement: {}, leaderboardChangedMinutes: 60 },
} satisfies ConfigInput;
const config = defineConfig(raw);

const of = (events: StoredChange[], type: string, userId?: string) => events.filter((e) => e.type === type && (userId === undefined || e.userId === userId));

onEachStore('change events, rule by rule', (kind) => {
  it('an event: achievement, e-mail, streak started, points and level, rank; then extended', async () => {
    const t = await setupOn(kind, config, '2026-01-05T10:00:00Z');
    await t.engine.recordEvent('lessons', { user: { id: 'u', tz: 'UTC' }, value: 1 });
    let events = await allChanges(t.engine);
    expect(events.map((e) => e.type)).toEqual(['achievement.completed', 'emails.achievement_due', 'streak.started', 'points.changed', 'leaderboard.rank_changed']);
    expect(events.every((e) => e.at === '2026-01-05T10:00:00.000Z' && e.userId === 'u')).toBe(true);
    expect(of(events, 'leaderboard.rank_changed')[0]?.payload.leaderboard).toMatchObject({ key: 'daily', previousRank: null, rank: 1, previousValue: null, value: 1, status: 'active' });
    t.advance(DAY);
    await t.engine.recordEvent('lessons', { user: { id: 'u' }, value: 1 });
    events = (await allChanges(t.engine)).slice(5);
    // A new daily run: a new rank; the level is reached at 20.
    expect(events.map((e) => e.type)).toEqual(['streak.extended', 'points.changed', 'points.level_changed', 'leaderboard.rank_changed']);
    expect(of(events, 'points.changed')[0]?.payload.points).toMatchObject({ key: 'xp', total: 20, added: 10, level: { key: 'one' } });
    expect(of(events, 'points.level_changed')[0]?.payload).toMatchObject({ previousLevel: null, newLevel: { key: 'one' }, points: { total: 20 } });
    // The same value again in the same run: rank unchanged, no rank event.
    const before = (await allChanges(t.engine)).length;
    await t.engine.recordEvent('lessons', { user: { id: 'v' }, value: 1 });
    expect((await allChanges(t.engine)).slice(before).filter((e) => e.type === 'leaderboard.rank_changed').map((e) => e.userId)).toEqual(['v']);
  });

  it('a lapse seen late is dated when it was due: freeze consumed at the end of the missed day, then lost', async () => {
    const t = await setupOn(kind, config, '2026-01-05T10:00:00Z');
    await t.engine.recordEvent('lessons', { user: { id: 'u', tz: 'America/New_York' }, value: 1 });
    t.advance(5 * DAY);
    await t.engine.sweep();
    const events = await allChanges(t.engine);
    // Covered 2026-01-05 (New York); 01-06 missed: a freeze at its end; 01-07 missed: lost at its end.
    expect(of(events, 'streak.freeze_consumed')[0]).toMatchObject({ at: '2026-01-07T05:00:00.000Z', payload: { consumed: 1, freezes: 0 } });
    expect(of(events, 'streak.lost')[0]).toMatchObject({ at: '2026-01-08T05:00:00.000Z', payload: { length: 1 } });
    expect(of(events, 'streak.freeze_earned')).toEqual([]);
    await t.engine.grantFreezes('u', 2);
    expect(of(await allChanges(t.engine), 'streak.freeze_earned')[0]?.payload).toMatchObject({ earned: 2, freezes: 2 });
  });

  it('the streak reminder: hours before expiry, once, not once extended, not to users who turned it off or in the control group', async () => {
    const t = await setupOn(kind, config, '2026-01-05T10:00:00Z');
    for (const id of ['a', 'b', 'off']) await t.engine.recordEvent('lessons', { user: { id, tz: 'UTC' }, value: 1 });
    await t.engine.updatePreferences('off', { notifications: { streak_reminder: ['push'] } });
    await t.engine.updatePreferences('off', { notifications: { streak_reminder: [] } });
    // b practises again on the 6th: its streak then expires at the end of the 7th.
    t.set('2026-01-06T09:00:00Z');
    await t.engine.recordEvent('lessons', { user: { id: 'b' }, value: 1 });
    t.set('2026-01-06T20:59:00Z');
    await t.engine.sweep();
    expect(of(await allChanges(t.engine), 'emails.streak_reminder_due')).toEqual([]);
    t.set('2026-01-06T21:30:00Z');
    await t.engine.sweep();
    await t.engine.sweep();
    const reminders = of(await allChanges(t.engine), 'emails.streak_reminder_due');
    expect(reminders.map((e) => [e.userId, e.at])).toEqual([['a', '2026-01-06T21:00:00.000Z']]);
    expect(reminders[0]?.payload).toMatchObject({ timestamp: '2026-01-06T21:00:00.000Z', streak: { length: 1, expires: '2026-01-06' } });
    // The streak as getStreak shows it: 7 periods of history, the last ones those of the streak.
    expect((reminders[0]?.payload.streak as { streakHistory: { periodStart: string; length: number }[] }).streakHistory.slice(-2)).toMatchObject([{ periodStart: '2026-01-05', length: 1 }, { periodStart: '2026-01-06', length: 1 }]);
    // a practises: no second reminder that day; the next one is for the next expiry.
    t.set('2026-01-06T22:00:00Z');
    await t.engine.recordEvent('lessons', { user: { id: 'a' }, value: 1 });
    t.set('2026-01-07T21:10:00Z');
    await t.engine.sweep();
    expect(of(await allChanges(t.engine), 'emails.streak_reminder_due').map((e) => [e.userId, e.at]).sort()).toEqual([
      ['a', '2026-01-06T21:00:00.000Z'],
      ['a', '2026-01-07T21:00:00.000Z'],
      ['b', '2026-01-07T21:00:00.000Z'],
    ]);
  });

  it('reactivation after idle days, recap per active week, none for the control group', async () => {
    const control = defineConfig({ ...raw, experiment: { controlRatio: 1 } });
    for (const [cfg, expectEmails] of [
      [config, true],
      [control, false],
    ] as const) {
      const t = await setupOn(kind, cfg, '2026-01-05T10:00:00Z');
      await t.engine.recordEvent('lessons', { user: { id: 'u', tz: 'UTC' }, value: 1 });
      t.set('2026-01-07T11:00:00Z');
      await t.engine.sweep();
      t.set('2026-01-12T12:00:00Z');
      await t.engine.sweep();
      const events = await allChanges(t.engine);
      const emails = events.filter((e) => e.type.startsWith('emails.') && e.type !== 'emails.achievement_due');
      if (!expectEmails) {
        expect(events.filter((e) => e.type.startsWith('emails.'))).toEqual([]);
        continue;
      }
      // The second sweep's commit: its changes in the order they fell due.
      expect(emails.map((e) => [e.type, e.at])).toEqual([
        ['emails.reactivation_due', '2026-01-07T10:00:00.000Z'],
        ['emails.reactivation_due', '2026-01-09T10:00:00.000Z'],
        ['emails.recap_due', '2026-01-12T00:00:00.000Z'],
      ]);
      expect(emails[1]?.payload).toMatchObject({ reactivation: { messageNumber: 2, daysSinceLastActive: 4 } });
      expect(emails[2]?.payload).toMatchObject({ recap: { periodStart: '2026-01-05', periodEnd: '2026-01-11' } });
    }
  });

  it('board runs start, change (throttled) and finish once; a configured boost starts and finishes once', async () => {
    const t = await setupOn(kind, config, '2026-01-05T10:00:00Z');
    await t.engine.recordEvent('lessons', { user: { id: 'u', tz: 'UTC' }, value: 1 });
    await t.engine.sweep();
    await t.engine.sweep();
    let events = (await allChanges(t.engine)).filter((e) => e.userId === null);
    // The run before the current one (begun before the first sweep) is announced too: started, finished.
    expect(events.map((e) => `${e.type}:${(e.payload.leaderboard as { run?: { start: string } } | undefined)?.run?.start ?? ''}`)).toEqual([
      'leaderboard.started:2026-01-04',
      'leaderboard.finished:2026-01-04',
      'leaderboard.started:2026-01-05',
      'leaderboard.changed:2026-01-05',
    ]);
    await t.engine.recordEvent('lessons', { user: { id: 'v', tz: 'UTC' }, value: 2 });
    t.advance(30 * 60_000);
    await t.engine.sweep();
    expect((await allChanges(t.engine)).filter((e) => e.type === 'leaderboard.changed')).toHaveLength(1);
    t.advance(31 * 60_000);
    await t.engine.sweep();
    const changed = (await allChanges(t.engine)).filter((e) => e.type === 'leaderboard.changed');
    expect(changed).toHaveLength(2);
    expect(changed[1]?.payload.leaderboard).toMatchObject({ status: 'active', rankings: [{ userId: 'v', rank: 1, value: 2 }, { userId: 'u', rank: 2, value: 1 }] });
    t.set('2026-01-12T13:00:00Z');
    await t.engine.sweep();
    await t.engine.sweep();
    events = (await allChanges(t.engine)).filter((e) => e.userId === null);
    const finished = events.filter((e) => e.type === 'leaderboard.finished');
    expect(finished.map((e) => (e.payload.leaderboard as { run: { start: string } }).run.start)).toContain('2026-01-05');
    expect(finished.find((e) => (e.payload.leaderboard as { run: { start: string } }).run.start === '2026-01-05')?.payload.leaderboard).toMatchObject({ status: 'finished', rankings: [{ userId: 'v' }, { userId: 'u' }] });
    const boosts = events.filter((e) => e.type.startsWith('points.boost_'));
    expect(boosts.map((e) => [e.type, e.at])).toEqual([
      ['points.boost_started', '2026-01-09T10:00:00.000Z'],
      ['points.boost_finished', '2026-01-12T12:00:00.000Z'],
    ]);
    expect(boosts[0]?.payload.boost).toMatchObject({ name: 'Launch', status: 'active', userId: null, pointsSystemKey: 'xp', start: '2026-01-10', end: '2026-01-11', multiplier: 2, rounding: 'down' });
  });

  it("a user's own boost starts and finishes in their zone", async () => {
    const t = await setupOn(kind, config, '2026-01-05T10:00:00Z');
    await t.engine.recordEvent('lessons', { user: { id: 'u', tz: 'Asia/Tokyo' }, value: 1 });
    await t.engine.createBoost({ userId: 'u', pointsSystemKey: 'xp', name: 'Welcome', start: '2026-01-07', end: '2026-01-07', multiplier: 1.5 });
    t.set('2026-01-08T12:00:00Z');
    await t.engine.sweep();
    const boosts = of(await allChanges(t.engine), 'points.boost_started', 'u').concat(of(await allChanges(t.engine), 'points.boost_finished', 'u'));
    expect(boosts.map((e) => [e.type, e.at])).toEqual([
      ['points.boost_started', '2026-01-06T15:00:00.000Z'],
      ['points.boost_finished', '2026-01-07T15:00:00.000Z'],
    ]);
    expect(boosts[0]?.payload.boost).toMatchObject({ userId: 'u', name: 'Welcome', multiplier: 1.5 });
  });

  it('deleteUser removes the user’s change events; pruneChanges removes old ones', async () => {
    const t = await setupOn(kind, config, '2026-01-05T10:00:00Z');
    await t.engine.recordEvent('lessons', { user: { id: 'gone' }, value: 1 });
    await t.engine.recordEvent('lessons', { user: { id: 'kept' }, value: 1 });
    await t.engine.deleteUser('gone');
    const events = await allChanges(t.engine);
    expect(events.some((e) => e.userId === 'gone')).toBe(false);
    expect(events.some((e) => e.userId === 'kept')).toBe(true);
    t.advance(10 * DAY);
    await t.engine.recordEvent('lessons', { user: { id: 'new' }, value: 1 });
    // Without olderThanMs nothing goes (it would otherwise mean "everything before now").
    for (const bad of [{}, undefined, { limit: 5 }]) {
      const err = await t.engine.pruneChanges(bad as never).catch((e: unknown) => e);
      expect(isLaurelErrorCode(err, 'VALIDATION')).toBe(true);
    }
    expect((await allChanges(t.engine)).length).toBeGreaterThan(events.length);
    expect(await t.engine.pruneChanges({ olderThanMs: 5 * DAY })).toBe(events.length);
    expect((await allChanges(t.engine)).every((e) => e.userId === 'new' || e.userId === null)).toBe(true);
    void HOUR;
  });

  it('createSweeper sweeps on an interval and prunes by retention; stop() ends it', async () => {
    const t = await setupOn(kind, config, '2026-01-05T10:00:00Z');
    await t.engine.recordEvent('lessons', { user: { id: 'u', tz: 'UTC' }, value: 1 });
    t.set('2026-01-20T10:00:00Z');
    const reports: number[] = [];
    const sweeper = createSweeper(t.engine, { everyMs: 10, retentionMs: 7 * DAY, onSweep: (r) => reports.push(r.users) });
    const end = Date.now() + 10_000;
    while (!reports.includes(1) && Date.now() < end) await new Promise((r) => setTimeout(r, 10));
    await new Promise((r) => setTimeout(r, 50));
    await sweeper.stop();
    expect(reports).toContain(1);
    // The first events (the 5th) are pruned; those written after the recent board-run changes stay, even
    // the lapse dated the 8th: retention goes in commit order, so nothing is pruned before it was readable.
    const left = await allChanges(t.engine);
    expect(left.some((e) => e.at.startsWith('2026-01-05'))).toBe(false);
    expect(left.find((e) => e.type === 'streak.lost')).toMatchObject({ userId: 'u', at: '2026-01-08T00:00:00.000Z' });
  });
});
