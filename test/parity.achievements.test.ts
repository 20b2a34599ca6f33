/**
 * Issue 14, achievements and streaks: the hosted service's documented rules (docs/rules.md sections 4 and 5),
 * one test per rule, each on the memory store and PostgreSQL.
 */
import { expect, it } from 'vitest';
import { createEngine, defineConfig, type ConfigInput } from '../src/index.js';
import { sequentialIds } from '../src/testing/index.js';
import { onEachStore, setupOn } from './stores.js';

const DAY = 86_400_000;

type Achievements = NonNullable<ConfigInput['achievements']>;

const achievements: Achievements = [
  { key: 'one', name: 'One', trigger: 'metric', metricKey: 'lessons', metricValue: 1 },
  { key: 'five', name: 'Five', trigger: 'metric', metricKey: 'lessons', metricValue: 5 },
  { key: 'pro-ten', name: 'Pro ten', trigger: 'metric', metricKey: 'lessons', metricValue: 10, userAttributes: { plan: 'pro' } },
  { key: 'pro-uk', name: 'Pro UK', trigger: 'api', userAttributes: { plan: 'pro', country: 'uk' } },
  { key: 'hundred-words', name: 'Hundred words', trigger: 'metric', metricKey: 'words', metricValue: 100 },
  { key: 'handshake', name: 'Handshake', trigger: 'api' },
];

const base = {
  metrics: [
    { key: 'lessons', name: 'Lessons' },
    { key: 'words', name: 'Words' },
  ],
  attributes: [
    { key: 'plan', name: 'Plan', type: 'user' as const },
    { key: 'country', name: 'Country', type: 'user' as const },
  ],
} satisfies ConfigInput;

/** The base configuration with some achievements' statuses set. */
function withStatus(statuses: Record<string, 'active' | 'inactive' | 'locked'>) {
  return defineConfig({ ...base, achievements: achievements.map((a) => (statuses[a.key] ? { ...a, status: statuses[a.key] } : a)) as Achievements });
}

const keys = (list: readonly { key: string }[]) => list.map((a) => a.key);

onEachStore('achievement statuses', (kind) => {
  it('an inactive achievement is not unlockable and not listed', async () => {
    const t = await setupOn(kind, withStatus({ five: 'inactive', handshake: 'inactive' }), '2026-03-02T09:00:00Z');
    const r = await t.engine.recordEvent('lessons', { user: { id: 'u1' }, value: 6 });
    expect(keys(r.achievements)).toEqual(['one']);
    await expect(t.engine.completeAchievement('handshake', { user: { id: 'u1' } })).rejects.toMatchObject({ code: 'VALIDATION' });
    expect(keys(await t.engine.listAchievements())).not.toContain('five');
    expect(keys(await t.engine.getUserAchievements('u1', { includeIncomplete: true }))).not.toContain('five');
    expect(keys((await t.engine.getUserMetric('u1', 'lessons')).achievements)).toEqual(['one', 'pro-ten']);
    // Activated later, the achievement a user already meets is backdated (docs/rules.md section 10).
    const later = createEngine({ config: withStatus({}), store: t.store, clock: () => t.now(), newId: sequentialIds('later-') });
    const five = (await later.getUserAchievements('u1')).find((a) => a.key === 'five');
    expect(five?.achievedAt).toBe('2026-03-02T09:00:00.000Z');
  });

  it('a locked achievement unlocks for nobody new and is shown only to users who hold it', async () => {
    const t = await setupOn(kind, withStatus({}), '2026-03-02T09:00:00Z');
    await t.engine.recordEvent('lessons', { user: { id: 'holder' }, value: 5 });
    await t.engine.completeAchievement('handshake', { user: { id: 'holder' } });
    const locked = createEngine({ config: withStatus({ five: 'locked', handshake: 'locked' }), store: t.store, clock: () => t.now(), newId: sequentialIds('locked-') });
    const r = await locked.recordEvent('lessons', { user: { id: 'late' }, value: 5 });
    expect(keys(r.achievements)).toEqual(['one']);
    await expect(locked.completeAchievement('handshake', { user: { id: 'late' } })).rejects.toMatchObject({ code: 'VALIDATION' });
    // The holder completing again gets the first completion back.
    expect((await locked.completeAchievement('handshake', { user: { id: 'holder' } })).achievement.achievedAt).toBe('2026-03-02T09:00:00.000Z');
    expect(keys(await locked.getUserAchievements('holder'))).toEqual(['one', 'five', 'handshake']);
    expect(keys(await locked.getUserAchievements('late', { includeIncomplete: true }))).toEqual(['one', 'pro-ten', 'pro-uk', 'hundred-words']);
    expect(keys((await locked.getUserMetric('holder', 'lessons')).achievements)).toEqual(['one', 'five', 'pro-ten']);
    expect(keys((await locked.getUserMetric('late', 'lessons')).achievements)).toEqual(['one', 'pro-ten']);
    expect(keys(await locked.listAchievements())).toEqual(['one', 'pro-ten', 'pro-uk', 'hundred-words']);
    // Its completions still count, and a recount of the holder's history keeps it.
    expect((await locked.listAchievements({ includeUnavailable: true })).find((a) => a.key === 'five')).toMatchObject({ completions: 1, rarity: 50 });
    await locked.replay({ policy: 'retroactive', users: ['holder'] });
    expect(keys(await locked.getUserAchievements('holder'))).toEqual(['one', 'five', 'handshake']);
  });
});

onEachStore('achievement lists', (kind) => {
  it('listAchievements({ userAttributes }) lists only achievements available to a user with those attributes', async () => {
    const t = await setupOn(kind, withStatus({}), '2026-03-02T09:00:00Z');
    const all = ['one', 'five', 'pro-ten', 'pro-uk', 'hundred-words', 'handshake'];
    expect(keys(await t.engine.listAchievements())).toEqual(all);
    expect(keys(await t.engine.listAchievements({ userAttributes: {} }))).toEqual(['one', 'five', 'hundred-words', 'handshake']);
    expect(keys(await t.engine.listAchievements({ userAttributes: { plan: 'free' } }))).toEqual(['one', 'five', 'hundred-words', 'handshake']);
    expect(keys(await t.engine.listAchievements({ userAttributes: { plan: 'pro' } }))).toEqual(['one', 'five', 'pro-ten', 'hundred-words', 'handshake']);
    expect(keys(await t.engine.listAchievements({ userAttributes: { plan: 'pro', country: 'uk' } }))).toEqual(all);
    await expect(t.engine.listAchievements({ userAttributes: { tier: 'gold' } })).rejects.toMatchObject({ code: 'INVALID_ATTRIBUTE_KEYS' });
  });

  it("getUserMetric lists all of the metric's achievements with progress, incomplete ones with achievedAt: null", async () => {
    const t = await setupOn(kind, withStatus({}), '2026-03-02T09:00:00Z');
    await t.engine.recordEvent('lessons', { user: { id: 'u1' }, value: 3 });
    const metric = await t.engine.getUserMetric('u1', 'lessons');
    expect(metric.current).toBe(3);
    expect(metric.achievements.map((a) => ({ key: a.key, achievedAt: a.achievedAt, progress: a.progress }))).toEqual([
      { key: 'one', achievedAt: '2026-03-02T09:00:00.000Z', progress: undefined },
      { key: 'five', achievedAt: null, progress: { current: 3, target: 5 } },
      { key: 'pro-ten', achievedAt: null, progress: { current: 3, target: 10 } },
    ]);
    const metrics = await t.engine.getUserMetrics('u1');
    expect(metrics.map((m) => [m.key, keys(m.achievements)])).toEqual([
      ['lessons', ['one', 'five', 'pro-ten']],
      ['words', ['hundred-words']],
    ]);
  });
});

const streakConfig = (freezes: boolean) =>
  defineConfig({
    metrics: [{ key: 'lessons', name: 'Lessons' }],
    streak: { frequency: 'daily', ...(freezes ? { freezes: { initial: 1, max: 1 } } : {}) },
  });

onEachStore('streak reads', (kind) => {
  it('extended in getStreak and getStreaks is null while the streak is not active (length 0)', async () => {
    const t = await setupOn(kind, streakConfig(false), '2026-03-02T09:00:00Z');
    await t.engine.identifyUser({ id: 'new' });
    await t.engine.recordEvent('lessons', { user: { id: 'u1' }, value: 1 });
    expect((await t.engine.getStreak('new')).extended).toBeNull();
    expect((await t.engine.getStreak('u1')).extended).toBe('2026-03-02T09:00:00.000Z');
    expect(await t.engine.getStreaks(['u1', 'new'])).toEqual([
      { userId: 'u1', streakLength: 1, extended: '2026-03-02T09:00:00.000Z' },
      { userId: 'new', streakLength: 0, extended: null },
    ]);
    // Lost: two days without activity.
    t.advance(2 * DAY);
    expect(await t.engine.getStreak('u1')).toMatchObject({ length: 0, extended: null });
    expect(await t.engine.getStreaks(['u1'])).toEqual([{ userId: 'u1', streakLength: 0, extended: null }]);
  });

  it('usedFreeze appears in history only when freezes are configured', async () => {
    for (const freezes of [false, true]) {
      const t = await setupOn(kind, streakConfig(freezes), '2026-03-02T09:00:00Z');
      await t.engine.recordEvent('lessons', { user: { id: 'u1' }, value: 1 });
      t.advance(2 * DAY);
      await t.engine.recordEvent('lessons', { user: { id: 'u1' }, value: 1 });
      const history = (await t.engine.getStreak('u1', { historyPeriods: 3 })).streakHistory;
      if (freezes) {
        expect(history).toEqual([
          { periodStart: '2026-03-02', periodEnd: '2026-03-02', length: 1, usedFreeze: false, usedPause: false },
          { periodStart: '2026-03-03', periodEnd: '2026-03-03', length: 1, usedFreeze: true, usedPause: false },
          { periodStart: '2026-03-04', periodEnd: '2026-03-04', length: 2, usedFreeze: false, usedPause: false },
        ]);
      } else {
        expect(history).toEqual([
          { periodStart: '2026-03-02', periodEnd: '2026-03-02', length: 1, usedPause: false },
          { periodStart: '2026-03-03', periodEnd: '2026-03-03', length: 0, usedPause: false },
          { periodStart: '2026-03-04', periodEnd: '2026-03-04', length: 1, usedPause: false },
        ]);
        for (const h of history) expect(Object.hasOwn(h, 'usedFreeze')).toBe(false);
      }
    }
  });
});
