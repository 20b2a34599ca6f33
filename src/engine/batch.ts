/**
 * `Engine.recordEvents`: many events, any users, applied per user in input order and committed together
 * (one `commitBatch` on stores that have it: one transaction on PostgreSQL). The pure core runs exactly as
 * for single calls, in input order, so a batch gives the responses that recording the same events one by
 * one would give, with the same clock and ids.
 */
import type { ConfigKeys, LaurelConfig } from '../config/define.js';
import { applyValidatedEvent, replayResponse } from '../core/apply.js';
import { needsReconcile } from '../core/rules.js';
import type { CoreContext, Effects, EventInput, EventResponse, IdempotencyRecord, UserInput, UserState } from '../core/types.js';
import type { Noted } from '../core/changes.js';
import { plainRecord, plainUserInput, unreadableInput, validateEvent } from '../core/users.js';
import { isLaurelError, isLaurelErrorCode, ValidationError, type LaurelError } from '../errors.js';
import type { BatchCommitOutcome, Commit, CommitResult, Store, VersionedState } from '../store/types.js';
import { joinEffects, reconcileFromStore } from './evolution.js';
import { runLocked, type KeyedLock } from './lock.js';

/** One event of {@link Engine.recordEvents}; `M` is the configuration's metric keys. */
export interface BatchEvent<M extends string = string> {
  metricKey: M;
  user: UserInput;
  value: number;
  attributes?: Record<string, string>;
  idempotencyKey?: string;
}

/**
 * The outcome of one event of a batch: its response, or the typed error that event alone failed with. `K`:
 * the configuration's key types, as in {@link EventResponse}.
 */
export type BatchEventResult<K extends ConfigKeys = ConfigKeys> = { ok: true; response: EventResponse<K> } | { ok: false; error: LaurelError };

/** The most events one `recordEvents` call takes. */
export const MAX_BATCH = 10_000;

/** What the batch needs from the engine that runs it. */
export interface BatchDeps {
  config: LaurelConfig;
  store: Store;
  lock: KeyedLock;
  context: () => CoreContext;
  /** Fills ranks and thresholds into a response from its commit's result (as for single calls). */
  fillRanks: (response: EventResponse, state: VersionedState['state'], result: CommitResult) => Promise<void> | undefined;
  /** A commit's state with its change events and due instant (the engine's `noted`). */
  noted: (before: UserState | null, after: UserState, effects: Effects, ctx: CoreContext) => Noted;
  /** The store commit of a call (as for single calls) from the user's version before it, `noted`'s result and its effects. */
  commitOf: (userId: string, loaded: { version: number } | null, n: Noted, effects: Effects) => Commit;
  /**
   * Gives the streak reminders of the batch's commits (in order, each with its clock reading) their streak
   * history; returns the reads that failed, by position.
   */
  streakHistories: (commits: readonly { commit: Commit; now: Date }[]) => Promise<Map<number, LaurelError>>;
  /** Records one event the single-call way (with its own retries): for events whose batch commit conflicted. */
  recordOne: (event: EventInput) => Promise<EventResponse>;
}

interface Pending {
  /** Position in the input. */
  at: number;
  event: EventInput;
  commit: Commit | null;
  response: EventResponse | null;
  /** The clock reading the core ran with. */
  now: Date | null;
}

/**
 * The core's event input from an engine call's arguments (tolerating a missing request or options), read
 * once into plain data (see `plainUserInput`) and validated. What reading the caller's objects throws (a
 * getter, a Proxy trap) is a `ValidationError` with it as `cause`, like any other bad input.
 */
export function readEvent(config: LaurelConfig, metricKey: string, request: { user?: UserInput; value?: number; attributes?: Record<string, string> } | null | undefined, opts: { idempotencyKey?: string } | null | undefined): EventInput {
  try {
    const r = typeof request === 'object' && request !== null ? request : {};
    let user: unknown;
    try {
      user = plainUserInput(r.user);
    } catch (error) {
      throw unreadableInput(error, USER_PATH);
    }
    const event = { metricKey, user, value: r.value } as EventInput;
    const attributes = r.attributes;
    if (attributes !== undefined) {
      try {
        event.attributes = plainRecord(attributes) as Record<string, string>;
      } catch (error) {
        throw unreadableInput(error, ATTRIBUTES_PATH);
      }
    }
    const key = typeof opts === 'object' && opts !== null ? opts.idempotencyKey : undefined;
    if (key !== undefined) event.idempotencyKey = key;
    validateEvent(config, event);
    return event;
  } catch (error) {
    throw unreadableInput(error, []);
  }
}

const USER_PATH = ['user'];
const ATTRIBUTES_PATH = ['attributes'];

const scopeOf = (e: EventInput) => `${e.metricKey}\u0000${e.idempotencyKey as string}`;

export async function recordBatch(deps: BatchDeps, input: readonly BatchEvent[]): Promise<BatchEventResult[]> {
  let length: number;
  try {
    if (!Array.isArray(input)) throw new ValidationError('events must be an array of events', [{ path: ['events'], message: 'must be an array' }]);
    length = input.length;
  } catch (error) {
    throw unreadableInput(error, ['events']);
  }
  if (length > MAX_BATCH) throw new ValidationError(`events: at most ${MAX_BATCH} events per call (got ${length})`, [{ path: ['events'], message: `at most ${MAX_BATCH}` }]);
  const { config, store } = deps;
  const results: (BatchEventResult | undefined)[] = new Array(length);
  const byUser = new Map<string, Pending[]>();
  // An index loop, not forEach: a hole in a sparse array is an entry too (read as undefined, and refused).
  for (let at = 0; at < length; at++) {
    let event: EventInput;
    try {
      const raw: unknown = input[at];
      const r = (typeof raw === 'object' && raw !== null ? raw : {}) as Partial<BatchEvent>;
      event = readEvent(config, r.metricKey as string, r, r);
    } catch (error) {
      results[at] = { ok: false, error: unreadableInput(error, []) };
      continue;
    }
    let list = byUser.get(event.user.id);
    if (!list) byUser.set(event.user.id, (list = []));
    list.push({ at, event, commit: null, response: null, now: null });
  }
  if (byUser.size === 0) return results as BatchEventResult[];

  const redo: Pending[][] = [];
  await runLocked(deps.lock, [...byUser.keys()], async () => {
    const userIds = [...byUser.keys()];
    const lookups = [...byUser.values()].flat().filter((p) => p.event.idempotencyKey !== undefined).map((p) => ({ userId: p.event.user.id, metricKey: p.event.metricKey, key: p.event.idempotencyKey as string }));
    let loaded: Awaited<ReturnType<typeof loadAll>>;
    try {
      loaded = await loadAll(store, userIds, lookups);
    } catch (error) {
      if (!isLaurelError(error)) throw error;
      // The batch's load failed (a storage fault): nothing was read or written, and each event not refused
      // already fails with it, as one by one each would have.
      for (const list of byUser.values()) for (const p of list) results[p.at] = { ok: false, error };
      return;
    }
    const stored = new Map<string, IdempotencyRecord>();
    loaded.records.forEach((rec) => rec && stored.set(`${rec.userId}\u0000${rec.metricKey}\u0000${rec.key}`, rec));

    // The core runs in input order (ids and clock readings come in the order single calls would take them).
    const state = new Map(userIds.map((id, i) => [id, loaded.users[i] ?? null]));
    const used = new Map<string, Map<string, string>>();
    const ordered = [...byUser.values()].flat().sort((a, b) => a.at - b.at);
    const commits: Pending[] = [];
    for (const p of ordered) {
      const userId = p.event.user.id;
      const current = state.get(userId) ?? null;
      const keys = used.get(userId) ?? new Map<string, string>();
      used.set(userId, keys);
      try {
        if (p.event.idempotencyKey !== undefined && current) {
          const earlier = keys.get(scopeOf(p.event)) ?? stored.get(`${userId}\u0000${p.event.metricKey}\u0000${p.event.idempotencyKey}`)?.eventId;
          if (earlier !== undefined) {
            results[p.at] = { ok: true, response: replayResponse(config, current.state, p.event.metricKey, earlier, p.event.idempotencyKey, deps.context()) };
            continue;
          }
        }
        const ctx = deps.context();
        // A state counted under earlier rules is first reconciled from the ledger, as by a single call (its
        // first event in the batch: the reconciled state is current for the user's later ones).
        const pre = current && needsReconcile(config, current.state) ? await reconcileFromStore(config, store, current.state, ctx) : null;
        const out = applyValidatedEvent(config, pre ? pre.state : (current?.state ?? null), p.event, ctx);
        const effects = pre ? joinEffects(pre.effects, out.effects) : out.effects;
        const n = deps.noted(current?.state ?? null, out.state, effects, ctx);
        p.commit = deps.commitOf(userId, current, n, effects);
        p.response = out.response;
        p.now = ctx.now;
        if (p.event.idempotencyKey !== undefined) keys.set(scopeOf(p.event), out.response.eventId);
        state.set(userId, { state: n.state, version: p.commit.expectedVersion + 1 });
        commits.push(p);
      } catch (error) {
        if (!isLaurelError(error)) throw error;
        results[p.at] = { ok: false, error };
      }
    }
    if (commits.length === 0) return;

    // A fault fails a user's first unapplied commit and, with it, every later event of that user in the
    // batch: their replays and refusals were decided on a state that now never was.
    const failed = new Map<string, { at: number; error: LaurelError }>();
    const fail = (p: Pending, error: LaurelError) => {
      if (!failed.has(p.event.user.id)) failed.set(p.event.user.id, { at: p.at, error });
    };
    const conflicted = new Set<string>();
    const committed = new Set<Pending>();
    const settle = async (p: Pending, outcome: BatchCommitOutcome | LaurelError) => {
      if (isLaurelErrorCode(outcome, 'CONFLICT')) {
        conflicted.add(p.event.user.id);
      } else if (isLaurelError(outcome)) {
        fail(p, outcome);
      } else {
        committed.add(p);
        await deps.fillRanks(p.response as EventResponse, (p.commit as Commit).state, outcome as CommitResult);
        results[p.at] = { ok: true, response: p.response as EventResponse };
      }
    };
    // A streak reminder's history read that failed fails its commit (and the user's later ones): not sent.
    for (const [i, error] of await deps.streakHistories(commits.map((p) => ({ commit: p.commit as Commit, now: p.now as Date })))) fail(commits[i] as Pending, error);
    const sent = failed.size === 0 ? commits : commits.filter((p) => p.at < (failed.get(p.event.user.id)?.at ?? Infinity));
    try {
      // Without commitBatch each commit's ranks are filled right after it, as one by one.
      const outcomes = sent.length === 0 ? null : await commitAll(store, sent.map((p) => p.commit as Commit), (i, outcome) => settle(sent[i] as Pending, outcome));
      if (outcomes) for (const [i, p] of sent.entries()) await settle(p, outcomes[i] as BatchCommitOutcome);
    } catch (error) {
      if (!isLaurelError(error)) throw error;
      // commitBatch rejected: nothing of the batch was applied.
      for (const p of sent) fail(p, error);
    }
    for (const [userId, { at, error }] of failed) {
      for (const p of byUser.get(userId) as Pending[]) if (p.at >= at) results[p.at] = { ok: false, error };
    }
    // Another writer got to these users first: everything after their last applied commit (replays and
    // refusals included, which were decided on a state that is no longer current) goes again, one by one
    // with the single-call retries, in input order.
    for (const userId of conflicted) {
      const list = byUser.get(userId) as Pending[];
      let last = -1;
      list.forEach((p, i) => {
        if (committed.has(p)) last = i;
      });
      redo.push(list.slice(last + 1));
    }
  });
  // In input order across users (redo holds each user's list), as one by one: ranks, rank history and who
  // enters a full board first depend on the order of every user's events, not just each user's own.
  for (const p of redo.flat().sort((a, b) => a.at - b.at)) {
    try {
      results[p.at] = { ok: true, response: await deps.recordOne(p.event) };
    } catch (error) {
      if (!isLaurelError(error)) throw error;
      results[p.at] = { ok: false, error };
    }
  }
  return results as BatchEventResult[];
}

async function loadAll(store: Store, userIds: string[], lookups: { userId: string; metricKey: string; key: string }[]) {
  if (store.loadForEvents) return store.loadForEvents(userIds, lookups);
  const users = await store.loadUsers(userIds);
  const records = await Promise.all(lookups.map((l) => store.getIdempotencyRecord(l.userId, l.metricKey, l.key)));
  return { users, records };
}

/**
 * `commitBatch` when the store has it (all or nothing on a fault: it rejects), returning the outcomes. Else
 * one commit after another, each outcome handed to `each` as it comes (and nothing returned): a user's later
 * commits are refused after a conflict, and a fault fails its commit and every later one (not attempted),
 * while the earlier ones stay applied and are reported so.
 */
async function commitAll(store: Store, commits: Commit[], each: (i: number, outcome: BatchCommitOutcome | LaurelError) => Promise<void>): Promise<BatchCommitOutcome[] | null> {
  if (store.commitBatch) return store.commitBatch(commits);
  const refused = new Map<string, LaurelError>();
  let fault: LaurelError | null = null;
  for (const [i, c] of commits.entries()) {
    let outcome: BatchCommitOutcome | LaurelError;
    const earlier = fault ?? refused.get(c.userId);
    if (earlier) {
      outcome = earlier;
    } else {
      try {
        outcome = await store.commit(c);
      } catch (error) {
        if (!isLaurelError(error)) throw error;
        if (error.code === 'CONFLICT') refused.set(c.userId, error);
        else fault = error;
        outcome = error;
      }
    }
    await each(i, outcome);
  }
  return null;
}
