import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { addDecimal, compareDecimal, decimalOf } from '../src/index.js';
import { addExact, floorDivideDecimal, floorDivideExact, subtractDecimal } from '../src/core/decimal.js';

// A reference on BigInt only: value = m / 10^s.
const ref = (text: string) => {
  const [int, frac = ''] = text.replace('-', '').split('.');
  const m = BigInt(`${int}${frac}`) * (text.startsWith('-') ? -1n : 1n);
  return { m, s: frac.length };
};
const refAdd = (a: string, b: string) => {
  const x = ref(a);
  const y = ref(b);
  const s = Math.max(x.s, y.s);
  const m = x.m * 10n ** BigInt(s - x.s) + y.m * 10n ** BigInt(s - y.s);
  const neg = m < 0n;
  let digits = (neg ? -m : m).toString().padStart(s + 1, '0');
  if (s > 0) digits = `${digits.slice(0, digits.length - s)}.${digits.slice(digits.length - s)}`.replace(/\.?0+$/, '');
  return digits === '0' ? '0' : `${neg ? '-' : ''}${digits}`;
};

const arbDecimal = fc.oneof(
  fc.tuple(fc.bigInt({ min: -(10n ** 20n), max: 10n ** 20n }), fc.integer({ min: 0, max: 12 })).map(([m, s]) => {
    const neg = m < 0n;
    let digits = (neg ? -m : m).toString().padStart(s + 1, '0');
    if (s > 0) digits = `${digits.slice(0, digits.length - s)}.${digits.slice(digits.length - s)}`;
    return decimalOf(`${neg ? '-' : ''}${digits}`);
  }),
  fc.double({ noNaN: true, noDefaultInfinity: true, min: -1e6, max: 1e6 }).map((d) => decimalOf(d)),
);

describe('exact decimals', () => {
  it('add and subtract are exact (fast path and BigInt path agree with a BigInt reference)', () => {
    fc.assert(
      fc.property(arbDecimal, arbDecimal, (a, b) => {
        const sum = addDecimal(a, b);
        expect(subtractDecimal(sum, b)).toBe(decimalOf(a));
        expect(sum).toBe(refAdd(a, b));
        expect(compareDecimal(a, b) + compareDecimal(b, a)).toBe(0);
        expect(compareDecimal(sum, a)).toBe(compareDecimal(b, '0'));
      }),
      { numRuns: 3000 },
    );
  });

  it('floorDivide counts whole multiples', () => {
    fc.assert(
      fc.property(fc.integer({ min: -100000, max: 100000 }), fc.integer({ min: 1, max: 1000 }), fc.integer({ min: 0, max: 3 }), (a, b, s) => {
        const x = decimalOf(a / 10 ** s);
        const y = decimalOf(b / 10 ** s);
        expect(floorDivideDecimal(x, y)).toBe(Math.floor(a / b));
      }),
      { numRuns: 2000 },
    );
  });

  it('0.1 + 0.2 = 0.3 and huge values stay exact', () => {
    expect(addDecimal('0.1', '0.2')).toBe('0.3');
    expect(addDecimal('99999999999999999999', '1')).toBe('100000000000000000000');
    expect(addDecimal('0.000000000000000001', '1')).toBe('1.000000000000000001');
  });
});

describe('number arithmetic of states (addExact, floorDivideExact)', () => {
  // Short decimals of every scale, around the bounds of the integer path (2^51 scaled, 1e15 digits).
  const arbShort = fc.oneof(
    fc.tuple(fc.integer({ min: -(2 ** 31), max: 2 ** 31 }), fc.integer({ min: 0, max: 2 ** 21 }), fc.integer({ min: 0, max: 15 })).map(([hi, lo, s]) => (hi * 2 ** 21 + lo) / 10 ** s),
    fc.integer({ min: -1e9, max: 1e9 }).map((n) => n / 100),
    fc.double({ noNaN: true, noDefaultInfinity: true, min: -1e16, max: 1e16 }),
    fc.constantFrom(0.1, 0.2, 0.3, 1e-7, 2 ** 53 - 1, -(2 ** 53 - 1), 0.30000000000000004, -2023.33540907069, 36113.2569008947, -36776086697.1935, -0.00036),
  );
  it('addExact(a, b) is the number nearest the exact decimal sum of String(a) and String(b)', () => {
    fc.assert(
      fc.property(arbShort, arbShort, (a, b) => {
        const expected = Number(addDecimal(String(a), String(b)));
        expect(addExact(a, b) + 0).toBe(expected + 0);
      }),
      { numRuns: 30_000 },
    );
    expect(addExact(-2023.33540907069, 36113.2569008947)).toBe(34089.92149182401);
    expect(addExact(-36776086697.1935, -0.00036)).toBe(Number(addDecimal('-36776086697.1935', '-0.00036')));
  });
  it('floorDivideExact(a, b) is floorDivideDecimal on the same decimals', () => {
    fc.assert(
      fc.property(arbShort, arbShort.filter((b) => b > 0), (a, b) => {
        expect(floorDivideExact(a, b) + 0).toBe(floorDivideDecimal(String(a), String(b)) + 0);
      }),
      { numRuns: 50_000 },
    );
  });
});
