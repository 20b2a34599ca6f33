/**
 * The arbitraries of `laurel/testing`: lists honour their bounds (asked for 80, some sample has 80), values
 * stay in their ranges, users carry zones, generated configurations always compile, scenarios are timed
 * monotonically and play on an engine with every failure a typed Laurel error.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { createEngine, defineConfig, isLaurelError } from '../src/index.js';
import { createMemoryStore } from '../src/memory.js';
import { arbAction, arbConfig, arbEventSequence, arbScenario, arbValue, runScenarioStep, sequentialIds, TIME_ZONES, type ScenarioStep } from '../src/testing/index.js';

const config = defineConfig({
  metrics: [{ key: 'lessons', name: 'Lessons' }, { key: 'minutes', name: 'Minutes' }],
  attributes: [{ key: 'device', name: 'Device', type: 'event' }, { key: 'plan', name: 'Plan', type: 'user' }],
  achievements: [{ key: 'intro', name: 'Intro', trigger: 'api' }, { key: 'three', name: 'Three', trigger: 'metric', metricKey: 'lessons', metricValue: 3 }],
  streak: { frequency: 'daily', freezes: { initial: 1, max: 3 } },
  pointsSystems: [{ key: 'xp', name: 'XP', levels: [{ key: 'l0', name: 'L0', points: 0 }, { key: 'l1', name: 'L1', points: 50 }], triggers: [{ key: 'per-lesson', type: 'metric', metricKey: 'lessons', metricThreshold: 1, points: 10 }] }],
  leaderboards: [{ key: 'weekly', name: 'Weekly', rankBy: 'metric', metricKey: 'lessons', start: '2025-01-06', runUnit: 'day', runInterval: 7 }],
});

const lengths = (samples: readonly { length: number }[]) => samples.map((s) => s.length);

describe('list sizes', () => {
  it('arbEventSequence reaches the maxLength it is asked for, and never exceeds it or goes below minLength', () => {
    const samples = lengths(fc.sample(arbEventSequence(config, { maxLength: 80 }), { numRuns: 300, seed: 1 }));
    expect(Math.max(...samples)).toBe(80);
    expect(Math.min(...samples)).toBeGreaterThanOrEqual(1);
    const bounded = lengths(fc.sample(arbEventSequence(config, { minLength: 5, maxLength: 7 }), { numRuns: 300, seed: 2 }));
    expect(new Set(bounded)).toEqual(new Set([5, 6, 7]));
  });

  it('a smaller size makes long sequences rarer, within the same bounds', () => {
    const max = lengths(fc.sample(arbEventSequence(config, { maxLength: 80 }), { numRuns: 300, seed: 3 }));
    const small = lengths(fc.sample(arbEventSequence(config, { maxLength: 80, size: 'xsmall' }), { numRuns: 300, seed: 3 }));
    const mean = (xs: number[]) => xs.reduce((s, x) => s + x, 0) / xs.length;
    expect(Math.max(...small)).toBeLessThanOrEqual(80);
    expect(mean(small)).toBeLessThan(mean(max) / 2);
  });

  it('arbScenario honours minSteps and maxSteps and reaches maxSteps', () => {
    const samples = lengths(fc.sample(arbScenario(config, { minSteps: 3, maxSteps: 80 }), { numRuns: 200, seed: 4 }));
    expect(Math.max(...samples)).toBe(80);
    expect(Math.min(...samples)).toBeGreaterThanOrEqual(3);
  });
});

describe('values', () => {
  it('per-metric ranges are honoured, with their decimals', () => {
    const values = { lessons: { min: 1, max: 3, decimals: 0 }, minutes: { min: -2.5, max: 2.5, decimals: 1 } };
    const events = fc.sample(arbEventSequence(config, { maxLength: 50, values }), { numRuns: 100, seed: 5 }).flat();
    const of = (key: string) => events.filter((e) => e.metricKey === key).map((e) => e.value);
    expect(new Set(of('lessons'))).toEqual(new Set([1, 2, 3]));
    const minutes = of('minutes');
    expect(minutes.every((v) => v >= -2.5 && v <= 2.5 && Math.round(v * 10) === v * 10)).toBe(true);
    expect(minutes.some((v) => v < 0)).toBe(true);
  });

  it('values are positive unless negatives are asked for', () => {
    const plain = fc.sample(arbEventSequence(config, { maxLength: 40 }), { numRuns: 100, seed: 6 }).flat().map((e) => e.value);
    expect(plain.every((v) => v > 0)).toBe(true);
    expect(plain.filter((v) => Number.isInteger(v)).length).toBeGreaterThan(plain.length / 3);
    const negative = fc.sample(arbValue({ allowNegative: true, max: 10 }), { numRuns: 500, seed: 7 });
    expect(negative.some((v) => v < 0)).toBe(true);
    expect(negative.every((v) => v >= -10 && v <= 10)).toBe(true);
  });

  it('an empty range is refused', () => {
    expect(() => arbEventSequence(config, { values: { lessons: { min: 2, max: 1 } } })).toThrow(RangeError);
  });
});

describe('zones', () => {
  it('with zones, every event user carries one zone for the whole sequence', () => {
    const sequences = fc.sample(arbEventSequence(config, { maxLength: 30, zones: true }), { numRuns: 100, seed: 8 });
    const seen = new Set<string>();
    for (const events of sequences) {
      const byUser = new Map<string, string | undefined>();
      for (const e of events) {
        expect(e.user.tz).toBeDefined();
        expect(TIME_ZONES).toContain(e.user.tz);
        seen.add(e.user.tz as string);
        if (byUser.has(e.user.id)) expect(e.user.tz).toBe(byUser.get(e.user.id));
        byUser.set(e.user.id, e.user.tz);
      }
    }
    expect(seen.size).toBeGreaterThan(5);
    const listed = fc.sample(arbEventSequence(config, { zones: ['Asia/Tokyo'] }), { numRuns: 20, seed: 9 }).flat();
    expect(new Set(listed.map((e) => e.user.tz))).toEqual(new Set(['Asia/Tokyo']));
    expect(fc.sample(arbEventSequence(config), { numRuns: 20, seed: 10 }).flat().every((e) => e.user.tz === undefined)).toBe(true);
  });
});

describe('arbConfig', () => {
  it('every generated configuration compiles with defineConfig', () => {
    fc.assert(
      fc.property(arbConfig(), (input) => {
        const compiled = defineConfig(input);
        expect(compiled.metrics.length).toBeGreaterThan(0);
      }),
      { numRuns: 1000 },
    );
  });

  it('covers every section and kind across samples', () => {
    const inputs = fc.sample(arbConfig(), { numRuns: 400, seed: 11 });
    const achievementKinds = new Set(inputs.flatMap((c) => (c.achievements ?? []).map((a) => a.trigger)));
    expect(achievementKinds).toEqual(new Set(['metric', 'streak', 'api', 'achievement']));
    const triggerKinds = new Set(inputs.flatMap((c) => (c.pointsSystems ?? []).flatMap((p) => (p.triggers ?? []).map((t) => t.type))));
    expect(triggerKinds).toEqual(new Set(['metric', 'streak', 'achievement', 'user_creation', 'time']));
    const rankBys = new Set(inputs.flatMap((c) => (c.leaderboards ?? []).map((b) => b.rankBy)));
    expect(rankBys).toEqual(new Set(['metric', 'points', 'streak']));
    expect(inputs.some((c) => c.streak?.freezes !== undefined)).toBe(true);
    expect(inputs.some((c) => (c.leaderboards ?? []).some((b) => (b.breakdownAttributes ?? []).length > 0))).toBe(true);
    expect(inputs.some((c) => (c.pointsSystems ?? []).some((p) => (p.levels ?? []).length > 1))).toBe(true);
    expect(inputs.some((c) => c.notifications !== undefined)).toBe(true);
    expect(inputs.some((c) => c.streak === undefined)).toBe(true);
  });

  it('keys are unique in every section', () => {
    const unique = (keys: readonly string[]) => new Set(keys).size === keys.length;
    for (const c of fc.sample(arbConfig({ maxMetrics: 6, maxAchievements: 8 }), { numRuns: 300, seed: 12 })) {
      expect(unique(c.metrics.map((m) => m.key))).toBe(true);
      expect(unique((c.attributes ?? []).map((a) => a.key))).toBe(true);
      expect(unique((c.achievements ?? []).map((a) => a.key))).toBe(true);
      expect(unique((c.pointsSystems ?? []).map((p) => p.key))).toBe(true);
      expect(unique((c.leaderboards ?? []).map((b) => b.key))).toBe(true);
      for (const p of c.pointsSystems ?? []) expect(unique((p.triggers ?? []).map((t) => t.key)) && unique((p.levels ?? []).map((l) => l.key))).toBe(true);
    }
  });

  it('honours streak: true and false', () => {
    expect(fc.sample(arbConfig({ streak: true }), { numRuns: 50, seed: 13 }).every((c) => c.streak !== undefined)).toBe(true);
    expect(fc.sample(arbConfig({ streak: false }), { numRuns: 50, seed: 14 }).every((c) => c.streak === undefined)).toBe(true);
  });
});

describe('arbScenario and arbAction', () => {
  it('instants never go back, gaps cross days and weeks, users and idempotency keys repeat', () => {
    const scenarios = fc.sample(arbScenario(config), { numRuns: 200, seed: 15 });
    let longGaps = 0;
    let zeroGaps = 0;
    let repeatedKeys = 0;
    for (const steps of scenarios) {
      for (let i = 1; i < steps.length; i++) {
        const gap = (steps[i]?.at.getTime() ?? 0) - (steps[i - 1]?.at.getTime() ?? 0);
        expect(gap).toBeGreaterThanOrEqual(0);
        if (gap > 86_400_000) longGaps++;
        if (gap === 0) zeroGaps++;
      }
      const keys = steps.flatMap(({ step }) => (step.kind === 'recordEvent' && step.event.idempotencyKey ? [`${step.event.user.id}/${step.event.idempotencyKey}`] : []));
      if (new Set(keys).size < keys.length) repeatedKeys++;
    }
    expect(longGaps).toBeGreaterThan(100);
    expect(zeroGaps).toBeGreaterThan(100);
    expect(repeatedKeys).toBeGreaterThan(20);
  });

  it('scenario users carry their zone (or none with zones: false), and events honour the value ranges', () => {
    const usersOf = (step: ScenarioStep) => (step.kind === 'recordEvent' ? [step.event.user] : step.kind === 'recordEvents' ? step.events.map((e) => e.user) : step.kind === 'identifyUser' ? [step.user] : []);
    const zoned = fc.sample(arbScenario(config, { zones: ['Asia/Tokyo', 'Europe/Paris'], values: { lessons: { min: 2, max: 4, decimals: 0 } } }), { numRuns: 100, seed: 18 });
    const tzs = new Set(zoned.flatMap((steps) => steps.flatMap(({ step }) => usersOf(step).map((u) => u.tz))));
    expect(tzs).toEqual(new Set(['Asia/Tokyo', 'Europe/Paris', undefined]));
    const lessons = zoned.flatMap((steps) => steps.flatMap(({ step }) => (step.kind === 'recordEvent' && step.event.metricKey === 'lessons' ? [step.event.value] : [])));
    expect(new Set(lessons)).toEqual(new Set([2, 3, 4]));
    const plain = fc.sample(arbScenario(config, { zones: false }), { numRuns: 100, seed: 19 });
    expect(plain.every((steps) => steps.every(({ step }) => usersOf(step).every((u) => u.tz === undefined) && (step.kind !== 'updateUser' || step.patch.tz === undefined)))).toBe(true);
  });

  it('runScenarioStep resolves relative dates from the UTC date of the step', async () => {
    const at = new Date('2026-03-10T23:30:00Z');
    const engine = createEngine({ config, store: createMemoryStore(), clock: () => at, newId: sequentialIds('r') });
    await engine.identifyUser({ id: 'u1', tz: 'UTC' });
    const paused = (await runScenarioStep(engine, { kind: 'pauseStreak', userId: 'u1', startInDays: 2, days: 3 }, at)) as { pause: { start: string; end: string } };
    expect([paused.pause.start, paused.pause.end]).toEqual(['2026-03-12', '2026-03-15']);
    await runScenarioStep(engine, { kind: 'deletePause', userId: 'u1' }, at);
    expect((await engine.getStreak('u1')).pauses).toEqual([]);
    await runScenarioStep(engine, { kind: 'createBoost', userId: 'u1', systemKey: 'xp', name: 'B', startInDays: 1, days: null, multiplier: 2, rounding: 'down' }, at);
    const [boost] = (await engine.listBoosts('xp', { includeFinished: true })).filter((b) => b.userId === 'u1');
    expect(boost?.start).toBe('2026-03-11');
    await runScenarioStep(engine, { kind: 'deleteBoost', userId: 'u1', systemKey: 'xp' }, at);
    expect((await engine.listBoosts('xp', { includeFinished: true })).filter((b) => b.userId === 'u1')).toEqual([]);
  });

  it('arbAction covers every operator call the configuration allows, and none it does not', () => {
    const kinds = new Set(fc.sample(arbAction(config), { numRuns: 2000, seed: 16 }).map((s) => s.kind));
    const expected: ScenarioStep['kind'][] = ['recordEvent', 'recordEvents', 'identifyUser', 'updateUser', 'completeAchievement', 'accrue', 'grantFreezes', 'restoreStreak', 'pauseStreak', 'deletePause', 'updatePreferences', 'adjustPoints', 'createBoost', 'deleteBoost', 'resetUser', 'deleteUser', 'sweep', 'read'];
    expect(kinds).toEqual(new Set(expected));
    const bare = defineConfig({ metrics: [{ key: 'm', name: 'M' }] });
    const bareKinds = new Set(fc.sample(arbAction(bare, { operations: false, reads: false }), { numRuns: 500, seed: 17 }).map((s) => s.kind));
    expect(bareKinds).toEqual(new Set(['recordEvent', 'recordEvents', 'identifyUser', 'updateUser', 'accrue', 'sweep']));
  });

  it('scenarios of generated configurations play on an engine, every failure a typed error, mostly successes', async () => {
    let ok = 0;
    let failed = 0;
    await fc.assert(
      fc.asyncProperty(
        arbConfig().chain((input) => {
          const compiled = defineConfig(input);
          return arbScenario(compiled, { maxSteps: 30 }).map((steps) => ({ compiled, steps }));
        }),
        async ({ compiled, steps }) => {
          let now = steps[0]?.at ?? new Date();
          const engine = createEngine({ config: compiled, store: createMemoryStore(), clock: () => now, newId: sequentialIds('a') });
          for (const { at, step } of steps) {
            now = at;
            try {
              await runScenarioStep(engine, step, at);
              ok++;
            } catch (error) {
              if (!isLaurelError(error)) throw error;
              failed++;
            }
          }
        },
      ),
      { numRuns: 40 },
    );
    expect(ok).toBeGreaterThan(failed * 2);
  }, 120_000);
});
