/**
 * Store methods given parameters in forms the engine never sends read alike on every store: instants in
 * another ISO form compare as instants, an instant that does not parse is a ValidationError, and a negative
 * limit reads nothing.
 */
import { beforeEach, expect, it } from 'vitest';
import { isLaurelErrorCode } from '../src/errors.js';
import type { LedgerRow } from '../src/core/types.js';
import type { Store } from '../src/store/types.js';
import { freshStore, onEachStore } from './stores.js';

const row = (id: string, at: string): LedgerRow => ({ id, userId: 'u', kind: 'metric', key: 'lessons', at, delta: 1, total: 1, data: null });

onEachStore('store parameters', (kind) => {
  let store: Store;
  beforeEach(async () => {
    store = await freshStore(kind);
    await store.commit({
      userId: 'u',
      expectedVersion: 0,
      state: { user: { id: 'u' } } as never,
      ledger: [row('r1', '2026-01-05T09:00:00.000Z'), row('r2', '2026-01-05T10:00:00.000Z'), row('r3', '2026-01-05T11:00:00.000Z')],
      leaderboard: [{ index: 'lb|a', userId: 'u', value: 3, reachedAt: '2026-01-05T10:00:00.000Z', date: '2026-01-05' }],
      counters: {},
      idempotency: null,
      changes: [{ id: 'c1', type: 'points.changed', userId: 'u', at: '2026-01-05T10:00:00.000Z', payload: {} } as never],
      due: null,
    });
  });

  it('readLedger compares from and to as instants, whatever their ISO form', async () => {
    const ids = async (from: string, to?: string) => (await store.readLedger({ userId: 'u', kind: 'metric', key: 'lessons', order: 'asc', from, ...(to ? { to } : {}) })).map((r) => r.id);
    expect(await ids('2026-01-05T10:00:00Z')).toEqual(['r2', 'r3']);
    expect(await ids('2026-01-05T11:00:00+01:00', '2026-01-05T11:00Z')).toEqual(['r2']);
    expect(await ids('2026-01-05')).toEqual(['r1', 'r2', 'r3']);
  });

  it('readLedger refuses a from or to that is not an ISO instant in the years 0000-9999, for any user', async () => {
    // Not ISO (read in the process's zone by Date.parse), no offset, not a day, past year 9999 (text order).
    const bad = ['yesterday', '', 'Jan 5 2026', '2026/01/05', '1', '2026-01-05T10:00:00', '2026-02-30', '+010000-01-01T00:00:00.000Z', '9999-12-31T23:00:00-05:00', '-000001-01-01T00:00:00.000Z'];
    for (const userId of ['u', 'nobody']) {
      for (const b of bad) {
        for (const q of [{ from: b }, { to: b }]) {
          const err = await store.readLedger({ userId, kind: 'metric', key: 'lessons', order: 'asc', ...q }).catch((e: unknown) => e);
          expect(isLaurelErrorCode(err, 'VALIDATION'), `${userId} ${JSON.stringify(q)}`).toBe(true);
        }
      }
    }
  });

  it('the outbox refuses a now or before that is not an ISO instant, and changes nothing', async () => {
    const outbox = store as Required<Store>;
    const before = (await outbox.readChanges({ limit: 10 })).events.length;
    const refused = async (p: Promise<unknown>) => isLaurelErrorCode(await p.then(() => null, (e: unknown) => e), 'VALIDATION');
    expect(await refused(outbox.pruneChanges({ before: 'not a date', limit: 10 }))).toBe(true);
    expect(await refused(outbox.claimDue({ now: 'Jan 5 2026', limit: 10, leaseMs: 1000 }))).toBe(true);
    expect(await refused(outbox.claimConsumer({ consumer: 'c', owner: 'o', now: '', leaseMs: 1000 }))).toBe(true);
    expect(await refused(outbox.advanceConsumer({ consumer: 'c', owner: 'o', cursor: '0', now: 'soon', leaseMs: 1000 }))).toBe(true);
    expect(before).toBe(1);
    expect((await outbox.readChanges({ limit: 10 })).events.length).toBe(before);
  });

  it('a negative limit reads nothing', async () => {
    expect(await store.readLedger({ userId: 'u', kind: 'metric', key: 'lessons', order: 'asc', limit: -1 })).toEqual([]);
    expect(await store.listUsers({ limit: -1 })).toEqual([]);
    expect(await store.readRankHistory('lb|a', 'u', -1)).toEqual([]);
    expect(await store.readRankHistory('lb|a', 'u', 5)).toHaveLength(1);
  });
});

onEachStore('store tenant ids', (kind) => {
  it('are checked as the engine checks them: 1..255 characters of storable text', async () => {
    const store = await freshStore(kind);
    const tenant = (store as Store & { tenant(id: string): Store }).tenant.bind(store);
    for (const bad of ['', 'a\u0000b', 'x'.repeat(256), '\ud800', 5 as unknown as string]) {
      let err: unknown;
      try {
        tenant(bad);
      } catch (e) {
        err = e;
      }
      expect(isLaurelErrorCode(err, 'VALIDATION'), JSON.stringify(bad)).toBe(true);
    }
    expect(await tenant('x'.repeat(255)).loadUser('u')).toBeNull();
    expect(tenant('acme')).toBe(tenant('acme'));
  });
});
