/**
 * A retroactive replay leaves the user as recording their history from scratch under the current
 * configuration would (docs/rules.md, "Replay"), also when what moves is not in the diff's headline figures:
 * the freezes a changed `freezes.initial` gives, an achievement's `achievedAt` under a lowered threshold, or
 * the restart instant of an `anchor: 'lastSpend'` schedule. Replay used to recompute these and then not
 * commit them (the freezes, `achievedAt`) or commit a count without its instant (the anchor). Found by a fuzz
 * of configuration changes against recording from scratch.
 */
import { describe, expect, it } from 'vitest';
import { createEngine, defineConfig, type ConfigInput } from '../src/index.js';
import { createMemoryStore } from '../src/memory.js';
import { sequentialIds } from '../src/testing/index.js';

const T0 = Date.parse('2026-03-02T10:00:00Z');
const H = 3_600_000;

/** The engine on `store` at `ms` under `config`. */
const at = (store: ReturnType<typeof createMemoryStore>, config: ConfigInput, ms: number, ids = 'r') =>
  createEngine({ config: defineConfig(config), store, clock: () => new Date(ms), newId: sequentialIds(ids) });

describe('retroactive replay commits everything it recomputes', () => {
  it('freezes from a changed freezes.initial, with nothing else changed', async () => {
    const cfg = (initial: number): ConfigInput => ({ metrics: [{ key: 'lessons', name: 'Lessons' }], streak: { frequency: 'daily', freezes: { initial, max: 3 } } });
    const store = createMemoryStore();
    await at(store, cfg(0), T0, 'x').recordEvent('lessons', { user: { id: 'u' }, value: 1 });
    const dry = await at(store, cfg(2), T0 + H).replay({ policy: 'retroactive', users: ['u'], dryRun: true });
    expect(dry.changed).toBe(1);
    expect(dry.diffs[0]?.streak).toEqual({ before: 1, after: 1, freezesBefore: 0, freezesAfter: 2 });
    const report = await at(store, cfg(2), T0 + H).replay({ policy: 'retroactive', users: ['u'] });
    expect(report.changed).toBe(1);
    expect((await at(store, cfg(2), T0 + H).getStreak('u')).freezes).toBe(2);
    const scratch = createMemoryStore();
    await at(scratch, cfg(2), T0, 'x').recordEvent('lessons', { user: { id: 'u' }, value: 1 });
    expect((await at(scratch, cfg(2), T0 + H).getStreak('u')).freezes).toBe(2);
    // A second replay finds nothing more to do.
    expect((await at(store, cfg(2), T0 + 2 * H).replay({ policy: 'retroactive', users: ['u'] })).changed).toBe(0);
  });

  it("an achievement's achievedAt under a lowered threshold, after a call has aligned the user's rules", async () => {
    const cfg = (metricValue: number): ConfigInput => ({ metrics: [{ key: 'lessons', name: 'Lessons' }], achievements: [{ key: 'three', name: 'Three', trigger: 'metric', metricKey: 'lessons', metricValue }] });
    const store = createMemoryStore();
    for (let i = 0; i < 3; i++) await at(store, cfg(3), T0 + i * H, 'x').recordEvent('lessons', { user: { id: 'u' }, value: 1 });
    const now = T0 + 10 * H;
    // A call under the new configuration first (the forward way: the held achievement keeps its date).
    await at(store, cfg(1), now).accrue('u');
    expect((await at(store, cfg(1), now).getUserAchievements('u'))[0]?.achievedAt).toBe(new Date(T0 + 2 * H).toISOString());
    const report = await at(store, cfg(1), now).replay({ policy: 'retroactive', users: ['u'] });
    expect(report.diffs[0]?.achievements).toEqual({ gained: [], lost: [], redated: ['three'] });
    expect((await at(store, cfg(1), now).getUserAchievements('u'))[0]?.achievedAt).toBe(new Date(T0).toISOString());
  });

  it("the restart instant of an anchor: 'lastSpend' schedule, with the count read against it", async () => {
    const cfg = (cost: boolean): ConfigInput => ({
      metrics: [{ key: 'quizzes', name: 'Quizzes' }],
      pointsSystems: [
        {
          key: 'coins',
          name: 'Coins',
          maxPoints: 100,
          triggers: [
            { key: 'signup', type: 'user_creation', points: 10 },
            { key: 'refill', type: 'time', timeUnit: 'hour', timeInterval: 3, points: 1, anchor: 'lastSpend' },
            ...(cost ? [{ key: 'quiz-cost', type: 'metric' as const, metricKey: 'quizzes', metricThreshold: 1, points: -5 }] : []),
          ],
        },
      ],
    });
    const record = async (store: ReturnType<typeof createMemoryStore>, config: ConfigInput) => {
      await at(store, config, T0, 'x').identifyUser({ id: 'u' });
      await at(store, config, T0 + 2 * H, 'y').recordEvent('quizzes', { user: { id: 'u' }, value: 1 });
    };
    const store = createMemoryStore();
    await record(store, cfg(false));
    await at(store, cfg(true), T0 + 9 * H).replay({ policy: 'retroactive', users: ['u'] });
    const scratch = createMemoryStore();
    await record(scratch, cfg(true));
    for (const ms of [T0 + 9 * H, T0 + 12 * H]) {
      const a = await at(store, cfg(true), ms).getPointsSummary('u', 'coins');
      const b = await at(scratch, cfg(true), ms).getPointsSummary('u', 'coins');
      expect({ total: a.total, next: a.nextGrantAt }).toEqual({ total: b.total, next: b.nextGrantAt });
    }
  });

  it('the operations of one runOperations call, all or none, as the call was', async () => {
    const cfg = (max: number): ConfigInput => ({
      metrics: [{ key: 'lessons', name: 'Lessons' }],
      streak: { frequency: 'daily', freezes: { initial: 1, max } },
      pointsSystems: [{ key: 'coins', name: 'Coins', triggers: [{ key: 'signup', type: 'user_creation', points: 50 }] }],
    });
    // The shop: spend 10 coins and take a freeze, only if there is room for it.
    const shop = [{ op: 'adjustPoints', system: 'coins', amount: -10 }, { op: 'grantFreezes', count: 1, requireRoom: true }] as const;
    const store = createMemoryStore();
    await at(store, cfg(3), T0, 'x').identifyUser({ id: 'u' });
    await at(store, cfg(3), T0, 'y').runOperations('u', [...shop]);
    // Under max 1 the call is refused whole from scratch.
    const scratch = createMemoryStore();
    await at(scratch, cfg(1), T0, 'x').identifyUser({ id: 'u' });
    await expect(at(scratch, cfg(1), T0, 'y').runOperations('u', [...shop])).rejects.toMatchObject({ code: 'VALIDATION' });
    await at(store, cfg(1), T0 + H).replay({ policy: 'retroactive', users: ['u'] });
    for (const s of [store, scratch]) {
      const e = at(s, cfg(1), T0 + H);
      expect({ coins: (await e.getPointsSummary('u', 'coins')).total, freezes: (await e.getStreak('u')).freezes }).toEqual({ coins: 50, freezes: 1 });
    }
  });

  it('what time alone does (a streak kept up by freezes, then lost) is not a change of replay\'s', async () => {
    const cfg: ConfigInput = { metrics: [{ key: 'lessons', name: 'Lessons' }], streak: { frequency: 'daily', freezes: { initial: 2, max: 3 } } };
    const store = createMemoryStore();
    for (let d = 0; d < 3; d++) await at(store, cfg, T0 + d * 24 * H, `x${d}`).recordEvent('lessons', { user: { id: 'u' }, value: 1 });
    for (const d of [3, 4, 5, 6, 10]) {
      const report = await at(store, cfg, T0 + d * 24 * H + H, `r${d}`).replay({ policy: 'retroactive', users: ['u'] });
      expect(report.changed, `day ${d}`).toBe(0);
    }
  });
});
