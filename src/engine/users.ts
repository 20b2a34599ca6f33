/**
 * Operations on users (issue 13; docs/rules.md, "Operations on users"): erasure (`deleteUser`), reset
 * (`resetUser`) and a user's recent events (`getUserEvents`). The engine runs them under the user's lock;
 * the store's `eraseUser` applies an erasure or a reset atomically, and `readEvents` reads a page of events.
 */
import type { LaurelConfig } from '../config/define.js';
import { applyIdentify } from '../core/apply.js';
import { applyOperation, validateOperation } from '../core/operations.js';
import type { CoreContext, Effects, MetricRowData, PreferencesPatch, UserInput, UserRecord, UserState } from '../core/types.js';
import { validateUserId } from '../core/users.js';
import { ConflictError, isLaurelError, NotFoundError, StorageUnavailableError, ValidationError } from '../errors.js';
import type { Erasure, ErasureResult, Store, VersionedState } from '../store/types.js';
import type { Noted } from '../core/changes.js';
import { joinEffects } from './evolution.js';

/** What the operations need from the engine. */
export interface UserOperationsContext {
  config: LaurelConfig;
  /** The engine's guarded store. */
  store: Store;
  context: () => CoreContext;
  /** Runs `attempt` under the user's lock on the user's state, retrying on conflicts. */
  withUser: <R>(userId: string, attempt: (loaded: VersionedState | null) => Promise<R>) => Promise<R>;
  /** A commit's state with its change events and due instant (the engine's `noted`). */
  noted: (before: UserState | null, after: UserState, effects: Effects, ctx: CoreContext) => Noted;
  /** The engine's `onDegraded`. */
  degraded: (error: unknown) => void;
  /** The engine's view of a user record (as `getUser` answers it). */
  view: (state: UserState) => UserRecord & { control: boolean };
}

/** What `deleteUser` answers. */
export interface DeleteUserResult {
  userId: string;
  deleted: true;
  /**
   * Present only when the store's erasure is durable but an external rank index (`withRankIndex`, e.g.
   * Redis) could not forget the user: the indexes where it still shows the user's old entries. Once it is
   * back, call `rankIndex.erase(userId, rankIndexPending)` (or `rebuildRankIndex` on each).
   */
  rankIndexPending?: string[];
}

/** What `resetUser` answers. */
export interface ResetUserResult {
  userId: string;
  reset: true;
  /** The user's record after the reset, as `getUser` answers it: the same fields, `created` and `updated` at the reset. */
  user: UserRecord & { control: boolean };
  /** As in {@link DeleteUserResult}. */
  rankIndexPending?: string[];
}

/** One recorded event of a user, as `getUserEvents` lists it. */
export interface UserEvent {
  /** The event's id (the `eventId` its recording answered). */
  id: string;
  metricKey: string;
  /** The value sent. */
  value: number;
  /** The metric's total right after the event. */
  total: number;
  /** When it was recorded (ISO instant). */
  at: string;
  /** The event attributes sent with it (empty when none). */
  attributes: Record<string, string>;
  /** The idempotency key it was recorded with, or null. */
  idempotencyKey: string | null;
}

/** Options of `getUserEvents`. */
export interface UserEventsOptions<M extends string = string> {
  /** Only this metric's events (default: every metric's). */
  metricKey?: M;
  /** The `next` cursor of the previous page (default: start at the newest event). */
  before?: string;
  /** Events per page, 1..100 (default 20). */
  limit?: number;
}

/** A page of `getUserEvents`. */
export interface UserEventsPage {
  /** Newest first. */
  events: UserEvent[];
  /** The cursor for the next (older) page as `before`; null after the last event. */
  next: string | null;
}

/** The counter increments that take a user's state out of the counts: each achievement it held. */
function achievementsOut(state: UserState, counters: Record<string, number>): Record<string, number> {
  for (const key of Object.keys(state.achievements)) counters[`achievement:${key}`] = (counters[`achievement:${key}`] ?? 0) - 1;
  return counters;
}

/** Reports an erasure whose rank-index half failed, and the indexes it left behind for the answer. */
function pending(ops: UserOperationsContext, operation: string, result: ErasureResult): { rankIndexPending?: string[] } {
  if (!result.ranksUnavailable) return {};
  ops.degraded(new StorageUnavailableError(`${operation}: the store's erasure is durable, but the rank index could not forget the user in ${result.indexes.length} index(es)`));
  return { rankIndexPending: [...result.indexes] };
}

/**
 * Erases a user: record, state, ledger, idempotency records, index entries and rank history, with the
 * counters (users, achievement completions) adjusted, in one store transaction under the user's lock.
 */
export async function deleteUser(ops: UserOperationsContext, userId: string): Promise<DeleteUserResult> {
  validateUserId(userId, ['userId']);
  return ops.withUser(userId, async (loaded) => {
    if (!loaded) throw new NotFoundError('user', userId);
    // The stored state is what the counters count (a pending reconcile has committed nothing yet).
    const counters = achievementsOut(loaded.state, { users: -1 });
    const result = await ops.store.eraseUser({ userId, expectedVersion: loaded.version, counters });
    if (!result.erased) throw new ConflictError(`User ${JSON.stringify(userId)} changed while it was being erased.`);
    return { userId, deleted: true, ...pending(ops, 'deleteUser', result) };
  });
}

/**
 * Resets a user to a new user as of now, keeping their record's fields (email, name, zone, the attributes
 * the configuration declares) and preferences: what creating the user now with that record would give
 * (`user_creation` awards, initial freezes), its ledger restarting with the `user` row that creates it.
 */
export async function resetUser(ops: UserOperationsContext, userId: string): Promise<ResetUserResult> {
  validateUserId(userId, ['userId']);
  const { config } = ops;
  return ops.withUser(userId, async (loaded) => {
    if (!loaded) throw new NotFoundError('user', userId);
    const ctx = ops.context();
    const before = loaded.state;
    const attributes: Record<string, string> = {};
    for (const k of Object.keys(before.user.attributes)) if (config.index.userAttributes.has(k)) attributes[k] = before.user.attributes[k] as string;
    const input: UserInput = { id: userId, email: before.user.email, name: before.user.name, tz: before.user.tz, attributes };
    const created = applyIdentify(config, null, input, ctx);
    let state = created.state;
    let effects: Effects = created.effects;
    if (before.preferences !== undefined) {
      // Kept with an `updatePreferences` operation row, so that replay of the new ledger keeps them too.
      const op = { op: 'updatePreferences' as const, preferences: before.preferences as PreferencesPatch };
      try {
        validateOperation(config, op);
        const out = applyOperation(config, state, op, ctx);
        state = out.state;
        effects = joinEffects(effects, out.effects);
      } catch (error) {
        // Preferences this configuration no longer allows return to the defaults.
        if (!isLaurelError(error)) throw error;
      }
    }
    const counters = { ...effects.counters };
    // The user is not new to the counts: only their achievements leave them (and any the new state holds join).
    delete counters.users;
    achievementsOut(before, counters);
    // The reset user's changes, as a new user's (their earlier events leave the outbox with the erasure).
    const n = ops.noted(null, state, effects, ctx);
    state = n.state;
    const reset: NonNullable<Erasure['reset']> = { state, ledger: effects.ledger, leaderboard: effects.leaderboard };
    if (n.changes !== undefined) {
      reset.changes = n.changes;
      reset.due = n.due as string | null;
    }
    const result = await ops.store.eraseUser({ userId, expectedVersion: loaded.version, counters, reset });
    if (!result.erased) throw new ConflictError(`User ${JSON.stringify(userId)} changed while it was being reset.`);
    return { userId, reset: true, user: ops.view(state), ...pending(ops, 'resetUser', result) };
  });
}

/** The largest `before` cursor accepted (stores' cursors are far shorter). */
const MAX_CURSOR = 2048;

/**
 * A page of a user's recorded events, newest first (by instant; events of one instant by metric key, then
 * latest first). Reversal rows written by replay are not events and are left out (the events they take back
 * stay listed, as sent). One bounded store read per page (another only when reversal rows were skipped).
 */
export async function getUserEvents(ops: UserOperationsContext, userId: string, options: UserEventsOptions | undefined): Promise<UserEventsPage> {
  const opts = options ?? {};
  if (typeof opts !== 'object') throw new ValidationError('options must be an object { metricKey, before, limit }', [{ path: ['options'], message: 'must be an object' }]);
  const { limit = 20, before, metricKey } = opts;
  if (typeof limit !== 'number' || !Number.isInteger(limit) || limit < 1 || limit > 100) {
    throw new ValidationError(`limit must be an integer from 1 to 100 (got ${String(limit)})`, [{ path: ['limit'], message: 'must be an integer from 1 to 100' }]);
  }
  if (before !== undefined && (typeof before !== 'string' || before.length === 0 || before.length > MAX_CURSOR)) {
    throw new ValidationError('before must be the `next` cursor of a previous page', [{ path: ['before'], message: 'must be a cursor returned by getUserEvents' }]);
  }
  if (metricKey !== undefined && (typeof metricKey !== 'string' || !ops.config.index.metrics.has(metricKey))) throw new NotFoundError('metric', String(metricKey));
  validateUserId(userId, ['userId']);
  if (!(await ops.store.loadUser(userId))) throw new NotFoundError('user', userId);
  const events: UserEvent[] = [];
  let cursor = before;
  let next: string | null = null;
  for (;;) {
    const page = await ops.store.readEvents(userId, { ...(metricKey === undefined ? {} : { metricKey }), ...(cursor === undefined ? {} : { before: cursor }), limit: limit - events.length });
    for (const r of page.rows) {
      const data = r.data as MetricRowData | null;
      if (data?.reverses !== undefined) continue;
      events.push({
        id: r.id,
        metricKey: r.key,
        value: r.delta,
        total: r.total,
        at: r.at,
        attributes: { ...(data?.attributes ?? {}) },
        idempotencyKey: data?.idempotencyKey ?? null,
      });
    }
    next = page.next;
    if (events.length >= limit || next === null || page.rows.length === 0) break;
    cursor = next;
  }
  return { events, next };
}
