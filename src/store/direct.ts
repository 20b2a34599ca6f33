/**
 * A store's synchronous operations, for the engine's direct path (see `DirectStore`): an in-process store
 * that holds everything in memory offers them under {@link DIRECT}, and the engine then records an event
 * whose user no other call of the engine is busy with from start to end without an async step (no lock
 * turn, no awaited store calls).
 */
import type { IdempotencyRecord } from '../core/types.js';
import type { Commit, CommitResult, VersionedState } from './types.js';

/**
 * The property of a store that holds its {@link DirectStore} (absent: the store has none). A registered
 * symbol, so that the package's ESM and CommonJS builds (each with its own copy of this module) find each
 * other's; versioned, so that another version's store is not taken for one.
 */
export const DIRECT: unique symbol = Symbol.for('laurel.direct.v1') as typeof DIRECT;

/**
 * Synchronous versions of a store's `loadForEvents` (one user, one lookup) and `commit`: the same results
 * and the same errors (thrown instead of rejected), with nothing done when they throw.
 */
export interface DirectStore {
  /**
   * Whether a call may use these operations instead of `via`'s methods (`via`: the store object the engine
   * was given, which may be the store itself, a wrapper or a proxy of it): only while `via`'s `commit` and
   * `loadForEvents` are still the store's own and nothing else (a hook) must run around a commit, so that
   * whatever someone put in front of those methods (a spy, a patch, a wrapper) is never skipped.
   */
  usable(via: object): boolean;
  load(userId: string): VersionedState | null;
  record(userId: string, metricKey: string, key: string): IdempotencyRecord | null;
  commit(c: Commit): CommitResult;
}

/** The store's {@link DirectStore}, or null. */
export function directOf(store: object): DirectStore | null {
  const direct = (store as { [DIRECT]?: DirectStore | null })[DIRECT];
  return direct ?? null;
}
