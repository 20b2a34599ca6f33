/**
 * Issue 15: a sweep costs the due users, never all users. 100 000 users, of whom 100 are due: the sweep
 * loads exactly those 100 (every read of a user's state counted), brings them up to date, and a second sweep
 * loads none. On the memory store with 100 000 users, on PostgreSQL with 20 000 (the same claim statement
 * over the due index; fewer users keep the CI run short).
 */
import { expect, it } from 'vitest';
import { defineConfig, type Store } from '../src/index.js';
import { DAY } from './helpers.js';
import { freshStore, onEachStore } from './stores.js';
import { setupWith } from './helpers.js';

const config = defineConfig({
  metrics: [{ key: 'lessons', name: 'Lessons' }],
  streak: { frequency: 'daily' },
});

/** The store with every user-state read counted by user id. */
function counted(store: Store) {
  const loads: string[] = [];
  const proxy = new Proxy(store, {
    get(target, prop, receiver) {
      const value = Reflect.get(target, prop, receiver) as unknown;
      if (typeof value !== 'function') return value;
      if (prop === 'loadUser') return (id: string) => (loads.push(id), (value as (id: string) => unknown).call(target, id));
      if (prop === 'loadUsers') return (ids: string[]) => (loads.push(...ids), (value as (ids: string[]) => unknown).call(target, ids));
      if (prop === 'loadForEvents') return (ids: string[], l: unknown) => (loads.push(...ids), (value as (ids: string[], l: unknown) => unknown).call(target, ids, l));
      return (value as (...a: unknown[]) => unknown).bind(target);
    },
  });
  return { store: proxy, loads };
}

onEachStore('a sweep touches only the due users', (kind) => {
  const total = kind === 'memory' ? 100_000 : 20_000;
  it(`${total} users, 100 due: the sweep loads exactly those 100`, { timeout: 600_000 }, async () => {
    const { store, loads } = counted(await freshStore(kind));
    const t = setupWith(store, config, '2026-03-01T12:00:00Z');
    const record = async (ids: string[]) => {
      for (let i = 0; i < ids.length; i += 5000) {
        const results = await t.engine.recordEvents(ids.slice(i, i + 5000).map((id) => ({ metricKey: 'lessons', user: { id }, value: 1 })));
        expect(results.every((r) => r.ok)).toBe(true);
      }
    };
    // 100 users whose streak lapses before the sweep, then the others, whose streak is safe until after it.
    const due = Array.from({ length: 100 }, (_, i) => `due-${String(i).padStart(3, '0')}`);
    await record(due);
    t.advance(3 * DAY);
    await record(Array.from({ length: total - 100 }, (_, i) => `user-${i}`));
    loads.length = 0;
    const report = await t.engine.sweep({ limit: 1000 });
    expect(report).toMatchObject({ users: 100, failed: 0, more: false });
    expect([...new Set(loads)].sort()).toEqual(due);
    expect(loads.length).toBe(100);
    // Nobody is due any more, and the due users' streaks were lost.
    loads.length = 0;
    expect((await t.engine.sweep()).users).toBe(0);
    expect(loads).toEqual([]);
    expect((await t.engine.getStreak('due-000')).length).toBe(0);
  });
});
