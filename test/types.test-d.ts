import { describe, expectTypeOf, it } from 'vitest';
import { createEngine, defineConfig } from '../src/index.js';

const config = defineConfig({
  metrics: [{ key: 'lessons', name: 'Lessons' }, { key: 'quizzes', name: 'Quizzes' }],
  achievements: [{ key: 'onboarded', name: 'Onboarded', trigger: 'api' }],
  pointsSystems: [{ key: 'xp', name: 'XP', triggers: [] }],
  leaderboards: [{ key: 'weekly', name: 'Weekly', rankBy: 'metric', metricKey: 'lessons', start: '2026-01-01' }],
});
const engine = createEngine({ config });

describe('config keys are literal types', () => {
  it('accepts declared keys and rejects typos at compile time', () => {
    expectTypeOf(engine.recordEvent).parameter(0).toEqualTypeOf<'lessons' | 'quizzes'>();
    // @ts-expect-error: 'lesons' is not a metric key
    void engine.recordEvent('lesons', { user: { id: 'u1' }, value: 1 });
    // @ts-expect-error: unknown achievement
    void engine.completeAchievement('onboard', { user: { id: 'u1' } });
    // @ts-expect-error: unknown points system
    void engine.getPointsSummary('u1', 'coins');
    // @ts-expect-error: unknown leaderboard
    void engine.getLeaderboard('daily');
    expectTypeOf(engine.getLeaderboard).parameter(0).toEqualTypeOf<'weekly'>();
    // @ts-expect-error: 'lesons' is not a metric key, in a batch either
    void engine.recordEvents([{ metricKey: 'lesons', user: { id: 'u1' }, value: 1 }]);
  });

  it('batch results narrow on ok', async () => {
    const [first] = await engine.recordEvents([{ metricKey: 'lessons', user: { id: 'u1' }, value: 1 }]);
    if (first?.ok) expectTypeOf(first.response.total).toEqualTypeOf<number>();
    else if (first) expectTypeOf(first.error.code).toBeString();
  });
});
