/**
 * Observability: hooks given to `createEngine({ hooks })` and events on `node:diagnostics_channel` channels
 * named `laurel:*`, for logs, metrics and tracing (`laurel/otel` builds spans on the `onCall` hook).
 *
 * Every public method of the engine is wrapped (`instrument`): when no hook is configured and nothing
 * subscribes to a `laurel:*` channel, a call costs one check of the channels and goes straight through.
 * Otherwise the call runs inside its own async context, so the retries, conflicts and commits deep inside
 * it are counted for it and reported with its operation's name. A hook that throws (or rejects) is ignored:
 * observing never changes a call's outcome.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import diagnostics from 'node:diagnostics_channel';
import { isLaurelError, isLaurelErrorCode, ValidationError, type LaurelErrorCode } from '../errors.js';
import type { Store } from '../store/types.js';

/** A public engine call: what every hook and channel message about it starts with. */
export interface CallInfo {
  /** The engine method, e.g. `'recordEvent'`. */
  readonly operation: string;
  /** The user the call is about, where the method names one (its `userId`, the event's or input's user). */
  readonly userId: string | undefined;
  /** The metric, for `recordEvent`, `simulateEvent` and the metric reads. */
  readonly metricKey: string | undefined;
  /** The call's arguments, as given. */
  readonly args: readonly unknown[];
  /** Milliseconds from the call to its outcome; 0 until the call has ended. */
  durationMs: number;
  /** Store commits of the call that succeeded (a batch commit counts each user's commit). */
  commits: number;
  /** Milliseconds spent in those commits. */
  commitMs: number;
  /** Optimistic-concurrency retries in the call. */
  retries: number;
  /** Conflicts (stale version, concurrent idempotency key) met in the call, retried or not. */
  conflicts: number;
}

/** `onError`: a public call failed (the error it failed with is what the caller gets). */
export interface CallErrorInfo extends CallInfo {
  error: unknown;
  /** The Laurel error code (`'CONFLICT'`, `'VALIDATION'`, ...), or undefined for another error. */
  code: LaurelErrorCode | undefined;
}

/** `onRetry`: a conflict is retried after `delayMs` (jittered exponential backoff). */
export interface RetryInfo {
  /** The public call retrying, when the conflict happened inside one. */
  operation: string | undefined;
  userId: string;
  /** The attempt that conflicted (1 is the first); the next one is `attempt + 1`. */
  attempt: number;
  delayMs: number;
  /** Milliseconds since the call began (0 outside a call). */
  elapsedMs: number;
  /** The ConflictError that caused the retry. */
  error: unknown;
}

/** `onConflict`: a ConflictError (stale version or concurrent idempotency key), every occurrence. */
export interface ConflictInfo {
  operation: string | undefined;
  userId: string;
  /** The attempt it happened in within the call (1 + the retries before it). */
  attempt: number;
  elapsedMs: number;
  error: unknown;
}

/** `laurel:degraded`: a storage failure degraded a call instead of failing it (see `onDegraded`). */
export interface DegradedInfo {
  operation: string | undefined;
  error: unknown;
}

/**
 * Hooks for `createEngine({ hooks })` (one object, or several in a list: each is called, in order). Every
 * hook is optional; one that throws or returns a rejected promise is ignored.
 */
export interface EngineHooks {
  /**
   * Around every public call: must call `run()` once (synchronously), e.g. inside a tracing context, and
   * may watch the promise it returns; what the hook returns is ignored (the caller gets `run()`'s result
   * whatever the hook does). `info`'s counters and `durationMs` are final once that promise has settled.
   */
  onCall?: (info: CallInfo, run: () => unknown) => unknown;
  /** After a public call that committed (at least one store commit succeeded), with its timings. */
  onCommit?: (info: CallInfo) => void;
  /** Before the backoff of each optimistic-concurrency retry. */
  onRetry?: (info: RetryInfo) => void;
  /** On each ConflictError from the store or the engine's own checks, retried or not. */
  onConflict?: (info: ConflictInfo) => void;
  /** After a public call failed. */
  onError?: (info: CallErrorInfo) => void;
}

const HOOK_NAMES = ['onCall', 'onCommit', 'onRetry', 'onConflict', 'onError'] as const;

/**
 * The channels (`diagnostics_channel.channel(name)` / `subscribe(name, fn)` / `tracingChannel('laurel:call')`):
 * - `tracing:laurel:call:start|end|asyncStart|asyncEnd|error`: every public call, as a tracing channel
 *   (`{ operation, userId, metricKey, args }`, then `result` or `error`, and `durationMs` when settled).
 * - `laurel:commit`: a call that committed (the {@link CallInfo}); `laurel:retry` ({@link RetryInfo});
 *   `laurel:conflict` ({@link ConflictInfo}); `laurel:degraded` ({@link DegradedInfo}).
 */
export const channels = {
  call: diagnostics.tracingChannel<unknown, CallMessage>('laurel:call'),
  commit: diagnostics.channel('laurel:commit'),
  retry: diagnostics.channel('laurel:retry'),
  conflict: diagnostics.channel('laurel:conflict'),
  degraded: diagnostics.channel('laurel:degraded'),
};

/** The message of the `tracing:laurel:call:*` channels. */
export interface CallMessage {
  operation: string;
  userId: string | undefined;
  metricKey: string | undefined;
  args: readonly unknown[];
  /** Set before `asyncStart` (or `end` for a synchronous method) when the call succeeded. */
  result?: unknown;
  /** Set before `error` when the call failed. */
  error?: unknown;
  /** Set when the call has settled. */
  durationMs?: number;
}

const tracing = channels.call;
const tracingActive = () => tracing.start.hasSubscribers || tracing.end.hasSubscribers || tracing.asyncStart.hasSubscribers || tracing.asyncEnd.hasSubscribers || tracing.error.hasSubscribers;

interface Call {
  readonly observer: Observer;
  readonly info: CallInfo;
  readonly start: number;
  done: boolean;
}

/** One for all engines (each call remembers its observer): every storage adds to the cost of async context. */
const calls = new AsyncLocalStorage<Call>();

const isThenable = (value: unknown): value is PromiseLike<unknown> => (typeof value === 'object' || typeof value === 'function') && value !== null && typeof (value as PromiseLike<unknown>).then === 'function';

const noop = () => {};

/** Calls each hook with `info`, ignoring what it throws or rejects with. */
function emit<I>(hooks: readonly ((info: I) => unknown)[], info: I): void {
  for (const hook of hooks) {
    try {
      const out = hook(info);
      if (isThenable(out)) out.then(undefined, noop);
    } catch {
      // An observer's failure must not change the call's outcome.
    }
  }
}

/** The user and metric of a call, from the methods whose arguments name them. */
const USER_FIRST = new Set([
  'updateUser', 'getUser', 'deleteUser', 'resetUser', 'getUserEvents', 'grantFreezes', 'restoreStreak', 'pauseStreak', 'deletePause',
  'updatePreferences', 'adjustPoints', 'runOperations', 'getUserBoosts', 'getWrapped', 'getProfile', 'getPreferences', 'accrue',
  'getUserAchievements', 'getStreak', 'getUserMetrics', 'getUserMetric', 'getMetricEventSummary', 'getPointsEventSummary',
  'getPointsSummary', 'getUserLeaderboard',
]);
const str = (value: unknown): string | undefined => (typeof value === 'string' ? value : undefined);
const field = (value: unknown, key: string): unknown => (typeof value === 'object' && value !== null ? (value as Record<string, unknown>)[key] : undefined);

function subjectOf(operation: string, args: readonly unknown[]): { userId: string | undefined; metricKey: string | undefined } {
  switch (operation) {
    case 'recordEvent':
    case 'simulateEvent':
      return { userId: str(field(field(args[1], 'user'), 'id')), metricKey: str(args[0]) };
    case 'completeAchievement':
      return { userId: str(field(field(args[1], 'user'), 'id')), metricKey: undefined };
    case 'identifyUser':
      return { userId: str(field(args[0], 'id')), metricKey: undefined };
    case 'createBoost':
      return { userId: str(field(args[0], 'userId')), metricKey: undefined };
    case 'getLeaderboard':
      return { userId: str(field(args[1], 'userId')), metricKey: undefined };
    case 'getUserMetric':
    case 'getMetricEventSummary':
      return { userId: str(args[0]), metricKey: str(args[1]) };
    default:
      return { userId: USER_FIRST.has(operation) ? str(args[0]) : undefined, metricKey: undefined };
  }
}

/** What one engine reports to: its hooks and the `laurel:*` channels. */
export class Observer {
  private readonly onCall: NonNullable<EngineHooks['onCall']>[];
  private readonly onCommit: NonNullable<EngineHooks['onCommit']>[];
  private readonly onRetry: NonNullable<EngineHooks['onRetry']>[];
  private readonly onConflict: NonNullable<EngineHooks['onConflict']>[];
  private readonly onError: NonNullable<EngineHooks['onError']>[];
  private readonly hooked: boolean;
  /** Conflicts already reported (a store's conflict is seen again by the retry loop that catches it). */
  private readonly reported = new WeakSet<object>();

  constructor(hooks: readonly EngineHooks[]) {
    const pick = <K extends (typeof HOOK_NAMES)[number]>(name: K) => hooks.map((h) => h[name]).filter((f): f is NonNullable<EngineHooks[K]> => typeof f === 'function');
    this.onCall = pick('onCall');
    this.onCommit = pick('onCommit');
    this.onRetry = pick('onRetry');
    this.onConflict = pick('onConflict');
    this.onError = pick('onError');
    this.hooked = this.onCall.length + this.onCommit.length + this.onRetry.length + this.onConflict.length + this.onError.length > 0;
  }

  /** Whether anything listens: a hook, or a subscriber to one of the channels. */
  active(): boolean {
    return this.hooked || tracingActive() || channels.commit.hasSubscribers || channels.retry.hasSubscribers || channels.conflict.hasSubscribers || channels.degraded.hasSubscribers;
  }

  /** The public call of this engine running in the current async context, if observed. */
  private current(): Call | undefined {
    const call = calls.getStore();
    return call && call.observer === this && !call.done ? call : undefined;
  }

  /** Runs one public call observed: `fn.apply(thisArg, args)`, its outcome untouched. */
  call(operation: string, fn: (...args: unknown[]) => unknown, thisArg: unknown, args: unknown[]): unknown {
    const { userId, metricKey } = subjectOf(operation, args);
    const info: CallInfo = { operation, userId, metricKey, args, durationMs: 0, commits: 0, commitMs: 0, retries: 0, conflicts: 0 };
    const call: Call = { observer: this, info, start: performance.now(), done: false };
    const message: CallMessage | undefined = tracingActive() ? { operation, userId, metricKey, args } : undefined;
    const invoke = (): unknown => {
      let result: unknown;
      try {
        result = Reflect.apply(fn, thisArg, args);
      } catch (error) {
        this.finish(call, true, error);
        if (message) {
          message.error = error;
          message.durationMs = info.durationMs;
          tracing.error.publish(message);
          tracing.end.publish(message);
        }
        throw error;
      }
      if (!isThenable(result)) {
        this.finish(call, false, undefined);
        if (message) {
          message.result = result;
          message.durationMs = info.durationMs;
          tracing.end.publish(message);
        }
        return result;
      }
      if (message) tracing.end.publish(message);
      return Promise.resolve(result).then(
        (value) => {
          this.finish(call, false, undefined);
          if (message) {
            message.result = value;
            message.durationMs = info.durationMs;
            tracing.asyncStart.publish(message);
            tracing.asyncEnd.publish(message);
          }
          return value;
        },
        (error: unknown) => {
          this.finish(call, true, error);
          if (message) {
            message.error = error;
            message.durationMs = info.durationMs;
            tracing.error.publish(message);
            tracing.asyncStart.publish(message);
            tracing.asyncEnd.publish(message);
          }
          throw error;
        },
      );
    };
    const run = () => calls.run(call, () => this.around(0, info, invoke));
    return message ? tracing.start.runStores(message, run) : run();
  }

  /** Runs `invoke` inside the `onCall` hooks from `i` on (the first is outermost), whatever they do. */
  private around(i: number, info: CallInfo, invoke: () => unknown): unknown {
    const hook = this.onCall[i];
    if (!hook) return invoke();
    let ran = false;
    let threw = false;
    let out: unknown;
    const run = (): unknown => {
      if (!ran) {
        ran = true;
        try {
          out = this.around(i + 1, info, invoke);
        } catch (error) {
          threw = true;
          out = error;
        }
      }
      if (threw) throw out;
      return out;
    };
    try {
      const returned = hook(info, run);
      if (returned !== out && isThenable(returned)) returned.then(undefined, noop);
    } catch {
      // A hook's failure is ignored; so is an error of run() it let through (rethrown below).
    }
    if (!ran) {
      try {
        run();
      } catch {
        // Rethrown below.
      }
    }
    if (threw) throw out;
    return out;
  }

  /** Ends a call once: its duration, then `onCommit` when it committed and `onError` when it failed. */
  private finish(call: Call, failed: boolean, error: unknown): void {
    if (call.done) return;
    call.done = true;
    const info = call.info;
    info.durationMs = performance.now() - call.start;
    if (info.commits > 0) {
      emit(this.onCommit, info);
      if (channels.commit.hasSubscribers) channels.commit.publish(info);
    }
    if (failed && this.onError.length > 0) emit(this.onError, { ...info, error, code: isLaurelError(error) ? error.code : undefined });
  }

  /** The retry loop is about to back off `delayMs` and try `attempt + 1` for `userId`. */
  retry(userId: string, attempt: number, delayMs: number, error: unknown): void {
    const call = this.current();
    if (call) call.info.retries++;
    if (this.onRetry.length === 0 && !channels.retry.hasSubscribers) return;
    const info: RetryInfo = { operation: call?.info.operation, userId, attempt, delayMs, elapsedMs: call ? performance.now() - call.start : 0, error };
    emit(this.onRetry, info);
    if (channels.retry.hasSubscribers) channels.retry.publish(info);
  }

  /** A ConflictError met for `userId` (reported once however many layers see it). */
  conflict(userId: string, error: unknown): void {
    if (typeof error === 'object' && error !== null) {
      if (this.reported.has(error)) return;
      this.reported.add(error);
    }
    const call = this.current();
    if (call) call.info.conflicts++;
    if (this.onConflict.length === 0 && !channels.conflict.hasSubscribers) return;
    const info: ConflictInfo = { operation: call?.info.operation, userId, attempt: 1 + (call?.info.retries ?? 0), elapsedMs: call ? performance.now() - call.start : 0, error };
    emit(this.onConflict, info);
    if (channels.conflict.hasSubscribers) channels.conflict.publish(info);
  }

  /** A storage failure degraded a call (`onDegraded`). */
  degraded(error: unknown): void {
    if (channels.degraded.hasSubscribers) channels.degraded.publish({ operation: this.current()?.info.operation, error } satisfies DegradedInfo);
  }

  /**
   * The store as the engine sees it, with its commits counted and timed for the running call and its
   * conflicts reported. Only the writing methods are replaced; the others (and which optional ones exist)
   * are the store's.
   */
  observeStore(store: Store): Store {
    const observed: Store = { ...store };
    const timed = <R>(userId: string, promise: Promise<R>, count: (result: R) => number): Promise<R> => {
      const call = this.current();
      const start = performance.now();
      return promise.then(
        (result) => {
          const n = count(result);
          if (call && !call.done && n > 0) {
            call.info.commits += n;
            call.info.commitMs += performance.now() - start;
          }
          return result;
        },
        (error: unknown) => {
          if (isLaurelErrorCode(error, 'CONFLICT')) this.conflict(userId, error);
          throw error;
        },
      );
    };
    observed.commit = (commit) => (this.active() ? timed(commit.userId, store.commit(commit), () => 1) : store.commit(commit));
    observed.eraseUser = (erasure) => (this.active() ? timed(erasure.userId, store.eraseUser(erasure), (r) => (r.erased ? 1 : 0)) : store.eraseUser(erasure));
    const batch = store.commitBatch;
    if (typeof batch === 'function') {
      observed.commitBatch = (commits) => {
        const promise = batch.call(store, commits);
        if (!this.active()) return promise;
        return timed('', promise, (outcomes) => {
          let n = 0;
          outcomes.forEach((outcome, i) => {
            if (isLaurelErrorCode(outcome, 'CONFLICT')) this.conflict(commits[i]?.userId ?? '', outcome);
            else n++;
          });
          return n;
        });
      };
    }
    return observed;
  }
}

/** The observer of `createEngine({ hooks })`. @throws {ValidationError} hooks that are not functions. */
export function createObserver(hooks: EngineHooks | readonly EngineHooks[] | undefined): Observer {
  const list: readonly unknown[] = hooks === undefined || hooks === null ? [] : Array.isArray(hooks) ? hooks : [hooks];
  list.forEach((h, i) => {
    const path = Array.isArray(hooks) ? ['hooks', i] : ['hooks'];
    if (typeof h !== 'object' || h === null) throw new ValidationError('hooks must be an object of hook functions (or a list of them)', [{ path, message: 'must be an object' }]);
    for (const name of HOOK_NAMES) {
      const f = (h as Record<string, unknown>)[name];
      if (f !== undefined && typeof f !== 'function') throw new ValidationError(`hooks.${name} must be a function`, [{ path: [...path, name], message: 'must be a function' }]);
    }
  });
  return new Observer(list as readonly EngineHooks[]);
}

/**
 * A copy of `target` whose function-valued properties report each call to `observer` (with `this` and
 * arguments passed through); other properties (getters included) are copied as they are. Calls between
 * the target's own methods go to the originals, so a nested call is part of the outer one.
 */
export function instrument<T extends object>(target: T, observer: Observer): T {
  const out = Object.create(Object.getPrototypeOf(target) as object | null) as T;
  for (const key of Reflect.ownKeys(target)) {
    const descriptor = Object.getOwnPropertyDescriptor(target, key) as PropertyDescriptor;
    const fn: unknown = descriptor.value;
    if (typeof fn === 'function' && typeof key === 'string') {
      // `arguments`, not rest parameters: nothing is allocated when nothing listens.
      const wrapped = function (this: unknown): unknown {
        return observer.active() ? observer.call(key, fn as (...a: unknown[]) => unknown, this, Array.prototype.slice.call(arguments)) : Reflect.apply(fn, this, arguments);
      };
      Object.defineProperty(wrapped, 'name', { value: fn.name });
      Object.defineProperty(wrapped, 'length', { value: fn.length });
      descriptor.value = wrapped;
    }
    Object.defineProperty(out, key, descriptor);
  }
  return out;
}
