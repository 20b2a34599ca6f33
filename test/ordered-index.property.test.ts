import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { OrderedIndex, compareEntries, type IndexEntry } from '../src/store/ordered-index.js';

// Few distinct values and instants, so that ties on value and on value + reachedAt are common; the rest
// spread over the whole range the index supports (years 1900..8999, fractional and negative values).
const arbValue = fc.oneof(
  fc.constantFrom(-3, -1, -0.5, -0, 0, 0.25, 1, 1, 2, 2, 7, 1e9),
  fc.integer({ min: -5, max: 5 }),
  fc.double({ min: -1e6, max: 1e6, noNaN: true }),
);
const MIN_DATE = Date.UTC(1900, 0, 1);
const MAX_DATE = Date.UTC(8999, 11, 31, 23, 59, 59, 999);
const arbReachedAt = fc.oneof(
  fc.constantFrom(
    '2026-01-01T00:00:00.000Z',
    '2026-01-01T00:00:00.001Z',
    '2026-01-01T00:00:01.000Z',
    '2025-12-31T23:59:59.999Z',
    '2024-02-29T12:00:00.000Z',
    '2000-02-29T00:00:00.000Z',
    '1900-01-01T00:00:00.000Z',
    '1900-02-28T23:59:59.999Z',
    '1900-03-01T00:00:00.000Z',
    '8999-12-31T23:59:59.999Z',
  ),
  fc.integer({ min: MIN_DATE, max: MAX_DATE }).map((ms) => new Date(ms).toISOString()),
  // Around the ends of months (leap days included) in any supported year.
  fc
    .record({ year: fc.integer({ min: 1900, max: 8999 }), month: fc.integer({ min: 0, max: 11 }), day: fc.constantFrom(0, 1, 28, 29, 30, 31), ms: fc.integer({ min: -1, max: 1 }) })
    .map(({ year, month, day, ms }) => new Date(Date.UTC(year, month, day) + ms).toISOString()),
);
// User ids are compared in UTF-16 code-unit order: include surrogate pairs and characters above them.
const arbUser = fc.oneof(fc.integer({ min: 0, max: 40 }).map((i) => `u${i}`), fc.constantFrom('', 'a', 'B', 'é', '\u{1F600}', '\uFFFF', 'u1\u0000', 'ü'));

type Op =
  | { kind: 'upsert'; userId: string; value: number; reachedAt: string }
  | { kind: 'remove'; pick: number }
  | { kind: 'removeAbsent'; userId: string; value: number; reachedAt: string }
  | { kind: 'rank'; pick: number }
  | { kind: 'rankAbsent'; userId: string; value: number; reachedAt: string }
  | { kind: 'at'; position: number }
  | { kind: 'range'; offset: number; limit: number }
  | { kind: 'countAtLeast'; value: number };

// Only two values and two instants: long runs of entries that only userId orders, across block boundaries.
const arbNarrow = fc.record({ userId: arbUser, value: fc.constantFrom(1, 2), reachedAt: fc.constantFrom('2026-01-01T00:00:00.000Z', '2026-01-02T00:00:00.000Z') });

const arbOps = (keys: fc.Arbitrary<{ userId: string; value: number; reachedAt: string }>): fc.Arbitrary<Op[]> => fc.array(fc.oneof(
  { weight: 6, arbitrary: keys.map((k) => ({ kind: 'upsert' as const, ...k })) },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('remove' as const), pick: fc.nat() }) },
  { weight: 1, arbitrary: keys.map((k) => ({ kind: 'removeAbsent' as const, ...k })) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('rank' as const), pick: fc.nat() }) },
  { weight: 1, arbitrary: keys.map((k) => ({ kind: 'rankAbsent' as const, ...k })) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('at' as const), position: fc.integer({ min: -2, max: 120 }) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('range' as const), offset: fc.integer({ min: 0, max: 120 }), limit: fc.integer({ min: 0, max: 30 }) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('countAtLeast' as const), value: arbValue }) },
), { maxLength: 400 });
const arbKeys = fc.record({ userId: arbUser, value: arbValue, reachedAt: arbReachedAt });

/** The model: every entry in one array kept sorted by compareEntries, and the entry of each user. */
class Model {
  sorted: IndexEntry[] = [];
  byUser = new Map<string, IndexEntry>();
  insert(e: IndexEntry) {
    this.sorted.push(e);
    this.sorted.sort(compareEntries);
    this.byUser.set(e.userId, e);
  }
  remove(e: IndexEntry) {
    this.sorted.splice(this.sorted.indexOf(e), 1);
    this.byUser.delete(e.userId);
  }
  /** Entries that rank strictly before `e`, plus one. */
  rankOf(e: IndexEntry) {
    return this.sorted.filter((x) => compareEntries(x, e) < 0).length + 1;
  }
}

function checkAll(index: OrderedIndex, model: Model) {
  expect(index.size).toBe(model.sorted.length);
  model.sorted.forEach((e, i) => {
    expect(index.at(i)).toBe(e);
    expect(index.rank(e)).toBe(i + 1);
  });
  expect(index.at(model.sorted.length)).toBeUndefined();
  expect(index.range(0, model.sorted.length + 5)).toEqual(model.sorted);
}

function runOps(index: OrderedIndex, ops: Op[], checkEvery: number) {
  const model = new Model();
  ops.forEach((op, step) => {
    const pick = (n: number) => model.sorted[n % model.sorted.length] as IndexEntry;
    switch (op.kind) {
      case 'upsert': {
        const old = model.byUser.get(op.userId);
        if (old) {
          // remove reports the rank the entry had, insert the rank it takes.
          expect(index.remove(old)).toBe(model.sorted.indexOf(old) + 1);
          model.remove(old);
        }
        const e = { userId: op.userId, value: op.value, reachedAt: op.reachedAt };
        const inserted = index.insert(e);
        model.insert(e);
        expect(inserted).toBe(model.sorted.indexOf(e) + 1);
        expect(index.rank(e)).toBe(model.sorted.indexOf(e) + 1);
        break;
      }
      case 'remove':
        if (model.sorted.length === 0) break;
        {
          const e = pick(op.pick);
          // An equal copy removes it too: the index matches by order, not by identity.
          expect(index.remove(step % 2 ? e : { ...e })).toBe(model.sorted.indexOf(e) + 1);
          model.remove(e);
        }
        break;
      case 'removeAbsent': {
        const e = { userId: op.userId, value: op.value, reachedAt: op.reachedAt };
        const present = model.sorted.some((x) => compareEntries(x, e) === 0);
        const at = model.sorted.findIndex((x) => compareEntries(x, e) === 0);
        expect(index.remove(e)).toBe(present ? at + 1 : 0);
        if (present) model.remove(model.sorted.find((x) => compareEntries(x, e) === 0) as IndexEntry);
        break;
      }
      case 'rank':
        if (model.sorted.length > 0) expect(index.rank(pick(op.pick))).toBe(model.sorted.indexOf(pick(op.pick)) + 1);
        break;
      case 'rankAbsent': {
        const e = { userId: op.userId, value: op.value, reachedAt: op.reachedAt };
        expect(index.rank(e)).toBe(model.rankOf(e));
        break;
      }
      case 'at':
        expect(index.at(op.position)).toBe(op.position >= 0 ? model.sorted[op.position] : undefined);
        break;
      case 'range':
        expect(index.range(op.offset, op.limit)).toEqual(model.sorted.slice(op.offset, op.offset + op.limit));
        break;
      case 'countAtLeast':
        expect(index.countAtLeast(op.value)).toBe(model.sorted.filter((e) => e.value >= op.value).length);
        break;
    }
    expect(index.size).toBe(model.sorted.length);
    if (step % checkEvery === checkEvery - 1) checkAll(index, model);
  });
  checkAll(index, model);
  return model;
}

describe('OrderedIndex (blocked arrays + Fenwick tree) vs a sorted array', () => {
  it('random insert/remove/rank/at/range/countAtLeast sequences agree with the model, at any block size', () => {
    fc.assert(
      fc.property(fc.constantFrom(4, 5, 6, 8, 16, undefined), arbOps(arbKeys), (blockSize, ops) => {
        runOps(new OrderedIndex(blockSize === undefined ? {} : { blockSize }), ops, 25);
      }),
      { numRuns: 300 },
    );
  });

  it('the same with keys that tie on value and reachedAt, so that userId alone orders long runs', () => {
    fc.assert(
      fc.property(fc.constantFrom(4, 5, 8), arbOps(arbNarrow), (blockSize, ops) => {
        runOps(new OrderedIndex({ blockSize }), ops, 10);
      }),
      { numRuns: 300 },
    );
  });

  it('grows to hundreds of blocks and shrinks back to one: every split, merge and evening-out keeps the order', () => {
    fc.assert(
      fc.property(
        fc.constantFrom(4, 5, 8),
        fc.array(fc.oneof(arbKeys, arbNarrow), { minLength: 200, maxLength: 800 }),
        fc.array(fc.nat(), { minLength: 50, maxLength: 300 }),
        (blockSize, inserts, removals) => {
          const index = new OrderedIndex({ blockSize });
          const ops: Op[] = [
            ...inserts.map((e) => ({ kind: 'upsert' as const, ...e })),
            ...removals.map((pick) => ({ kind: 'remove' as const, pick })),
            ...removals.map((pick) => ({ kind: 'remove' as const, pick })),
          ];
          const model = runOps(index, ops, 100);
          // Empty it completely, then use it again.
          // From the last place up: each removal reports the last rank.
          for (let r = model.sorted.length; r >= 1; r--) expect(index.remove(model.sorted[r - 1] as IndexEntry)).toBe(r);
          expect(index.size).toBe(0);
          expect(index.range(0, 10)).toEqual([]);
          expect(index.countAtLeast(-Infinity)).toBe(0);
          expect(index.at(0)).toBeUndefined();
          const e = { userId: 'x', value: 1, reachedAt: '2026-01-01T00:00:00.000Z' };
          index.insert(e);
          expect([index.size, index.rank(e), index.at(0), index.countAtLeast(1), index.countAtLeast(1.5)]).toEqual([1, 1, e, 1, 0]);
        },
      ),
      { numRuns: 60 },
    );
  });

  it('a long deterministic run with many value ties: 20,000 updates over 3,000 users at block size 8', () => {
    const index = new OrderedIndex({ blockSize: 8 });
    const model = new Map<string, IndexEntry>();
    let seed = 12345;
    const rand = (n: number) => {
      seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
      return seed % n;
    };
    for (let i = 0; i < 20_000; i++) {
      const userId = `u${rand(3000)}`;
      const old = model.get(userId);
      if (old) expect(index.remove(old)).toBeGreaterThan(0);
      if (rand(5) === 0) model.delete(userId);
      else {
        const e = { userId, value: rand(30) - 5, reachedAt: new Date(Date.UTC(2026, 0, 1) + rand(50) * 1000).toISOString() };
        index.insert(e);
        model.set(userId, e);
      }
      if (i % 4000 === 3999) {
        const sorted = [...model.values()].sort(compareEntries);
        expect(index.range(0, sorted.length)).toEqual(sorted);
        sorted.forEach((e, j) => expect(index.rank(e)).toBe(j + 1));
        for (let v = -6; v <= 25; v += 3) expect(index.countAtLeast(v)).toBe(sorted.filter((e) => e.value >= v).length);
      }
    }
  });

  it('reachedAt strings order as strings across the supported years (the numeric keys agree with compareEntries)', () => {
    // Pairs of nearby instants, the later one with the smaller userId: were both read as the same number,
    // the userId tie-break would put them in the wrong order.
    const arbPair = fc.tuple(arbReachedAt, fc.constantFrom(1, 999, 1000, 59_999, 3_600_000, 86_399_999, 86_400_000, 86_400_001, 2 * 86_400_000, 31 * 86_400_000));
    fc.assert(
      fc.property(fc.array(arbPair, { maxLength: 100 }), (pairs) => {
        const index = new OrderedIndex({ blockSize: 4 });
        const entries: IndexEntry[] = [];
        pairs.forEach(([reachedAt, gap], i) => {
          const later = new Date(Math.min(Date.parse(reachedAt) + gap, MAX_DATE)).toISOString();
          for (const e of [{ userId: `b${i}`, value: 1, reachedAt }, { userId: `a${i}`, value: 1, reachedAt: later }]) {
            entries.push(e);
            index.insert(e);
          }
        });
        expect(index.range(0, entries.length)).toEqual([...entries].sort(compareEntries));
      }),
      { numRuns: 300 },
    );
  });

  it('every month boundary of every supported year: the last millisecond before it ranks before the first after it', () => {
    // The numeric reading of reachedAt has its only steps at month and year ends (leap days included); a
    // wrong step would read the later instant as earlier, or as equal, and the smaller userId would win.
    const index = new OrderedIndex();
    const entries: IndexEntry[] = [];
    for (let year = 1900; year <= 8999; year++) {
      for (let month = 0; month < 12; month++) {
        const boundary = Date.UTC(year, month, 1);
        for (const [userId, ms] of [['b', boundary - 1], ['a', boundary]] as const) {
          if (ms < MIN_DATE) continue;
          const e = { userId, value: 1, reachedAt: new Date(ms).toISOString() };
          entries.push(e);
          index.insert(e);
        }
      }
    }
    expect(index.range(0, entries.length)).toEqual(entries);
    expect([...entries].sort(compareEntries)).toEqual(entries);
  });

  it('rejects a block size below 4 and a reachedAt that is not an instant', () => {
    expect(() => new OrderedIndex({ blockSize: 3 })).toThrow(RangeError);
    expect(() => new OrderedIndex({ blockSize: 6.5 })).toThrow(RangeError);
    expect(() => new OrderedIndex().insert({ userId: 'a', value: 1, reachedAt: 'yesterday' })).toThrow(RangeError);
  });
});
