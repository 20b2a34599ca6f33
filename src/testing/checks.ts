/**
 * What every check of the store conformance suite (conformance.ts, tenancy.ts) asserts with, and the sample
 * state it stores.
 */
import type { UserState } from '../core/types.js';

/** A check's failure (anything else a check throws is the store's own error). */
export class CheckFailed extends Error {}

/** Fails the check with `message` unless `condition` holds. */
export function assert(condition: unknown, message: string): asserts condition {
  if (!condition) throw new CheckFailed(message);
}

/** Fails the check unless `actual` and `expected` are the same JSON. */
export function equal(actual: unknown, expected: unknown, message: string): void {
  const a = JSON.stringify(actual);
  const e = JSON.stringify(expected);
  if (a !== e) throw new CheckFailed(`${message}\n  expected: ${e}\n  actual:   ${a}`);
}

/** A minimal valid user state for store tests (`total` as given: states before 0.2 held decimal strings). */
export function sampleState(userId: string, total: number | string = 0): UserState {
  return {
    user: { id: userId, email: null, name: `User ${userId}`, tz: null, attributes: {}, created: '2026-01-01T00:00:00.000Z', updated: '2026-01-01T00:00:00.000Z' },
    metrics: { lessons: total as number },
    achievementProgress: {},
    achievements: {},
    streak: null,
    points: {},
    leaderboards: {},
    rules: '',
  };
}
