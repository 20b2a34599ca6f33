/**
 * The engine's storage boundary: whatever a store throws that is not a Laurel error (a driver's error, a
 * dropped connection, a bug in a custom adapter) leaves the engine as a `StorageUnavailableError` with the
 * original kept as `cause`, so no raw driver error escapes a public call.
 */
import { storageError, ValidationError } from '../errors.js';
import type { Store } from '../store/types.js';


/** A store whose every method rejects only with Laurel errors. Stores that already do so pass through. */
export function guardStore(store: Store): Store {
  if (typeof store !== 'object' || store === null) throw new ValidationError('store must be an object implementing Store', [{ path: ['store'], message: 'must implement Store' }]);
  const call = <A extends unknown[], R>(method: keyof Store, fn: (...args: A) => Promise<R>) => {
    // Made once per method, not per call (this wraps every store call of the hot path).
    const fail = (error: unknown): never => {
      throw storageError(`store.${method}`, error);
    };
    return (...args: A): Promise<R> => {
      try {
        // Promise.resolve: a custom store may return a non-promise or a foreign thenable.
        return Promise.resolve(fn(...args)).then(undefined, fail);
      } catch (error) {
        return Promise.reject(storageError(`store.${method}`, error));
      }
    };
  };
  const guarded: Store = {
    loadUser: call('loadUser', (id) => store.loadUser(id)),
    loadUsers: call('loadUsers', (ids) => store.loadUsers(ids)),
    getIdempotencyRecord: call('getIdempotencyRecord', (u, m, k) => store.getIdempotencyRecord(u, m, k)),
    commit: call('commit', (c) => store.commit(c)),
    readLedger: call('readLedger', (q) => store.readLedger(q)),
    readUserLedger: call('readUserLedger', (userId, page) => store.readUserLedger(userId, page)),
    listUsers: call('listUsers', (page) => store.listUsers(page)),
    getEntry: call('getEntry', (index, userId) => store.getEntry(index, userId)),
    readRange: call('readRange', (index, offset, limit) => store.readRange(index, offset, limit)),
    countEntries: call('countEntries', (index, range) => store.countEntries(index, range)),
    readRankHistory: call('readRankHistory', (index, userId, limit) => store.readRankHistory(index, userId, limit)),
    getCounters: call('getCounters', (names) => store.getCounters(names)),
    readEvents: call('readEvents', (userId, page) => store.readEvents(userId, page)),
    eraseUser: call('eraseUser', (erasure) => store.eraseUser(erasure)),
    listBoosts: call('listBoosts', (systemKey, page) => store.listBoosts(systemKey, page)),
    getBoost: call('getBoost', (id) => store.getBoost(id)),
  };
  // The optional methods exist on the guard exactly when the store has them, so the engine can ask.
  if (typeof store.loadForEvents === 'function') guarded.loadForEvents = call('loadForEvents', (ids, lookups) => (store.loadForEvents as NonNullable<Store['loadForEvents']>)(ids, lookups));
  if (typeof store.commitBatch === 'function') guarded.commitBatch = call('commitBatch', (commits) => (store.commitBatch as NonNullable<Store['commitBatch']>)(commits));
  // The outbox methods: all of them or none (a store with only some is refused when the engine is created).
  const outbox = ['readChanges', 'claimConsumer', 'advanceConsumer', 'releaseConsumer', 'getMarks', 'appendChanges', 'claimDue', 'pruneChanges', 'recordDeliveries', 'readDeliveries'] as const;
  const present = outbox.filter((m) => typeof store[m] === 'function');
  if (present.length > 0 && present.length < outbox.length) {
    const missing = outbox.filter((m) => typeof store[m] !== 'function');
    throw new ValidationError(`store implements part of OutboxStore: missing ${missing.join(', ')}`, [{ path: ['store'], message: 'must implement all of OutboxStore or none of it' }]);
  }
  for (const m of present) {
    const fn = store[m] as (...args: unknown[]) => Promise<unknown>;
    (guarded as unknown as Record<string, unknown>)[m] = call(m, (...args: unknown[]) => fn.apply(store, args));
  }
  return guarded;
}
