/**
 * `createEngine`: the only async layer. Each write loads the user's state, runs the pure core, and commits
 * the result with an expected version; a conflict reloads and retries (bounded). Reads apply lazy
 * maintenance (missed streak periods, due time grants) to what they load without writing it.
 */
import type { AchievementKeyOf, CompiledLeaderboard, ConfigKeys, ConfigKeysOf, LaurelConfig, LeaderboardKeyOf, MetricKeyOf, PointsKeyOf } from '../config/define.js';
import { ConflictError, isLaurelError, isLaurelErrorCode, NoLevelsError, NotFoundError, storageError, ValidationError, type LaurelError } from '../errors.js';
import { guardStore } from './guard.js';
import { achievementView, achievementWithProgress, listedFor } from '../core/achievements.js';
import { applyAccrue, applyCompletion, applyIdentify, applyValidatedEvent, checkConfig, checkInstant, readContext, replayResponse, viewAfter, viewState, type CompletionResult } from '../core/apply.js';
import { isValidLocalDate, localDateOf } from '../core/calendar.js';
import {
  boardIndex,
  boardIndexOf,
  boardStatus,
  groupOf,
  leaderboardView,
  pointsTotalsIndex,
  runContaining,
  runOf,
  runStatus,
} from '../core/leaderboards.js';
import { awardOfRow, isAdjustment, levelFor, levelView, nextGrants, systemView, triggerView } from '../core/points.js';
import { attributeTotalsIndex, bucketOf, bucketRange, histogramBuckets } from '../core/totals.js';
import { extendedAt, historyWindowStart, streakHistory, type StreakHistoryEntry } from '../core/streaks.js';
import type {
  AchievementView,
  Award,
  CoreContext,
  Effects,
  EventInput,
  EventLeaderboard,
  EventPointsMap,
  EventResponse,
  IdempotencyRecord,
  LevelView,
  LeaderboardView,
  LedgerRow,
  OperationInput,
  OperationRowData,
  PreferencesPatch,
  StreakPause,
  PointsSystemView,
  PointsTriggerView,
  StreakPeriodRow,
  StreakView,
  UserAchievement,
  UserInput,
  UserRecord,
  UserState,
} from '../core/types.js';
import { needsReconcile } from '../core/rules.js';
import { applyOperation, type AdjustPointsResult, operationStreak, preferencesView, validateOperation, type PreferencesView, type UpdatePreferencesResult, type DeletePauseResult, type GrantFreezesResult, type OperationResult, type PauseStreakResult, type RestoreStreakResult } from '../core/operations.js';
import { matchesFilter, own, userZone } from '../core/step.js';
import { checkAttributes, readUserInput, validateText, validateUserId } from '../core/users.js';
import { directOf, type DirectStore } from '../store/direct.js';
import { createMemoryStore } from '../store/memory.js';
import type { Commit, CommitResult, RankChange, Store, VersionedState } from '../store/types.js';
import { readEvent, recordBatch, type BatchEvent, type BatchEventResult } from './batch.js';
import { joinEffects, rankOfValue, reconcileFromStore, runReplay, type ReplayOptions, type ReplayReport } from './evolution.js';
import { KeyedLock } from './lock.js';
import { createObserver, instrument, type EngineHooks } from './observe.js';
import { changesApi } from './changes.js';
import { deriveChanges, type Noted } from '../core/changes.js';
import { getWrapped, type WrappedResponse } from './wrapped.js';
import { createBoost, deleteBoost, getUserBoosts, listBoosts, type BoostsContext, type CreateBoostInput } from './boosts.js';
import type { PointsBoost } from '../core/boosts.js';
import type { CreateBoostResult, DeleteBoostResult } from '../core/operations.js';
import { deleteUser, getUserEvents, resetUser, type DeleteUserResult, type ResetUserResult, type UserEventsOptions, type UserEventsPage, type UserOperationsContext } from './users.js';
import { foldSummary, ledgerTotals, summaryPeriods, validateSummaryOptions, type DatedTotal, type SummaryOptions, type SummaryRow } from './summaries.js';
import { randomUuid } from './uuid.js';

/** Bounded optimistic-concurrency retries. */
/** Options of an operator operation: an idempotency key makes a retry return the first result and change nothing. */
export interface OperationOptions {
  idempotencyKey?: string;
}

/** An operation's result; with an idempotency key, `idempotentReplayed` says whether it was a repeat. */
export type Replayable<R> = R & { idempotentReplayed?: boolean };

/**
 * How often the engine retries a call whose commit lost a race (a `ConflictError` from the store) before
 * failing it with that error.
 */
export interface RetryOptions {
  /** Total attempts per call (default 10). */
  attempts?: number;
  /** Base of the jittered exponential backoff between attempts, in ms (default 2). */
  baseDelayMs?: number;
}

/**
 * Options of {@link createEngine}: the configuration (from {@link defineConfig}), the store, the clock and id
 * sources, retries and observability hooks.
 */
export interface EngineOptions<C extends LaurelConfig> {
  /** The configuration, from `defineConfig`. */
  config: C;
  /** Where state lives (default: a new in-memory store). */
  store?: Store;
  /** The engine's only source of "now" (default `() => new Date()`). */
  clock?: () => Date;
  /** The engine's only source of ids (default: random UUIDs). */
  newId?: () => string;
  /** Retries of a call whose commit lost a race. */
  retry?: RetryOptions;
  /**
   * Called when a storage failure degraded a call instead of failing it: after a durable commit, a rank or
   * threshold read that failed (e.g. Redis down; any failure, as a `LaurelError`: a store's own error as it
   * is, anything else as a `StorageUnavailableError` with it as the cause) leaves that board's
   * `rank`/`previousRank` null. For logs and metrics; the call itself still succeeds.
   */
  onDegraded?: (error: unknown) => void;
  /**
   * Observability hooks (`onCall`, `onCommit`, `onRetry`, `onConflict`, `onError`), one object or a list; see
   * README "Observability" and `laurel/otel`. A hook that throws never changes a call's outcome.
   */
  hooks?: EngineHooks | readonly EngineHooks[];
  /**
   * Change notifications (default true when the store implements `OutboxStore`, as the memory and PostgreSQL
   * stores do): every commit writes its change events to the store's outbox, read with `readChanges`,
   * `subscribe` and the webhook relay. `false` writes none (and keeps no due index for `sweep`).
   */
  changes?: boolean;
}

/**
 * One event for `Engine.recordEvent` and `Engine.simulateEvent`: the user (created on their first event), the
 * metric's value (positive or negative) and the event's attributes.
 */
export interface EventRequest {
  /** The user (created on their first event; email, name, zone and attributes updated). */
  user: UserInput;
  /** The event's value: finite, positive or negative, whole or decimal. */
  value: number;
  /** The event's attributes (declared with `type: 'event'`). */
  attributes?: Record<string, string>;
}

/**
 * Options of `Engine.recordEvent`: an `idempotencyKey` makes a repeated event (same user, metric and key)
 * answer the first one's response instead of counting again.
 */
export interface RecordOptions {
  /** A repeat of (user, metric, key) applies nothing and answers the current state as a replay. */
  idempotencyKey?: string;
}

/**
 * A user as the engine returns it (`identifyUser`, `getUser`, `getProfile`): the stored record and its control flag.
 *
 * @expand
 */
export interface UserView extends UserRecord {
  /** In the experiment's control group (`config.experiment`): no reminders are emitted for them. */
  control: boolean;
}

/** A points system's total and level, as {@link Profile} shows it. */
export type ProfilePoints = PointsSystemView & { total: number; level: LevelView | null };
/** A user's standing in a board's current run, as {@link Profile} shows it (rank null: not ranked). */
export type ProfileStanding = { run: { start: string; end: string | null }; rank: number | null; value: number | null };

/**
 * `getProfile`: what a profile screen shows, from one load of the user's state. `K`: the configuration's key
 * types; with literal keys, `points` has every system's key and `leaderboards` every board's key, optional
 * (an inactive board is left out); with `string` keys both are plain records.
 */
export interface Profile<K extends ConfigKeys = ConfigKeys> {
  user: UserView;
  metrics: MetricResponse[];
  streak: Omit<StreakResponse, 'streakHistory'>;
  /** Every points system, by key. */
  points: string extends K['points'] ? Record<string, ProfilePoints> : { [S in K['points']]: ProfilePoints };
  achievements: UserAchievement<K['achievement']>[];
  /** The user's standing in the current run of every active board. */
  leaderboards: string extends K['leaderboard'] ? Record<string, ProfileStanding> : { [B in K['leaderboard']]?: ProfileStanding };
}

/** What `Engine.getStreak` answers: the streak, its pauses and the history of its latest periods. */
export interface StreakResponse extends StreakView {
  /** Instant of the last extension; null while the streak is not active (length 0). */
  extended: string | null;
  /** Upcoming and running streak pauses, in start order. */
  pauses: StreakPause[];
  streakHistory: StreakHistoryEntry[];
}

/** What `Engine.getPointsSummary` answers: a user's total and level in one points system and their latest awards. */
export interface UserPoints extends PointsSystemView {
  /** The user's total. */
  total: number;
  /** The user's level, or null. */
  level: LevelView | null;
  /** The user's latest awards, newest first (time grants due by now included). */
  awards: Award[];
  /**
   * For a system with time triggers: when each (by trigger key) next grants (ISO), or null when it will not
   * by itself (the balance is at the cap, or the user lacks the trigger's attributes).
   */
  nextGrantAt?: Record<string, string | null>;
}

/**
 * A user's total of one metric and the metric's achievements with their progress, as `Engine.getUserMetric`
 * answers.
 */
export interface MetricResponse {
  /** The metric's id. */
  id: string;
  /** The metric's key. */
  key: string;
  /** The metric's name. */
  name: string;
  /** The user's total of the metric. */
  current: number;
  /** The metric's achievements the user can see, completed ones with `achievedAt`, others with `achievedAt: null` and their progress. */
  achievements: UserAchievement[];
}

export interface AchievementStats extends AchievementView {
  completions: number;
  /** Percent of users who completed it (0..100, two decimals). */
  rarity: number;
}

/** One user's place in a leaderboard's rankings. */
export interface Ranking {
  /** The user. */
  userId: string;
  /** The user's name, or null. */
  userName: string | null;
  /** The user's 1-based rank. */
  rank: number;
  /** The user's value in the run. */
  value: number;
}

/** A board's or run's status; `inactive` for a board switched off in the configuration. */
export type BoardStatus = 'scheduled' | 'active' | 'finished' | 'inactive';

/**
 * What `Engine.getLeaderboard` answers: a page of a board run's rankings, the run's dates and status, and the
 * `threshold` (the value of the last ranked entry when the run is full, else 0).
 */
export interface LeaderboardRankings extends LeaderboardView {
  /** The run's status. */
  status: BoardStatus;
  /** The run's first and last dates (`end` null for a perpetual board). */
  run: { start: string; end: string | null };
  /** The value of the last ranked entry when the run is full, else 0. */
  threshold: number;
  /** The page of rankings, best first. */
  rankings: Ranking[];
}

/**
 * What `Engine.getUserLeaderboard` answers: a user's rank and value in a board run (null when not ranked) and
 * their daily rank history, latest first.
 */
export interface UserLeaderboard extends LeaderboardView {
  /** The run's status (as `getLeaderboard` gives it for the same run). */
  status: BoardStatus;
  /** The user's rank in the run, or null when not ranked. */
  rank: number | null;
  /** The user's value in the run, or null without an entry. */
  value: number | null;
  /** The run's first and last dates. */
  run: { start: string; end: string | null };
  /** One row per day the user's entry changed, latest first: ranks and values before and after that day. */
  history: { date: string; previousRank: number | null; rank: number | null; previousValue: number | null; value: number | null }[];
}

/** Options of `Engine.getLeaderboard`: the page (`offset`, `limit`), the run, and the breakdown group. */
export interface LeaderboardOptions {
  /** 0-based position of the first ranking (default 0; relative to the user's rank with `userId`). */
  offset?: number;
  /** How many rankings (default 10). */
  limit?: number;
  /** Any date inside the wanted run (default: the current run). */
  run?: string;
  /** Makes `offset` relative to this user's rank. */
  userId?: string;
  /**
   * Picks the breakdown group: required on a board with `breakdownAttributes` unless `userId` is given (then
   * the user's group is read); a validation error on a board without them.
   */
  userAttributes?: Record<string, string>;
}

const intIn = (value: unknown, name: string, min: number, max: number, fallback: number): number => {
  if (value === undefined || value === null) return fallback;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    throw new ValidationError(`${name} must be an integer from ${min} to ${max} (got ${String(value)})`, [{ path: [name], message: `must be an integer from ${min} to ${max}` }]);
  }
  return value;
};

/** A copy of the user record of a state (states are immutable values a store may share). */
const userView = (state: UserState): UserView => ({ ...state.user, attributes: { ...state.user.attributes }, control: state.user.control === true });

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Users read per page when a histogram filtered by several attributes checks a group's users. */
const HISTOGRAM_PAGE = 500;

/** What {@link fillRanks} works through: the response's boards and the commit's rank changes per index. */
interface RankFill {
  boards: Record<string, EventLeaderboard>;
  keys: readonly string[];
  attributes: Readonly<Record<string, string>>;
  /** The commit's rank changes and its user: a board's are the first and last of the user's in its index. */
  ranks: readonly RankChange[];
  userId: string;
  /** Whether the rank index is down in this call (set by the commit, or by a failed read). */
  index: { down: boolean };
}

/**
 * Creates an engine over a configuration and a store.
 *
 * @example
 * ```ts
 * const engine = createEngine({ config, store: createMemoryStore(), clock: () => new Date() });
 * const res = await engine.recordEvent('lessons', { user: { id: 'u1', tz: 'Europe/Paris' }, value: 1 });
 * ```
 */
export function createEngine<C extends LaurelConfig>(options: EngineOptions<C>): Engine<C> {
  if (typeof options !== 'object' || options === null) throw new ValidationError('createEngine needs options { config, store, clock, newId }', [{ path: ['options'], message: 'must be an object' }]);
  const store = options.store ?? createMemoryStore();
  const tenants = new Map<string, Engine<C>>();
  const tenant = (id: string): Engine<C> => {
    validateText(id, ['tenant'], 255, { nonEmpty: true });
    let engine = tenants.get(id);
    if (!engine) {
      if (typeof store.tenant !== 'function') throw new ValidationError('This store has no tenants (Store.tenant): the memory and PostgreSQL stores, and withRankIndex over them with the Redis rank index, have them.', [{ path: ['tenant'], message: 'the store does not support tenants' }]);
      tenants.set(id, (engine = withTenancy(buildEngine({ ...options, store: store.tenant(id) }), id, tenant)));
    }
    return engine;
  };
  return withTenancy(buildEngine({ ...options, store }), null, tenant);
}

/** Multi-tenancy, on every engine (see {@link Engine}). */
export type EngineTenancy<C extends LaurelConfig> = {
  /** The tenant this engine serves; null for the default tenant (the engine `createEngine` returned). */
  readonly tenantId: string | null;
  /**
   * The engine of tenant `id` (1..255 characters, no NUL; compared exactly): the same config, clock, ids,
   * retry, hooks and change settings over `store.tenant(id)`, so its users, boards, counters, ledger, boosts
   * and outbox are disjoint from every other tenant's and the default tenant's. Made once per id and kept (the
   * same engine every time). Tenants do not nest: on a tenant's engine it returns the sibling tenant's engine.
   * @throws {ValidationError} an invalid id, or a store without `tenant`.
   */
  tenant(id: string): Engine<C>;
};

function withTenancy<C extends LaurelConfig>(engine: EngineCore<C>, tenantId: string | null, tenant: (id: string) => Engine<C>): Engine<C> {
  return Object.assign(engine, { tenantId, tenant });
}

function buildEngine<C extends LaurelConfig>(options: EngineOptions<C> & { store: Store }) {
  const config = options.config as LaurelConfig;
  checkConfig(config);
  const rawStore = options.store;
  const observer = createObserver(options.hooks);
  const store = observer.observeStore(guardStore(rawStore));
  const clock = options.clock ?? (() => new Date());
  const newId = options.newId ?? randomUuid;
  if (typeof clock !== 'function') throw new ValidationError('clock must be a function returning a Date', [{ path: ['clock'], message: 'must be a function' }]);
  if (typeof newId !== 'function') throw new ValidationError('newId must be a function returning ids', [{ path: ['newId'], message: 'must be a function' }]);
  const attempts = Math.max(1, intIn(options.retry?.attempts, 'retry.attempts', 1, 1000, 10));
  const baseDelay = intIn(options.retry?.baseDelayMs, 'retry.baseDelayMs', 0, 60_000, 2);
  const degraded = (error: unknown) => {
    try {
      observer.degraded(error);
      options.onDegraded?.(error);
    } catch {
      // An observer's failure must not turn a successful call into a failed one.
    }
  };
  const lock = new KeyedLock();
  const changesOn = options.changes !== false && typeof store.readChanges === 'function';
  // The direct path of recordEvent (see recordDirect): an in-process store's synchronous operations, unless
  // a change event of this configuration may need a store read first (a streak reminder carries the
  // streak history, read from the ledger). Each call checks that the store's methods are still its own.
  const direct: DirectStore | null = changesOn && config.notifications.streakReminderHours !== null && config.streak !== null ? null : directOf(rawStore);
  /** The engine's clock, checked: a clock that returns an invalid or out-of-range date fails the call typed. */
  const now = (): Date => {
    const value = clock();
    checkInstant(value, ['clock()']);
    return value;
  };
  // Ids become keys in every store: the engine checks each one, so a bad id source fails the call typed, the
  // same way on every store, instead of being stored by one and refused by another.
  // The default source makes valid ids (flat strings: see engine/uuid.ts); a caller's own is checked. Its
  // check also leaves an id flat (a concatenated text kept whole by a store costs the collector dearly).
  const checkedId =
    newId === randomUuid
      ? randomUuid
      : (): string => {
          const id = newId();
          validateText(id, ['newId()'], 255, { nonEmpty: true });
          return id;
        };
  const context = (): CoreContext => ({ now: now(), newId: checkedId });

  /** Runs `attempt` under the user's lock on what `load` reads (default: the user's state), retrying on conflicts. */
  async function withUser<R, L = VersionedState | null>(userId: string, attempt: (loaded: L) => Promise<R>, load: () => Promise<L> = () => store.loadUser(userId) as Promise<L>): Promise<R> {
    return lock.run(userId, async () => {
      for (let i = 0; ; i++) {
        const loaded = await load();
        try {
          return await attempt(loaded);
        } catch (error) {
          if (!isLaurelErrorCode(error, 'CONFLICT')) throw error;
          observer.conflict(userId, error);
          if (i + 1 >= attempts) throw new ConflictError(`Storage conflict for user ${JSON.stringify(userId)} after ${attempts} attempts.`, { cause: error });
          const delay = baseDelay * 2 ** Math.min(i, 6) * Math.random();
          observer.retry(userId, i + 1, delay, error);
          await sleep(delay);
        }
      }
    });
  }

  /**
   * A commit's state with its change events and due instant (core/changes.ts), when change notifications
   * are on; else the state alone.
   */
  function noted(before: UserState | null, after: UserState, effects: Effects, ctx: CoreContext): Noted {
    if (!changesOn) return { state: after };
    return deriveChanges(config, before, after, effects, ctx);
  }

  /** A streak's history as `getStreak` shows it (7 periods), from the stored rows and a call's own. */
  async function historyOf(userId: string, state: UserState, rows: readonly LedgerRow[], now: Date): Promise<StreakHistoryEntry[]> {
    if (!config.streak) return [];
    const tz = userZone(config, state);
    const today = localDateOf(now, tz);
    const from = historyWindowStart(config, today, 7, tz).toISOString();
    const stored = await store.readLedger({ userId, kind: 'streak', key: 'streak', from, order: 'asc' });
    return streakHistory(config, state, today, 7, [...stored, ...rows.filter((r) => r.kind === 'streak')].map((r) => r.data as StreakPeriodRow));
  }

  function commit(userId: string, loaded: VersionedState | null, state: UserState, effects: Effects, ctx: CoreContext = context()): Promise<CommitResult> {
    const c = commitOf(userId, loaded, noted(loaded?.state ?? null, state, effects, ctx), effects);
    // A streak reminder carries the streak as `getStreak` shows it: its history is read for it (the only
    // commit that waits for a read; the others go to the store at once, without an async step).
    if (remindsOfStreak(c)) return streakHistories(c, effects.ledger, ctx.now).then(() => store.commit(c));
    return store.commit(c);
  }

  /** Whether a commit's change events hold a streak reminder (whose streak history must be read). */
  function remindsOfStreak(c: Commit): boolean {
    if (c.changes !== undefined) for (const ch of c.changes) if (ch.type === 'emails.streak_reminder_due') return true;
    return false;
  }

  /** The store commit of a call: its state with change events and due instant (`n`), and its effects. */
  function commitOf(userId: string, loaded: { version: number } | null, n: Noted, effects: Effects): Commit {
    const c: Commit = {
      userId,
      expectedVersion: loaded?.version ?? 0,
      state: n.state,
      ledger: effects.ledger,
      leaderboard: effects.leaderboard,
      counters: effects.counters,
      idempotency: effects.idempotency,
    };
    if (n.changes !== undefined) {
      c.changes = n.changes;
      c.due = n.due as string | null;
    }
    return c;
  }

  /**
   * Gives each streak reminder of a commit the streak history: the stored rows, then `rows` (the rows not
   * stored yet that one-by-one calls would have stored by then: the call's own, a batch's earlier ones too).
   */
  async function streakHistories(c: Commit, rows: readonly LedgerRow[], now: Date): Promise<void> {
    for (const ch of c.changes ?? []) {
      if (ch.type !== 'emails.streak_reminder_due') continue;
      ch.payload = { ...ch.payload, streak: { ...(ch.payload.streak as object), streakHistory: await historyOf(c.userId, c.state, rows, now) } };
    }
  }

  /**
   * {@link streakHistories} for a batch's commits in order (`now`: each one's clock reading): a commit's rows
   * not stored yet are the ledger rows of its user's commits in the batch up to its own. Returns the reads
   * that failed, by position: such a commit fails alone (its user's later ones with it), as its single call
   * would have failed, and its user's later commits need no read.
   */
  async function batchStreakHistories(commits: readonly { commit: Commit; now: Date }[]): Promise<Map<number, LaurelError>> {
    const failed = new Map<number, LaurelError>();
    if (!commits.some((p) => remindsOfStreak(p.commit))) return failed;
    const pending = new Map<string, LedgerRow[]>();
    const failedUsers = new Set<string>();
    for (const [i, { commit: c, now }] of commits.entries()) {
      if (failedUsers.has(c.userId)) continue;
      let rows = pending.get(c.userId);
      if (!rows) pending.set(c.userId, (rows = []));
      for (const row of c.ledger) rows.push(row);
      if (!remindsOfStreak(c)) continue;
      try {
        await streakHistories(c, rows, now);
      } catch (error) {
        if (!isLaurelError(error)) throw error;
        failed.set(i, error);
        failedUsers.add(c.userId);
      }
    }
    return failed;
  }

  const board = (key: string): CompiledLeaderboard => {
    const b = config.index.leaderboards.get(key);
    if (!b) throw new NotFoundError('leaderboard', key);
    return b;
  };

  /**
   * The value of the last ranked entry when a board (run, group) is full, else 0: one read at position
   * maxParticipants - 1, never a count of the whole board.
   */
  async function thresholdOf(b: CompiledLeaderboard, index: string): Promise<number> {
    const [last] = await store.readRange(index, b.maxParticipants - 1, 1);
    return last?.value ?? 0;
  }

  const capRank = (b: CompiledLeaderboard, rank: number | null | undefined) => (rank != null && rank <= b.maxParticipants ? rank : null);

  /**
   * Fills ranks and thresholds into a response's leaderboards from the commit's rank changes. The commit is
   * durable by now, so a failing threshold read (the rank index is down) must not fail the call: that
   * board's ranks read null instead, as the rank index would have answered had it been reachable.
   */
  function fillRanks(boards: Record<string, EventLeaderboard>, state: UserState, result: CommitResult): Promise<void> | undefined {
    const keys = Object.keys(boards);
    if (keys.length === 0) return undefined;
    return fillFrom({ boards, keys, attributes: state.user.attributes, ranks: result.ranks, userId: state.user.id, index: { down: result.ranksUnavailable === true } }, 0);
  }

  /**
   * {@link fillRanks} from the board at position `i` on: synchronously while the commit reported each
   * board's threshold (the usual case: no async step), from the first board whose threshold must be read
   * on, one read after another (each read learns whether the rank index is down for the boards after it).
   */
  function fillFrom(f: RankFill, i: number): Promise<void> | undefined {
    for (; i < f.keys.length; i++) {
      const key = f.keys[i] as string;
      const entry = f.boards[key] as EventLeaderboard;
      const b = board(key);
      const name = boardIndexOf(b, entry.start, groupOf(b, f.attributes));
      // The first and last rank change of the user in the board's index: a scan of the commit's few changes
      // (cheaper than grouping them in a map first).
      let first: RankChange | undefined;
      let last: RankChange | undefined;
      for (let j = 0; j < f.ranks.length; j++) {
        const r = f.ranks[j] as RankChange;
        if (r.index !== name || r.userId !== f.userId) continue;
        first ??= r;
        last = r;
      }
      entry.previousRank = capRank(b, first?.previousRank);
      entry.rank = capRank(b, last?.rank);
      // A store that reports the threshold in its commit saves the read after it.
      if (last?.threshold !== undefined && !f.index.down) entry.threshold = last.threshold;
      else return readThenFill(f, i, entry, b, name);
    }
    return undefined;
  }

  async function readThenFill(f: RankFill, i: number, entry: EventLeaderboard, b: CompiledLeaderboard, name: string): Promise<void> {
    await readRanks(
      f.index,
      entry,
      async () => {
        entry.threshold = await thresholdOf(b, name);
      },
      true,
    );
    await fillFrom(f, i + 1);
  }

  /**
   * Runs one board's rank reads for an event response. Once the rank index has failed in this call
   * (`index.down`, also set when the commit found it down), that board and every later one read null ranks
   * without asking again, so a call waits for at most one rank-index timeout however many boards it touched.
   * Before a commit (simulateEvent) only a STORAGE_UNAVAILABLE failure degrades and anything else fails the
   * call. After a durable commit (`afterCommit`) every failure degrades: the call must neither fail (its
   * event is recorded) nor be retried (a CONFLICT from a read would have the retry loop record it again).
   */
  async function readRanks(index: { down: boolean }, entry: EventLeaderboard, read: () => Promise<void>, afterCommit = false): Promise<void> {
    if (!index.down) {
      try {
        await read();
      } catch (error) {
        if (!afterCommit && !isLaurelErrorCode(error, 'STORAGE_UNAVAILABLE')) throw error;
        degraded(storageError('store.readRange', error));
        index.down = true;
      }
    }
    if (index.down) {
      entry.previousRank = null;
      entry.rank = null;
    }
  }

  /**
   * The user's state and, for an event with an idempotency key, its record: one read on stores that have
   * `loadForEvents` (one round trip on PostgreSQL), else two.
   */
  async function loadForEvent(event: EventInput): Promise<{ loaded: VersionedState | null; record: IdempotencyRecord | null }> {
    const lookups = event.idempotencyKey === undefined ? [] : [{ userId: event.user.id, metricKey: event.metricKey, key: event.idempotencyKey }];
    if (store.loadForEvents) {
      const { users, records } = await store.loadForEvents([event.user.id], lookups);
      return { loaded: users[0] ?? null, record: records[0] ?? null };
    }
    const loaded = await store.loadUser(event.user.id);
    const record = loaded && event.idempotencyKey !== undefined ? await store.getIdempotencyRecord(event.user.id, event.metricKey, event.idempotencyKey) : null;
    return { loaded, record };
  }

  /**
   * recordEvent on a store with synchronous operations (the memory store), for a user no other call of this
   * engine holds: load, apply and commit run one after another without an async step, so no other call can
   * come in between and no lock turn is needed. The same steps, results and errors as the locked path; it
   * declines (undefined, before doing anything) a state that must first be reconciled with store reads. A
   * threshold that must be read after the commit is read holding the user's lock, as on the locked path.
   */
  function recordDirect(d: DirectStore, event: EventInput): EventResponse | Promise<EventResponse> | undefined {
    const userId = event.user.id;
    let loaded: VersionedState | null;
    let record: IdempotencyRecord | null;
    try {
      loaded = d.load(userId);
      record = event.idempotencyKey === undefined ? null : d.record(userId, event.metricKey, event.idempotencyKey);
    } catch (error) {
      throw storageError('store.loadForEvents', error);
    }
    if (record && loaded) return replayResponse(config, loaded.state, event.metricKey, record.eventId, record.key, context());
    if (loaded && needsReconcile(config, loaded.state)) return undefined;
    const ctx = context();
    const { state, response, effects } = applyValidatedEvent(config, loaded?.state ?? null, event, ctx);
    const c = commitOf(userId, loaded, noted(loaded?.state ?? null, state, effects, ctx), effects);
    let result: CommitResult;
    try {
      result = d.commit(c);
    } catch (error) {
      throw storageError('store.commit', error);
    }
    const reads = fillRanks(response.leaderboards, state, result);
    return reads === undefined ? response : lock.run(userId, () => reads.then(() => response));
  }

  const boostsContext = (): BoostsContext => ({ config, store, now, operate: (userId, op, opts) => operate(userId, op, opts) as never, loadUser: loadOrThrow });

  async function loadOrThrow(userId: string): Promise<VersionedState> {
    validateUserId(userId, ['userId']);
    const loaded = await store.loadUser(userId);
    if (!loaded) throw new NotFoundError('user', userId);
    return loaded;
  }

  function metricKeyOrThrow(key: string) {
    const metric = config.index.metrics.get(key);
    if (!metric) throw new NotFoundError('metric', key);
    return metric;
  }

  function systemOrThrow(key: string) {
    const system = config.index.pointsSystems.get(key);
    if (!system) throw new NotFoundError('pointsSystem', key);
    return system;
  }

  /**
   * The user's state brought in line with the configuration's rules when it was counted under earlier ones
   * (reading the ledger; see core/evolve.ts), with the effects that brings, to commit with the call's own.
   */
  async function current(state: UserState, ctx: CoreContext): Promise<{ state: UserState; effects: Effects | null; awards: Map<string, Award[]> | null }> {
    if (!needsReconcile(config, state)) return { state, effects: null, awards: null };
    const r = await reconcileFromStore(config, store, state, ctx);
    return { state: r.state, effects: r.effects, awards: r.awards };
  }

  /**
   * Runs one operator operation under the user's lock: applied to the user's current state and committed
   * with its `operation` ledger row. With an idempotency key, a repeat returns the first call's result (read
   * back from its ledger row) with the current streak and `idempotentReplayed: true`, and changes nothing.
   */
  async function operate<R extends OperationResult>(userId: string, op: OperationInput, opts: OperationOptions): Promise<Replayable<R>> {
    return (await operateAll(userId, [op], opts))[0] as Replayable<R>;
  }

  /**
   * Runs operator operations on one user as one atomic call: each applied to the state the previous one left,
   * all committed together (one `operation` ledger row each), or none when any fails. With an idempotency
   * key, a repeat returns the first call's answers (read back from their ledger rows) with the current streak
   * and `idempotentReplayed: true`, and changes nothing.
   */
  async function operateAll(userId: string, ops: readonly OperationInput[], opts: OperationOptions): Promise<Replayable<OperationResult>[]> {
    validateUserId(userId, ['userId']);
    if (!Array.isArray(ops) || ops.length === 0 || ops.length > 100) throw new ValidationError('operations must be a list of 1 to 100 operations', [{ path: ['operations'], message: 'must list 1 to 100 operations' }]);
    ops.forEach((op) => validateOperation(config, op));
    // A boost's id is the store's key across users: only replay gives one (core/evolve.ts).
    ops.forEach((op, i) => {
      if (op.op === 'createBoost' && op.id !== undefined) throw new ValidationError('a boost id is chosen by the engine', [{ path: ['operations', i, 'id'], message: 'must not be given' }]);
    });
    const key = (opts ?? {}).idempotencyKey;
    if (key !== undefined) validateText(key, ['idempotencyKey'], 255, { nonEmpty: true });
    const scope = `op/${ops.map((o) => o.op).join('+')}`;
    return withUser(userId, async (loaded) => {
      if (!loaded) throw new NotFoundError('user', userId);
      const ctx = context();
      const record = key === undefined ? null : await store.getIdempotencyRecord(userId, scope, key);
      if (record) {
        const view = await viewOf(loaded.state, ctx);
        const to = new Date(Date.parse(record.at) + 1).toISOString();
        const rows = new Map<string, LedgerRow>();
        for (const k of new Set(ops.map((o) => o.op))) for (const r of await store.readLedger({ userId, kind: 'operation', key: k, from: record.at, to, order: 'asc' })) rows.set(r.id, r);
        const last = rows.get(record.eventId)?.data as OperationRowData | undefined;
        const ids = last?.batch ?? [record.eventId];
        const streak = operationStreak(config, view.state, view.today);
        return ids.map((id) => ({ ...((rows.get(id)?.data as OperationRowData | undefined)?.result ?? {}), streak, idempotentReplayed: true }) as unknown as Replayable<OperationResult>);
      }
      const prior = await current(loaded.state, ctx);
      let state = prior.state;
      let effects = prior.effects;
      const results: OperationResult[] = [];
      const opRows: LedgerRow[] = [];
      for (const op of ops) {
        const out = applyOperation(config, state, op, ctx);
        state = out.state;
        effects = effects ? joinEffects(effects, out.effects) : out.effects;
        opRows.push(out.effects.ledger[out.effects.ledger.length - 1] as LedgerRow);
        results.push(out.result);
      }
      const lastRow = opRows[opRows.length - 1] as LedgerRow;
      // The last row of a batch names every row of it, so that a repeat finds all the answers.
      if (opRows.length > 1) lastRow.data = { ...(lastRow.data as OperationRowData), batch: opRows.map((r) => r.id) };
      if (key !== undefined) (effects as Effects).idempotency = { userId, metricKey: scope, key, eventId: lastRow.id, at: lastRow.at };
      await commit(userId, loaded, state, effects as Effects, ctx);
      return results.map((r) => (key === undefined ? r : { ...r, idempotentReplayed: false }));
    });
  }

  /** `viewState` of the user's state brought in line with the rules (for reads: nothing is committed). */
  async function viewOf(state: UserState, ctx: CoreContext): Promise<ReturnType<typeof viewState>> {
    // A read draws no ids: what the configuration's changes make here is committed by no one.
    const prior = await current(state, readContext(state, ctx, 'view-reconcile'));
    const view = viewAfter(config, prior.state, ctx, state.rules !== config.rules.all);
    if (!prior.effects || !prior.awards) return view;
    const awards = new Map(prior.awards);
    for (const [k, list] of view.awards) awards.set(k, [...(awards.get(k) ?? []), ...list]);
    return { ...view, awards, effects: joinEffects(prior.effects, view.effects) };
  }

  /** What the operations on users (./users.ts) need. */
  const userOperations = (): UserOperationsContext => ({ config, store, context, degraded, noted, view: userView, withUser: (userId, attempt) => withUser(userId, attempt) });

  /** Brings a due user up to now and commits, whatever changed: the commit also sets their next due instant. */
  async function sweepUser(userId: string): Promise<void> {
    await withUser(userId, async (loaded) => {
      if (!loaded) return;
      const ctx = context();
      const prior = await current(loaded.state, ctx);
      const out = applyAccrue(config, prior.state, ctx);
      await commit(userId, loaded, out.state, prior.effects ? joinEffects(prior.effects, out.effects) : out.effects, ctx);
    });
  }

  const changes = changesApi({
    config,
    store,
    now,
    newId: checkedId,
    sweepUser,
    rankings: async (b, run, limit) => (await engine.getLeaderboard(b.key as LeaderboardKeyOf<C>, { run: run.start, limit })).rankings,
  });

  const engine = {
    config: options.config,
    ...changes,
    /** The store given to `createEngine` (the engine itself reads it through a guard that types every failure). */
    store: rawStore,

    /**
     * Records one event for one user and returns what changed for them.
     * @throws {NotFoundError} unknown metric. {@link ValidationError} / {@link InvalidAttributeKeysError} bad input.
     * {@link InsufficientPointsError} a blocking trigger would overdraw. {@link ConflictError} retries spent.
     * Nothing is recorded by a call that throws.
     */
    async recordEvent(metricKey: MetricKeyOf<C>, request: EventRequest, opts: RecordOptions = {}): Promise<EventResponse<ConfigKeysOf<C>>> {
      opts = opts ?? {};
      const event = readEvent(config, metricKey as string, request, opts);
      if (direct !== null && direct.usable(rawStore) && lock.idle(event.user.id) && !observer.active()) {
        const response = recordDirect(direct, event);
        if (response !== undefined) return response as EventResponse<ConfigKeysOf<C>> | Promise<EventResponse<ConfigKeysOf<C>>>;
      }
      return withUser(
        event.user.id,
        async ({ loaded, record }) => {
          if (record && loaded) return replayResponse(config, loaded.state, event.metricKey, record.eventId, record.key, context());
          const ctx = context();
          const pre = loaded && needsReconcile(config, loaded.state) ? await reconcileFromStore(config, store, loaded.state, ctx) : null;
          const { state, response, effects } = applyValidatedEvent(config, pre ? pre.state : (loaded?.state ?? null), event, ctx);
          const result = await commit(event.user.id, loaded, state, pre ? joinEffects(pre.effects, effects) : effects, ctx);
          const reads = fillRanks(response.leaderboards, state, result);
          if (reads !== undefined) await reads;
          return response;
        },
        () => loadForEvent(event),
      ) as Promise<EventResponse<ConfigKeysOf<C>>>;
    },

    /**
     * Records many events (any users, each with its own idempotency key) and returns one result per event,
     * in input order: `{ ok: true, response }`, or `{ ok: false, error }` with the typed error that event
     * alone failed with (a bad event, an overdraw, a storage fault). Each user's events apply in input
     * order, and the responses are those recording them one by one would give; the commits go to the store
     * together (one transaction on PostgreSQL), so bulk imports and queue consumers run at database speed.
     * At most 10,000 events per call.
     * @throws {ValidationError} when `events` is not an array or is longer than that.
     * @example
     * ```ts
     * const results = await engine.recordEvents([
     *   { metricKey: 'lessons', user: { id: 'u1' }, value: 1, idempotencyKey: 'msg-1' },
     *   { metricKey: 'lessons', user: { id: 'u2' }, value: 3, idempotencyKey: 'msg-2' },
     * ]);
     * for (const r of results) if (!r.ok) console.warn(r.error.code);
     * ```
     */
    async recordEvents(events: readonly BatchEvent<MetricKeyOf<C>>[]): Promise<BatchEventResult<ConfigKeysOf<C>>[]> {
      return recordBatch(
        {
          config,
          store,
          lock,
          context,
          fillRanks: (response, state, result) => fillRanks(response.leaderboards, state, result),
          noted,
          commitOf,
          streakHistories: batchStreakHistories,
          recordOne: (event) => engine.recordEvent(event.metricKey as MetricKeyOf<C>, event, event.idempotencyKey === undefined ? {} : { idempotencyKey: event.idempotencyKey }) as Promise<EventResponse>,
        },
        events,
      ) as Promise<BatchEventResult<ConfigKeysOf<C>>[]>;
    },

    /**
     * Returns the response `recordEvent` would return for the same input, without committing anything
     * (ranks are those the user would have if no one else moved). Throws exactly as `recordEvent` would.
     */
    async simulateEvent(metricKey: MetricKeyOf<C>, request: EventRequest, opts: RecordOptions = {}): Promise<EventResponse<ConfigKeysOf<C>>> {
      opts = opts ?? {};
      const event = readEvent(config, metricKey as string, request, opts);
      const { loaded, record } = await loadForEvent(event);
      if (record && loaded) return replayResponse(config, loaded.state, event.metricKey, record.eventId, record.key, context()) as EventResponse<ConfigKeysOf<C>>;
      const ctx = context();
      const prior = loaded ? await current(loaded.state, ctx) : null;
      const { state, response } = applyValidatedEvent(config, prior?.state ?? null, event, ctx);
      // Like recordEvent: ranks the index cannot answer read null, and after one failure no more are read.
      const index = { down: false };
      for (const [key, entry] of Object.entries(response.leaderboards)) {
        const b = board(key);
        const name = boardIndex(key, entry.start, groupOf(b, state.user.attributes));
        await readRanks(index, entry, async () => {
          const before = await store.getEntry(name, state.user.id);
          entry.previousRank = capRank(b, before?.rank);
          if (entry.value > 0) entry.rank = capRank(b, await rankOfValue(store, name, entry.value, before));
          entry.threshold = await thresholdOf(b, name);
        });
      }
      return response as EventResponse<ConfigKeysOf<C>>;
    },

    /** Creates or updates a user (identify / upsert). New users get their `user_creation` awards. */
    async identifyUser(input: UserInput): Promise<UserView> {
      const user = readUserInput(config, () => input);
      return withUser(user.id, async (loaded) => {
        const ctx = context();
        const prior = loaded ? await current(loaded.state, ctx) : null;
        const { state, effects } = applyIdentify(config, prior?.state ?? null, user, ctx);
        await commit(user.id, loaded, state, prior?.effects ? joinEffects(prior.effects, effects) : effects, ctx);
        return userView(state);
      });
    },

    /** Updates an existing user. @throws {NotFoundError} when the user does not exist. */
    async updateUser(userId: string, patch: Omit<UserInput, 'id'>): Promise<UserView> {
      const user = readUserInput(config, () => ({ ...patch, id: userId }));
      return withUser(userId, async (loaded) => {
        if (!loaded) throw new NotFoundError('user', userId);
        const ctx = context();
        const prior = await current(loaded.state, ctx);
        const { state, effects } = applyIdentify(config, prior.state, user, ctx);
        await commit(userId, loaded, state, prior.effects ? joinEffects(prior.effects, effects) : effects, ctx);
        return userView(state);
      });
    },

    /** A user's record. @throws {NotFoundError} for an unknown user. */
    async getUser(userId: string): Promise<UserView> {
      const { state } = await loadOrThrow(userId);
      return userView(state);
    },

    /**
     * Erases a user (right to erasure), irreversibly: their record, state, ledger, idempotency records, entries
     * in every board run and totals index, and rank history, in one store transaction under the user's lock;
     * the counters (users, achievement completions) are adjusted, so rarity, level summaries and histograms
     * leave the user out and the ranks of others close the gap. A later call with the same id creates a new
     * user. See docs/rules.md, "Operations on users".
     * @throws {NotFoundError} for an unknown user.
     */
    async deleteUser(userId: string): Promise<DeleteUserResult> {
      return deleteUser(userOperations(), userId);
    },

    /**
     * Resets a user to a new user as of now: the record's fields and the preferences stay; metrics,
     * achievements, streak, points, board entries, rank history, ledger and idempotency records go, with the
     * same bookkeeping as `deleteUser` (the user still counts). `user_creation` awards and initial freezes
     * are granted again. See docs/rules.md, "Operations on users".
     * @throws {NotFoundError} for an unknown user.
     */
    async resetUser(userId: string): Promise<ResetUserResult> {
      return resetUser(userOperations(), userId);
    },

    /**
     * A page of a user's recorded events, newest first, with value, total, attributes and idempotency key
     * (`limit` 1..100, default 20; `before`: the previous page's `next`). Reversal rows written by replay are
     * left out.
     * @throws {NotFoundError} unknown user or metric. {@link ValidationError} bad `limit` or cursor.
     * @example
     * ```ts
     * const first = await engine.getUserEvents('u1', { metricKey: 'lessons', limit: 50 });
     * const older = first.next ? await engine.getUserEvents('u1', { metricKey: 'lessons', before: first.next }) : null;
     * ```
     */
    async getUserEvents(userId: string, opts: UserEventsOptions<MetricKeyOf<C>> = {}): Promise<UserEventsPage> {
      return getUserEvents(userOperations(), userId, opts);
    },

    /**
     * Completes an `api` achievement. Idempotent: completing it again returns the first completion.
     * @throws {NotFoundError} unknown achievement. {@link ValidationError} not an `api` achievement.
     */
    async completeAchievement(key: AchievementKeyOf<C>, input: { user: UserInput }): Promise<{ completionId: string; achievement: UserAchievement<AchievementKeyOf<C>>; points: EventPointsMap<PointsKeyOf<C>> }> {
      const achievement = config.index.achievements.get(key as string);
      if (!achievement) throw new NotFoundError('achievement', key as string);
      const user = readUserInput(config, () => input?.user);
      return withUser(user.id, async (loaded) => {
        const ctx = context();
        const prior = loaded ? await current(loaded.state, ctx) : null;
        const out = applyCompletion(config, prior?.state ?? null, achievement, user, ctx);
        if (out.changed || prior?.effects) await commit(user.id, loaded, out.state, prior?.effects ? joinEffects(prior.effects, out.effects) : out.effects, ctx);
        const { completionId, achievement: view, points } = out.result as CompletionResult;
        return { completionId, achievement: view as UserAchievement<AchievementKeyOf<C>>, points: points as EventPointsMap<PointsKeyOf<C>> };
      });
    },

    /**
     * Recomputes users' derived state (totals, achievements, streak and history, points and awards, levels,
     * board values) from their ledgers under this engine's configuration, per policy: `forward` (default;
     * keep what was paid, apply changed rules from now on), `retroactive` (recompute everything; awards no
     * longer owed are taken back with reversal rows) or `grandfather` (retroactive gains, nothing taken
     * away). Each user is committed on its own with the usual version check, so replay is safe while traffic
     * continues; a walk over every user resumes after a crash from the last `cursor`. `dryRun` commits
     * nothing and reports the same diffs. See docs/rules.md, "Replay".
     * @example
     * ```ts
     * const preview = await engine.replay({ policy: 'retroactive', dryRun: true, users: ['u1'] });
     * console.log(preview.diffs[0]?.points);
     * ```
     */
    async replay(opts: ReplayOptions = {}): Promise<ReplayReport> {
      return runReplay({ config, store, context, withUser: (userId, attempt) => withUser(userId, attempt), commit }, opts);
    },

    /**
     * Gives a user streak freezes, up to the configured maximum: the excess is reported (`excess`, and the
     * hosted service's warning "Would exceed maximum freeze limit"), not added. See docs/rules.md, "Operations".
     * @example
     * ```ts
     * const { granted, excess, streak } = await engine.grantFreezes('u1', 2, { idempotencyKey: 'order-42' });
     * ```
     */
    async grantFreezes(userId: string, count: number, opts: OperationOptions = {}): Promise<Replayable<GrantFreezesResult>> {
      return operate<GrantFreezesResult>(userId, { op: 'grantFreezes', count }, opts);
    },

    /**
     * Restores the user's lost streak to the length it had when lost, if it was lost inside the hosted
     * service's restore window (daily: 90 days; weekly: since the week containing 1 January; monthly: since
     * the start of last year); a streak begun since continues the restored one. `restored: false` with a
     * `warning` when there is nothing to restore.
     */
    async restoreStreak(userId: string, opts: OperationOptions = {}): Promise<Replayable<RestoreStreakResult>> {
      return operate<RestoreStreakResult>(userId, { op: 'restoreStreak' }, opts);
    },

    /**
     * Pauses the user's streak from `start` to `end` (local dates in the user's zone, both included; `start`
     * not before today): a period overlapping the pause keeps the streak without a freeze and without adding
     * to its length. Returns the pause with its id.
     */
    async pauseStreak(userId: string, pause: { start: string; end: string }, opts: OperationOptions = {}): Promise<Replayable<PauseStreakResult>> {
      if (typeof pause !== 'object' || pause === null) throw new ValidationError('pause must be an object { start, end }', [{ path: ['pause'], message: 'must be an object' }]);
      return operate<PauseStreakResult>(userId, { op: 'pauseStreak', start: pause.start, end: pause.end }, opts);
    },

    /** Deletes one of the user's streak pauses (`deleted: false` with a warning when there is no such pause). */
    async deletePause(userId: string, pauseId: string, opts: OperationOptions = {}): Promise<Replayable<DeletePauseResult>> {
      return operate<DeletePauseResult>(userId, { op: 'deletePause', id: pauseId }, opts);
    },

    /**
     * Changes a user's preferences: notification channels per type, and their own streak rule (`enabled`;
     * `mode` and `metrics` within the configuration's `streak.customization`). Fields left out stay; `null`
     * returns one to the default. Turning the streak off sets it to 0 until it is turned on again.
     */
    async updatePreferences(userId: string, preferences: PreferencesPatch, opts: OperationOptions = {}): Promise<Replayable<UpdatePreferencesResult>> {
      return operate<UpdatePreferencesResult>(userId, { op: 'updatePreferences', preferences }, opts);
    },

    /**
     * An explicit grant (positive `amount`) or spend (negative) of points: an award with trigger type
     * `adjustment` and the `reason`, in summaries and boards like any other. A grant stops at `maxPoints`; a
     * spend the balance cannot cover fails whole with `InsufficientPointsError` (422).
     * @example
     * ```ts
     * await engine.adjustPoints('u1', 'coins', -50, { reason: 'bought a streak freeze', idempotencyKey: 'order-42' });
     * ```
     */
    async adjustPoints(userId: string, systemKey: PointsKeyOf<C>, amount: number, opts: OperationOptions & { reason?: string } = {}): Promise<Replayable<AdjustPointsResult>> {
      const reason = (opts ?? {}).reason;
      return operate<AdjustPointsResult>(userId, { op: 'adjustPoints', system: systemKey as string, amount, ...(reason === undefined ? {} : { reason }) }, opts);
    },

    /**
     * Runs several operations on one user atomically (all committed in one call, or none when one fails),
     * e.g. a shop's "spend 50 coins and grant a freeze": `[{ op: 'adjustPoints', system: 'coins', amount: -50 },
     * { op: 'grantFreezes', count: 1, requireRoom: true }]`. Answers one result per operation, in order.
     */
    async runOperations(userId: string, operations: readonly OperationInput[], opts: OperationOptions = {}): Promise<Replayable<OperationResult>[]> {
      return operateAll(userId, operations, opts);
    },

    /**
     * Creates a boost of one user's positive awards in one points system, from `start` to `end` (local dates in
     * the user's zone, both included), applied like a configured boost. Answers the boost (with its id). See
     * docs/rules.md, section 12.
     * @example
     * ```ts
     * const { boost } = await engine.createBoost({ pointsSystemKey: 'xp', userId: 'u1', name: 'Welcome back', start: '2025-03-01', end: '2025-03-07', multiplier: 2 });
     * ```
     */
    async createBoost(boost: CreateBoostInput<PointsKeyOf<C>>, opts: OperationOptions = {}): Promise<Replayable<CreateBoostResult>> {
      return createBoost(boostsContext(), boost as CreateBoostInput, opts);
    },

    /** Deletes a runtime boost by id (under its user's lock). @throws {NotFoundError} an unknown or deleted boost. */
    async deleteBoost(id: string, opts: OperationOptions = {}): Promise<Replayable<DeleteBoostResult>> {
      return deleteBoost(boostsContext(), id, opts);
    },

    /**
     * A points system's boosts with their status (`scheduled`, `active`, `finished`): the configured ones, then
     * every user's runtime boosts; finished ones only with `includeFinished`.
     */
    async listBoosts(systemKey: PointsKeyOf<C>, opts: { includeFinished?: boolean } = {}): Promise<PointsBoost[]> {
      return listBoosts(boostsContext(), systemKey as string, opts);
    },

    /** The boosts applying to a user's awards in a system today: active configured ones they are eligible for, then their own active ones. */
    async getUserBoosts(userId: string, systemKey: PointsKeyOf<C>): Promise<PointsBoost[]> {
      return getUserBoosts(boostsContext(), userId, systemKey as string);
    },

    /**
     * A user's year in review in the hosted service's `WrappedResponse` shape: days, weeks and months active,
     * the most active day, week and month, per-metric and per-points-system changes (with percentiles among
     * users for the entire year), achievements completed, the longest streak and best board ranks, from the
     * user's ledger of that year (bounded reads). `year` defaults to the current year in the user's zone.
     * See docs/rules.md, "Wrapped".
     * @throws {ValidationError} a year that is not an integer from 1900 to the current year. {@link NotFoundError} unknown user.
     * @example
     * ```ts
     * const { activity } = await engine.getWrapped('u1', { year: 2025 });
     * console.log(activity.daysActive, activity.mostActiveDay.date, activity.entireYear.longestStreak.length);
     * ```
     */
    async getWrapped(userId: string, opts: { year?: number } = {}): Promise<WrappedResponse> {
      return getWrapped({ config, store, now, view: userView, load: async (id) => viewOf((await loadOrThrow(id)).state, context()) }, userId, opts);
    },

    /**
     * Everything a profile screen shows, from one load of the user's state: the user, every metric with its
     * achievements, the streak (with pauses, without history), each points system's total and level, the
     * achievements listed for the user (incomplete ones with progress), and the user's standing in the
     * current run of every active board (one entry read per board).
     */
    async getProfile(userId: string): Promise<Profile<ConfigKeysOf<C>>> {
      const { state } = await loadOrThrow(userId);
      const ctx = context();
      const view = await viewOf(state, ctx);
      const s = view.state;
      const points = Object.fromEntries(
        config.pointsSystems.map((system) => {
          const total = own(s.points, system.key)?.total ?? 0;
          return [system.key, { ...systemView(system), total, level: levelFor(system, total) }];
        }),
      );
      const achievements = config.achievements
        .filter((a) => listedFor(a, s))
        .map((a) => achievementWithProgress(config, a, s));
      const leaderboards: Profile['leaderboards'] = {};
      await Promise.all(
        config.leaderboards
          .filter((b) => b.status !== 'inactive')
          .map(async (b) => {
            const run = resolveRun(b, undefined, localDateOf(now(), b.timeZone ?? userZone(config, s)));
            const entry = await store.getEntry(boardIndex(b.key, run.start, groupOf(b, s.user.attributes)), userId);
            leaderboards[b.key] = { run, rank: capRank(b, entry?.rank), value: entry?.value ?? null };
          }),
      );
      return {
        user: userView(s),
        metrics: config.metrics.map((m) => metricResponse(m.key, s)),
        streak: operationStreak(config, s, view.today),
        points,
        achievements,
        leaderboards,
      } as Profile<ConfigKeysOf<C>>;
    },

    /** A user's preferences, defaults filled in (every notification on every channel; the configuration's streak rule). */
    async getPreferences(userId: string): Promise<PreferencesView> {
      const { state } = await loadOrThrow(userId);
      return preferencesView(config, state);
    },

    /** Materialises due time grants and streak maintenance for a user; returns the systems that changed. */
    async accrue(userId: string): Promise<{ points: EventPointsMap<PointsKeyOf<C>> }> {
      validateUserId(userId, ['userId']);
      return withUser(userId, async (loaded) => {
        if (!loaded) throw new NotFoundError('user', userId);
        const ctx = context();
        const prior = await current(loaded.state, ctx);
        const out = applyAccrue(config, prior.state, ctx);
        const { state, result } = out;
        const effects = prior.effects ? joinEffects(prior.effects, out.effects) : out.effects;
        // Unlocked achievements (counters) are changes too, even without a ledger row or a board write.
        if (effects.ledger.length > 0 || effects.leaderboard.length > 0 || Object.keys(effects.counters).length > 0 || state.rules !== loaded.state.rules) await commit(userId, loaded, state, effects, ctx);
        return result as { points: EventPointsMap<PointsKeyOf<C>> };
      });
    },

    /** A user's achievements: completed ones, plus incomplete ones with progress when asked. */
    async getUserAchievements(userId: string, opts: { includeIncomplete?: boolean } = {}): Promise<UserAchievement<AchievementKeyOf<C>>[]> {
      opts = opts ?? {};
      const { state } = await loadOrThrow(userId);
      const view = (await viewOf(state, context())).state;
      const out: UserAchievement[] = [];
      for (const a of config.achievements) {
        if (!listedFor(a, view)) continue;
        if (own(view.achievements, a.key) || opts.includeIncomplete) out.push(achievementWithProgress(config, a, view));
      }
      return out as UserAchievement<AchievementKeyOf<C>>[];
    },

    /**
     * Every achievement a user can unlock, with its number of completions and rarity (percent of users):
     * `inactive` and `locked` ones are left out; with `userAttributes`, so is every achievement whose
     * attribute filter a user with those attributes does not meet. `includeUnavailable: true` lists every
     * configured achievement (for stats of a locked one its holders still see).
     */
    async listAchievements(opts: { userAttributes?: Record<string, string>; includeUnavailable?: boolean } = {}): Promise<AchievementStats[]> {
      const attributes = (opts ?? {}).userAttributes;
      if (attributes !== undefined && attributes !== null) checkAttributes(attributes, config.index.userAttributes, ['userAttributes']);
      const listed = config.achievements.filter((a) => (a.status === 'active' || opts?.includeUnavailable === true) && (!attributes || matchesFilter(a.userAttributes, attributes)));
      const counters = await store.getCounters(['users', ...listed.map((a) => `achievement:${a.key}`)]);
      const users = counters.users ?? 0;
      return listed.map((a) => {
        const completions = counters[`achievement:${a.key}`] ?? 0;
        return { ...achievementView(a), completions, rarity: users > 0 ? Math.round((completions / users) * 10_000) / 100 : 0 };
      });
    },

    /** The user's streak as of now, with the last `historyPeriods` periods (default 7, 1..365). */
    async getStreak(userId: string, opts: { historyPeriods?: number } = {}): Promise<StreakResponse> {
      opts = opts ?? {};
      const periods = intIn(opts.historyPeriods, 'historyPeriods', 1, 365, 7);
      const { state } = await loadOrThrow(userId);
      const ctx = context();
      const view = await viewOf(state, ctx);
      const from = historyWindowStart(config, view.today, periods, view.tz).toISOString();
      const stored = config.streak ? await store.readLedger({ userId, kind: 'streak', key: 'streak', from, order: 'asc' }) : [];
      const rows = [...stored, ...view.effects.ledger.filter((r) => r.kind === 'streak')].map((r) => r.data as StreakPeriodRow);
      return {
        ...operationStreak(config, view.state, view.today),
        streakHistory: streakHistory(config, view.state, view.today, periods, rows),
      };
    },

    /** Streak lengths of up to 100 users, longest first (unknown users are left out). */
    async getStreaks(userIds: readonly string[]): Promise<{ userId: string; streakLength: number; extended: string | null }[]> {
      if (!Array.isArray(userIds) || userIds.length > 100) throw new ValidationError('userIds must be a list of at most 100 user ids', [{ path: ['userIds'], message: 'at most 100' }]);
      userIds.forEach((id, i) => validateUserId(id, ['userIds', i]));
      const ctx = context();
      const loaded = await store.loadUsers([...new Set(userIds)]);
      const rows = await Promise.all(
        loaded
          .filter((l): l is VersionedState => l !== null)
          .map(async (l) => {
            const v = (await viewOf(l.state, ctx)).state;
            return { userId: v.user.id, streakLength: v.streak?.length ?? 0, extended: extendedAt(v) };
          }),
      );
      return rows.sort((a, b) => b.streakLength - a.streakLength || (a.userId < b.userId ? -1 : a.userId > b.userId ? 1 : 0));
    },

    /** Every metric's current total for a user, with the metric achievements they completed. */
    async getUserMetrics(userId: string): Promise<MetricResponse[]> {
      const { state } = await loadOrThrow(userId);
      // As the current configuration shows the user (a read applies its changes; docs/rules.md, section 10).
      const view = (await viewOf(state, context())).state;
      return config.metrics.map((m) => metricResponse(m.key, view));
    },

    /** One metric's current total for a user. */
    async getUserMetric(userId: string, metricKey: MetricKeyOf<C>): Promise<MetricResponse> {
      metricKeyOrThrow(metricKey as string);
      const { state } = await loadOrThrow(userId);
      return metricResponse(metricKey as string, (await viewOf(state, context())).state);
    },

    /** Per-period totals and changes of a metric for charts (docs/rules.md, section 6). */
    async getMetricEventSummary(userId: string, metricKey: MetricKeyOf<C>, opts: SummaryOptions): Promise<SummaryRow[]> {
      metricKeyOrThrow(metricKey as string);
      const options = validateSummaryOptions(opts);
      const { state } = await loadOrThrow(userId);
      const tz = state.user.tz ?? config.timeZone;
      return summarise(userId, 'metric', metricKey as string, options, tz, []);
    },

    /** Per-period totals and changes of a points system for charts, including time grants due by now. */
    async getPointsEventSummary(userId: string, systemKey: PointsKeyOf<C>, opts: SummaryOptions): Promise<SummaryRow[]> {
      systemOrThrow(systemKey as string);
      const options = validateSummaryOptions(opts);
      const { state } = await loadOrThrow(userId);
      const view = await viewOf(state, context());
      const pending = (view.awards.get(systemKey as string) ?? []).map((a) => ({ at: a.date, total: a.total, delta: a.awarded, grants: a.grants }));
      return summarise(userId, 'points', systemKey as string, options, view.tz, pending);
    },

    /** A user's total, level and latest awards (newest first; `awards` 1..100, default 10) in a system. */
    async getPointsSummary(userId: string, systemKey: PointsKeyOf<C>, opts: { awards?: number } = {}): Promise<UserPoints> {
      opts = opts ?? {};
      const system = systemOrThrow(systemKey as string);
      const count = intIn(opts.awards, 'awards', 1, 100, 10);
      const { state } = await loadOrThrow(userId);
      const ctx = context();
      const view = await viewOf(state, ctx);
      const pending = [...(view.awards.get(system.key) ?? [])].reverse();
      // Adjustments (a total clamped to a lowered cap, replay's corrections) are not awards and are left out;
      // they are rare (one per change of configuration or replay), so a few more rows are read to make up.
      const stored = (await store.readLedger({ userId, kind: 'points', key: system.key, order: 'desc', limit: count + 16 })).filter((r) => !isAdjustment(r)).slice(0, count);
      // The awards this read materialised (due time grants) in the places their rows take once written: by
      // instant, after stored rows of the same instant. Usually they are the newest; after a changed schedule
      // they can be older than stored awards.
      const merged = [...pending.map((award) => ({ at: award.date, award })), ...stored.map((r) => ({ at: r.at, award: awardOfRow(system, r) }))];
      merged.sort((x, y) => (x.at < y.at ? 1 : x.at > y.at ? -1 : 0));
      const total = own(view.state.points, system.key)?.total ?? 0;
      const summary: UserPoints = { ...systemView(system), total, level: levelFor(system, total), awards: merged.slice(0, count).map((m) => m.award) };
      if (system.timeTriggers.length > 0) summary.nextGrantAt = nextGrants(config, view.state, ctx.now, system);
      return summary;
    },

    /** A points system with its triggers. */
    async getPointsSystem(systemKey: PointsKeyOf<C>): Promise<PointsSystemView & { triggers: PointsTriggerView[]; levels: LevelView[] }> {
      const system = systemOrThrow(systemKey as string);
      return { ...systemView(system), triggers: system.triggers.map(triggerView), levels: system.levels.map(levelView) };
    },

    /** A points system's levels, lowest first. */
    async getLevels(systemKey: PointsKeyOf<C>): Promise<LevelView[]> {
      return systemOrThrow(systemKey as string).levels.map(levelView);
    },

    /**
     * How many users are at each level (from the ordered index of totals: one count per level).
     * @throws {NoLevelsError} (422) when the system has no levels.
     */
    async getLevelSummary(systemKey: PointsKeyOf<C>): Promise<{ level: LevelView; users: number }[]> {
      const system = systemOrThrow(systemKey as string);
      if (system.levels.length === 0) throw new NoLevelsError(system.key);
      const index = pointsTotalsIndex(system.key);
      return Promise.all(
        system.levels.map(async (level, i) => {
          const next = system.levels[i + 1];
          return { level: levelView(level), users: await store.countEntries(index, { min: level.points, ...(next ? { max: next.points } : {}) }) };
        }),
      );
    },

    /**
     * Distribution of users' totals in the hosted service's eleven buckets `{ from, to, users }` (inclusive
     * bounds): 0-0, then ten equal ranges from 1 to the highest total rounded up to a power of ten, at least
     * 10 (highest 950: 1-100, ..., 901-1000). A bucket holds the totals `t` with `from - 1 < t <= to`; totals
     * below 0 (`allowNegative`) count in the first. With `userAttributes`, only users who have all of them
     * now are counted (and the highest total is theirs). Reads counts from the stores' totals indexes: one
     * attribute costs what no filter costs (12 reads); several read the users of the smallest
     * single-attribute group, a page at a time, and check the others in their states.
     */
    async getPointsHistogram(systemKey: PointsKeyOf<C>, opts: { userAttributes?: Record<string, string> } = {}): Promise<{ from: number; to: number; users: number }[]> {
      opts = opts ?? {};
      const system = systemOrThrow(systemKey as string);
      const filter = opts.userAttributes;
      if (filter !== undefined && filter !== null) checkAttributes(filter, config.index.userAttributes, ['userAttributes']);
      const pairs = filter ? Object.keys(filter).map((k) => [k, filter[k] as string] as const) : [];
      if (pairs.length <= 1) {
        const [only] = pairs;
        const index = only ? attributeTotalsIndex(system.key, only[0], only[1]) : pointsTotalsIndex(system.key);
        const [top] = await store.readRange(index, 0, 1);
        return Promise.all(histogramBuckets(top?.value ?? 0).map(async (b, i) => ({ ...b, users: await store.countEntries(index, bucketRange(b, i === 0)) })));
      }
      const indexes = pairs.map(([k, v]) => attributeTotalsIndex(system.key, k, v));
      const sizes = await Promise.all(indexes.map((i) => store.countEntries(i)));
      let smallest = 0;
      for (let i = 1; i < sizes.length; i++) if ((sizes[i] as number) < (sizes[smallest] as number)) smallest = i;
      const index = indexes[smallest] as string;
      const counts: number[] = new Array<number>(11).fill(0);
      let max: number | null = null;
      for (let offset = 0; (sizes[smallest] as number) > 0; offset += HISTOGRAM_PAGE) {
        const page = await store.readRange(index, offset, HISTOGRAM_PAGE);
        if (page.length === 0) break;
        const states = await store.loadUsers(page.map((e) => e.userId));
        page.forEach((e, j) => {
          const attrs = states[j]?.state.user.attributes;
          if (!attrs || !pairs.every(([k, v]) => own(attrs, k) === v)) return;
          // Entries come highest first: the first match holds the group's highest total.
          max ??= e.value;
          counts[bucketOf(max, e.value)]! += 1;
        });
        if (page.length < HISTOGRAM_PAGE) break;
      }
      return histogramBuckets(max ?? 0).map((b, i) => ({ ...b, users: counts[i] as number }));
    },

    /**
     * Every leaderboard with its status (finished ones only with `includeFinished`, inactive ones only with
     * `includeInactive`).
     */
    async listLeaderboards(opts: { includeFinished?: boolean; includeInactive?: boolean } = {}): Promise<(LeaderboardView & { status: BoardStatus })[]> {
      opts = opts ?? {};
      const at = now();
      return config.leaderboards
        .map((b) => ({ ...leaderboardView(b), status: boardStatus(b, at) }))
        .filter((b) => (opts.includeFinished || b.status !== 'finished') && (opts.includeInactive || b.status !== 'inactive'));
    },

    /**
     * One page of a leaderboard run (docs/rules.md, section 7). With `userId`, `offset` is relative to that
     * user's rank (`{ userId, offset: -2, limit: 5 }`: two above, the user, two below).
     */
    async getLeaderboard(key: LeaderboardKeyOf<C>, opts: LeaderboardOptions = {}): Promise<LeaderboardRankings> {
      opts = opts ?? {};
      const b = board(key as string);
      const limit = intIn(opts.limit, 'limit', 1, 1000, 10);
      const offset = intIn(opts.offset, 'offset', opts.userId === undefined ? 0 : -1_000_000, 1_000_000_000, 0);
      const at = now();
      // A board following each user's zone reads by default the run of today in the configuration's zone.
      const run = resolveRun(b, opts.run, localDateOf(at, b.timeZone ?? config.timeZone));
      const byAttributes = opts.userAttributes !== undefined && opts.userAttributes !== null;
      if (byAttributes) checkAttributes(opts.userAttributes, config.index.userAttributes, ['userAttributes']);
      if (b.breakdownAttributes.length === 0 && byAttributes) {
        throw new ValidationError(`userAttributes: leaderboard "${b.key}" has no breakdown attributes`, [{ path: ['userAttributes'], message: 'the board has no breakdown attributes' }]);
      }
      if (b.breakdownAttributes.length > 0 && !byAttributes && opts.userId === undefined) {
        throw new ValidationError(`userAttributes: leaderboard "${b.key}" is broken down by ${b.breakdownAttributes.join(', ')}; reading it needs userAttributes (or a userId, to read that user's group)`, [{ path: ['userAttributes'], message: 'required on a board with breakdown attributes' }]);
      }
      let attributes = opts.userAttributes ?? {};
      let start = offset;
      if (opts.userId !== undefined) {
        validateUserId(opts.userId, ['userId']);
        if (!opts.userAttributes && b.breakdownAttributes.length > 0) attributes = (await store.loadUser(opts.userId))?.state.user.attributes ?? {};
      }
      const index = boardIndex(b.key, run.start, groupOf(b, attributes));
      // Streak boards hold lengths set at each user's last call; a streak that lapsed since is brought up to
      // date (the user's lazy maintenance is committed, as their next call would) and the page read again.
      for (let pass = 0; ; pass++) {
        const page = await readPage();
        if (b.rankBy !== 'streak' || pass >= 5) return page.result;
        const ctx = context();
        const lapsed = page.states.filter((l, i) => l && (viewState(config, l.state, ctx).state.streak?.length ?? 0) !== page.result.rankings[i]?.value);
        if (lapsed.length === 0) return page.result;
        for (const l of lapsed) await engine.accrue((l as VersionedState).state.user.id);
      }

      async function readPage(): Promise<{ result: LeaderboardRankings; states: (VersionedState | null)[] }> {
        const base = { ...leaderboardView(b), status: runStatus(b, run, at), run, threshold: await thresholdOf(b, index) };
        if (opts.userId !== undefined) {
          const entry = await store.getEntry(index, opts.userId);
          if (!entry || entry.rank > b.maxParticipants) return { result: { ...base, rankings: [] }, states: [] };
          start = entry.rank - 1 + offset;
        }
        const from = Math.max(0, start);
        const to = Math.min(b.maxParticipants, start + limit);
        if (to <= from) return { result: { ...base, rankings: [] }, states: [] };
        const entries = await store.readRange(index, from, to - from);
        const states = await store.loadUsers(entries.map((e) => e.userId));
        return {
          result: { ...base, rankings: entries.map((e, i) => ({ userId: e.userId, userName: states[i]?.state.user.name ?? null, rank: e.rank, value: e.value })) },
          states,
        };
      }
    },

    /** A user's rank, value and daily rank history (latest `numEvents` days, 0..100, default 10) in a board run. */
    async getUserLeaderboard(userId: string, key: LeaderboardKeyOf<C>, opts: { run?: string; numEvents?: number } = {}): Promise<UserLeaderboard> {
      opts = opts ?? {};
      const b = board(key as string);
      const numEvents = intIn(opts.numEvents, 'numEvents', 0, 100, 10);
      let { state } = await loadOrThrow(userId);
      if (b.rankBy === 'streak' && (viewState(config, state, context()).state.streak?.length ?? 0) !== (state.streak?.length ?? 0)) {
        await engine.accrue(userId);
        state = (await loadOrThrow(userId)).state;
      }
      // A board following each user's zone reads by default the run of today in the user's zone.
      const at = now();
      const run = resolveRun(b, opts.run, localDateOf(at, b.timeZone ?? userZone(config, state)));
      // The user's group in that run as their state keeps it (a run read after their attributes changed
      // holds their entry in the group they had then); else their group now.
      const kept = own(state.leaderboards, b.key);
      const then = kept === undefined ? undefined : kept.run === run.start ? kept : kept.earlier?.find((e) => e.run === run.start);
      const index = boardIndex(b.key, run.start, then?.group ?? groupOf(b, state.user.attributes));
      const entry = await store.getEntry(index, userId);
      const history = numEvents > 0 ? await store.readRankHistory(index, userId, numEvents) : [];
      return {
        ...leaderboardView(b),
        status: runStatus(b, run, at),
        run,
        rank: capRank(b, entry?.rank),
        value: entry?.value ?? null,
        history: history.map((h) => ({ ...h, previousRank: capRank(b, h.previousRank), rank: capRank(b, h.rank) })),
      };
    },
  };

  function metricResponse(metricKey: string, state: UserState): MetricResponse {
    const metric = metricKeyOrThrow(metricKey);
    return {
      id: metric.id,
      key: metric.key,
      name: metric.name,
      current: Number(own(state.metrics, metricKey) ?? 0),
      achievements: (config.index.achievementsByMetric.get(metricKey) ?? [])
        .filter((a) => listedFor(a, state))
        .map((a) => achievementWithProgress(config, a, state)),
    };
  }

  async function summarise(userId: string, kind: 'metric' | 'points', key: string, options: SummaryOptions, tz: string, pending: DatedTotal[]): Promise<SummaryRow[]> {
    const { starts, bounds } = summaryPeriods(options, tz, config.weekStartsOn);
    const from = bounds[0] as string;
    const to = bounds[bounds.length - 1] as string;
    // A run of time grants that starts before the range may reach into it. Rows are dated in order except
    // after a zone change, which can date a grant up to about two days before rows already written; so every
    // run that can reach into the range is among the rows of the three days before it or the last row before
    // those, and all of them are spread.
    const lookBack = kind === 'points' ? new Date(Date.parse(from) - 3 * 86_400_000).toISOString() : from;
    // Totals summed by instant (a clock stepped back writes rows out of time order, whose stored running
    // totals then follow commit order), with the awards this read materialised among them.
    const points = await ledgerTotals(store, { userId, kind, key, from: lookBack, to }, pending, bounds);
    let baseline = 0;
    const inside: { at: string; total: number }[] = [];
    for (const p of points) {
      if (p.at < from) baseline = p.total;
      else if (p.at < to) inside.push(p);
    }
    return foldSummary(starts, bounds, baseline, inside);
  }

  function resolveRun(b: CompiledLeaderboard, run: string | undefined, today: string) {
    if (run !== undefined && (typeof run !== 'string' || !isValidLocalDate(run))) throw new ValidationError(`run must be a date in YYYY-MM-DD form (got ${String(run)})`, [{ path: ['run'], message: 'must be a date' }]);
    const date = run ?? today;
    return runOf(b, date) ?? runContaining(b, date < b.start ? b.start : (b.end ?? date));
  }

  // Every public method (and any added later) reports to the hooks and `laurel:*` channels.
  return instrument(engine, observer);
}

/**
 * The engine returned by {@link createEngine}.
 *
 * @interface
 */
export type Engine<C extends LaurelConfig = LaurelConfig> = EngineCore<C> & EngineTenancy<C>;

/** An engine's calls, without {@link EngineTenancy}. */
type EngineCore<C extends LaurelConfig> = ReturnType<typeof buildEngine<C>>;
