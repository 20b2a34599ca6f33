import { describe, expect, it } from 'vitest';
import { defineConfig, NotFoundError } from '../src/index.js';
import { DAY, setup } from './helpers.js';

const config = defineConfig({
  metrics: [{ key: 'lessons', name: 'Lessons completed' }],
  attributes: [
    { key: 'device', name: 'Device', type: 'event' },
    { key: 'plan', name: 'Plan', type: 'user' },
  ],
  achievements: [
    { key: 'first-lesson', name: 'First lesson', description: 'Your first', badgeUrl: 'https://x/b.png', trigger: 'metric', metricKey: 'lessons', metricValue: 1 },
    { key: 'ten', name: 'Ten', trigger: 'metric', metricKey: 'lessons', metricValue: 10 },
    { key: 'three-ios', name: '3 on iOS', trigger: 'metric', metricKey: 'lessons', metricValue: 3, eventAttributes: { device: 'ios' } },
    { key: 'pro-five', name: 'Pro five', trigger: 'metric', metricKey: 'lessons', metricValue: 5, userAttributes: { plan: 'pro' } },
    { key: 'week-streak', name: '3-day streak', trigger: 'streak', streakLength: 3 },
    { key: 'onboarded', name: 'Finished onboarding', trigger: 'api' },
    { key: 'all-rounder', name: 'All-rounder', trigger: 'achievement', achievementKeys: ['onboarded', 'first-lesson'] },
    { key: 'master', name: 'Master', trigger: 'achievement', achievementKeys: ['all-rounder', 'ten'] },
  ],
  streak: { frequency: 'daily' },
});

const user = { id: 'u1' };
const keys = (list: { key: string }[]) => list.map((a) => a.key);

describe('achievements (semantics 4)', () => {
  it('a metric achievement unlocks when the total reaches metricValue, with the seed\'s fields', async () => {
    const t = setup(config);
    const r = await t.engine.recordEvent('lessons', { user, value: 1 });
    expect(r.achievements).toEqual([
      {
        id: config.achievements[0]?.id,
        key: 'first-lesson',
        name: 'First lesson',
        description: 'Your first',
        badgeUrl: 'https://x/b.png',
        trigger: 'metric',
        metricId: config.metrics[0]?.id,
        metricName: 'Lessons completed',
        metricValue: 1,
        userAttributes: [],
        eventAttributes: [],
        achievedAt: '2026-01-05T10:00:00.000Z',
      },
    ]);
  });

  it('one event can pass several thresholds; the list follows the configuration order', async () => {
    const t = setup(config);
    const r = await t.engine.recordEvent('lessons', { user, value: 12, attributes: { device: 'ios' } });
    expect(keys(r.achievements)).toEqual(['first-lesson', 'ten', 'three-ios']);
  });

  it('eventAttributes: only matching events count, progress is the sum of their values', async () => {
    const t = setup(config);
    await t.engine.recordEvent('lessons', { user, value: 2, attributes: { device: 'ios' } });
    await t.engine.recordEvent('lessons', { user, value: 5, attributes: { device: 'web' } });
    const progress = (await t.engine.getUserAchievements('u1', { includeIncomplete: true })).find((a) => a.key === 'three-ios');
    expect(progress).toMatchObject({ achievedAt: null, progress: { current: 2, target: 3 } });
    const r = await t.engine.recordEvent('lessons', { user, value: 1, attributes: { device: 'ios' } });
    expect(keys(r.achievements)).toEqual(['three-ios']);
  });

  it('userAttributes: only users whose attributes match can unlock', async () => {
    const t = setup(config);
    expect(keys((await t.engine.recordEvent('lessons', { user: { id: 'free', attributes: { plan: 'free' } }, value: 6 })).achievements)).not.toContain('pro-five');
    expect(keys((await t.engine.recordEvent('lessons', { user: { id: 'pro', attributes: { plan: 'pro' } }, value: 6 })).achievements)).toContain('pro-five');
    // The free user upgrades: the next event unlocks it from the total already reached.
    expect(keys((await t.engine.recordEvent('lessons', { user: { id: 'free', attributes: { plan: 'pro' } }, value: 0 })).achievements)).toEqual(['pro-five']);
  });

  it('a streak achievement unlocks when the length reaches streakLength', async () => {
    const t = setup(config);
    for (let d = 0; d < 2; d++) {
      expect(keys((await t.engine.recordEvent('lessons', { user, value: 0.5 })).achievements)).not.toContain('week-streak');
      t.advance(DAY);
    }
    expect(keys((await t.engine.recordEvent('lessons', { user, value: 0.5 })).achievements)).toContain('week-streak');
  });

  it('api achievements complete through completeAchievement only, idempotently, and composites follow in the same call', async () => {
    const t = setup(config);
    await t.engine.recordEvent('lessons', { user, value: 1 });
    const first = await t.engine.completeAchievement('onboarded', { user });
    expect(first.achievement).toMatchObject({ key: 'onboarded', trigger: 'api', achievedAt: '2026-01-05T10:00:00.000Z' });
    const unlocked = await t.engine.getUserAchievements('u1');
    expect(keys(unlocked)).toEqual(['first-lesson', 'onboarded', 'all-rounder']);
    t.advance(DAY);
    const again = await t.engine.completeAchievement('onboarded', { user });
    expect(again.completionId).toBe(first.completionId);
    expect(again.achievement.achievedAt).toBe('2026-01-05T10:00:00.000Z');
    expect((await t.engine.listAchievements()).find((a) => a.key === 'onboarded')?.completions).toBe(1);
    await expect(t.engine.completeAchievement('ten', { user })).rejects.toMatchObject({ status: 400 });
    await expect(t.engine.completeAchievement('nope' as 'ten', { user })).rejects.toBeInstanceOf(NotFoundError);
  });

  it('composites unlock in the same call as their last prerequisite, chained', async () => {
    const t = setup(config);
    await t.engine.completeAchievement('onboarded', { user });
    const r = await t.engine.recordEvent('lessons', { user, value: 10 });
    expect(keys(r.achievements)).toEqual(['first-lesson', 'ten', 'all-rounder', 'master']);
    expect(new Set(r.achievements.map((a) => a.achievedAt))).toEqual(new Set(['2026-01-05T10:00:00.000Z']));
  });

  it('unlocks at most once and is never revoked by a decrease', async () => {
    const t = setup(config);
    await t.engine.recordEvent('lessons', { user, value: 1 });
    await t.engine.recordEvent('lessons', { user, value: -1 });
    const r = await t.engine.recordEvent('lessons', { user, value: 1 });
    expect(r.achievements).toEqual([]);
    expect(keys(await t.engine.getUserAchievements('u1'))).toContain('first-lesson');
  });

  it('listAchievements reports completions and rarity as a percent of users', async () => {
    const t = setup(config);
    await t.engine.recordEvent('lessons', { user: { id: 'a' }, value: 1 });
    await t.engine.recordEvent('lessons', { user: { id: 'b' }, value: 10 });
    await t.engine.recordEvent('lessons', { user: { id: 'c' }, value: 0 });
    const list = await t.engine.listAchievements();
    expect(list.find((a) => a.key === 'first-lesson')).toMatchObject({ completions: 2, rarity: 66.67 });
    expect(list.find((a) => a.key === 'ten')).toMatchObject({ completions: 1, rarity: 33.33 });
    expect(list.find((a) => a.key === 'all-rounder')).toMatchObject({ trigger: 'achievement', achievementIds: [config.achievements[5]?.id, config.achievements[0]?.id], completions: 0, rarity: 0 });
  });

  it("getUserMetrics lists totals with all of the metric's achievements, completed or not", async () => {
    const t = setup(config);
    await t.engine.recordEvent('lessons', { user, value: 2 });
    const [m] = await t.engine.getUserMetrics('u1');
    expect(m).toMatchObject({ key: 'lessons', current: 2 });
    expect(m?.achievements.filter((a) => a.achievedAt !== null).map((a) => a.key)).toEqual(['first-lesson']);
    expect(m?.achievements.filter((a) => a.achievedAt === null).every((a) => a.progress !== undefined)).toBe(true);
    expect(await t.engine.getUserMetric('u1', 'lessons')).toEqual(m);
  });
});
