/**
 * A lowered `streak.freezes.max` applies from each user's next call (docs/rules.md, section 10), as a lowered
 * `maxPoints` does: a user holding more freezes than the new maximum is brought down to it on the next read
 * or write, before anything else of that call. Users kept 3 freezes of a maximum of 1 until they used them.
 */
import fc from 'fast-check';
import { expect, it } from 'vitest';
import { applyEvent, createEngine, defineConfig, type UserState } from '../src/index.js';
import { sequentialIds } from '../src/testing/index.js';
import { setupWith } from './helpers.js';
import { freshStore, onEachStore } from './stores.js';

const withMax = (max: number) =>
  defineConfig({ timeZone: 'UTC', metrics: [{ key: 'lessons', name: 'Lessons' }], streak: { frequency: 'daily', freezes: { initial: 1, max } } });

onEachStore('a lowered freezes.max', (kind) => {
  it('brings a user down to it on the next read and write; a gap then uses only what the user may hold', async () => {
    const store = await freshStore(kind);
    const t = setupWith(store, withMax(3));
    await t.engine.recordEvent('lessons', { user: { id: 'u' }, value: 1 });
    await t.engine.runOperations('u', [{ op: 'grantFreezes', count: 2 }]);
    expect((await t.engine.getStreak('u')).freezes).toBe(3);
    const changesBefore = (await store.readChanges!({ limit: 1000 })).events.length;

    const lowered = createEngine({ config: withMax(1), store, clock: t.now, newId: sequentialIds('n') });
    const read = await lowered.getStreak('u');
    expect(read.freezes).toBe(1);
    expect(read.maxFreezes).toBe(1);
    await lowered.recordEvent('lessons', { user: { id: 'u' }, value: 1 });
    expect((await lowered.getStreak('u')).freezes).toBe(1);
    // Lowering takes freezes away: no freeze was used or earned, so no streak change event says so.
    const events = (await store.readChanges!({ limit: 1000 })).events.slice(changesBefore);
    expect(events.filter((e) => e.type.startsWith('streak.'))).toEqual([]);

    // Two days missed: the one freeze covers the first, the second breaks the streak.
    t.set('2026-01-08T10:00:00Z');
    await lowered.recordEvent('lessons', { user: { id: 'u' }, value: 1 });
    const after = await lowered.getStreak('u');
    expect(after.length).toBe(1);
    expect(after.started).toBe('2026-01-08');
    expect(after.freezes).toBe(0);
  });
});

it('property: whatever the freezes a state holds, a call under a configuration leaves at most its maximum', () => {
  fc.assert(
    fc.property(fc.integer({ min: 1, max: 5 }), fc.integer({ min: 0, max: 5 }), fc.integer({ min: 0, max: 3 }), (max, granted, days) => {
      const newId = sequentialIds();
      const ctx = (iso: string) => ({ now: new Date(iso), newId });
      let state: UserState = applyEvent(withMax(5), null, { metricKey: 'lessons', user: { id: 'u' }, value: 1 }, ctx('2026-01-05T10:00:00Z')).state;
      // A state holding `granted` more freezes, as grants under a larger maximum leave it.
      state = { ...state, streak: { ...state.streak!, freezes: Math.min(5, state.streak!.freezes + granted) } };
      const held = state.streak!.freezes;
      const next = applyEvent(withMax(max), state, { metricKey: 'lessons', user: { id: 'u' }, value: 1 }, ctx(`2026-01-${String(5 + days).padStart(2, '0')}T10:00:00Z`)).state;
      expect(next.streak!.freezes).toBeLessThanOrEqual(max);
      // Missed days use freezes from what the user may hold now.
      const missed = Math.max(0, days - 1);
      const usable = Math.min(held, max);
      expect(next.streak!.freezes).toBe(missed <= usable ? usable - missed : 0);
    }),
    { numRuns: 200 },
  );
});

onEachStore('a lowered freezes.max and the change events', (kind) => {
  it('a freeze earned in the call that brings the user down is announced (counted from the lowered count)', async () => {
    // Found by a streak fuzz: `earned` was counted from the stored count above the maximum, so it came out
    // at or below 0 and no `streak.freeze_earned` was sent.
    const store = await freshStore(kind);
    const freezes = (max: number) => defineConfig({ timeZone: 'UTC', metrics: [{ key: 'a', name: 'A' }], streak: { frequency: 'daily', freezes: { initial: Math.min(3, max), max, autoEarn: { everyDays: 2, amount: 1 } } } });
    const t = setupWith(store, freezes(3), '2026-03-02T10:00:00Z');
    await t.engine.recordEvent('a', { user: { id: 'u' }, value: 1 });
    const seen = (await store.readChanges!({ limit: 1000 })).events.length;
    // Max 1: 3 -> 1 first; 03-03 missed uses it (0); the grant of 03-04 gives one (1).
    t.set('2026-03-04T10:00:00Z');
    const lowered = createEngine({ config: freezes(1), store, clock: t.now, newId: sequentialIds('n') });
    expect((await lowered.recordEvent('a', { user: { id: 'u' }, value: 1 })).currentStreak.freezes).toBe(1);
    const events = (await store.readChanges!({ limit: 1000 })).events.slice(seen).filter((e) => e.type.startsWith('streak.freeze'));
    expect(events.map((e) => [e.type, e.at, (e.payload as { earned?: number; consumed?: number; freezes: number }).freezes])).toEqual([
      ['streak.freeze_earned', '2026-03-04T00:00:00.000Z', 1],
      ['streak.freeze_consumed', '2026-03-04T00:00:00.000Z', 1],
    ]);
    expect((events[0]?.payload as { earned: number }).earned).toBe(1);
  });
});

it('freezes removed from the configuration: kept and hidden, not used; added back, usable again', async () => {
  // Found by a review: a user's stored freezes went on covering missed periods under a configuration
  // without freezes (docs/rules.md, section 10: removed parts are kept and hidden).
  const store = (await import('../src/memory.js')).createMemoryStore();
  const m = [{ key: 'a', name: 'A' }];
  const withFreezes = defineConfig({ timeZone: 'UTC', metrics: m, streak: { frequency: 'daily', freezes: { initial: 3, max: 3 } } });
  const without = defineConfig({ timeZone: 'UTC', metrics: m, streak: { frequency: 'daily' } });
  let now = new Date('2026-03-02T10:00:00Z');
  await createEngine({ config: withFreezes, store, clock: () => now }).recordEvent('a', { user: { id: 'u' }, value: 1 });
  now = new Date('2026-03-05T10:00:00Z'); // 03-03 and 03-04 missed
  const r = await createEngine({ config: without, store, clock: () => now }).recordEvent('a', { user: { id: 'u' }, value: 1 });
  expect(r.currentStreak.length).toBe(1);
  expect(r.currentStreak.freezes).toBeUndefined();
  // Back with freezes: the three are there, and cover a missed day.
  now = new Date('2026-03-07T10:00:00Z'); // 03-06 missed
  const back = await createEngine({ config: withFreezes, store, clock: () => now }).recordEvent('a', { user: { id: 'u' }, value: 1 });
  expect([back.currentStreak.length, back.currentStreak.freezes]).toEqual([2, 2]);
});
