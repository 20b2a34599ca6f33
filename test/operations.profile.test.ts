/**
 * Issue 13: getProfile (one load for a profile screen) and the experiment's control group, on the memory
 * store and PostgreSQL.
 */
import { expect, it } from 'vitest';
import { defineConfig } from '../src/index.js';
import { inControlGroup } from '../src/core/users.js';
import { onEachStore, setupOn } from './stores.js';

const config = defineConfig({
  metrics: [
    { key: 'lessons', name: 'Lessons' },
    { key: 'words', name: 'Words' },
  ],
  achievements: [
    { key: 'one', name: 'One', trigger: 'metric', metricKey: 'lessons', metricValue: 1 },
    { key: 'ten', name: 'Ten', trigger: 'metric', metricKey: 'lessons', metricValue: 10 },
  ],
  streak: { frequency: 'daily' },
  pointsSystems: [{ key: 'xp', name: 'XP', levels: [{ key: 'novice', name: 'Novice', points: 0 }, { key: 'pro', name: 'Pro', points: 50 }], triggers: [{ key: 'per-lesson', type: 'metric', metricKey: 'lessons', metricThreshold: 1, points: 10 }] }],
  leaderboards: [
    { key: 'all', name: 'All', rankBy: 'metric', metricKey: 'lessons', start: '2026-01-01', timeZone: 'UTC' },
    { key: 'off', name: 'Off', rankBy: 'metric', metricKey: 'lessons', start: '2026-01-01', status: 'inactive' },
  ],
  experiment: { controlRatio: 0.5 },
});

onEachStore('getProfile', (kind) => {
  it('answers the user, metrics, streak, points with level, achievements with progress and board standings from one load', async () => {
    const t = await setupOn(kind, config, '2026-03-02T09:00:00Z');
    await t.engine.recordEvent('lessons', { user: { id: 'u1', name: 'Ana' }, value: 6 });
    await t.engine.recordEvent('lessons', { user: { id: 'u2' }, value: 8 });
    const loads = { count: 0 };
    const loadUser = t.store.loadUser.bind(t.store);
    t.store.loadUser = (id: string) => {
      loads.count += 1;
      return loadUser(id);
    };
    const p = await t.engine.getProfile('u1');
    expect(loads.count).toBe(1);
    expect(p.user).toMatchObject({ id: 'u1', name: 'Ana' });
    expect(p.metrics.map((m) => [m.key, m.current])).toEqual([
      ['lessons', 6],
      ['words', 0],
    ]);
    expect(p.streak).toMatchObject({ length: 1, extended: '2026-03-02T09:00:00.000Z', pauses: [] });
    expect(p.points.xp).toMatchObject({ total: 60, level: { key: 'pro' } });
    expect(p.achievements.map((a) => [a.key, a.achievedAt, a.progress ?? null])).toEqual([
      ['one', '2026-03-02T09:00:00.000Z', null],
      ['ten', null, { current: 6, target: 10 }],
    ]);
    expect(p.leaderboards).toEqual({ all: { run: { start: '2026-01-01', end: null }, rank: 2, value: 6 } });
    await expect(t.engine.getProfile('nobody')).rejects.toMatchObject({ code: 'NOT_FOUND' });
  });
});

onEachStore('experiment control group', (kind) => {
  it('assigns new users to the control group deterministically from their id, at about controlRatio', async () => {
    const t = await setupOn(kind, config, '2026-03-02T09:00:00Z');
    const ids = Array.from({ length: 40 }, (_, i) => `user-${i}`);
    for (const id of ids) await t.engine.identifyUser({ id });
    const control = [];
    for (const id of ids) {
      const u = await t.engine.getUser(id);
      expect(u.control).toBe(inControlGroup(config, id));
      if (u.control) control.push(id);
    }
    expect(control.length).toBeGreaterThan(8);
    expect(control.length).toBeLessThan(32);
    // Fixed at creation: a configuration without the experiment leaves existing users where they are.
    expect(inControlGroup(defineConfig({ metrics: [{ key: 'm', name: 'M' }] }), 'user-0')).toBe(false);
    const withoutRatio = defineConfig({ metrics: [{ key: 'm', name: 'M' }], experiment: { controlRatio: 0 } });
    expect(ids.some((id) => inControlGroup(withoutRatio, id))).toBe(false);
    const everyone = defineConfig({ metrics: [{ key: 'm', name: 'M' }], experiment: { controlRatio: 1 } });
    expect(ids.every((id) => inControlGroup(everyone, id))).toBe(true);
  });
});
