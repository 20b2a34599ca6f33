/**
 * A subscriber keeps its lease from the claim on (docs/rules.md, section 15: two processes never hold the same
 * batch at once while the holder's renewals reach the store). Renewals used to start only when the handler
 * started, so a read slower than about two thirds of `leaseMs` let the lease run out and another subscriber
 * take the same batch while the first handler ran; a renewal that found the lease taken was ignored, and a
 * later one took it back. Found by a fuzz of change notifications.
 */
import { describe, expect, it } from 'vitest';
import { createEngine, defineConfig, isLaurelErrorCode, type StoredChange } from '../src/index.js';
import { createMemoryStore } from '../src/memory.js';
import type { Store } from '../src/store/types.js';

const config = defineConfig({ metrics: [{ key: 'lessons', name: 'Lessons' }], achievements: [{ key: 'first', name: 'First', trigger: 'metric', metricKey: 'lessons', metricValue: 1 }] });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** `store` with some methods replaced. */
function withMethods(store: Store, methods: Partial<Record<keyof Store, unknown>>): Store {
  return new Proxy(store, {
    get(target, key) {
      if (Object.hasOwn(methods, key)) return methods[key as keyof Store];
      const v = (target as unknown as Record<string | symbol, unknown>)[key];
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  });
}

describe('subscribe: the lease', () => {
  it('a read slower than the lease: one handler at a time, every event delivered', async () => {
    const store = createMemoryStore();
    const engine = createEngine({ config, store });
    for (let i = 0; i < 3; i++) await engine.recordEvent('lessons', { user: { id: `u${i}` }, value: 1 });
    // Reads take 450 ms against a lease of 600 ms (renewed every 200 ms).
    const slow = withMethods(store, { readChanges: async (page: { after?: string; limit: number }) => (await sleep(450), store.readChanges(page)) });
    let holding = 0;
    let overlaps = 0;
    const seen: string[] = [];
    const subscribers = ['A', 'B'].map(() =>
      createEngine({ config, store: slow }).subscribe(
        'c',
        async (events) => {
          holding++;
          if (holding > 1) overlaps++;
          await sleep(300);
          seen.push(...events.map((e) => e.id));
          holding--;
        },
        { leaseMs: 600, pollMs: 10, batchSize: 2 },
      ),
    );
    for (let i = 0; i < 100 && seen.length < 3; i++) await sleep(100);
    await Promise.all(subscribers.map((s) => s.stop()));
    expect(overlaps).toBe(0);
    const all = (await store.readChanges({ limit: 100 })).events.map((e) => e.id);
    expect([...new Set(seen)].sort()).toEqual([...all].sort());
  });

  it('a renewal that finds the lease taken: the handler is told, the cursor stays, the lease is not taken back', async () => {
    const store = createMemoryStore();
    const engine = createEngine({ config, store });
    await engine.recordEvent('lessons', { user: { id: 'u' }, value: 1 });
    let claims = 0;
    // The first claim is granted; every renewal after it finds another holder.
    const lossy = withMethods(store, {
      claimConsumer: async (lease: Parameters<NonNullable<Store['claimConsumer']>>[0]) => (++claims === 1 ? (store.claimConsumer as NonNullable<Store['claimConsumer']>)(lease) : null),
    });
    const errors: unknown[] = [];
    let aborted = false;
    const batches: StoredChange[][] = [];
    let done: () => void = () => undefined;
    const handled = new Promise<void>((resolve) => (done = resolve));
    const sub = createEngine({ config, store: lossy }).subscribe(
      'c',
      async (events, { signal }) => {
        batches.push(events);
        // Until told (or 5 s).
        await new Promise((resolve) => {
          signal.addEventListener('abort', resolve);
          setTimeout(resolve, 5000);
        });
        aborted = signal.aborted;
        done();
      },
      { leaseMs: 150, pollMs: 10, onError: (e) => errors.push(e) },
    );
    await handled;
    await sleep(50);
    await sub.stop();
    expect(batches).toHaveLength(1);
    expect(aborted).toBe(true);
    expect(errors.some((e) => isLaurelErrorCode(e, 'CONFLICT'))).toBe(true);
    // Not advanced: the batch is delivered to the next subscriber of the name.
    const next: StoredChange[][] = [];
    const other = engine.subscribe('c', (events) => void next.push(events), { pollMs: 10 });
    for (let i = 0; i < 50 && next.length === 0; i++) await sleep(100);
    await other.stop();
    expect(next[0]?.map((e) => e.id)).toEqual(batches[0]?.map((e) => e.id));
  });
});
