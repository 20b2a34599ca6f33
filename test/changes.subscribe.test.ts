/**
 * Issue 15: consuming change events. `readChanges` pages in commit order; `subscribe` delivers at least once
 * to a named consumer whose cursor is stored and advanced only after the handler succeeds; processes that
 * subscribe under one name never hold a batch at the same time; `stop()` ends cleanly. Memory and PostgreSQL.
 */
import { expect, it } from 'vitest';
import { createEngine, defineConfig, isLaurelErrorCode, type Store, type StoredChange } from '../src/index.js';
import { sequentialIds } from '../src/testing/index.js';
import { allChanges } from './helpers.js';
import { freshStore, onEachStore, setupOn } from './stores.js';
import { setupWith } from './helpers.js';

const config = defineConfig({
  metrics: [{ key: 'lessons', name: 'Lessons' }],
  achievements: [{ key: 'first', name: 'First', trigger: 'metric', metricKey: 'lessons', metricValue: 1 }],
  pointsSystems: [{ key: 'xp', name: 'XP', triggers: [{ key: 'per-lesson', type: 'metric', metricKey: 'lessons', metricThreshold: 1, points: 10 }] }],
});

const until = async (check: () => boolean | Promise<boolean>, ms = 20_000) => {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 10));
  }
};

onEachStore('consuming change events', (kind) => {
  it('readChanges pages in commit order with cursors; a bad cursor or limit is a ValidationError', async () => {
    const { engine } = await setupOn(kind, config);
    for (let i = 0; i < 5; i++) await engine.recordEvent('lessons', { user: { id: `u${i}` }, value: 1 });
    const all = await allChanges(engine);
    // Per new user: achievement.completed, points.changed.
    expect(all.map((e) => `${e.userId}:${e.type}`)).toEqual(['u0', 'u1', 'u2', 'u3', 'u4'].flatMap((u) => [`${u}:achievement.completed`, `${u}:points.changed`]));
    const first = await engine.readChanges({ limit: 3 });
    expect(first.events.map((e) => e.id)).toEqual(all.slice(0, 3).map((e) => e.id));
    const second = await engine.readChanges({ after: first.next, limit: 100 });
    expect(second.events.map((e) => e.id)).toEqual(all.slice(3).map((e) => e.id));
    const none = await engine.readChanges({ after: second.next });
    expect(none).toEqual({ events: [], next: second.next });
    await expect(engine.readChanges({ after: 'not a cursor' })).rejects.toSatisfy((e) => isLaurelErrorCode(e, 'VALIDATION'));
    await expect(engine.readChanges({ limit: 0 })).rejects.toSatisfy((e) => isLaurelErrorCode(e, 'VALIDATION'));
  });

  it('at least once: a failing handler gets the same batch again; the stored cursor survives a new subscription', async () => {
    const { engine } = await setupOn(kind, config);
    for (let i = 0; i < 4; i++) await engine.recordEvent('lessons', { user: { id: `u${i}` }, value: 1 });
    const got: string[][] = [];
    let failures = 0;
    const errors: unknown[] = [];
    const sub = engine.subscribe(
      'c1',
      (events) => {
        if (failures < 2) {
          failures++;
          throw new Error('receiver down');
        }
        got.push(events.map((e) => e.id));
      },
      { batchSize: 3, pollMs: 5, maxBackoffMs: 20, onError: (e) => errors.push(e) },
    );
    await until(() => got.flat().length >= 8);
    await sub.stop();
    const all = (await allChanges(engine)).map((e) => e.id);
    expect(got.flat()).toEqual(all);
    expect(got[0]).toEqual(all.slice(0, 3));
    expect(errors).toHaveLength(2);
    // New events, a new subscription under the same name: only the new ones.
    await engine.recordEvent('lessons', { user: { id: 'late' }, value: 1 });
    const later: string[] = [];
    const again = engine.subscribe('c1', (events) => void later.push(...events.map((e) => e.id)), { pollMs: 5 });
    await until(() => later.length >= 2);
    await again.stop();
    expect(later).toEqual((await allChanges(engine)).slice(8).map((e) => e.id));
    // Another name starts from the beginning; the types filter passes only its types.
    const points: StoredChange[] = [];
    const other = engine.subscribe('c2', (events) => void points.push(...events), { pollMs: 5, types: ['points.changed'] });
    await until(() => points.length >= 5);
    await other.stop();
    expect(points.every((e) => e.type === 'points.changed')).toBe(true);
  });

  /** The store's outbox operations (both stores here have them). */
  const outboxOf = (store: Store) => {
    if (!store.claimConsumer) throw new Error('the store keeps no outbox');
    return store as Store & Required<Pick<Store, 'claimConsumer'>>;
  };

  it('stop() waits for a lease renewal still on its way: the released lease is free for the next subscriber', async () => {
    const store = await freshStore(kind);
    // Renewals (claims made while the handler runs) reach the store 300 ms late.
    let slow = false;
    const claim = outboxOf(store).claimConsumer.bind(store);
    store.claimConsumer = async (lease) => {
      if (slow) await new Promise((r) => setTimeout(r, 300));
      return claim(lease);
    };
    const { engine, now } = setupWith(store, config);
    await engine.recordEvent('lessons', { user: { id: 'u1' }, value: 1 });
    let handled = false;
    const sub = engine.subscribe(
      'c1',
      async () => {
        slow = true;
        // Long enough for renewals (every 50 ms with a 150 ms lease) to be on their way when it ends.
        await new Promise((r) => setTimeout(r, 120));
        handled = true;
        void sub.stop();
      },
      { pollMs: 5, leaseMs: 150 },
    );
    await until(() => handled);
    await sub.stop();
    slow = false;
    // Any renewal made before the stop has landed by now.
    await new Promise((r) => setTimeout(r, 400));
    // The clock stands still: a lease taken again by the stopped subscriber would still hold.
    expect(await outboxOf(store).claimConsumer({ consumer: 'c1', owner: 'next', now: now().toISOString(), leaseMs: 150 })).not.toBeNull();
  });

  it('two processes under one consumer name never hold a batch at once, and together deliver every event', { timeout: 60_000 }, async () => {
    const store = await freshStore(kind);
    let t = Date.parse('2026-01-05T10:00:00Z');
    const engines = [0, 1].map((p) => createEngine({ config, store, clock: () => new Date(t), newId: sequentialIds(`p${p}-`) }));
    const producer = engines[0] as (typeof engines)[number];
    for (let i = 0; i < 30; i++) await producer.recordEvent('lessons', { user: { id: `u${i}` }, value: 1 });
    let inFlight = 0;
    let maxInFlight = 0;
    const delivered: string[] = [];
    const handler = async (events: StoredChange[]) => {
      inFlight++;
      maxInFlight = Math.max(maxInFlight, inFlight);
      await new Promise((r) => setTimeout(r, 5));
      delivered.push(...events.map((e) => e.id));
      inFlight--;
    };
    const subs = engines.map((e) => e.subscribe('shared', handler, { batchSize: 4, pollMs: 2, leaseMs: 5000 }));
    await until(() => delivered.length >= 60);
    // The first holder stops: it gives up its lease, and the other takes over at once.
    await (subs[0] as (typeof subs)[number]).stop();
    t += 1000;
    for (let i = 0; i < 5; i++) await producer.recordEvent('lessons', { user: { id: `v${i}` }, value: 1 });
    await until(() => delivered.length >= 70);
    await (subs[1] as (typeof subs)[number]).stop();
    expect(maxInFlight).toBe(1);
    const all = (await allChanges(producer)).map((e) => e.id);
    expect(delivered).toEqual(all);
  });
});
