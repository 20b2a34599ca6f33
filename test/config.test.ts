import { describe, expect, it, vi } from 'vitest';
import { ConfigError, defineConfig, isLaurelError } from '../src/index.js';
import { stableId } from '../src/core/ids.js';

const base = { metrics: [{ key: 'lessons', name: 'Lessons' }] };

function issuesOf(input: unknown): { path: (string | number)[]; message: string }[] {
  try {
    defineConfig(input as Parameters<typeof defineConfig>[0]);
  } catch (e) {
    expect(e).toBeInstanceOf(ConfigError);
    expect(isLaurelError(e)).toBe(true);
    return (e as ConfigError).issues;
  }
  throw new Error('expected a ConfigError');
}

describe('defineConfig', () => {
  it('applies defaults and freezes the compiled config', () => {
    const c = defineConfig(base);
    expect(c.timeZone).toBe('UTC');
    expect(c.weekStartsOn).toBe(1);
    expect(Object.isFrozen(c)).toBe(true);
    expect(Object.isFrozen(c.metrics[0])).toBe(true);
    expect(c.index.metrics.get('lessons')?.name).toBe('Lessons');
    // Outside production, arrays too (in production they stay unfrozen: see the next test).
    expect(Object.isFrozen(c.metrics)).toBe(true);
    expect(Object.isFrozen(c.index.achievementsByMetric)).toBe(true);
  });

  it('in production, freezes every object and map of the compiled config but leaves its arrays unfrozen (V8 iterates frozen arrays slowly)', async () => {
    vi.stubEnv('NODE_ENV', 'production');
    vi.resetModules();
    try {
      const { defineConfig: define } = await import('../src/config/define.js');
      const c = define({ ...base, achievements: [{ key: 'ten', name: 'Ten', trigger: 'metric', metricKey: 'lessons', metricValue: 10 }], pointsSystems: [{ key: 'xp', name: 'XP', triggers: [{ key: 't', type: 'metric', metricKey: 'lessons', metricThreshold: 1, points: 1 }] }] });
      const arrays: unknown[] = [];
      const objects: object[] = [];
      const walk = (v: unknown, seen: Set<unknown>) => {
        if (v === null || typeof v !== 'object' || seen.has(v)) return;
        seen.add(v);
        if (Array.isArray(v)) arrays.push(v);
        else objects.push(v);
        for (const x of v instanceof Map ? v.values() : v instanceof Set ? [] : Object.values(v)) walk(x, seen);
      };
      walk(c, new Set());
      expect(arrays.length).toBeGreaterThan(3);
      expect(arrays.filter((a) => Object.isFrozen(a))).toEqual([]);
      expect(objects.filter((o) => !Object.isFrozen(o))).toEqual([]);
      expect(Object.isFrozen(c.achievements[0])).toBe(true);
      expect(c.index.achievementsByMetric.get('lessons')?.map((a) => a.key)).toEqual(['ten']);
    } finally {
      vi.unstubAllEnvs();
      vi.resetModules();
    }
  });

  it('gives stable UUID-shaped ids derived from kind and key, and keeps explicit ids', () => {
    const a = defineConfig({ ...base, achievements: [{ key: 'x', name: 'X', trigger: 'api' }] });
    const b = defineConfig({ ...base, achievements: [{ key: 'x', name: 'X', trigger: 'api' }] });
    expect(a.metrics[0]?.id).toBe(b.metrics[0]?.id);
    expect(a.metrics[0]?.id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(a.achievements[0]?.id).not.toBe(a.metrics[0]?.id);
    const c = defineConfig({ metrics: [{ key: 'lessons', name: 'L', id: 'my-id' }] });
    expect(c.metrics[0]?.id).toBe('my-id');
  });

  it('lists every problem with its path', () => {
    const issues = issuesOf({
      timeZone: 'Mars/Olympus',
      metrics: [{ key: 'lessons', name: 'L' }, { key: 'lessons', name: 'L2' }],
      achievements: [
        { key: 'a', name: 'A', trigger: 'metric', metricKey: 'nope', metricValue: 1 },
        { key: 's', name: 'S', trigger: 'streak', streakLength: 3 },
      ],
    });
    const paths = issues.map((i) => i.path.join('.'));
    expect(paths).toContain('timeZone');
    expect(paths).toContain('metrics.1.key');
    expect(paths).toContain('achievements.0.metricKey');
    expect(paths).toContain('achievements.1.trigger');
  });

  it('rejects prerequisite cycles', () => {
    const issues = issuesOf({
      ...base,
      achievements: [
        { key: 'a', name: 'A', trigger: 'achievement', achievementKeys: ['b'] },
        { key: 'b', name: 'B', trigger: 'achievement', achievementKeys: ['c'] },
        { key: 'c', name: 'C', trigger: 'achievement', achievementKeys: ['a'] },
      ],
    });
    expect(issues.some((i) => i.message.includes('prerequisite cycle'))).toBe(true);
  });

  it('rejects reserved and malformed keys, undeclared attribute filters and bad leaderboards', () => {
    const issues = issuesOf({
      metrics: [{ key: '__proto__', name: 'X' }, { key: 'ok', name: 'OK' }],
      attributes: [{ key: 'plan', name: 'Plan', type: 'user' }],
      achievements: [{ key: 'a', name: 'A', trigger: 'metric', metricKey: 'ok', metricValue: 1, eventAttributes: { plan: 'pro' } }],
      leaderboards: [
        { key: 'l1', name: 'L', rankBy: 'metric', metricKey: 'ok', start: '2026-02-01', end: '2026-01-01' },
        { key: 'l2', name: 'L', rankBy: 'points', pointsSystemKey: 'none', start: '2026-01-01' },
        { key: 'l3', name: 'L', rankBy: 'streak', start: '2026-01-01' },
      ],
    });
    const paths = issues.map((i) => i.path.join('.'));
    expect(paths).toContain('metrics.0.key');
    expect(paths).toContain('achievements.0.eventAttributes.plan');
    expect(paths).toContain('leaderboards.0.end');
    expect(paths).toContain('leaderboards.1.pointsSystemKey');
    expect(paths).toContain('leaderboards.2.rankBy');
  });

  it('rejects repeating streak boards and positive blocking triggers', () => {
    const issues = issuesOf({
      ...base,
      streak: { frequency: 'daily' },
      pointsSystems: [{ key: 'e', name: 'E', triggers: [{ key: 'per-lesson', type: 'metric', metricKey: 'lessons', metricThreshold: 1, points: 1, blockIfOutOfPoints: true }] }],
      leaderboards: [{ key: 's', name: 'S', rankBy: 'streak', start: '2026-01-01', runUnit: 'day', runInterval: 7 }],
    });
    const paths = issues.map((i) => i.path.join('.'));
    expect(paths).toContain('leaderboards.0.runUnit');
    expect(paths).toContain('pointsSystems.0.triggers.0.blockIfOutOfPoints');
  });

  it('requires a key on every points trigger', () => {
    const issues = issuesOf({
      ...base,
      pointsSystems: [
        { key: 'xp', name: 'XP', triggers: [{ key: 'per-lesson', type: 'metric', metricKey: 'lessons', metricThreshold: 1, points: 10 }] },
        { key: 'energy', name: 'Energy', triggers: [{ key: 'signup', type: 'user_creation', points: 5 }, { type: 'time', timeUnit: 'hour', timeInterval: 1, points: 1 }] },
      ],
    });
    expect(issues.map((i) => i.path.join('.'))).toContain('pointsSystems.1.triggers.1.key');
  });

  it('trigger keys are unique within a system, not across systems', () => {
    const issues = issuesOf({
      ...base,
      pointsSystems: [{ key: 'xp', name: 'XP', triggers: [
        { key: 'per-lesson', type: 'metric', metricKey: 'lessons', metricThreshold: 1, points: 10 },
        { key: 'per-lesson', type: 'metric', metricKey: 'lessons', metricThreshold: 5, points: 50 },
      ] }],
    });
    const duplicate = issues.find((i) => i.path.join('.') === 'pointsSystems.0.triggers.1.key');
    expect(duplicate?.message).toContain('duplicate key');
    const c = defineConfig({
      ...base,
      pointsSystems: [
        { key: 'xp', name: 'XP', triggers: [{ key: 'per-lesson', type: 'metric', metricKey: 'lessons', metricThreshold: 1, points: 10 }] },
        { key: 'coins', name: 'Coins', triggers: [{ key: 'per-lesson', type: 'metric', metricKey: 'lessons', metricThreshold: 1, points: 1 }] },
      ],
    });
    expect(c.pointsSystems[0]?.triggers[0]?.id).toBe(stableId('pointsTrigger', 'xp/per-lesson'));
    expect(c.pointsSystems[1]?.triggers[0]?.id).toBe(stableId('pointsTrigger', 'coins/per-lesson'));
    // The id follows the key, not the position: a trigger added before it changes nothing.
    const moved = defineConfig({
      ...base,
      pointsSystems: [{ key: 'xp', name: 'XP', triggers: [
        { key: 'signup', type: 'user_creation', points: 5 },
        { key: 'per-lesson', type: 'metric', metricKey: 'lessons', metricThreshold: 1, points: 10 },
      ] }],
    });
    expect(moved.pointsSystems[0]?.triggers[1]?.id).toBe(c.pointsSystems[0]?.triggers[0]?.id);
  });
});
