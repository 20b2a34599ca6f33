/**
 * Type tests (issue 17): `defineConfig` keeps literal keys for inline, pre-declared `as const` and
 * `as const satisfies ConfigInput` configurations, a widened configuration still compiles with `string` keys,
 * and response maps are keyed by the configuration's keys (optional where an entry can be absent).
 */
import { describe, expectTypeOf, it } from 'vitest';
import { createEngine, defineConfig, type ConfigInput, type EventLeaderboard, type EventPoints, type EventResponse, type UserAchievement } from '../src/index.js';

const user = { id: 'u1' };

describe('inline configuration', () => {
  const config = defineConfig({
    metrics: [{ key: 'lessons', name: 'Lessons' }],
    achievements: [{ key: 'first', name: 'First', trigger: 'metric', metricKey: 'lessons', metricValue: 1 }],
    pointsSystems: [{ key: 'heart', name: 'Hearts', triggers: [{ key: 'per-lesson', type: 'metric', metricKey: 'lessons', metricThreshold: 1, points: 1 }] }],
    leaderboards: [{ key: 'weekly', name: 'Weekly', rankBy: 'metric', metricKey: 'lessons', start: '2026-01-01' }],
  });
  const engine = createEngine({ config });

  it('types the event response maps by the configuration keys, each entry optional', async () => {
    const r = await engine.recordEvent('lessons', { user, value: 1 });
    expectTypeOf(r.points.heart).toEqualTypeOf<EventPoints<'heart'> | undefined>();
    expectTypeOf(r.leaderboards.weekly).toEqualTypeOf<EventLeaderboard<'weekly'> | undefined>();
    expectTypeOf(r.achievements).toEqualTypeOf<UserAchievement<'first'>[]>();
    // @ts-expect-error: the points system is `heart`
    void r.points.hert;
    // @ts-expect-error: the leaderboard is `weekly`
    void r.leaderboards.daily;
    // @ts-expect-error: an entry can be absent (a system the event awarded nothing in)
    const total: number = r.points.heart.total;
    void total;
    if (r.points.heart) expectTypeOf(r.points.heart.key).toEqualTypeOf<'heart'>();
    for (const a of r.achievements) {
      // @ts-expect-error: no achievement `frist`
      void (a.key === 'frist');
    }
  });

  it('types the simulated, batched, completion, accrual and profile maps the same way', async () => {
    const simulated = await engine.simulateEvent('lessons', { user, value: 1 });
    // @ts-expect-error: misspelt key on a simulated response
    void simulated.points.hert;
    const [first] = await engine.recordEvents([{ metricKey: 'lessons', user, value: 1 }]);
    if (first?.ok) {
      expectTypeOf(first.response.points.heart).toEqualTypeOf<EventPoints<'heart'> | undefined>();
      // @ts-expect-error: misspelt key in a batch response
      void first.response.points.hert;
    }
    const completion = await engine.completeAchievement('first', { user });
    expectTypeOf(completion.achievement.key).toEqualTypeOf<'first'>();
    expectTypeOf(completion.points.heart).toEqualTypeOf<EventPoints<'heart'> | undefined>();
    // @ts-expect-error: misspelt key on a completion
    void completion.points.hert;
    const accrued = await engine.accrue('u1');
    // @ts-expect-error: misspelt key on an accrual
    void accrued.points.hert;
    const profile = await engine.getProfile('u1');
    // Every points system is in a profile; a board is left out when inactive.
    expectTypeOf(profile.points.heart.total).toEqualTypeOf<number>();
    expectTypeOf(profile.leaderboards.weekly).toEqualTypeOf<{ run: { start: string; end: string | null }; rank: number | null; value: number | null } | undefined>();
    // @ts-expect-error: misspelt key on a profile
    void profile.points.hert;
    expectTypeOf(await engine.getUserAchievements('u1')).toEqualTypeOf<UserAchievement<'first'>[]>();
  });

  it('leaves a response without the maps a configuration has no keys for', async () => {
    const bare = createEngine({ config: defineConfig({ metrics: [{ key: 'm', name: 'M' }] }) });
    const r = await bare.recordEvent('m', { user, value: 1 });
    // @ts-expect-error: no points system is configured
    void r.points.xp;
    expectTypeOf(r.achievements).toEqualTypeOf<UserAchievement<never>[]>();
  });
});

describe('pre-declared configurations', () => {
  it('keeps literal keys for a configuration declared `as const`', async () => {
    const input = {
      metrics: [{ key: 'lessons', name: 'Lessons' }],
      achievements: [{ key: 'onboarded', name: 'Onboarded', trigger: 'api' }],
      pointsSystems: [{ key: 'heart', name: 'Hearts' }],
    } as const;
    const engine = createEngine({ config: defineConfig(input) });
    expectTypeOf(engine.recordEvent).parameter(0).toEqualTypeOf<'lessons'>();
    expectTypeOf(engine.completeAchievement).parameter(0).toEqualTypeOf<'onboarded'>();
    // @ts-expect-error: 'lesons' is not a metric key
    void engine.recordEvent('lesons', { user, value: 1 });
    const r = await engine.recordEvent('lessons', { user, value: 1 });
    // @ts-expect-error: the points system is `heart`
    void r.points.hert;
  });

  it('keeps literal keys for `as const satisfies ConfigInput`, which also checks the shape where it is written', async () => {
    const input = {
      metrics: [{ key: 'lessons', name: 'Lessons' }, { key: 'quizzes', name: 'Quizzes' }],
      pointsSystems: [{ key: 'heart', name: 'Hearts', maxPoints: 5, triggers: [{ key: 'cost', type: 'metric', metricKey: 'quizzes', metricThreshold: 1, points: -1, blockIfOutOfPoints: true }] }],
      leaderboards: [{ key: 'weekly', name: 'Weekly', rankBy: 'points', pointsSystemKey: 'heart', start: '2026-01-01', runUnit: 'day', runInterval: 7 }],
    } as const satisfies ConfigInput;
    const engine = createEngine({ config: defineConfig(input) });
    expectTypeOf(engine.recordEvent).parameter(0).toEqualTypeOf<'lessons' | 'quizzes'>();
    expectTypeOf(engine.getLeaderboard).parameter(0).toEqualTypeOf<'weekly'>();
    const r = await engine.recordEvent('quizzes', { user, value: 1 });
    expectTypeOf(r.points.heart).toEqualTypeOf<EventPoints<'heart'> | undefined>();
    // @ts-expect-error: the points system is `heart`
    void r.points.hert;
    // The shape is checked at the declaration, before defineConfig sees it.
    // @ts-expect-error: `metricKey` is misspelt
    void ({ metrics: [{ key: 'm', name: 'M' }], leaderboards: [{ key: 'b', name: 'B', rankBy: 'metric', metrcKey: 'm', start: '2026-01-01' }] } as const satisfies ConfigInput);
  });

  it('compiles a widened configuration (plain `satisfies` or a `ConfigInput` annotation) with `string` keys', async () => {
    const satisfied = {
      metrics: [{ key: 'lessons', name: 'Lessons' }],
      achievements: [{ key: 'onboarded', name: 'Onboarded', trigger: 'api' }],
    } satisfies ConfigInput;
    const annotated: ConfigInput = { metrics: [{ key: 'lessons', name: 'Lessons' }], pointsSystems: [{ key: 'heart', name: 'Hearts' }] };
    const a = createEngine({ config: defineConfig(satisfied) });
    const b = createEngine({ config: defineConfig(annotated) });
    expectTypeOf(a.recordEvent).parameter(0).toEqualTypeOf<string>();
    expectTypeOf(b.recordEvent).parameter(0).toEqualTypeOf<string>();
    expectTypeOf(b.getPointsSummary).parameter(1).toEqualTypeOf<string>();
    // The maps are plain records then: any key reads, possibly undefined.
    const r = await b.recordEvent('anything', { user, value: 1 });
    expectTypeOf(r).toEqualTypeOf<EventResponse>();
    expectTypeOf(r.points).toEqualTypeOf<Record<string, EventPoints>>();
    expectTypeOf(r.points.whatever).toEqualTypeOf<EventPoints | undefined>();
  });

  it('compiles a plain pre-declared object whose literals widen only where no literal is needed', () => {
    const plain = { timeZone: 'Europe/Paris', metrics: [{ key: 'lessons', name: 'Lessons' }] };
    const engine = createEngine({ config: defineConfig(plain) });
    expectTypeOf(engine.recordEvent).parameter(0).toEqualTypeOf<string>();
    // A discriminant (`trigger`, `type`, `rankBy`) widens to `string` in a plain object, which TypeScript
    // cannot accept: declare such a configuration `as const` (the README, "Types").
    const widened = { metrics: [{ key: 'lessons', name: 'Lessons' }], achievements: [{ key: 'a', name: 'A', trigger: 'api' }] };
    // @ts-expect-error: `trigger` is `string` here
    void defineConfig(widened);
  });

  it('accepts readonly arrays and objects anywhere in the input', () => {
    const metrics: readonly { readonly key: string; readonly name: string }[] = [{ key: 'm', name: 'M' }];
    const attributes = Object.freeze([Object.freeze({ key: 'plan', name: 'Plan', type: 'user' as const })]);
    expectTypeOf(defineConfig({ metrics, attributes })).not.toBeNever();
  });
});

describe('the default response type', () => {
  it('is keyed by string, as before', () => {
    expectTypeOf<EventResponse['points']>().toEqualTypeOf<Record<string, EventPoints>>();
    expectTypeOf<EventResponse['leaderboards']>().toEqualTypeOf<Record<string, EventLeaderboard>>();
    // A typed response is still an EventResponse (for code that handles any configuration's responses).
    expectTypeOf<EventResponse<{ metric: 'm'; achievement: 'a'; points: 'p'; leaderboard: 'l' }>>().toMatchTypeOf<EventResponse>();
  });
});
