import { describe, expect, it } from 'vitest';
import { ConflictError, createEngine, defineConfig } from '../src/index.js';
import { createMemoryStore } from '../src/memory.js';

const config = defineConfig({
  metrics: [{ key: 'lessons', name: 'Lessons' }],
  pointsSystems: [{ key: 'xp', name: 'XP', triggers: [{ key: 'per-lesson', type: 'metric', metricKey: 'lessons', metricThreshold: 1, points: 1 }] }],
  leaderboards: [{ key: 'all', name: 'All', rankBy: 'metric', metricKey: 'lessons', start: '2020-01-01' }],
});

describe('concurrent calls lose nothing', () => {
  it('200 concurrent recordEvent calls for one user: exact total, each key once, no call lost', async () => {
    const store = createMemoryStore();
    const engine = createEngine({ config, store });
    const calls = Array.from({ length: 200 }, (_, i) =>
      engine.recordEvent('lessons', { user: { id: 'hot' }, value: 0.1 }, { idempotencyKey: `k${i % 150}` }),
    );
    const results = await Promise.all(calls);
    expect(results).toHaveLength(200);
    expect(results.filter((r) => !r.idempotentReplayed)).toHaveLength(150);
    const state = (await store.loadUser('hot'))?.state;
    expect(state?.metrics.lessons).toBe(15);
    expect(state?.points.xp?.total).toBe(15);
    expect(await store.readLedger({ userId: 'hot', kind: 'metric', key: 'lessons', order: 'asc' })).toHaveLength(150);
    expect((await engine.getLeaderboard('all')).rankings[0]).toMatchObject({ userId: 'hot', value: 15 });
  });

  it('two engines on one store (two processes) retry conflicts and lose nothing', async () => {
    // A beforeCommit hook keeps the engines off the memory store's direct path (which runs a call without an
    // async step, so nothing could come in between): each call waits for the store, as with a database.
    const store = createMemoryStore({ beforeCommit: () => undefined });
    let conflicts = 0;
    const hooks = { onConflict: () => void conflicts++ };
    const a = createEngine({ config, store, retry: { attempts: 50, baseDelayMs: 1 }, hooks });
    const b = createEngine({ config, store, retry: { attempts: 50, baseDelayMs: 1 }, hooks });
    const calls = Array.from({ length: 100 }, (_, i) => (i % 2 ? a : b).recordEvent('lessons', { user: { id: 'shared' }, value: 1 }, { idempotencyKey: `k${i % 80}` }));
    await Promise.all(calls);
    expect(conflicts).toBeGreaterThan(0);
    expect((await store.loadUser('shared'))?.state.metrics.lessons).toBe(80);
    expect(await store.readLedger({ userId: 'shared', kind: 'metric', key: 'lessons', order: 'asc' })).toHaveLength(80);
  });

  it('gives up with a ConflictError (409) after the configured attempts, having recorded nothing', async () => {
    const inner = createMemoryStore();
    let commits = 0;
    const store = { ...inner, commit: async () => { commits++; throw new ConflictError('always stale'); } };
    const engine = createEngine({ config, store, retry: { attempts: 3, baseDelayMs: 0 } });
    const error = await engine.recordEvent('lessons', { user: { id: 'u' }, value: 1 }).catch((e) => e);
    expect(error).toBeInstanceOf(ConflictError);
    expect(error.status).toBe(409);
    expect(commits).toBe(3);
    expect(await inner.loadUser('u')).toBeNull();
  });
});
