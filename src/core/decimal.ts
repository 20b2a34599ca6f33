/**
 * Exact decimal arithmetic for metric totals (docs/rules.md, section 2: 0.1 + 0.2 gives 0.3).
 *
 * A decimal is kept as a canonical string ("0.3", "-12", "1000.25") in user state, so state stays JSON and
 * any store can persist it. Arithmetic scales both operands to a common number of decimal places and works
 * on BigInt, so sums are exact to the places used by the inputs.
 */
import { ValidationError } from '../errors.js';

/** A decimal in canonical string form: optional "-", digits, optional "." and digits without trailing zeros. */
export type DecimalString = string;

interface Scaled {
  m: bigint; // mantissa
  s: number; // scale: value = m / 10^s
}

/** Parses a JS number or a decimal string (also "1e-7" / "1e+21" forms, as `String(number)` can produce). */
function parse(input: number | string): Scaled {
  const text = typeof input === 'number' ? String(input) : typeof input === 'string' ? input : '';
  const match = /^(-)?(\d+)(?:\.(\d+))?(?:e([+-]?\d+))?$/i.exec(text);
  if (!match) throw new ValidationError(`Not a finite decimal: ${text.length > 40 ? `${text.slice(0, 40)}...` : text}`, [{ path: [], message: 'must be a finite decimal' }]);
  const [, sign, intPart, fracPart = '', expPart] = match;
  // Doubles need exponents within +-324; anything beyond would only expand into megabytes of zeros.
  if (expPart && Math.abs(Number(expPart)) > 400) throw new ValidationError(`Decimal exponent out of range: ${expPart}`, [{ path: [], message: 'exponent out of range' }]);
  let digits = (intPart as string) + fracPart;
  let scale = fracPart.length - (expPart ? Number(expPart) : 0);
  if (scale < 0) {
    digits += '0'.repeat(-scale);
    scale = 0;
  }
  const m = BigInt(digits);
  return { m: sign ? -m : m, s: scale };
}

function align(a: Scaled, b: Scaled): [bigint, bigint, number] {
  if (a.s === b.s) return [a.m, b.m, a.s];
  if (a.s > b.s) return [a.m, b.m * 10n ** BigInt(a.s - b.s), a.s];
  return [a.m * 10n ** BigInt(b.s - a.s), b.m, b.s];
}

function format(m: bigint, s: number): DecimalString {
  if (m === 0n) return '0';
  const negative = m < 0n;
  let digits = (negative ? -m : m).toString();
  if (s > 0) {
    if (digits.length <= s) digits = '0'.repeat(s - digits.length + 1) + digits;
    let int = digits.slice(0, digits.length - s);
    let frac = digits.slice(digits.length - s).replace(/0+$/, '');
    if (int === '') int = '0';
    digits = frac ? `${int}.${frac}` : int;
  }
  return negative ? `-${digits}` : digits;
}

// Fast path: a plain decimal with at most 15 significant digits converts to a double and back without loss,
// and integer arithmetic on doubles is exact below 2^53, so such sums need no BigInt. Anything larger, or in
// exponent form, takes the exact BigInt path.
const PLAIN = /^-?\d{1,15}(?:\.\d{1,15})?$/;
const POW10 = Array.from({ length: 31 }, (_, i) => 10 ** i);

interface Small {
  int: number;
  scale: number;
}

function small(input: number | string): Small | null {
  const text = typeof input === 'number' ? String(input) : input;
  if (typeof text !== 'string') return null;
  if (text.length > 17 || !PLAIN.test(text)) return null;
  const dot = text.indexOf('.');
  const scale = dot < 0 ? 0 : text.length - dot - 1;
  const digits = text.length - (dot < 0 ? 0 : 1) - (text[0] === '-' ? 1 : 0);
  if (digits > 15) return null;
  return { int: Number(dot < 0 ? text : text.slice(0, dot) + text.slice(dot + 1)), scale };
}

function smallSum(a: Small, b: Small, sign: 1 | -1): DecimalString | null {
  const scale = Math.max(a.scale, b.scale);
  const sum = a.int * (POW10[scale - a.scale] as number) + sign * b.int * (POW10[scale - b.scale] as number);
  if (Math.abs(sum) >= 1e15) return null;
  const text = String(sum / (POW10[scale] as number));
  // Below 1e-6 JavaScript prints exponents ("1e-7"); the canonical form has none, so take the exact path.
  return text.includes('e') ? null : text;
}

/** The canonical decimal string of a finite number (`0.1` -> "0.1"). */
export function decimalOf(value: number | string): DecimalString {
  if (typeof value === 'number' && small(value)) return String(value);
  const p = parse(value);
  return format(p.m, p.s);
}

/** Exact `a + b`. */
export function addDecimal(a: DecimalString | number, b: DecimalString | number): DecimalString {
  const sa = small(a);
  const sb = sa && small(b);
  const fast = sa && sb ? smallSum(sa, sb, 1) : null;
  if (fast !== null) return fast;
  const [x, y, s] = align(parse(a), parse(b));
  return format(x + y, s);
}

/** Exact `a - b`. */
export function subtractDecimal(a: DecimalString | number, b: DecimalString | number): DecimalString {
  const sa = small(a);
  const sb = sa && small(b);
  const fast = sa && sb ? smallSum(sa, sb, -1) : null;
  if (fast !== null) return fast;
  const [x, y, s] = align(parse(a), parse(b));
  return format(x - y, s);
}

/** -1, 0 or 1 as `a` is below, equal to or above `b`. */
export function compareDecimal(a: DecimalString | number, b: DecimalString | number): -1 | 0 | 1 {
  if (small(a) && small(b)) {
    // Distinct decimals of at most 15 significant digits are distinct doubles, in the same order.
    const x = Number(a);
    const y = Number(b);
    return x < y ? -1 : x > y ? 1 : 0;
  }
  const [x, y] = align(parse(a), parse(b));
  return x < y ? -1 : x > y ? 1 : 0;
}

/** `floor(a / b)` for `b > 0`, exact (how many whole multiples of a threshold a high-water mark has passed). */
export function floorDivideDecimal(a: DecimalString | number, b: DecimalString | number): number {
  const sa = small(a);
  const sb = sa && small(b);
  if (sa && sb && sb.int > 0) {
    const scale = Math.max(sa.scale, sb.scale);
    return Math.floor((sa.int * (POW10[scale - sa.scale] as number)) / (sb.int * (POW10[scale - sb.scale] as number)));
  }
  const [x, y] = align(parse(a), parse(b));
  if (y <= 0n) throw new ValidationError('floorDivideDecimal: divisor must be positive');
  let q = x / y;
  if (x % y !== 0n && x < 0n) q -= 1n;
  return Number(q);
}

/**
 * The largest magnitude Laurel accepts for an event value, a metric total, a points total or award and a
 * leaderboard value: 2^53 - 1, the largest integer a JS number (and PostgreSQL's double precision) holds
 * exactly together with every integer below it.
 */
export const MAX_EXACT = Number.MAX_SAFE_INTEGER;



// Totals and sums in a user's state are JS numbers: each is the number nearest to the exact decimal sum of
// the decimals its operands denote (a number denotes its shortest decimal, `String(n)`), so 0.1 + 0.2 is 0.3.
// The hot path works on scaled integers: a number with at most 15 significant digits and k decimals is m/10^k
// for an integer |m| < 1e15, found without any string. Anything else takes the exact string/BigInt path.

/** The number of decimals (0..15) of `x` when it denotes a decimal of at most 15 significant digits, else -1. */
function scaleOf(x: number): number {
  if (Number.isInteger(x)) return Math.abs(x) < 1e15 ? 0 : -1;
  for (let k = 1; k <= 15; k++) {
    const p = POW10[k] as number;
    const m = Math.round(x * p);
    if (m / p === x) return Math.abs(m) < 1e15 ? k : -1;
  }
  return -1;
}

/**
 * `x * 10^s` as an exact integer, or NaN when it might not be (`x` has at most `s` decimals). Below 2^51 the
 * product's rounding error stays under 0.5, so rounding gives the integer `x` denotes; above, it may not.
 */
function scaled(x: number, s: number): number {
  const v = Math.round(x * (POW10[s] as number));
  return Math.abs(v) < 2 ** 51 ? v : NaN;
}

/**
 * Exact `a + b` for numbers, rounded once to the nearest number: `0.1 + 0.2` is `0.3`, and
 * `0.30000000000000004 + 0.30000000000000004` is `0.6000000000000001`, as in JavaScript. Integers and short decimals take an integer path; anything else the exact decimal path.
 */
export function addExact(a: number, b: number): number {
  const sa = scaleOf(a);
  const sb = sa < 0 ? -1 : scaleOf(b);
  if (sa === 0 && sb === 0) {
    const r = a + b;
    if (Math.abs(r) < 1e15) return r;
  } else if (sa >= 0 && sb >= 0) {
    const s = sa > sb ? sa : sb;
    const r = scaled(a, s) + scaled(b, s);
    // Both addends are exact integers below 2^51, so their sum is exact; one division rounds it once.
    if (Math.abs(r) < 2 ** 52) return r / (POW10[s] as number);
  }
  return Number(addDecimal(a, b));
}

/** Exact `floor(a / b)` for numbers, `b > 0` (how many whole thresholds a high-water mark has passed). */
export function floorDivideExact(a: number, b: number): number {
  const sa = scaleOf(a);
  const sb = sa < 0 ? -1 : scaleOf(b);
  if (sa >= 0 && sb >= 0 && b > 0) {
    const s = sa > sb ? sa : sb;
    const x = scaled(a, s);
    const y = scaled(b, s);
    if (Math.abs(x) < 1e15 && y > 0) return Math.floor(x / y);
  }
  return floorDivideDecimal(a, b);
}

/**
 * The exact product of `factors` (each as written: 1.15 is 115/100, not the nearest double), rounded to a whole
 * number: `down` (towards -infinity), `up` (towards +infinity) or `nearest` (halves up, as `Math.round`). A
 * boosted award rounds the exact product of its points and multipliers: 50 x 1.15 is 57.5, which rounds to 58
 * (the doubles' product is 57.49999999999999).
 */
export function multiplyRounded(factors: readonly number[], rounding: 'up' | 'down' | 'nearest'): number {
  // Whole factors (a multiplier of 2 or 3): their product is whole and, below 2^53, exact as a double.
  let product = 1;
  for (const f of factors) product = Number.isInteger(f) ? product * f : NaN;
  if (Number.isSafeInteger(product)) return product;
  let m = 1n;
  let s = 0;
  for (const f of factors) {
    const p = parse(f);
    m *= p.m;
    s += p.s;
  }
  if (s === 0) return Number(m);
  const d = 10n ** BigInt(s);
  // BigInt division truncates towards zero; the remainder has the dividend's sign.
  let q = m / d;
  const r = m % d;
  if (r > 0n && (rounding === 'up' || (rounding === 'nearest' && 2n * r >= d))) q += 1n;
  if (r < 0n && (rounding === 'down' || (rounding === 'nearest' && -2n * r > d))) q -= 1n;
  return Number(q);
}
