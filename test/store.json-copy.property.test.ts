import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { frozenJsonCopy } from '../src/store/json-copy.js';

const isDeepFrozen = (v: unknown): boolean => v === null || typeof v !== 'object' || (Object.isFrozen(v) && Object.values(v).every(isDeepFrozen));

describe('frozenJsonCopy (the memory store keeps ledger row data with it)', () => {
  it('equals the JSON round trip for any value JSON can write, deep-frozen, never the input itself', () => {
    fc.assert(
      fc.property(fc.oneof(fc.jsonValue(), fc.anything({ withNullPrototype: true, withObjectString: true, withBoxedValues: true, withSparseArray: true, withDate: true, withMap: true })), (value) => {
        let expected: unknown;
        try {
          expected = JSON.parse(JSON.stringify(value) ?? 'null');
        } catch {
          return; // a BigInt: JSON refuses it, and so does the copy (next test)
        }
        if (JSON.stringify(value) === undefined) return;
        const copy = frozenJsonCopy(value);
        expect(copy).toStrictEqual(expected);
        expect(JSON.stringify(copy)).toBe(JSON.stringify(expected));
        expect(isDeepFrozen(copy)).toBe(true);
        if (value !== null && typeof value === 'object') expect(copy).not.toBe(value);
      }),
      { numRuns: 2000 },
    );
  });

  it('keeps JSON\'s answers for -0, NaN, undefined, toJSON, class instances, __proto__ keys, and its errors', () => {
    expect(Object.is(frozenJsonCopy(-0), 0)).toBe(true);
    expect(frozenJsonCopy({ a: NaN, b: Infinity, c: undefined, d: () => 1, e: [undefined, NaN] })).toStrictEqual({ a: null, b: null, e: [null, null] });
    expect(frozenJsonCopy({ at: new Date(0) })).toStrictEqual({ at: '1970-01-01T00:00:00.000Z' });
    expect(frozenJsonCopy({ x: { toJSON: () => 'y' } })).toStrictEqual({ x: 'y' });
    const proto = JSON.parse('{"__proto__": {"a": 1}}');
    const copy = frozenJsonCopy(proto) as Record<string, unknown>;
    expect(Object.getPrototypeOf(copy)).toBe(Object.prototype);
    expect(Object.keys(copy)).toEqual(['__proto__']);
    expect(() => frozenJsonCopy({ n: 1n })).toThrow(TypeError);
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    expect(() => frozenJsonCopy(cyclic)).toThrow(TypeError);
    const input = { attributes: { device: 'ios' }, list: [1, 'a'] };
    const kept = frozenJsonCopy(input);
    input.attributes.device = 'web';
    input.list.push(2);
    expect(kept).toStrictEqual({ attributes: { device: 'ios' }, list: [1, 'a'] });
  });
});
