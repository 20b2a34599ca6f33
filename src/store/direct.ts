/**
 * A store's synchronous operations, for the engine's direct path (see `DirectStore`): an in-process store
 * that holds everything in memory offers them under {@link DIRECT}, and the engine then records an event
 * whose user no other call of the engine is busy with from start to end without an async step (no lock
 * turn, no awaited store calls).
 */
import type { IdempotencyRecord } from '../core/types.js';
import type { Commit, CommitResult, VersionedState } from './types.js';

/** The property of a store that holds its {@link DirectStore} (absent: the store has none). */
export const DIRECT: unique symbol = Symbol('laurel.direct');

/**
 * Synchronous versions of a store's `loadForEvents` (one user, one lookup) and `commit`: the same results
 * and the same errors (thrown instead of rejected), with nothing done when they throw.
 */
export interface DirectStore {
  load(userId: string): VersionedState | null;
  record(userId: string, metricKey: string, key: string): IdempotencyRecord | null;
  commit(c: Commit): CommitResult;
}

/** The store's {@link DirectStore}, or null. */
export function directOf(store: object): DirectStore | null {
  const direct = (store as { [DIRECT]?: DirectStore | null })[DIRECT];
  return direct ?? null;
}
