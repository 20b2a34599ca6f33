/**
 * Issue 13, erasure (docs/rules.md, "Operations on users"): for any users and events, deleting any subset of
 * the users leaves every other user's ranks, the achievements' completions and rarity, the level summary and
 * the histograms exactly as a recomputation from scratch over the remaining users (their events alone,
 * recorded on a fresh memory store at the same instants), and no read reveals a deleted user (memory store
 * 50 runs; PostgreSQL 5).
 */
import fc from 'fast-check';
import { expect, it } from 'vitest';
import { createEngine, defineConfig, type Engine } from '../src/index.js';
import { createMemoryStore } from '../src/memory.js';
import { sequentialIds } from '../src/testing/index.js';
import { onEachStore, setupOn } from './stores.js';

const START = Date.parse('2026-03-02T09:00:00Z');
const HOUR = 3_600_000;

const config = defineConfig({
  metrics: [
    { key: 'lessons', name: 'Lessons' },
    { key: 'quizzes', name: 'Quizzes' },
  ],
  attributes: [{ key: 'country', name: 'Country', type: 'user' }],
  achievements: [
    { key: 'five', name: 'Five lessons', trigger: 'metric', metricKey: 'lessons', metricValue: 5 },
    { key: 'quizzer', name: 'Three quizzes', trigger: 'metric', metricKey: 'quizzes', metricValue: 3 },
  ],
  streak: { frequency: 'daily' },
  pointsSystems: [
    {
      key: 'xp',
      name: 'XP',
      levels: [
        { key: 'l0', name: 'Zero', points: 0 },
        { key: 'l1', name: 'One', points: 20 },
        { key: 'l2', name: 'Two', points: 60 },
      ],
      triggers: [
        { key: 'per-lesson', type: 'metric', metricKey: 'lessons', metricThreshold: 1, points: 5 },
        { key: 'per-quiz', type: 'metric', metricKey: 'quizzes', metricThreshold: 2, points: 7 },
        { key: 'signup', type: 'user_creation', points: 1 },
      ],
    },
  ],
  leaderboards: [
    { key: 'xp-board', name: 'XP', rankBy: 'points', pointsSystemKey: 'xp', start: '2026-01-01' },
    { key: 'top3', name: 'Top three', rankBy: 'metric', metricKey: 'lessons', start: '2026-01-01', maxParticipants: 3 },
    { key: 'by-country', name: 'By country', rankBy: 'metric', metricKey: 'quizzes', start: '2026-01-01', breakdownAttributes: ['country'] },
  ],
});

type Ev = { user: number; metric: 'lessons' | 'quizzes'; value: number; country: 'FR' | 'DE' | null; hours: number };

const arbEvent = fc.record({
  user: fc.integer({ min: 0, max: 5 }),
  metric: fc.constantFrom('lessons' as const, 'quizzes' as const),
  value: fc.integer({ min: 1, max: 4 }),
  country: fc.constantFrom<'FR' | 'DE' | null>(null, null, 'FR', 'DE'),
  hours: fc.integer({ min: 0, max: 30 }),
});

const boards = [
  ['xp-board', undefined],
  ['top3', undefined],
  ['by-country', { country: 'FR' }],
  ['by-country', { country: 'DE' }],
  ['by-country', { country: '' }],
] as const;

/** Records `events` (those of `keep` users) at their instants. */
async function record(engine: Engine<typeof config>, set: (ms: number) => void, events: readonly Ev[], keep: (id: string) => boolean) {
  let at = START;
  for (const e of events) {
    at += e.hours * HOUR;
    const id = `u${e.user}`;
    if (!keep(id)) continue;
    set(at);
    await engine.recordEvent(e.metric, { user: { id, ...(e.country ? { attributes: { country: e.country } } : {}) }, value: e.value });
  }
  return at;
}

/** Everything cross-user: board pages and each user's standing, rarity, level summary, histograms. */
async function view(engine: Engine<typeof config>, users: readonly string[]) {
  const pages = [];
  for (const [key, userAttributes] of boards) {
    const page = await engine.getLeaderboard(key, { limit: 100, ...(userAttributes ? { userAttributes } : {}) });
    pages.push({ key, threshold: page.threshold, rankings: page.rankings.map((r) => [r.userId, r.rank, r.value]) });
  }
  const standings = [];
  for (const id of users) for (const key of ['xp-board', 'top3', 'by-country'] as const) standings.push([id, key, (await engine.getUserLeaderboard(id, key, { numEvents: 0 })).rank]);
  return {
    pages,
    standings,
    achievements: (await engine.listAchievements()).map((a) => [a.key, a.completions, a.rarity]),
    levels: (await engine.getLevelSummary('xp')).map((l) => [l.level.key, l.users]),
    histogram: await engine.getPointsHistogram('xp'),
    histogramFR: await engine.getPointsHistogram('xp', { userAttributes: { country: 'FR' } }),
    histogramDE: await engine.getPointsHistogram('xp', { userAttributes: { country: 'DE' } }),
  };
}

onEachStore('deleteUser (property)', (kind) => {
  it('after deleting any users, every other rank, rarity, level count and histogram equals a recomputation without them, and no read reveals them', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(arbEvent, { minLength: 1, maxLength: 30 }), fc.array(fc.boolean(), { minLength: 6, maxLength: 6 }), async (events, deleteMask) => {
        const t = await setupOn(kind, config, new Date(START).toISOString());
        const end = await record(t.engine, (ms) => t.set(new Date(ms).toISOString()), events, () => true);
        const created = [...new Set(events.map((e) => `u${e.user}`))].sort();
        const deleted = created.filter((id) => deleteMask[Number(id.slice(1))]);
        const kept = created.filter((id) => !deleted.includes(id));
        t.set(new Date(end + HOUR).toISOString());
        for (const id of deleted) expect(await t.engine.deleteUser(id)).toEqual({ userId: id, deleted: true });

        let now = new Date(START);
        const fresh = createEngine({ config, store: createMemoryStore(), clock: () => now, newId: sequentialIds() });
        await record(fresh, (ms) => (now = new Date(ms)), events, (id) => kept.includes(id));
        now = new Date(end + HOUR);
        expect(await view(t.engine, kept)).toEqual(await view(fresh, kept));
        expect(await t.store.getCounters(['users'])).toEqual({ users: kept.length });
        expect(await t.store.listUsers({ limit: 100 })).toEqual(kept);

        for (const id of deleted) {
          const reads = [() => t.engine.getUser(id), () => t.engine.getStreak(id), () => t.engine.getPointsSummary(id, 'xp'), () => t.engine.getUserEvents(id), () => t.engine.getUserLeaderboard(id, 'xp-board')];
          for (const read of reads) await expect(read()).rejects.toMatchObject({ code: 'NOT_FOUND' });
          expect(await t.store.readUserLedger(id, { limit: 10 })).toEqual({ rows: [], next: null });
          expect(await t.engine.getStreaks([id])).toEqual([]);
        }
        const shown = (await view(t.engine, [])).pages.flatMap((p) => p.rankings.map((r) => r[0]));
        for (const id of deleted) expect(shown).not.toContain(id);
      }),
      { numRuns: kind === 'memory' ? 50 : 5 },
    );
  }, 300_000);
});
