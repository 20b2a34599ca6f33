/**
 * Two extensions of a streak at one instant (the user's zone moved east between the calls, so the second
 * counts the next day) each send theirs: `streak.started`, then `streak.extended` (docs/rules.md, section 15).
 * The second sent none: a commit was taken for an extension only when the instant of the last extension
 * changed. Found by a streak fuzz against a day-by-day model.
 */
import { expect, it } from 'vitest';
import { createEngine, defineConfig } from '../src/index.js';
import { createMemoryStore } from '../src/memory.js';

it('the second extension at the same instant sends streak.extended', async () => {
  const engine = createEngine({
    config: defineConfig({ metrics: [{ key: 'a', name: 'A' }], streak: { frequency: 'daily' } }),
    store: createMemoryStore(),
    clock: () => new Date('2026-03-23T23:00:00Z'), // 03-23 in UTC, 03-24 12:45 in Pacific/Chatham
  });
  const first = await engine.recordEvent('a', { user: { id: 'u', tz: 'UTC' }, value: 1 });
  const second = await engine.recordEvent('a', { user: { id: 'u', tz: 'Pacific/Chatham' }, value: 1 });
  expect([first.currentStreak.length, second.currentStreak.length]).toEqual([1, 2]);
  const streak = (await engine.readChanges({ limit: 100 })).events.filter((e) => e.type.startsWith('streak.'));
  expect(streak.map((e) => [e.type, e.at, (e.payload as { streak: { length: number } }).streak.length])).toEqual([
    ['streak.started', '2026-03-23T23:00:00.000Z', 1],
    ['streak.extended', '2026-03-23T23:00:00.000Z', 2],
  ]);
  // A third call the same day changes nothing: no event.
  await engine.recordEvent('a', { user: { id: 'u' }, value: 1 });
  expect((await engine.readChanges({ limit: 100 })).events.filter((e) => e.type.startsWith('streak.'))).toHaveLength(2);
});

it('a changed streak rule recounts the streak with period rows, and sends no streak event for it', async () => {
  // Found by a review of the fix above: the recount's rows were taken for an extension of the call.
  const metrics = [{ key: 'a', name: 'A' }, { key: 'b', name: 'B' }];
  const store = createMemoryStore();
  let now = new Date('2026-03-02T10:00:00Z');
  const old = createEngine({ config: defineConfig({ timeZone: 'UTC', metrics, streak: { frequency: 'daily', metrics: [{ key: 'a', threshold: 1 }] } }), store, clock: () => now });
  await old.recordEvent('b', { user: { id: 'u' }, value: 1 });
  for (const day of ['03', '04']) {
    now = new Date(`2026-03-${day}T10:00:00Z`);
    await old.recordEvent('a', { user: { id: 'u' }, value: 1 });
  }
  const seen = (await old.readChanges({ limit: 1000 })).events.length;
  now = new Date('2026-03-04T12:00:00Z');
  const changed = createEngine({ config: defineConfig({ timeZone: 'UTC', metrics, streak: { frequency: 'daily' } }), store, clock: () => now });
  await changed.identifyUser({ id: 'u', name: 'U' });
  expect((await changed.getStreak('u')).length).toBe(3);
  expect((await changed.readChanges({ limit: 1000 })).events.slice(seen).filter((e) => e.type.startsWith('streak.'))).toEqual([]);
});

it('streak.freeze_earned is dated at the last grant that added a freeze, not at a later one held at the maximum', async () => {
  // Found by a streak fuzz: it was dated at the last grant processed (03-07), which added nothing.
  let now = new Date('2026-03-02T10:00:00Z');
  const engine = createEngine({
    config: defineConfig({ timeZone: 'UTC', metrics: [{ key: 'a', name: 'A' }], streak: { frequency: 'daily', freezes: { initial: 0, max: 1, autoEarn: { everyDays: 1, amount: 1 } } } }),
    store: createMemoryStore(),
    clock: () => now,
  });
  await engine.identifyUser({ id: 'u' });
  now = new Date('2026-03-07T10:00:00Z');
  await engine.identifyUser({ id: 'u' });
  const earned = (await engine.readChanges({ limit: 100 })).events.filter((e) => e.type === 'streak.freeze_earned');
  expect(earned.map((e) => [e.at, (e.payload as { earned: number; freezes: number }).earned, (e.payload as { freezes: number }).freezes])).toEqual([['2026-03-03T00:00:00.000Z', 1, 1]]);
});
