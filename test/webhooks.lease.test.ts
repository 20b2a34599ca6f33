/**
 * The webhook relay gives a batch up as soon as its subscription loses the batch's lease (docs/rules.md,
 * section 15): a request in flight is aborted and a backoff before a retry ends at once. It used to look at
 * the lease only between attempts, so a relay that had lost the batch kept posting it for up to `timeoutMs`
 * (a request in flight) or `maxDelayMs` (a backoff) while another relay delivered the same events.
 */
import { describe, expect, it } from 'vitest';
import { createEngine, createWebhookRelay, defineConfig, type DeliveryRecord } from '../src/index.js';
import { createMemoryStore } from '../src/memory.js';
import type { Store } from '../src/store/types.js';

const config = defineConfig({ metrics: [{ key: 'lessons', name: 'Lessons' }], achievements: [{ key: 'first', name: 'First', trigger: 'metric', metricKey: 'lessons', metricValue: 1 }] });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * A memory store whose first consumer claim is granted and whose later ones (the renewals, the next claims)
 * find another holder; `claims` counts them.
 */
async function lossyStore() {
  const store = createMemoryStore();
  await createEngine({ config, store }).recordEvent('lessons', { user: { id: 'u' }, value: 1 });
  const counter = { claims: 0 };
  const claim = store.claimConsumer.bind(store);
  const lossy = new Proxy(store, {
    get(target, key) {
      if (key === 'claimConsumer') return async (lease: Parameters<typeof claim>[0]) => (++counter.claims === 1 ? claim(lease) : null);
      const v = (target as unknown as Record<string | symbol, unknown>)[key];
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  }) as unknown as Store;
  return { engine: createEngine({ config, store: lossy }), counter };
}

describe('createWebhookRelay: a lost lease', () => {
  it('aborts the request in flight at once, records the attempt as failed, posts nothing more', async () => {
    const { engine } = await lossyStore();
    let posts = 0;
    const records: DeliveryRecord[] = [];
    const started = Date.now();
    // A receiver that never answers: only the relay's abort ends a request (its timeout is 20 s).
    const fetch = (async (_url: string, init: { signal: AbortSignal }) => {
      posts++;
      return new Promise((_resolve, reject) => {
        init.signal.addEventListener('abort', () => reject(new Error('aborted')));
      });
    }) as unknown as typeof globalThis.fetch;
    const relay = createWebhookRelay(engine, { url: 'http://127.0.0.1:9/hooks', secret: 'whsec_x', consumer: 'c', fetch, timeoutMs: 20_000, leaseMs: 150, pollMs: 10, onDelivery: (r) => records.push(r) });
    for (let i = 0; i < 40 && records.length === 0; i++) await sleep(50);
    const took = Date.now() - started;
    await sleep(300);
    await relay.stop();
    expect(records).toHaveLength(1);
    expect(records[0]?.ok).toBe(false);
    expect(records[0]?.error).toMatch(/lease/);
    // Renewals run every 50 ms: the abort comes with the first one, far sooner than the 20 s timeout.
    expect(took).toBeLessThan(1500);
    expect(posts).toBe(1);
  });

  it('ends a backoff at once: the subscription moves on instead of sleeping out the delay', async () => {
    const { engine, counter } = await lossyStore();
    let posts = 0;
    const fetch = (async () => {
      posts++;
      return new Response('no', { status: 500 });
    }) as unknown as typeof globalThis.fetch;
    // A failed post waits about 20 s before its retry.
    const relay = createWebhookRelay(engine, { url: 'http://127.0.0.1:9/hooks', secret: 'whsec_x', consumer: 'c', fetch, baseDelayMs: 20_000, maxDelayMs: 20_000, random: () => 0.999, leaseMs: 150, pollMs: 10 });
    for (let i = 0; i < 40 && posts === 0; i++) await sleep(50);
    await sleep(400);
    // The lease is lost by now; the subscription claims again (every 10 ms, finding it taken) once the
    // relay's handler has returned, which it does without sitting out the backoff.
    const before = counter.claims;
    await sleep(300);
    const after = counter.claims;
    await relay.stop();
    expect(posts).toBe(1);
    expect(after - before).toBeGreaterThan(3);
  });
});
