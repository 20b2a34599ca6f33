/**
 * The check every store makes of a commit's or an erasure's `counters` before its first change, so that a
 * counter increment one store could not keep is refused alike by all of them: the memory store used to add
 * anything (a fraction, NaN, a string), while PostgreSQL's `bigint` column failed the whole statement with a
 * server error.
 */
import { ValidationError } from '../errors.js';
import { isStorableText } from '../core/text.js';

/** The longest counter name a store takes (the engine's are `users` and `achievement:<key>`). */
export const MAX_COUNTER_NAME = 1000;

/**
 * Checks `counters`: a plain object whose every own name is well-formed text of at most
 * {@link MAX_COUNTER_NAME} characters without NUL, and whose every increment is a safe integer. Throws
 * `ValidationError` naming the first that is not.
 */
export function checkCounters(counters: unknown, path: readonly (string | number)[] = ['counters']): void {
  if (typeof counters !== 'object' || counters === null || Array.isArray(counters)) {
    throw new ValidationError(`${path.join('.')} must be an object of integer increments`, [{ path: [...path], message: 'must be an object' }]);
  }
  // for...in with an own check: no array of names on the commit path (most commits count nothing).
  for (const name in counters) {
    if (!Object.hasOwn(counters, name)) continue;
    if (name.length > MAX_COUNTER_NAME || !isStorableText(name)) {
      throw new ValidationError(`${path.join('.')}: counter name ${JSON.stringify(name.slice(0, 40))} must be well-formed text of at most ${MAX_COUNTER_NAME} characters without NUL`, [{ path: [...path, name], message: 'invalid counter name' }]);
    }
    const value: unknown = (counters as Record<string, unknown>)[name];
    if (!Number.isSafeInteger(value)) {
      throw new ValidationError(`${path.join('.')}.${name} must be an integer increment between -(2^53 - 1) and 2^53 - 1 (got ${typeof value === 'number' ? String(value) : typeof value})`, [{ path: [...path, name], message: 'must be a safe integer' }]);
    }
  }
}
