/**
 * The OutboxStore contract (issue 15) on each store, called directly (not through the engine): change events
 * written by commits, erasures and resets, `readChanges` pages and cursors, `leaderboard.rank_changed` events
 * completed from the commit's own rank changes, consumer leases, marks, the due index, pruning and delivery
 * outcomes. PostgreSQL only: commit order across concurrent transactions (the xid horizon), and the plans.
 */
import { PGlite } from '@electric-sql/pglite';
import fc from 'fast-check';
import pg from 'pg';
import { afterAll, beforeEach, describe, expect, it } from 'vitest';
import type { ChangeEvent, LeaderboardWrite, StoredChange } from '../src/core/types.js';
import { isLaurelErrorCode } from '../src/errors.js';
import { createEngine, defineConfig, withRankIndex, type RankIndex } from '../src/index.js';
import { createMemoryStore, type MemoryStore } from '../src/memory.js';
import { compactBoard, compactPoints, settleChanges } from '../src/store/outbox.js';
import { createPostgresStore, type PostgresClient } from '../src/postgres.js';
import type { Commit, OutboxStore, RankChange, Store } from '../src/store/types.js';
import { sampleState, sequentialIds } from '../src/testing/index.js';
import { PG_URL, uniq } from './servers.js';
import { freshStore, onEachStore } from './stores.js';

type OutboxCapable = Store & OutboxStore;

const T0 = Date.parse('2026-01-05T10:00:00.000Z');
/** The instant `minutes` after T0, as toISOString writes it. */
const at = (minutes = 0) => new Date(T0 + minutes * 60_000).toISOString();

const event = (id: string, userId: string | null, extra: Partial<ChangeEvent> = {}): ChangeEvent => ({
  id,
  type: 'points.changed',
  userId,
  at: at(),
  payload: { type: 'points.changed', id, user: userId === null ? null : { id: userId }, n: 1 },
  ...extra,
});

/** A rank_changed event whose ranks the store completes from the commit's writes to `index`. */
const rankEvent = (id: string, userId: string, index: string, cap = 1000): ChangeEvent => ({
  id,
  type: 'leaderboard.rank_changed',
  userId,
  at: at(),
  payload: { type: 'leaderboard.rank_changed', leaderboard: { key: index, name: 'Board' } },
  rank: { index, cap },
});

const write = (index: string, userId: string, value: number, minutes = 0): LeaderboardWrite => ({ index, userId, value, reachedAt: at(minutes), date: at(minutes).slice(0, 10) });

const commitOf = (userId: string, expectedVersion: number, extra: Partial<Commit> = {}): Commit => ({
  userId,
  expectedVersion,
  state: sampleState(userId, expectedVersion + 1),
  ledger: [],
  leaderboard: [],
  counters: {},
  idempotency: null,
  ...extra,
});

/** Every event after `after`, in pages of `page`. */
async function readAll(store: OutboxStore, after?: string, page = 3): Promise<{ events: StoredChange[]; next: string }> {
  const events: StoredChange[] = [];
  let cursor = after;
  for (;;) {
    const r = await store.readChanges(cursor === undefined ? { limit: page } : { after: cursor, limit: page });
    events.push(...r.events);
    if (r.events.length === 0) return { events, next: r.next };
    cursor = r.next;
  }
}

const ids = (events: readonly StoredChange[]) => events.map((e) => e.id);

// On a real server readChanges shows an event once every transaction older than it has ended, in the whole
// cluster: other test files' transactions included. Reads that expect what was just committed wait for that.
const syncPool = PG_URL ? new pg.Pool({ connectionString: PG_URL, max: 1 }) : null;
afterAll(() => syncPool?.end());
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
/** Waits until every transaction begun before this call has ended (a no-op on PGlite and the memory store). */
async function sync(): Promise<void> {
  if (!syncPool) return;
  const target = String((await syncPool.query(`SELECT pg_snapshot_xmax(pg_current_snapshot())::text AS x`)).rows[0].x);
  for (let i = 0; i < 1200; i++) {
    if ((await syncPool.query(`SELECT pg_snapshot_xmin(pg_current_snapshot()) >= $1::xid8 AS ok`, [target])).rows[0].ok === true) return;
    await sleep(25);
  }
  throw new Error('a transaction older than the test stayed open for 30s');
}

onEachStore('OutboxStore contract', (kind) => {
  let store: OutboxCapable;
  /** The next version of each user committed through `put`. */
  let versions: Map<string, number>;
  beforeEach(async () => {
    const raw = (await freshStore(kind)) as OutboxCapable;
    store = kind === 'postgres' && syncPool ? { ...raw, readChanges: async (page) => (await sync(), raw.readChanges(page)) } : raw;
    versions = new Map();
  }, 60_000); // the first one starts PGlite

  /** Commits the next version of `userId` with `extra`. */
  async function put(userId: string, extra: Partial<Commit> = {}) {
    const v = versions.get(userId) ?? 0;
    const result = await store.commit(commitOf(userId, v, extra));
    versions.set(userId, result.version);
    return result;
  }

  it('implements every OutboxStore method', () => {
    for (const name of ['readChanges', 'claimConsumer', 'advanceConsumer', 'releaseConsumer', 'getMarks', 'appendChanges', 'claimDue', 'pruneChanges', 'recordDeliveries', 'readDeliveries'] as const) {
      expect(typeof store[name], name).toBe('function');
    }
  });

  it('appends a commit’s change events in order, as given, with positions', async () => {
    const e1 = event('e1', 'u1');
    const e2 = event('e2', 'u1', { type: 'streak.started', at: at(1), payload: { type: 'streak.started', nested: { a: [1, 'x', null] } } });
    await put('u1', { changes: [e1, e2] });
    await put('u2', { changes: [] });
    await put('u2', { changes: [event('e3', 'u2')] });
    const { events, next } = await readAll(store);
    expect(ids(events)).toEqual(['e1', 'e2', 'e3']);
    const [s1, s2] = events as [StoredChange, StoredChange];
    expect({ ...s2, position: undefined }).toEqual({ id: 'e2', type: 'streak.started', userId: 'u1', at: at(1), payload: { type: 'streak.started', nested: { a: [1, 'x', null] } }, position: undefined });
    expect(s1.payload).toEqual(e1.payload);
    expect('rank' in s1).toBe(false);
    for (const e of events) expect(typeof e.position).toBe('string');
    expect(next).toBe((events[2] as StoredChange).position);
    // readChanges from each event's position continues right after it.
    expect(ids((await store.readChanges({ after: s1.position, limit: 10 })).events)).toEqual(['e2', 'e3']);
  });

  it('commitBatch appends the events of the applied commits only, in commit order', async () => {
    await put('u1');
    const outcomes = await store.commitBatch!([
      commitOf('u2', 0, { changes: [event('b1', 'u2'), event('b2', 'u2')] }),
      commitOf('u1', 0, { changes: [event('refused', 'u1')] }), // u1 exists: refused
      commitOf('u3', 0, { changes: [event('b3', 'u3')] }),
      commitOf('u2', 1, { changes: [event('b4', 'u2')] }),
    ]);
    expect(outcomes.map((o) => (o instanceof Error ? 'conflict' : 'ok'))).toEqual(['ok', 'conflict', 'ok', 'ok']);
    expect(ids((await readAll(store)).events)).toEqual(['b1', 'b2', 'b3', 'b4']);
  });

  it('a refused commit appends nothing and leaves the due instant', async () => {
    await put('u1', { due: at(5) });
    await expect(store.commit(commitOf('u1', 0, { changes: [event('no', 'u1')], due: at(1) }))).rejects.toMatchObject({ code: 'CONFLICT' });
    expect((await readAll(store)).events).toEqual([]);
    expect(await store.claimDue({ now: at(2), limit: 10, leaseMs: 1000 })).toEqual([]);
    expect(await store.claimDue({ now: at(5), limit: 10, leaseMs: 1000 })).toEqual(['u1']);
  });

  it('readChanges pages by limit, keeps cursors valid as events are added, and refuses malformed cursors', async () => {
    const empty = await store.readChanges({ limit: 10 });
    expect(empty.events).toEqual([]);
    expect(typeof empty.next).toBe('string');
    // The start cursor of an empty outbox is a cursor.
    expect((await store.readChanges({ after: empty.next, limit: 10 })).events).toEqual([]);

    await put('u1', { changes: [event('a1', 'u1'), event('a2', 'u1'), event('a3', 'u1')] });
    await put('u2', { changes: [event('a4', 'u2'), event('a5', 'u2')] });
    const p1 = await store.readChanges({ limit: 2 });
    expect(ids(p1.events)).toEqual(['a1', 'a2']);
    expect(p1.next).toBe(p1.events[1]?.position);
    const p2 = await store.readChanges({ after: p1.next, limit: 2 });
    expect(ids(p2.events)).toEqual(['a3', 'a4']);
    const p3 = await store.readChanges({ after: p2.next, limit: 2 });
    expect(ids(p3.events)).toEqual(['a5']);
    const p4 = await store.readChanges({ after: p3.next, limit: 2 });
    expect(p4).toEqual({ events: [], next: p3.next });
    // From the empty outbox's start cursor: everything.
    expect(ids((await readAll(store, empty.next)).events)).toEqual(['a1', 'a2', 'a3', 'a4', 'a5']);

    // Events added later come after every cursor handed out.
    await put('u1', { changes: [event('a6', 'u1')] });
    expect(ids((await store.readChanges({ after: p3.next, limit: 10 })).events)).toEqual(['a6']);
    expect(ids((await store.readChanges({ after: p1.next, limit: 10 })).events)).toEqual(['a3', 'a4', 'a5', 'a6']);

    for (const bad of ['', 'abc', '1.2.3', '-1', '1e3', ' 1', 'x.1']) {
      await expect(store.readChanges({ after: bad, limit: 10 }), bad).rejects.toSatisfy((e) => isLaurelErrorCode(e, 'VALIDATION'));
    }
  });

  describe('leaderboard.rank_changed events', () => {
    /** b: u1 = 10 (rank 3), u2 = 20 (rank 2), u3 = 30 (rank 1). */
    async function board() {
      await put('u1', { leaderboard: [write('b', 'u1', 10)] });
      await put('u2', { leaderboard: [write('b', 'u2', 20)] });
      await put('u3', { leaderboard: [write('b', 'u3', 30)] });
    }
    const leaderboardOf = (e: StoredChange | undefined) => (e?.payload as { leaderboard: Record<string, unknown> }).leaderboard;

    it('get previousRank and rank from the commit’s own rank change, other payload fields kept, marker dropped', async () => {
      await board();
      const result = await put('u1', { leaderboard: [write('b', 'u1', 25)], changes: [event('p1', 'u1'), rankEvent('r1', 'u1', 'b'), event('p2', 'u1')] });
      expect(result.ranks[0]).toMatchObject({ previousRank: 3, rank: 2 });
      const { events } = await readAll(store);
      expect(ids(events)).toEqual(['p1', 'r1', 'p2']);
      const r1 = events[1] as StoredChange;
      expect(r1.type).toBe('leaderboard.rank_changed');
      expect(r1.payload).toEqual({ type: 'leaderboard.rank_changed', leaderboard: { key: 'b', name: 'Board', previousRank: 3, rank: 2 } });
      expect('rank' in r1).toBe(false);
    });

    it('read a missing payload, or a leaderboard that is not an object, as {} (the commit is applied whole)', async () => {
      await board();
      const odd = (id: string, payload: unknown) => ({ ...rankEvent(id, 'u1', 'b'), payload: payload as Record<string, unknown> });
      await put('u1', { leaderboard: [write('b', 'u1', 25)], changes: [odd('none', undefined), odd('text', { type: 'leaderboard.rank_changed', leaderboard: 'x' }), odd('list', { note: 1, leaderboard: [1, 2] })] });
      const { events } = await readAll(store);
      expect(ids(events)).toEqual(['none', 'text', 'list']);
      expect(events.map((e) => e.payload)).toEqual([
        { leaderboard: { previousRank: 3, rank: 2 } },
        { type: 'leaderboard.rank_changed', leaderboard: { previousRank: 3, rank: 2 } },
        { note: 1, leaderboard: { previousRank: 3, rank: 2 } },
      ]);
      expect((await store.getEntry('b', 'u1'))?.value).toBe(25);
    });

    it('read a marked event’s payload that is null, an array, text or a number as {} (PostgreSQL used to store it as [payload, {leaderboard}])', async () => {
      await board();
      const odd = (id: string, payload: unknown) => ({ ...rankEvent(id, 'u1', 'b'), payload: payload as Record<string, unknown> });
      await put('u1', { leaderboard: [write('b', 'u1', 25)], changes: [odd('null', null), odd('array', [1, { leaderboard: 2 }]), odd('text', 'x'), odd('number', 7)] });
      const { events } = await readAll(store);
      expect(ids(events)).toEqual(['null', 'array', 'text', 'number']);
      expect(events.map((e) => e.payload)).toEqual(Array.from({ length: 4 }, () => ({ leaderboard: { previousRank: 3, rank: 2 } })));
    });

    it('keep an unmarked event’s payload as given (null and text included; a marker that is not an object marks nothing), and read a missing one as {}', async () => {
      const plain = (id: string, payload: unknown, extra: Record<string, unknown> = {}) => ({ ...event(id, 'u1'), payload: payload as Record<string, unknown>, ...extra });
      await put('u1', {
        changes: [plain('none', undefined), plain('null', null), plain('object', { a: 1 }), plain('text', 's'), plain('digits', '123'), plain('null-marker', null, { rank: null }), plain('list-marker', [1], { rank: null }), plain('text-marker', { a: 2 }, { rank: 'x' }), plain('array-marker', { a: 3 }, { rank: [] })],
      });
      // One page: an odd payload must not stop the events after it from being read.
      const { events } = await store.readChanges({ limit: 10 });
      expect(events.map((e) => [e.id, e.payload])).toEqual([['none', {}], ['null', null], ['object', { a: 1 }], ['text', 's'], ['digits', '123'], ['null-marker', null], ['list-marker', [1]], ['text-marker', { a: 2 }], ['array-marker', { a: 3 }]]);
    });

    it('apply a commit whose changes are null as one without events', async () => {
      await put('u1', { changes: null as unknown as ChangeEvent[], leaderboard: [write('b', 'u1', 5)] });
      expect((await store.readChanges({ limit: 10 })).events).toEqual([]);
      expect((await store.getEntry('b', 'u1'))?.value).toBe(5);
    });

    it('read back field for field and in key order with plain markers (kept whole), in the engine’s payload shape (type, user, leaderboard) and in any other', async () => {
      await board();
      const user = { id: 'u1', name: null, attributes: {} };
      const engineShape = { ...rankEvent('shaped', 'u1', 'b'), payload: { type: 'leaderboard.rank_changed', user, leaderboard: { key: 'b', rank: null, value: 25, previousRank: null, previousValue: 10 } } };
      const reordered = { ...rankEvent('reordered', 'u1', 'b'), payload: { user, type: 'leaderboard.rank_changed', leaderboard: { key: 'b', rank: null } } };
      const extra = { ...rankEvent('extra', 'u1', 'b'), payload: { type: 'leaderboard.rank_changed', user, leaderboard: { key: 'b', rank: null }, note: 'kept' } };
      await put('u1', { leaderboard: [write('b', 'u1', 25)], changes: [engineShape, reordered, extra] });
      const { events } = await readAll(store);
      expect(ids(events)).toEqual(['shaped', 'reordered', 'extra']);
      const shaped = { type: 'leaderboard.rank_changed', user, leaderboard: { key: 'b', rank: 2, value: 25, previousRank: 3, previousValue: 10 } };
      const others = [{ user, type: 'leaderboard.rank_changed', leaderboard: { key: 'b', rank: 2, previousRank: 3 } }, { type: 'leaderboard.rank_changed', user, leaderboard: { key: 'b', rank: 2, previousRank: 3 }, note: 'kept' }];
      expect(events.map((e) => e.payload)).toEqual([shaped, ...others]);
      // The memory store keeps the keys' order too (PostgreSQL's jsonb orders keys its own way).
      if (kind === 'memory') expect(events.map((e) => JSON.stringify(e.payload))).toEqual([shaped, ...others].map((p) => JSON.stringify(p)));
      expect(events.map((e) => [e.id, e.type, e.userId, e.at])).toEqual(['shaped', 'reordered', 'extra'].map((id) => [id, 'leaderboard.rank_changed', 'u1', at()]));
      // The events read again are the same.
      expect((await readAll(store)).events).toEqual(events);
    });

    it('read back each event’s own values and description when many events of one board are kept', async () => {
      await board();
      const user = { id: 'u1' };
      const lb = (name: string, value: number, previousValue: number | null) => ({ id: 'board-b', key: 'b', name, status: 'active', rank: null, value, previousRank: null, previousValue, breakdownAttributes: [] });
      const of = (id: string, leaderboard: Record<string, unknown>) => ({ ...rankEvent(id, 'u1', 'b'), payload: { type: 'leaderboard.rank_changed', user, leaderboard } });
      // u1: 10 (rank 3) -> 25 (2) -> 35 (1) -> 5 (3): each commit keeps its event, the third with a renamed board.
      await put('u1', { leaderboard: [write('b', 'u1', 25)], changes: [of('e1', lb('Board', 25, 10))] });
      await put('u1', { leaderboard: [write('b', 'u1', 35)], changes: [of('e2', lb('Board', 35, 25))] });
      await put('u1', { leaderboard: [write('b', 'u1', 5)], changes: [of('e3', lb('Renamed', 5, 35))] });
      await put('u1', { leaderboard: [write('b', 'u1', 25)], changes: [of('e4', { ...lb('Board', 25, 5), extra: true })] });
      // Fewer fields than the event before (the same ones in the same order, less the last two).
      const { breakdownAttributes: _, ...fewer } = lb('Board', 35, 25);
      await put('u1', { leaderboard: [write('b', 'u1', 35)], changes: [of('e5', fewer)] });
      const { events } = await readAll(store);
      expect(ids(events)).toEqual(['e1', 'e2', 'e3', 'e4', 'e5']);
      expect(events.map((e) => (e.payload as { leaderboard: unknown }).leaderboard)).toEqual([
        { ...lb('Board', 25, 10), previousRank: 3, rank: 2 },
        { ...lb('Board', 35, 25), previousRank: 2, rank: 1 },
        { ...lb('Renamed', 5, 35), previousRank: 1, rank: 3 },
        { ...lb('Board', 25, 5), extra: true, previousRank: 3, rank: 2 },
        { ...fewer, previousRank: 2, rank: 1 },
      ]);
    });

    it('are dropped when the ranks are equal, or when the commit has no rank change of that index and user', async () => {
      await board();
      await put('u3', { leaderboard: [write('b', 'u3', 35)], changes: [rankEvent('same', 'u3', 'b'), event('kept', 'u3')] });
      await put('u2', { leaderboard: [write('other', 'u2', 1)], changes: [rankEvent('nowrite', 'u2', 'b')] });
      // A write of another user to that index is not this user's rank change.
      await put('u1', { leaderboard: [write('b', 'u2', 99)], changes: [rankEvent('notmine', 'u1', 'b')] });
      expect(ids((await readAll(store)).events)).toEqual(['kept']);
    });

    it('take the first write’s previous rank and the last write’s rank of the commit', async () => {
      await board();
      // u1: 3 -> 1 (40) -> 2 (25): previousRank 3 (first), rank 2 (last).
      await put('u1', { leaderboard: [write('b', 'u1', 40), write('c', 'u1', 5), write('b', 'u1', 25)], changes: [rankEvent('r', 'u1', 'b')] });
      // u1 again: 2 -> 1 (50) -> 2 (26): equal over the commit, dropped.
      await put('u1', { leaderboard: [write('b', 'u1', 50), write('b', 'u1', 26)], changes: [rankEvent('back', 'u1', 'b')] });
      const { events } = await readAll(store);
      expect(ids(events)).toEqual(['r']);
      expect(leaderboardOf(events[0])).toMatchObject({ previousRank: 3, rank: 2 });
    });

    it('cap ranks above the marker’s cap to null, and are dropped when both are above it', async () => {
      await board();
      // 3 -> 2 with cap 1: both null, dropped. 2 -> 1 with cap 1: null -> 1.
      await put('u1', { leaderboard: [write('b', 'u1', 25)], changes: [rankEvent('hidden', 'u1', 'b', 1)] });
      await put('u1', { leaderboard: [write('b', 'u1', 31)], changes: [rankEvent('entered', 'u1', 'b', 1)] });
      // u3 falls 2 -> 3 with cap 2: 2 -> null. A removal: rank null.
      await put('u3', { leaderboard: [write('b', 'u3', 5)], changes: [rankEvent('left', 'u3', 'b', 2)] });
      await put('u2', { leaderboard: [{ index: 'b', userId: 'u2', remove: true, date: at().slice(0, 10) }], changes: [rankEvent('removed', 'u2', 'b')] });
      const { events } = await readAll(store);
      expect(ids(events)).toEqual(['entered', 'left', 'removed']);
      expect(leaderboardOf(events[0])).toMatchObject({ previousRank: null, rank: 1 });
      expect(leaderboardOf(events[1])).toMatchObject({ previousRank: 2, rank: null });
      expect(leaderboardOf(events[2])).toMatchObject({ previousRank: 2, rank: null });
    });

    it('in a commitBatch, each from its own commit', async () => {
      await board();
      await store.commitBatch!([
        commitOf('u1', versions.get('u1')!, { leaderboard: [write('b', 'u1', 31)], changes: [rankEvent('x1', 'u1', 'b')] }),
        commitOf('u2', versions.get('u2')!, { leaderboard: [write('b', 'u2', 32)], changes: [rankEvent('x2', 'u2', 'b')] }),
      ]);
      const { events } = await readAll(store);
      expect(ids(events)).toEqual(['x1', 'x2']);
      expect(leaderboardOf(events[0])).toMatchObject({ previousRank: 3, rank: 1 });
      // After x1: u1 31, u3 30, u2 20.
      expect(leaderboardOf(events[1])).toMatchObject({ previousRank: 3, rank: 1 });
    });
  });

  it('consumer leases: one owner at a time, expiry, renewal by advance, refusal of others, release', async () => {
    const T = (ms: number) => new Date(T0 + ms).toISOString();
    expect(await store.claimConsumer({ consumer: 'c', owner: 'A', now: T(0), leaseMs: 1000 })).toEqual({ cursor: null });
    expect(await store.claimConsumer({ consumer: 'c', owner: 'B', now: T(500), leaseMs: 1000 })).toBeNull();
    // Renewed by its owner until 1500; another consumer is independent.
    expect(await store.claimConsumer({ consumer: 'c', owner: 'A', now: T(500), leaseMs: 1000 })).toEqual({ cursor: null });
    expect(await store.claimConsumer({ consumer: 'd', owner: 'B', now: T(500), leaseMs: 1000 })).toEqual({ cursor: null });
    expect(await store.advanceConsumer({ consumer: 'c', owner: 'B', cursor: 'b1', now: T(600), leaseMs: 1000 })).toBe(false);
    // Renews until 1600.
    expect(await store.advanceConsumer({ consumer: 'c', owner: 'A', cursor: 'a1', now: T(600), leaseMs: 1000 })).toBe(true);
    expect(await store.claimConsumer({ consumer: 'c', owner: 'B', now: T(1599), leaseMs: 1000 })).toBeNull();
    // Ended at 1600: B takes it, with A's cursor.
    expect(await store.claimConsumer({ consumer: 'c', owner: 'B', now: T(1600), leaseMs: 1000 })).toEqual({ cursor: 'a1' });
    expect(await store.advanceConsumer({ consumer: 'c', owner: 'A', cursor: 'a2', now: T(1700), leaseMs: 1000 })).toBe(false);
    // B's lease ended (2600) and nobody took it since: B may still advance.
    expect(await store.advanceConsumer({ consumer: 'c', owner: 'B', cursor: 'b2', now: T(5000), leaseMs: 1000 })).toBe(true);
    // A release by a non-holder does nothing; by the holder it ends the lease, keeping the cursor.
    await store.releaseConsumer({ consumer: 'c', owner: 'A' });
    expect(await store.claimConsumer({ consumer: 'c', owner: 'A', now: T(5100), leaseMs: 1000 })).toBeNull();
    await store.releaseConsumer({ consumer: 'c', owner: 'B' });
    await store.releaseConsumer({ consumer: 'unknown', owner: 'B' });
    expect(await store.advanceConsumer({ consumer: 'c', owner: 'B', cursor: 'b3', now: T(5100), leaseMs: 1000 })).toBe(false);
    expect(await store.claimConsumer({ consumer: 'c', owner: 'A', now: T(5100), leaseMs: 1000 })).toEqual({ cursor: 'b2' });
    expect(await store.advanceConsumer({ consumer: 'unknown', owner: 'A', cursor: 'x', now: T(5100), leaseMs: 1000 })).toBe(false);
  });

  it('concurrent claims of a free consumer: exactly one owner gets it', async () => {
    const now = at();
    const got = await Promise.all(['A', 'B', 'C', 'D', 'E', 'F'].map((owner) => store.claimConsumer({ consumer: 'race', owner, now, leaseMs: 60_000 })));
    expect(got.filter((g) => g !== null)).toHaveLength(1);
  });

  it('marks: appendChanges sets the mark and appends only when it holds the expected value', async () => {
    expect(await store.getMarks([])).toEqual({});
    expect(await store.getMarks(['m1', 'm2'])).toEqual({});
    expect(await store.appendChanges({ mark: 'm1', expected: null, value: 'v1', changes: [event('g1', null), event('g2', null)] })).toBe(true);
    expect(await store.appendChanges({ mark: 'm1', expected: null, value: 'v1', changes: [event('dup', null)] })).toBe(false);
    expect(await store.appendChanges({ mark: 'm1', expected: 'other', value: 'v2', changes: [event('dup2', null)] })).toBe(false);
    expect(await store.appendChanges({ mark: 'm1', expected: 'v1', value: 'v2', changes: [event('g3', 'u1')] })).toBe(true);
    expect(await store.appendChanges({ mark: 'm2', expected: 'v1', value: 'v2', changes: [event('dup3', null)] })).toBe(false);
    // No events: the mark alone. A rank marker completes from no rank change: dropped.
    expect(await store.appendChanges({ mark: 'm3', expected: null, value: 'only', changes: [] })).toBe(true);
    expect(await store.appendChanges({ mark: 'm4', expected: null, value: 'r', changes: [rankEvent('ranked', 'u1', 'b'), event('g4', null)] })).toBe(true);
    expect(await store.getMarks(['m1', 'm2', 'm3', 'm4'])).toEqual({ m1: 'v2', m3: 'only', m4: 'r' });
    const { events } = await readAll(store);
    expect(ids(events)).toEqual(['g1', 'g2', 'g3', 'g4']);
    expect(events[0]).toMatchObject({ userId: null, type: 'points.changed' });
  });

  it('concurrent appendChanges with the same expected value: exactly one wins', async () => {
    const first = await Promise.all([0, 1, 2, 3, 4, 5, 6, 7].map((i) => store.appendChanges({ mark: 'race', expected: null, value: `v${i}`, changes: [event(`w${i}`, null)] })));
    expect(first.filter(Boolean)).toHaveLength(1);
    const winner = first.indexOf(true);
    expect(await store.getMarks(['race'])).toEqual({ race: `v${winner}` });
    const second = await Promise.all([0, 1, 2, 3, 4, 5].map((i) => store.appendChanges({ mark: 'race', expected: `v${winner}`, value: `n${i}`, changes: [event(`n${i}`, null)] })));
    expect(second.filter(Boolean)).toHaveLength(1);
    expect(ids((await readAll(store)).events)).toEqual([`w${winner}`, `n${second.indexOf(true)}`]);
  });

  describe('claimDue', () => {
    it('returns the users due by now, earliest first, at most limit, and leases them', async () => {
      await put('u1', { due: at(60) });
      await put('u2', { due: at(30) });
      await put('u3', { due: at(120) });
      await put('u4');
      await put('u5', { due: null });
      // An ISO instant without milliseconds is the same instant.
      await put('u6', { due: '2026-01-05T10:45:00Z' });
      expect(await store.claimDue({ now: at(10), limit: 10, leaseMs: 60_000 })).toEqual([]);
      expect(await store.claimDue({ now: at(90), limit: 2, leaseMs: 60_000 })).toEqual(['u2', 'u6']);
      expect(await store.claimDue({ now: at(90), limit: 10, leaseMs: 60_000 })).toEqual(['u1']);
      // Leased until 91 (u2, u6) and 91 (u1): hidden until then.
      expect(await store.claimDue({ now: at(90.5), limit: 10, leaseMs: 60_000 })).toEqual([]);
      expect((await store.claimDue({ now: at(91), limit: 10, leaseMs: 60_000 })).sort()).toEqual(['u1', 'u2', 'u6']);
      expect(await store.claimDue({ now: at(1000), limit: 0, leaseMs: 60_000 })).toEqual([]);
    });

    it('a user is claimed once, however many commits set the same or another due instant', async () => {
      await put('u1', { due: at(60) });
      await put('u1', { due: at(60) });
      await put('u1', { due: at(30) });
      await put('u1', { due: at(30) });
      await put('u2', { due: at(40) });
      expect(await store.claimDue({ now: at(90), limit: 10, leaseMs: 60_000 })).toEqual(['u1', 'u2']);
      expect(await store.claimDue({ now: at(90), limit: 10, leaseMs: 60_000 })).toEqual([]);
    });

    it('a later commit’s due replaces it, an absent one keeps it, null clears it', async () => {
      await put('u1', { due: at(60) });
      await put('u2', { due: at(60) });
      await put('u3', { due: at(60) });
      await put('u1', { due: at(5) });
      await put('u2');
      await put('u3', { due: null });
      expect(await store.claimDue({ now: at(10), limit: 10, leaseMs: 1000 })).toEqual(['u1']);
      await put('u1', { due: at(200) });
      expect(await store.claimDue({ now: at(100), limit: 10, leaseMs: 1000 })).toEqual(['u2']);
      // u2 again once its lease (100 + 1s) ended, before u1 (200).
      expect(await store.claimDue({ now: at(300), limit: 10, leaseMs: 1000 })).toEqual(['u2', 'u1']);
    });

    it('concurrent claims never return the same user', async () => {
      for (let i = 0; i < 12; i++) await put(`d${String(i).padStart(2, '0')}`, { due: at(i) });
      const claims = await Promise.all([0, 1, 2, 3].map(() => store.claimDue({ now: at(100), limit: 5, leaseMs: 60_000 })));
      const all = claims.flat();
      expect(new Set(all).size).toBe(all.length);
      expect(all.length).toBe(12);
    });
  });

  it('pruneChanges removes the oldest events dated before the instant, at most limit', async () => {
    await put('u1', { changes: [event('old1', 'u1', { at: at(-3000) }), event('old2', 'u1', { at: at(-2000) })] });
    await put('u2', { changes: [event('mid', 'u2', { at: at(-1000) }), event('new', 'u2', { at: at(0) })] });
    const before = await store.readChanges({ limit: 1 });
    expect(await store.pruneChanges({ before: at(-1000), limit: 1 })).toBe(1);
    expect(await store.pruneChanges({ before: at(-1000), limit: 10 })).toBe(1);
    expect(await store.pruneChanges({ before: at(-1000), limit: 10 })).toBe(0);
    expect(ids((await readAll(store)).events)).toEqual(['mid', 'new']);
    // A cursor handed out before the prune stays valid.
    expect(ids((await store.readChanges({ after: before.next, limit: 10 })).events)).toEqual(['mid', 'new']);
    expect(await store.pruneChanges({ before: at(1), limit: 10 })).toBe(2);
    expect((await readAll(store)).events).toEqual([]);
  });

  it('pruneChanges removes delivery outcomes oldest first, equal instants in the order recorded (across consumers)', async () => {
    const rec = (consumer: string, eventId: string, minutes: number) => ({ consumer, eventId, attempt: 1, ok: true, status: 200, error: null, at: at(minutes), ms: 1 });
    await store.recordDeliveries([rec('A', 'e1', -10), rec('B', 'e2', -10), rec('A', 'e3', -10), rec('B', 'e4', -20)]);
    await store.recordDeliveries([rec('A', 'e5', -10)]);
    expect(await store.pruneChanges({ before: at(0), limit: 3 })).toBe(0);
    const left = async (consumer: string) => (await store.readDeliveries({ consumer, limit: 10 })).map((d) => d.eventId);
    // e4 (the oldest), then e1 and e2, recorded first among those at -10.
    expect([await left('A'), await left('B')]).toEqual([['e5', 'e3'], []]);
  });

  it('records delivery outcomes and reads a consumer’s latest, newest first', async () => {
    const rec = (consumer: string, eventId: string, attempt: number, ok: boolean, minutes: number) => ({
      consumer,
      eventId,
      attempt,
      ok,
      status: ok ? 200 : attempt === 1 ? 500 : null,
      error: ok ? null : attempt === 1 ? 'HTTP 500' : 'timeout',
      at: at(minutes),
      ms: ok ? 12.5 : 3000,
    });
    await store.recordDeliveries([]);
    await store.recordDeliveries([rec('c1', 'e1', 1, false, 0), rec('c2', 'e1', 1, true, 0)]);
    await store.recordDeliveries([rec('c1', 'e1', 2, false, 1), rec('c1', 'e1', 3, true, 2)]);
    expect(await store.readDeliveries({ consumer: 'c1', limit: 2 })).toEqual([rec('c1', 'e1', 3, true, 2), rec('c1', 'e1', 2, false, 1)]);
    expect(await store.readDeliveries({ consumer: 'c1', limit: 10 })).toEqual([rec('c1', 'e1', 3, true, 2), rec('c1', 'e1', 2, false, 1), rec('c1', 'e1', 1, false, 0)]);
    expect(await store.readDeliveries({ consumer: 'c2', limit: 10 })).toEqual([rec('c2', 'e1', 1, true, 0)]);
    expect(await store.readDeliveries({ consumer: 'none', limit: 10 })).toEqual([]);
  });

  it('eraseUser removes the user’s events and due instant, and nothing of anyone else', async () => {
    await put('u1', { changes: [event('a1', 'u1')], due: at(5) });
    await put('u2', { changes: [event('b1', 'u2')], due: at(5) });
    await store.appendChanges({ mark: 'g', expected: null, value: '1', changes: [event('g1', null)] });
    await put('u1', { changes: [event('a2', 'u1')] });
    const result = await store.eraseUser({ userId: 'u1', expectedVersion: versions.get('u1')!, counters: {} });
    expect(result.erased).toBe(true);
    versions.delete('u1');
    expect(ids((await readAll(store)).events)).toEqual(['b1', 'g1']);
    expect(await store.claimDue({ now: at(100), limit: 10, leaseMs: 1000 })).toEqual(['u2']);
    // The same id as a new user: only its new events, its new due instant.
    await put('u1', { changes: [event('a3', 'u1')], due: at(200) });
    expect(ids((await readAll(store)).events)).toEqual(['b1', 'g1', 'a3']);
    expect(await store.claimDue({ now: at(300), limit: 10, leaseMs: 1000 })).toEqual(['u2', 'u1']);
  });

  it('an erased user is never claimed, even when it was due', async () => {
    await put('u1', { due: at(1) });
    await put('u2', { due: at(2) });
    await store.eraseUser({ userId: 'u1', expectedVersion: 1, counters: {} });
    expect(await store.claimDue({ now: at(10), limit: 10, leaseMs: 1000 })).toEqual(['u2']);
  });

  it('a reset removes the user’s events, appends reset.changes (ranks completed) and sets reset.due', async () => {
    await put('u0', { leaderboard: [write('b', 'u0', 10)] });
    await put('u1', { leaderboard: [write('b', 'u1', 20)], changes: [event('old', 'u1')], due: at(5) });
    await put('u2', { changes: [event('other', 'u2')] });
    const after = (await readAll(store)).next;
    const result = await store.eraseUser({
      userId: 'u1',
      expectedVersion: versions.get('u1')!,
      counters: {},
      reset: { state: sampleState('u1', 0), ledger: [], leaderboard: [write('b', 'u1', 5)], changes: [event('reset', 'u1'), rankEvent('rank', 'u1', 'b')], due: at(50) },
    });
    expect(result).toMatchObject({ erased: true, version: versions.get('u1')! + 1 });
    versions.set('u1', result.version);
    const { events } = await readAll(store);
    expect(ids(events)).toEqual(['other', 'reset', 'rank']);
    expect((events[2]?.payload as { leaderboard: unknown }).leaderboard).toMatchObject({ previousRank: null, rank: 2 });
    // The new events come after a cursor handed out before the reset.
    expect(ids((await store.readChanges({ after, limit: 10 })).events)).toEqual(['reset', 'rank']);
    expect(await store.claimDue({ now: at(10), limit: 10, leaseMs: 1000 })).toEqual([]);
    expect(await store.claimDue({ now: at(50), limit: 10, leaseMs: 1000 })).toEqual(['u1']);
    // A reset without due clears it.
    await store.eraseUser({ userId: 'u1', expectedVersion: versions.get('u1')!, counters: {}, reset: { state: sampleState('u1', 0), ledger: [], leaderboard: [] } });
    expect(await store.claimDue({ now: at(1000), limit: 10, leaseMs: 1000 })).toEqual([]);
    expect(ids((await readAll(store)).events)).toEqual(['other']);
  });
});

describe('memory outbox: rank events as the engine makes them', () => {
  const config = defineConfig({
    metrics: [{ key: 'lessons', name: 'Lessons' }],
    attributes: [{ key: 'team', name: 'Team', type: 'user' }],
    pointsSystems: [{ key: 'xp', name: 'XP', triggers: [{ key: 't', type: 'metric', metricKey: 'lessons', metricThreshold: 1, points: 3 }] }],
    leaderboards: [
      { key: 'all', name: 'All', rankBy: 'metric', metricKey: 'lessons', start: '2026-01-01' },
      { key: 'daily', name: 'Daily', rankBy: 'metric', metricKey: 'lessons', start: '2026-01-01', runUnit: 'day', maxParticipants: 2 },
      { key: 'teams', name: 'Teams', rankBy: 'points', pointsSystemKey: 'xp', start: '2026-01-01', breakdownAttributes: ['team'] },
    ],
  });
  /** An engine on `main` whose commits `edit` gets first, and 60 events over 5 users, 3 boards. */
  async function run(main: MemoryStore, edit: (c: Commit) => Promise<Commit> | Commit, committed?: (c: Commit, ranks: readonly RankChange[]) => void) {
    const store = new Proxy(main, {
      get(target, prop, receiver) {
        if (prop === 'commit') {
          return async (c: Commit) => {
            const edited = await edit(c);
            const result = await target.commit(edited);
            committed?.(edited, result.ranks);
            return result;
          };
        }
        return Reflect.get(target, prop, receiver);
      },
    });
    let now = Date.parse('2026-01-05T10:00:00Z');
    const engine = createEngine({ config, store, clock: () => new Date(now), newId: sequentialIds() });
    for (let i = 0; i < 60; i++) {
      now += 37 * 60_000;
      await engine.recordEvent('lessons', { user: { id: `u${i % 5}`, attributes: { team: i % 7 < 3 ? 'red' : 'blue' } }, value: 1 + (i % 4) });
    }
  }
  const rankEvents = (c: Commit) => (c.changes ?? []).filter((e) => e.type === 'leaderboard.rank_changed');

  it('read back exactly as the same commits given as plain data (a JSON copy), field for field and in key order', async () => {
    // One memory store gets each commit as the engine made it (kept compactly), the other a JSON copy of it
    // (plain markers: kept whole). The engine's events take the compact path, the copies do not.
    const copy = createMemoryStore();
    const main = createMemoryStore();
    let compact = 0;
    await run(main, async (c) => {
      const plain = JSON.parse(JSON.stringify(c)) as Commit;
      for (const e of rankEvents(c)) if (compactBoard(e) !== undefined) compact++;
      expect(rankEvents(plain).filter((e) => compactBoard(e) !== undefined)).toEqual([]);
      await copy.commit(plain);
      return c;
    });
    const kept = (await readAll(main, undefined, 50)).events;
    const whole = (await readAll(copy, undefined, 50)).events;
    expect(compact).toBeGreaterThan(60);
    expect(kept.filter((e) => e.type === 'leaderboard.rank_changed').length).toBeGreaterThan(30);
    expect(kept).toEqual(whole);
    expect(kept.map((e) => JSON.stringify(e))).toEqual(whole.map((e) => JSON.stringify(e)));
  });

  it('keep a commit’s edits: a cloned marker or a replaced leaderboard is kept whole, as settleChanges completes it', async () => {
    const main = createMemoryStore();
    const expected: Omit<ChangeEvent, 'rank'>[] = [];
    let edited = 0;
    const settled = (c: Commit, ranks: readonly RankChange[]) => expected.push(...settleChanges(c.changes, ranks, c.userId));
    await run(main, (c) => {
      if (!c.changes) return c;
      const changes = c.changes.map((e, i) => {
        if (e.type !== 'leaderboard.rank_changed' || !e.rank) return e;
        edited++;
        // A clone that keeps the marker's prototype (lodash's cloneDeep does), or a replaced leaderboard.
        if (i % 2 === 0) return { ...e, rank: Object.assign(Object.create(Object.getPrototypeOf(e.rank) as object) as object, e.rank) as typeof e.rank };
        return { ...e, payload: { ...e.payload, leaderboard: { ...(e.payload.leaderboard as object), name: 'Renamed', extra: 1 } } };
      });
      for (const e of changes) if (e.rank) expect(compactBoard(e)).toBeUndefined();
      return { ...c, changes };
    }, settled);
    expect(edited).toBeGreaterThan(30);
    expect((await readAll(main, undefined, 50)).events.map(({ position: _, ...e }) => e)).toEqual(expected);
    const kept = (await readAll(main, undefined, 50)).events.filter((e) => e.type === 'leaderboard.rank_changed');
    const names = kept.map((e) => (e.payload.leaderboard as { name: string; extra?: number }).name);
    expect(names).toContain('Renamed');
    expect(names.filter((n) => n !== 'Renamed').length).toBeGreaterThan(0);
    for (const e of kept) {
      const lb = e.payload.leaderboard as { name: string; extra?: number };
      expect(lb.extra === 1).toBe(lb.name === 'Renamed');
    }
  });
});

/** Every key of a value, nested, in order (an undefined value's key included). */
const keysOf = (v: unknown): unknown => (typeof v === 'object' && v !== null ? Object.entries(v).map(([k, x]) => [k, keysOf(x)]) : typeof v);

describe('memory outbox: points events', () => {
  const config = defineConfig({
    metrics: [{ key: 'lessons', name: 'Lessons' }],
    pointsSystems: [
      { key: 'xp', name: 'XP', description: 'Experience', triggers: [{ key: 'a', type: 'metric', metricKey: 'lessons', metricThreshold: 1, points: 3 }, { key: 'b', type: 'metric', metricKey: 'lessons', metricThreshold: 2, points: 5 }], levels: [{ key: 'one', name: 'One', points: 10 }, { key: 'two', name: 'Two', points: 40 }], boosts: [{ key: 'double', name: 'Double', multiplier: 2, start: '2026-01-07', end: '2026-01-07' }] },
      { key: 'energy', name: 'Energy', maxPoints: 5, triggers: [{ key: 'signup', type: 'user_creation', points: 5 }, { key: 'use', type: 'metric', metricKey: 'lessons', metricThreshold: 1, points: -1 }, { key: 'refill', type: 'time', timeUnit: 'hour', timeInterval: 1, points: 1 }] },
    ],
  });
  /** Every event as committed (a structured clone at commit time: fields, values and key order). */
  async function recorded(store: MemoryStore) {
    const committed: Omit<ChangeEvent, 'rank'>[] = [];
    const proxy = new Proxy(store, {
      get(target, prop, receiver) {
        if (prop === 'commit') return async (c: Commit) => (committed.push(...structuredClone(c.changes ?? [])), target.commit(c));
        return Reflect.get(target, prop, receiver);
      },
    });
    let now = Date.parse('2026-01-05T10:00:00Z');
    const engine = createEngine({ config, store: proxy, clock: () => new Date(now), newId: sequentialIds() });
    for (let i = 0; i < 80; i++) {
      now += 53 * 60_000;
      await engine.recordEvent('lessons', { user: { id: `u${i % 4}` }, value: 1 + (i % 3) });
      // Spends that take a user below a level (a level change to the lower level, or to none) and grants.
      if (i % 9 === 8) await engine.adjustPoints(`u${i % 4}`, 'xp', i % 2 ? -35 : 20, { reason: 'test' });
    }
    // A user who reaches the first level and drops below it again (a level change to none).
    await engine.recordEvent('lessons', { user: { id: 'v' }, value: 1 });
    await engine.adjustPoints('v', 'xp', 10);
    await engine.adjustPoints('v', 'xp', -10);
    return committed;
  }

  it('read back exactly as committed (field for field and in key order), most kept compactly', async () => {
    const store = createMemoryStore();
    const committed = await recorded(store);
    const points = committed.filter((e) => e.type === 'points.changed');
    const compact = points.filter((e) => compactPoints(e) !== undefined);
    // Boosted awards (2026-01-07) are kept whole; level changes to a level and to none are kept compactly.
    expect(compact.length).toBeGreaterThan(80);
    expect(points.length - compact.length).toBeGreaterThan(5);
    expect(compact.some((e) => (e.payload.points as { level?: unknown }).level === null)).toBe(true);
    expect(compact.some((e) => typeof (e.payload.points as { level?: unknown }).level === 'object' && (e.payload.points as { level?: unknown }).level !== null)).toBe(true);
    expect(compact.some((e) => (e.payload.points as { awards: unknown[] }).awards.length === 0)).toBe(true);
    const read = (await readAll(store, undefined, 40)).events.map(({ position: _, ...e }) => e);
    expect(read).toEqual(committed);
    expect(read.map((e) => JSON.stringify(e))).toEqual(committed.map((e) => JSON.stringify(e)));
    // Read again (the completed events are kept): the same.
    expect((await readAll(store, undefined, 500)).events.map(({ position: _, ...e }) => JSON.stringify(e))).toEqual(committed.map((e) => JSON.stringify(e)));
  });

  it('keeps any other shape whole: random payloads read back as given', async () => {
    const key = fc.constantFrom('id', 'key', 'name', 'description', 'badgeUrl', 'maxPoints', 'total', 'added', 'awards', 'level', 'extra', 'awarded', 'date', 'trigger', 'boosts', 'type', 'user', 'points');
    const value = fc.oneof(fc.constant(null), fc.constant(undefined), fc.integer(), fc.double({ noNaN: true, noDefaultInfinity: true }), fc.string({ maxLength: 4 }), fc.constant({ id: 'shared' }));
    // Mostly the engine's shapes, sometimes with a key added, left out, or the order reversed.
    const rarely = <T,>(arb: fc.Arbitrary<T>): fc.Arbitrary<T | null> => fc.oneof({ arbitrary: fc.constant(null), weight: 6 }, { arbitrary: arb, weight: 1 });
    const shaped = (keys: readonly string[], v: fc.Arbitrary<unknown>) =>
      fc.tuple(fc.array(v, { minLength: keys.length, maxLength: keys.length }), rarely(fc.tuple(fc.nat(keys.length), key, value)), rarely(fc.nat(keys.length - 1)), rarely(fc.constant(true))).map(([values, added, dropped, swap]) => {
        const entries: [string, unknown][] = keys.map((k, i) => [k, values[i]]);
        if (dropped !== null && dropped < entries.length) entries.splice(dropped, 1);
        if (added !== null) entries.splice(added[0], 0, [added[1], added[2]]);
        if (swap !== null && entries.length > 1) entries.reverse();
        return Object.fromEntries(entries);
      });
    const award = shaped(['id', 'awarded', 'date', 'total', 'trigger'], value);
    const points = fc
      .tuple(shaped(['id', 'key', 'name', 'description', 'badgeUrl', 'maxPoints', 'total', 'added', 'awards'], value), fc.array(award, { maxLength: 3 }), fc.option(value, { freq: 2 }))
      .map(([p, awards, level]) => ('awards' in p ? Object.assign(p, { awards, ...(level === null ? {} : { level }) }) : p));
    const payload = fc.tuple(shaped(['type', 'user', 'points'], value), points).map(([p, pts]) => ('points' in p ? Object.assign(p, { points: pts }) : p));
    let compacted = 0;
    let whole = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(fc.tuple(payload, fc.boolean()), { minLength: 1, maxLength: 6 }), async (list) => {
        const store = createMemoryStore();
        const changes: ChangeEvent[] = list.map(([p, other], i) => ({ id: `e${i}`, type: other ? 'points.level_changed' : 'points.changed', userId: 'u1', at: at(i), payload: p as Record<string, unknown> }));
        const given = structuredClone(changes);
        for (const c of changes) if (compactPoints(c) === undefined) whole++;
        else compacted++;
        await store.commit(commitOf('u1', 0, { changes }));
        const read = (await store.readChanges({ limit: 100 })).events.map(({ position: _, ...e }) => e);
        expect(read.map((e) => JSON.stringify(e))).toEqual(given.map((e) => JSON.stringify(e)));
        expect(read).toEqual(given);
        // Keys whose value is undefined too (JSON and toEqual pass over them): the same keys, in the same order.
        expect(read.map(keysOf)).toEqual(given.map(keysOf));
      }),
      { numRuns: 300 },
    );
    // Both paths taken, each many times: a run draws about 100-150 compacted events and 900 whole ones (random:
    // a bound of 100 failed once at 99), so the bound stays well below.
    expect(compacted).toBeGreaterThan(40);
    expect(whole).toBeGreaterThan(40);
  });

  /** A points.changed event of the engine's shape with `points` (its system `id`, `name`, `maxPoints`). */
  const pointsEvent = (id: string, points: Record<string, unknown> = {}): ChangeEvent => ({
    id,
    type: 'points.changed',
    userId: 'u1',
    at: at(),
    payload: { type: 'points.changed', user: { id: 'u1' }, points: { id: 's', key: 'xp', name: 'XP', description: null, badgeUrl: null, maxPoints: null, total: 3, added: 3, awards: [{ id: `${id}-a`, awarded: 3, date: at(), total: 3, trigger: { id: 't' } }], ...points } },
  });

  it('read back each event’s own system fields when a system’s fields change between commits (same id)', async () => {
    const store = createMemoryStore();
    const changes = [pointsEvent('e1'), pointsEvent('e2', { name: 'Experience' }), pointsEvent('e3', { maxPoints: 0 }), pointsEvent('e4', { maxPoints: -0 }), pointsEvent('e5')];
    for (const e of changes) expect(compactPoints(e)).toBeDefined();
    let v = 0;
    for (const e of changes) v = (await store.commit(commitOf('u1', v, { changes: [e] }))).version;
    const read = (await store.readChanges({ limit: 10 })).events.map((e) => e.payload.points as { name: string; maxPoints: number | null });
    expect(read.map((p) => p.name)).toEqual(['XP', 'Experience', 'XP', 'XP', 'XP']);
    expect(read.map((p) => p.maxPoints)).toEqual([null, null, 0, -0, null]);
    expect(Object.is(read[2]?.maxPoints, 0) && Object.is(read[3]?.maxPoints, -0)).toBe(true);
  });

  it('keeps whole a payload, points or award that is not a plain object, and a level that is not enumerable', async () => {
    class Payload {
      type = 'points.changed';
      user = { id: 'u1' };
      points = pointsEvent('x').payload.points;
      toJSON() {
        return { custom: true };
      }
    }
    const inherited = Object.assign(Object.create({ points: pointsEvent('y').payload.points }) as object, { type: 'points.changed', user: { id: 'u1' } });
    const asArray = Object.assign([] as unknown[], { type: 'points.changed', user: { id: 'u1' }, points: pointsEvent('z').payload.points });
    const bare = Object.assign(Object.create(null) as object, pointsEvent('n').payload);
    const hiddenLevel = pointsEvent('h');
    Object.defineProperty(hiddenLevel.payload.points, 'level', { value: { key: 'gold' }, enumerable: false });
    const classAward = pointsEvent('c');
    (classAward.payload.points as { awards: unknown[] }).awards = [Object.assign(Object.create({ extra: 1 }) as object, { id: 'c-a', awarded: 3, date: at(), total: 3, trigger: { id: 't' } })];
    const changes: ChangeEvent[] = [new Payload(), inherited, asArray, bare].map((payload, i) => ({ ...pointsEvent(`p${i}`), payload: payload as Record<string, unknown> }));
    changes.push(classAward);
    for (const e of changes) expect(compactPoints(e)).toBeUndefined();
    // A level that for...in does not list is no level of the event's (as in its JSON): kept compactly without one.
    expect(compactPoints(hiddenLevel)).toBeDefined();
    const store = createMemoryStore();
    const given = [...changes, hiddenLevel].map((e) => JSON.stringify(e));
    await store.commit(commitOf('u1', 0, { changes: [...changes, hiddenLevel] }));
    const read = (await store.readChanges({ limit: 10 })).events.map(({ position: _, ...e }) => e);
    expect(read.map((e) => JSON.stringify(e))).toEqual(given);
    for (let i = 0; i < changes.length; i++) expect(read[i]?.payload).toBe(changes[i]?.payload);
    expect(Object.keys(read[changes.length]?.payload.points as object)).not.toContain('level');
  });

  it('applies a commit whole when a points event cannot be read (a getter that throws): the event is kept as given', async () => {
    const store = createMemoryStore();
    const e = pointsEvent('g');
    const award = (e.payload.points as { awards: Record<string, unknown>[] }).awards[0] as Record<string, unknown>;
    let reads = 0;
    Object.defineProperty(award, 'total', {
      enumerable: true,
      get() {
        reads++;
        throw new Error('unreadable');
      },
    });
    const result = await store.commit(commitOf('u1', 0, { changes: [e], ledger: [], due: at(5) }));
    expect(result.version).toBe(1);
    expect(reads).toBeGreaterThan(0);
    expect((await store.loadUser('u1'))?.version).toBe(1);
    const [read] = (await store.readChanges({ limit: 10 })).events;
    expect(read?.payload).toBe(e.payload);
    expect(await store.claimDue({ now: at(5), limit: 10, leaseMs: 1000 })).toEqual(['u1']);
  });

  it('keeps the values a commit gave: an event edited after its commit reads as committed', async () => {
    const store = createMemoryStore();
    const awards = [{ id: 'a1', awarded: 3, date: at(), total: 3, trigger: { id: 't' } }];
    const e: ChangeEvent = { id: 'e1', type: 'points.changed', userId: 'u1', at: at(), payload: { type: 'points.changed', user: { id: 'u1' }, points: { id: 's', key: 'xp', name: 'XP', description: null, badgeUrl: null, maxPoints: null, total: 3, added: 3, awards } } };
    expect(compactPoints(e)).toBeDefined();
    const given = structuredClone(e);
    await store.commit(commitOf('u1', 0, { changes: [e] }));
    (awards[0] as { awarded: number }).awarded = 99;
    (e.payload.points as { total: number }).total = 99;
    const [read] = (await store.readChanges({ limit: 10 })).events;
    expect(read && { ...read, position: undefined }).toEqual({ ...given, position: undefined });
  });
});

describe('withRankIndex', () => {
  const unused = () => Promise.reject(new Error('not used'));
  const rankIndex: RankIndex = { apply: unused, getEntry: unused, readRange: unused, countEntries: unused, readRankHistory: unused, scanUsers: unused, erase: unused };
  const NAMES = ['readChanges', 'claimConsumer', 'advanceConsumer', 'releaseConsumer', 'getMarks', 'appendChanges', 'claimDue', 'pruneChanges', 'recordDeliveries', 'readDeliveries'] as const;

  it('forwards every OutboxStore method to the store, which keeps the outbox', async () => {
    const inner = createMemoryStore();
    const wrapped = withRankIndex(inner, rankIndex) as OutboxCapable;
    for (const name of NAMES) expect(typeof wrapped[name], name).toBe('function');
    // Events committed through the wrapper (no leaderboard writes: no rank index call) land in the store.
    await wrapped.commit(commitOf('u1', 0, { changes: [event('c1', 'u1')], due: at(1) }));
    expect(await wrapped.appendChanges({ mark: 'm', expected: null, value: '1', changes: [event('c2', null)] })).toBe(true);
    expect(ids((await inner.readChanges({ limit: 10 })).events)).toEqual(['c1', 'c2']);
    expect(ids((await wrapped.readChanges({ limit: 10 })).events)).toEqual(['c1', 'c2']);
    expect(await wrapped.getMarks(['m'])).toEqual({ m: '1' });
    expect(await wrapped.claimDue({ now: at(1), limit: 10, leaseMs: 1000 })).toEqual(['u1']);
    expect(await wrapped.claimConsumer({ consumer: 'c', owner: 'A', now: at(), leaseMs: 1000 })).toEqual({ cursor: null });
    expect(await inner.claimConsumer({ consumer: 'c', owner: 'B', now: at(), leaseMs: 1000 })).toBeNull();
  });

  it('offers none of them over a store without an outbox', () => {
    const inner = createMemoryStore() as Store;
    const bare: Store = Object.fromEntries(Object.entries(inner).filter(([name]) => !(NAMES as readonly string[]).includes(name))) as unknown as Store;
    const wrapped = withRankIndex(bare, rankIndex);
    for (const name of NAMES) expect(wrapped[name], name).toBeUndefined();
  });
});

describe.skipIf(!PG_URL)('PostgreSQL outbox across concurrent transactions (real server)', () => {
  const pool = PG_URL ? new pg.Pool({ connectionString: PG_URL, max: 4 }) : null;
  const clients: pg.Client[] = [];
  afterAll(async () => {
    for (const c of clients) await c.end().catch(() => undefined);
    await pool?.end();
  });

  /** A store on the pool, and one on a connection of its own that the test holds a transaction open on. */
  async function setup() {
    const schema = uniq('outbox_tx');
    const store = createPostgresStore({ client: pool as unknown as PostgresClient, schema });
    await store.migrate();
    const conn = new pg.Client({ connectionString: PG_URL });
    clients.push(conn);
    await conn.connect();
    const inTx = createPostgresStore({ client: conn as unknown as PostgresClient, schema, transactions: 'serial' });
    return { store, conn, inTx };
  }

  it('holds back an open transaction’s events, and every later one’s, until it ends; none is skipped', async () => {
    const { store, conn, inTx } = await setup();
    await store.commit(commitOf('u0', 0, { changes: [event('e0', 'u0')] }));
    await sync();
    await conn.query('BEGIN');
    // Written first (a lower seq), committed last.
    await inTx.commit(commitOf('slow', 0, { changes: [event('slow1', 'slow'), event('slow2', 'slow')] }));
    await store.commit(commitOf('fast', 0, { changes: [event('fast', 'fast')] }));
    const page = await store.readChanges({ limit: 10 });
    expect(ids(page.events)).toEqual(['e0']);
    // A reader polling meanwhile never moves past the open transaction.
    const again = await store.readChanges({ after: page.next, limit: 10 });
    expect(again).toEqual({ events: [], next: page.next });
    await conn.query('COMMIT');
    await sync();
    const rest = await store.readChanges({ after: page.next, limit: 10 });
    expect(ids(rest.events)).toEqual(['slow1', 'slow2', 'fast']);
  });

  it('an open transaction that does not write the outbox holds nothing back', async () => {
    const { store, conn } = await setup();
    await conn.query('BEGIN');
    // A transaction with an id (it wrote), open on the server, unrelated to the outbox.
    await conn.query('SELECT pg_current_xact_id()');
    try {
      await store.commit(commitOf('u1', 0, { changes: [event('a1', 'u1')] }));
      await store.commit(commitOf('u2', 0, { changes: [event('a2', 'u2')] }));
      expect(ids((await store.readChanges({ limit: 10 })).events)).toEqual(['a1', 'a2']);
    } finally {
      await conn.query('COMMIT');
    }
  });

  it('a rolled-back transaction’s events never appear; later events do once it ended', async () => {
    const { store, conn, inTx } = await setup();
    await conn.query('BEGIN');
    await inTx.commit(commitOf('gone', 0, { changes: [event('gone', 'gone')], due: at(1) }));
    await store.commit(commitOf('kept', 0, { changes: [event('kept', 'kept')] }));
    await store.appendChanges({ mark: 'm', expected: null, value: '1', changes: [event('marked', null)] });
    const page = await store.readChanges({ limit: 10 });
    expect(page.events).toEqual([]);
    await conn.query('ROLLBACK');
    await sync();
    expect(ids((await store.readChanges({ after: page.next, limit: 10 })).events)).toEqual(['kept', 'marked']);
    expect(await store.claimDue({ now: at(10), limit: 10, leaseMs: 1000 })).toEqual([]);
  });

  it('claimDue skips a user whose row another transaction holds', async () => {
    const { store, conn, inTx } = await setup();
    await store.commit(commitOf('a', 0, { due: at(1) }));
    await store.commit(commitOf('b', 0, { due: at(2) }));
    await conn.query('BEGIN');
    await inTx.commit(commitOf('a', 1, { due: at(3) }));
    expect(await store.claimDue({ now: at(10), limit: 10, leaseMs: 1000 })).toEqual(['b']);
    await conn.query('COMMIT');
    expect(await store.claimDue({ now: at(10), limit: 10, leaseMs: 1000 })).toEqual(['a']);
  });
});

describe('PostgreSQL outbox plans (PGlite)', () => {
  const db = new PGlite();
  afterAll(() => db.close());

  it('reads changes, claims due users and prunes on indexes', async () => {
    const schema = 'outbox_plans';
    const store = createPostgresStore({ client: db as unknown as PostgresClient, schema });
    await store.migrate();
    await store.commit(commitOf('u', 0, { changes: [event('e', 'u')], due: at(1) }));
    await db.query('SET enable_seqscan = off');
    try {
      const plan = async (sql: string) => (await db.query<{ 'QUERY PLAN': string }>(`EXPLAIN ${sql}`)).rows.map((r) => r['QUERY PLAN']).join('\n');
      // The store's reads, in the default tenant ('', migration 008).
      const changes = await plan(`SELECT * FROM ${schema}.outbox o WHERE o.tenant = '' AND (o.xid, o.seq) > ('5'::xid8, 7::bigint) AND o.xid < pg_snapshot_xmin(pg_current_snapshot()) ORDER BY o.xid, o.seq LIMIT 10`);
      expect(changes).toContain('outbox_pkey');
      expect(changes).not.toContain('Sort');
      const due = await plan(`SELECT user_id FROM ${schema}.users WHERE tenant = '' AND due IS NOT NULL AND due <= '2026' ORDER BY due, user_id LIMIT 10 FOR UPDATE SKIP LOCKED`);
      expect(due).toContain('users_due');
      expect(due).not.toContain('Sort');
      expect(await plan(`SELECT xid, seq FROM ${schema}.outbox WHERE tenant = '' AND at < '2026' ORDER BY at LIMIT 10`)).toContain('outbox_at');
      expect(await plan(`DELETE FROM ${schema}.outbox WHERE tenant = '' AND user_id = 'u'`)).toContain('outbox_user');
      expect(await plan(`SELECT * FROM ${schema}.deliveries WHERE tenant = '' AND consumer = 'c' ORDER BY seq DESC LIMIT 10`)).toContain('deliveries_consumer');
    } finally {
      await db.query('SET enable_seqscan = on');
    }
  });
});
