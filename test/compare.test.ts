/**
 * `compareWithMemoryStore`: passes against a second memory store and against PostgreSQL, and fails with a
 * message naming the call and both results against memory stores with a plausible adapter bug injected
 * (a board page missing its last entry; `countEntries` counting its `max` bound).
 */
import { describe, expect, it } from 'vitest';
import { defineConfig, type Store } from '../src/index.js';
import { createMemoryStore } from '../src/memory.js';
import { compareWithMemoryStore } from '../src/testing/index.js';
import { PG_URL } from './servers.js';
import { freshStore } from './stores.js';

/** Every event is worth 10 points, so totals land exactly on level bounds (10, 20, 30). */
const config = defineConfig({
  metrics: [{ key: 'lessons', name: 'Lessons' }],
  attributes: [{ key: 'plan', name: 'Plan', type: 'user' }],
  achievements: [{ key: 'intro', name: 'Intro', trigger: 'api' }],
  streak: { frequency: 'daily', freezes: { initial: 1, max: 2 } },
  pointsSystems: [
    {
      key: 'xp',
      name: 'XP',
      levels: [{ key: 'l0', name: 'L0', points: 0 }, { key: 'l1', name: 'L1', points: 10 }, { key: 'l2', name: 'L2', points: 20 }, { key: 'l3', name: 'L3', points: 30 }],
      triggers: [{ key: 'per-lesson', type: 'metric', metricKey: 'lessons', metricThreshold: 1, points: 10 }],
    },
  ],
  leaderboards: [{ key: 'all-time', name: 'All time', rankBy: 'metric', metricKey: 'lessons', start: '2025-01-01' }],
});
const scenario = { values: { lessons: { min: 1, max: 1, decimals: 0 } }, minSteps: 15, maxSteps: 40 };

/** A memory store with some methods replaced by `patch(store)`. */
function brokenStore(patch: (base: ReturnType<typeof createMemoryStore>) => Partial<Store>): () => Store {
  return () => {
    const base = createMemoryStore();
    return { ...base, ...patch(base) } as Store;
  };
}

/** The error `compareWithMemoryStore` ends with (fast-check's report, with the shrunk run's own message). */
async function failureOf(run: Promise<void>): Promise<string> {
  try {
    await run;
  } catch (error) {
    return error instanceof Error ? error.message : String(error);
  }
  throw new Error('compareWithMemoryStore passed against a broken store');
}

describe('compareWithMemoryStore', () => {
  it('passes against a second memory store, on generated configurations', async () => {
    await compareWithMemoryStore(() => createMemoryStore(), { runs: 25 });
  }, 120_000);

  it('passes against a second memory store, on a given configuration', async () => {
    await compareWithMemoryStore(async () => createMemoryStore(), { runs: 10, config, scenario });
  }, 120_000);

  it('fails against a store whose readRange drops the last entry, naming the call and both results', async () => {
    const message = await failureOf(compareWithMemoryStore(brokenStore((base) => ({ readRange: async (index, offset, limit) => (await base.readRange(index, offset, limit)).slice(0, -1) })), { runs: 10, config, scenario, endOnFailure: true }));
    expect(message).toMatch(/the adapter differs from the memory store at \$\.ok/);
    expect(message).toMatch(/memory store: \{"ok":/);
    expect(message).toMatch(/adapter: +\{"ok":/);
    expect(message).toMatch(/getLeaderboard|getPointsHistogram|step \d+ at/);
    expect(message).toMatch(/Counterexample: .*"steps"/);
    expect(message).toMatch(/seed: -?\d+/);
  }, 120_000);

  it('fails against a store whose countEntries counts its max bound, and shrinks to a short scenario', async () => {
    const inclusive = brokenStore((base) => ({ countEntries: async (index, range) => (range?.max === undefined ? base.countEntries(index, range) : base.countEntries(index, { ...range, max: range.max + 1e-9 })) }));
    const message = await failureOf(compareWithMemoryStore(inclusive, { runs: 25, config, scenario: { ...scenario, minSteps: 1 } }));
    expect(message).toMatch(/getLevelSummary|getPointsHistogram/);
    expect(message).toMatch(/the adapter differs from the memory store at \$\.ok\[\d+\]\.users/);
    expect(message).toMatch(/seed/);
    // Shrunk: a handful of steps (two events that reach a level bound suffice), not the original dozens.
    const counterexample = message.slice(message.indexOf('Counterexample:'));
    expect((counterexample.match(/"step":/g) ?? []).length).toBeLessThanOrEqual(6);
  }, 120_000);

  it('fails against a store that returns ledger rows of one instant in reverse order', async () => {
    // Each run of rows dated at one instant comes back reversed (a plausible ORDER BY at without a tiebreak).
    const reverseTies = (rows: Awaited<ReturnType<Store['readLedger']>>) => {
      const out: typeof rows = [];
      for (let i = 0; i < rows.length; ) {
        let j = i;
        while (j < rows.length && rows[j]?.at === rows[i]?.at) j++;
        out.push(...rows.slice(i, j).reverse());
        i = j;
      }
      return out;
    };
    const ties = brokenStore((base) => ({ readLedger: async (query) => reverseTies(await base.readLedger(query)) }));
    const message = await failureOf(compareWithMemoryStore(ties, { runs: 25, config, scenario }));
    expect(message).toMatch(/the adapter differs from the memory store at \$\.ok/);
  }, 120_000);

  it('refuses a factory that is not a function', async () => {
    await expect(compareWithMemoryStore(undefined as never)).rejects.toThrow(TypeError);
  });
});

describe.skipIf(!PG_URL)('compareWithMemoryStore on PostgreSQL', () => {
  it('the PostgreSQL store behaves like the memory store', async () => {
    await compareWithMemoryStore(() => freshStore('postgres'), { runs: Number(process.env.COMPARE_RUNS ?? 6), endOnFailure: true });
  }, 600_000);

  it('the PostgreSQL store behaves like the memory store on a given configuration', async () => {
    await compareWithMemoryStore(() => freshStore('postgres'), { runs: Number(process.env.COMPARE_RUNS ?? 4), config, scenario, endOnFailure: true });
  }, 600_000);
});
