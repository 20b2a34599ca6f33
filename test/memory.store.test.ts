/** Internals of the memory store that its conformance suite cannot see. */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { isoOf } from '../src/store/memory.js';

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
