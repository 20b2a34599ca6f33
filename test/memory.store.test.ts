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
