/** Internals of the memory store that its conformance suite cannot see. */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { isoOf } from '../src/core/instants.js';

describe('memory store', () => {
  it('formats a ledger row\'s instant exactly as Date.prototype.toISOString over the supported years', () => {
    fc.assert(
      fc.property(fc.integer({ min: Date.parse('1900-01-01T00:00:00Z'), max: Date.parse('8999-12-31T23:59:59.999Z') }), (ms) => {
        expect(isoOf(ms)).toBe(new Date(ms).toISOString());
      }),
      { numRuns: 50_000 },
    );
    for (const iso of ['1900-01-01T00:00:00.000Z', '1969-12-31T23:59:59.999Z', '1970-01-01T00:00:00.000Z', '2024-02-29T12:34:56.789Z', '8999-12-31T23:59:59.999Z']) expect(isoOf(Date.parse(iso))).toBe(iso);
  });
});

describe('memory store rank history', () => {
  it('keeps one row per date in date order when a write is dated before the last row (a clock that went back)', async () => {
    const { createMemoryStore } = await import('../src/memory.js');
    const { sampleState } = await import('../src/testing/index.js');
    const store = createMemoryStore();
    const write = (version: number, value: number, date: string) =>
      store.commit({ userId: 'u', expectedVersion: version, state: sampleState('u'), ledger: [], counters: {}, idempotency: null, leaderboard: [{ index: 'lb|b|2026-01-01|', userId: 'u', value, reachedAt: `${date}T00:00:00.000Z`, date }] });
    await write(0, 1, '2026-01-01');
    await write(1, 2, '2026-01-02');
    await write(2, 3, '2026-01-01');
    const rows = await store.readRankHistory('lb|b|2026-01-01|', 'u', 10);
    expect(rows.map((r) => [r.date, r.value])).toEqual([
      ['2026-01-02', 2],
      ['2026-01-01', 3],
    ]);
  });
});

describe('memory store atomicity with malformed commits', () => {
  it('a commit, a batch or an erasure whose rows or entries the store cannot keep throws before changing anything', async () => {
    const { createMemoryStore } = await import('../src/memory.js');
    const { sampleState } = await import('../src/testing/index.js');
    const store = createMemoryStore();
    const at = '2026-01-01T00:00:00.000Z';
    const commitOf = (userId: string, version: number, opts: { data?: unknown; reachedAt?: string; key?: string } = {}) => ({
      userId,
      expectedVersion: version,
      state: sampleState(userId, version + 1),
      ledger: [{ id: `${userId}-${version}`, userId, kind: 'metric' as const, key: 'lessons', at, delta: 1, total: version + 1, data: (opts.data ?? { attributes: { device: 'ios' } }) as never }],
      counters: { events: 1 },
      idempotency: opts.key ? { userId, metricKey: 'lessons', key: opts.key, eventId: `${userId}-${version}`, at } : null,
      leaderboard: [{ index: 'lb|a|', userId, value: version + 1, reachedAt: opts.reachedAt ?? at, date: '2026-01-01' }],
    });
    await store.commit(commitOf('u', 0));
    const snapshot = async () => ({
      user: await store.loadUser('u'),
      other: await store.loadUser('v'),
      ledger: await store.readUserLedger('u', { limit: 10 }),
      entries: await store.readRange('lb|a|', 0, 10),
      history: await store.readRankHistory('lb|a|', 'u', 10),
      counters: await store.getCounters(['events']),
      key: await store.getIdempotencyRecord('u', 'lessons', 'k1'),
    });
    const before = await snapshot();
    // Data JSON cannot write (a BigInt), and an entry whose reachedAt is not an instant.
    await expect(store.commit(commitOf('u', 1, { data: { n: 1n }, key: 'k1' }))).rejects.toThrow(TypeError);
    await expect(store.commit(commitOf('u', 1, { reachedAt: 'yesterday', key: 'k1' }))).rejects.toThrow(RangeError);
    // A batch whose second commit is malformed applies neither.
    await expect(store.commitBatch!([commitOf('v', 0), commitOf('u', 1, { data: { n: 1n }, key: 'k1' })])).rejects.toThrow(TypeError);
    // An erasure that resets the user to a malformed state keeps everything.
    const reset = commitOf('u', 1, { reachedAt: 'yesterday' });
    await expect(store.eraseUser({ userId: 'u', expectedVersion: 1, counters: { events: -1 }, reset: { state: reset.state, ledger: reset.ledger, leaderboard: reset.leaderboard } })).rejects.toThrow(RangeError);
    expect(await snapshot()).toEqual(before);
    // And a well-formed commit still applies.
    await store.commit(commitOf('u', 1, { key: 'k1' }));
    expect((await store.loadUser('u'))?.version).toBe(2);
  });
});

describe('memory store idempotency records', () => {
  // A record that names its commit's own row is kept as that row's place in the user's log (no string per
  // record); any other record as text. Either way it reads back exactly as committed, also after rows were
  // slotted in before it (a clock that went back), other users' commits, and a reset of the user.
  it('reads back every record as committed, whatever rows and instants its commit had', async () => {
    const { createMemoryStore } = await import('../src/memory.js');
    const { sampleState } = await import('../src/testing/index.js');
    const base = Date.parse('2026-03-01T00:00:00.000Z');
    const commitArb = fc.record({
      user: fc.constantFrom('a', 'b'),
      // Minutes from the base: a later commit may be dated earlier (its rows slot in before later ones).
      minute: fc.integer({ min: 0, max: 50 }),
      // How the record relates to the commit's rows.
      shape: fc.constantFrom('own-row', 'own-row-second', 'no-row', 'other-id', 'other-at', 'non-canonical-at', 'non-canonical-both', 'not-an-instant', 'other-user'),
      reset: fc.boolean(),
    });
    await fc.assert(
      fc.asyncProperty(fc.array(commitArb, { minLength: 1, maxLength: 25 }), async (commits) => {
        const store = createMemoryStore();
        const versions = new Map<string, number>();
        const model = new Map<string, { eventId: string; at: string }>();
        let n = 0;
        for (const c of commits) {
          const version = versions.get(c.user) ?? 0;
          if (c.reset && version > 0) {
            // A reset erases the user's ledger and records (it keeps the user, at the next version).
            await store.eraseUser({ userId: c.user, expectedVersion: version, counters: {}, reset: { state: sampleState(c.user), ledger: [], leaderboard: [] } });
            versions.set(c.user, version + 1);
            for (const k of [...model.keys()]) if (k.startsWith(`${c.user}|`)) model.delete(k);
            continue;
          }
          const iso = new Date(base + c.minute * 60_000).toISOString();
          // Both the row and the record at an instant in another form than the one the ledger gives back.
          const at = c.shape === 'non-canonical-both' ? iso.replace('.000Z', 'Z') : iso;
          const id = `e${n++}`;
          const row = (rowId: string, rowAt: string) => ({ id: rowId, userId: c.user, kind: 'metric' as const, key: 'lessons', at: rowAt, delta: 1, total: 1, data: null });
          const rows = c.shape === 'own-row-second' ? [row(`${id}-first`, at), row(id, at)] : c.shape === 'no-row' ? [] : [row(id, at)];
          const record = {
            userId: c.shape === 'other-user' ? `${c.user}-other` : c.user,
            metricKey: 'lessons',
            key: `k${n}`,
            eventId: c.shape === 'other-id' ? `${id}-elsewhere` : id,
            at: c.shape === 'other-at' ? new Date(base + c.minute * 60_000 + 1).toISOString() : c.shape === 'non-canonical-at' ? at.replace('.000Z', 'Z') : c.shape === 'not-an-instant' ? 'not an instant' : at,
          };
          await store.commit({ userId: c.user, expectedVersion: version, state: sampleState(c.user), ledger: rows, counters: {}, idempotency: record, leaderboard: [] });
          versions.set(c.user, version + 1);
          model.set(`${record.userId}|${record.key}`, { eventId: record.eventId, at: record.at });
        }
        for (const [k, want] of model) {
          const [userId, key] = k.split('|') as [string, string];
          expect(await store.getIdempotencyRecord(userId, 'lessons', key)).toEqual({ userId, metricKey: 'lessons', key, ...want });
        }
      }),
      { numRuns: 300 },
    );
  });
});
