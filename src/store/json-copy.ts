/**
 * Deep-frozen copies of JSON data, as the memory store keeps what a commit hands it (the caller's objects
 * stay the caller's).
 */

const deepFreeze = <T>(value: T): T => {
  if (value && typeof value === 'object' && !Object.isFrozen(value)) {
    for (const v of Object.values(value)) deepFreeze(v);
    Object.freeze(value);
  }
  return value;
};

/** {@link plainCopy}'s answer for a value it leaves to JSON (a `toJSON`, a class instance, a cycle). */
const UNUSUAL: unique symbol = Symbol('unusual');

/**
 * A deep-frozen copy of `value` equal to `JSON.parse(JSON.stringify(value))`: what a commit hands the store
 * is the caller's, so the store keeps its own. Plain objects, arrays and JSON scalars (row data is nothing
 * else in practice) are copied directly, several times faster than the JSON round trip and without the
 * intermediate string; anything else goes through JSON, so the result is always JSON's.
 */
export function frozenJsonCopy(value: unknown): unknown {
  const copy = plainCopy(value, 0);
  return copy === UNUSUAL ? deepFreeze(JSON.parse(JSON.stringify(value))) : copy;
}

function plainCopy(v: unknown, depth: number): unknown {
  switch (typeof v) {
    case 'string':
    case 'boolean':
      return v;
    case 'number':
      // JSON writes -0 as 0 and refuses nothing else finite; NaN and the infinities become null there.
      return Number.isFinite(v) ? (v === 0 ? 0 : v) : UNUSUAL;
    case 'object':
      break;
    default:
      return UNUSUAL;
  }
  if (v === null) return null;
  if (depth > 32) return UNUSUAL;
  if (Array.isArray(v)) {
    if (Object.getPrototypeOf(v) !== Array.prototype) return UNUSUAL;
    const out: unknown[] = new Array(v.length);
    for (let i = 0; i < v.length; i++) {
      const c = plainCopy(v[i], depth + 1);
      if (c === UNUSUAL) return UNUSUAL;
      out[i] = c;
    }
    return Object.freeze(out);
  }
  const proto = Object.getPrototypeOf(v);
  if ((proto !== Object.prototype && proto !== null) || typeof (v as { toJSON?: unknown }).toJSON === 'function') return UNUSUAL;
  const out: Record<string, unknown> = {};
  for (const k of Object.keys(v)) {
    const item = (v as Record<string, unknown>)[k];
    // JSON leaves out properties it cannot write.
    if (item === undefined || typeof item === 'function' || typeof item === 'symbol') continue;
    if (k === '__proto__') return UNUSUAL;
    const c = plainCopy(item, depth + 1);
    if (c === UNUSUAL) return UNUSUAL;
    out[k] = c;
  }
  return Object.freeze(out);
}
