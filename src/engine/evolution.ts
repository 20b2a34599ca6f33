/**
 * The engine's side of configuration evolution: reading a user's whole ledger, reconciling a state counted
 * under earlier rules before a call, and `engine.replay`, which recomputes users from their ledgers.
 */
import type { LaurelConfig } from '../config/define.js';
import { isLaurelError, ValidationError, type LaurelError } from '../errors.js';
import { reconcileUser, replayUser, type Reconciled, type ReplayDiff, type ReplayPolicy } from '../core/evolve.js';
import type { CoreContext, Effects, LedgerRow, UserState } from '../core/types.js';
import { validateUserId } from '../core/users.js';
import { boardIndexOf } from '../core/leaderboards.js';
import { own } from '../core/step.js';
import type { CommitResult, RankedEntry, Store, VersionedState } from '../store/types.js';

/** Rows per page when a whole ledger is read. */
const LEDGER_PAGE = 1000;

/** A user's whole ledger in commit order. */
export async function readWholeLedger(store: Store, userId: string): Promise<LedgerRow[]> {
  const rows: LedgerRow[] = [];
  let after: string | undefined;
  for (;;) {
    const page = await store.readUserLedger(userId, after === undefined ? { limit: LEDGER_PAGE } : { after, limit: LEDGER_PAGE });
    for (const r of page.rows) rows.push(r);
    if (page.next === null || page.rows.length === 0) return rows;
    after = page.next;
  }
}

/** The effects of two steps of one call, committed together (`b` after `a`). */
export function joinEffects(a: Effects, b: Effects): Effects {
  const counters = { ...a.counters };
  for (const [k, v] of Object.entries(b.counters)) counters[k] = (counters[k] ?? 0) + v;
  return { ledger: [...a.ledger, ...b.ledger], leaderboard: [...a.leaderboard, ...b.leaderboard], counters, idempotency: b.idempotency ?? a.idempotency, created: a.created || b.created };
}

/** Reconciles a state counted under earlier rules, reading the user's ledger (see `reconcileUser`). */
export async function reconcileFromStore(config: LaurelConfig, store: Store, state: UserState, ctx: CoreContext): Promise<Reconciled> {
  return reconcileUser(config, state, await readWholeLedger(store, state.user.id), ctx);
}

/** Options of `engine.replay`. */
export interface ReplayOptions {
  /** Only these users (unknown ids are skipped); default: every user, walked in id order. */
  users?: readonly string[];
  /** Default `forward`. See docs/rules.md, "Replay". */
  policy?: ReplayPolicy;
  /** Compute and return the diffs without committing anything. */
  dryRun?: boolean;
  /** Resume a walk over every user after this user id (the `cursor` of an earlier run or progress report). */
  after?: string;
  /** Users read per page of the walk (1..1000, default 100). */
  pageSize?: number;
  /** Called after each user with the running counts and the cursor to resume from. */
  onProgress?: (progress: ReplayProgress) => void;
  /** Called with each user's diff (changed or not) as it is made. */
  onDiff?: (diff: ReplayDiff) => void;
}

/** The running counts of a replay, passed to {@link ReplayOptions.onProgress} after each user. */
export interface ReplayProgress {
  /** Users replayed so far in this run. */
  done: number;
  /** Of those, users replay changed (or, in a dry run, would change). */
  changed: number;
  /** Users that failed (see `failures`). */
  failed: number;
  /** The last user finished: pass it as `after` to resume a walk over every user. */
  cursor: string;
}

/** The outcome of `engine.replay`. */
export interface ReplayReport {
  /** The policy the run applied. */
  policy: ReplayPolicy;
  /** True when nothing was committed (the diffs say what a real run would change). */
  dryRun: boolean;
  /** Users replayed. */
  users: number;
  /** Of those, users replay changed (or, in a dry run, would change). */
  changed: number;
  /** The diffs of users replay changed (or would change), when `users` was given; otherwise see `onDiff`. */
  diffs: ReplayDiff[];
  /** Users whose replay failed with a typed error (nothing of theirs was committed). */
  failures: { userId: string; error: LaurelError }[];
  /** The last user finished (resume with `after`), or null when none was. */
  cursor: string | null;
  /** Totals over every changed user: achievements gained and lost, points per system, awards, events. */
  summary: {
    achievementsGained: number;
    achievementsLost: number;
    points: Record<string, number>;
    awardsReversed: number;
    awardsAdded: number;
    rejectedEvents: number;
    streaksChanged: number;
  };
}

export interface ReplayDeps {
  config: LaurelConfig;
  store: Store;
  context: () => CoreContext;
  /** Runs `attempt` under the user's lock on the user's state, retrying on version conflicts. */
  withUser: <R>(userId: string, attempt: (loaded: VersionedState | null) => Promise<R>) => Promise<R>;
  commit: (userId: string, loaded: VersionedState | null, state: UserState, effects: Effects) => Promise<CommitResult>;
}

/** Adds a changed user's diff to a replay summary's totals (a diff that changed nothing adds nothing). */
export function addToReplaySummary(s: ReplayReport['summary'], diff: ReplayDiff): void {
  if (!diff.changed) return;
  s.achievementsGained += diff.achievements.gained.length;
  s.achievementsLost += diff.achievements.lost.length;
  for (const [k, v] of Object.entries(diff.points)) s.points[k] = (s.points[k] ?? 0) + v.delta;
  s.awardsReversed += diff.awards.reversed;
  s.awardsAdded += diff.awards.added;
  s.rejectedEvents += diff.rejectedEvents;
  if (diff.streak.before !== diff.streak.after) s.streaksChanged++;
}

/**
 * The rank `value` would take in an index as it stands: everyone at or above it ranks first (they reached it
 * earlier), the user's own entry `mine` (if in this index) not counted.
 */
export async function rankOfValue(store: Store, index: string, value: number, mine: RankedEntry | null): Promise<number> {
  const above = await store.countEntries(index, { min: value });
  return above - (mine && mine.value >= value ? 1 : 0) + 1;
}

/**
 * Fills the ranks of a diff's boards: the user's rank before, and the rank the new value takes against the
 * board as it stands now (everyone at or above it ranks first, the user's own old entry not counted; null
 * beyond `maxParticipants`), read before anything is committed, the same way in a dry run and a real one.
 */
async function rankChanges(deps: ReplayDeps, before: UserState, after: UserState, diff: ReplayDiff): Promise<void> {
  const userId = before.user.id;
  for (const [key, change] of Object.entries(diff.leaderboards)) {
    const board = deps.config.index.leaderboards.get(key);
    if (!board) continue;
    const cap = (rank: number | null | undefined) => (rank != null && rank <= board.maxParticipants ? rank : null);
    const was = own(before.leaderboards, key);
    const now = own(after.leaderboards, key);
    const prior = was ? await deps.store.getEntry(boardIndexOf(board, was.run, was.group), userId) : null;
    change.rankBefore = cap(prior?.rank);
    if (now && now.value > 0) {
      const index = boardIndexOf(board, now.run, now.group);
      const mine = was && was.run === now.run && was.group === now.group ? prior : null;
      change.rankAfter = cap(await rankOfValue(deps.store, index, now.value, mine));
    }
  }
}

const POLICIES: readonly ReplayPolicy[] = ['forward', 'retroactive', 'grandfather'];

/** `engine.replay`: see {@link ReplayOptions}. */
export async function runReplay(deps: ReplayDeps, options: ReplayOptions = {}): Promise<ReplayReport> {
  const opts = options ?? {};
  const policy = opts.policy ?? 'forward';
  if (!POLICIES.includes(policy)) throw new ValidationError(`policy must be one of ${POLICIES.join(', ')} (got ${String(policy)})`, [{ path: ['policy'], message: 'unknown policy' }]);
  const dryRun = opts.dryRun === true;
  const pageSize = opts.pageSize ?? 100;
  if (!Number.isInteger(pageSize) || pageSize < 1 || pageSize > 1000) throw new ValidationError('pageSize must be an integer from 1 to 1000', [{ path: ['pageSize'], message: 'must be 1..1000' }]);
  if (opts.users !== undefined) {
    if (!Array.isArray(opts.users)) throw new ValidationError('users must be a list of user ids', [{ path: ['users'], message: 'must be an array' }]);
    opts.users.forEach((id, i) => validateUserId(id, ['users', i]));
  }
  if (opts.after !== undefined) validateUserId(opts.after, ['after']);

  const report: ReplayReport = {
    policy,
    dryRun,
    users: 0,
    changed: 0,
    diffs: [],
    failures: [],
    cursor: null,
    summary: { achievementsGained: 0, achievementsLost: 0, points: {}, awardsReversed: 0, awardsAdded: 0, rejectedEvents: 0, streaksChanged: 0 },
  };
  const one = async (userId: string) => {
    let diff: ReplayDiff | null = null;
    try {
      diff = await deps.withUser(userId, async (loaded) => {
        if (!loaded) return null;
        const rows = await readWholeLedger(deps.store, userId);
        const out = replayUser(deps.config, loaded.state, rows, policy, deps.context());
        await rankChanges(deps, loaded.state, out.state, out.diff);
        const effects = out.effects;
        const writes = effects.ledger.length > 0 || effects.leaderboard.length > 0 || Object.keys(effects.counters).length > 0 || out.state.rules !== loaded.state.rules;
        if (!dryRun && (out.diff.changed || writes)) await deps.commit(userId, loaded, out.state, effects);
        return out.diff;
      });
    } catch (error) {
      if (!isLaurelError(error)) throw error;
      report.failures.push({ userId, error });
    }
    if (diff) {
      report.users++;
      if (diff.changed) {
        report.changed++;
        addToReplaySummary(report.summary, diff);
        if (opts.users !== undefined) report.diffs.push(diff);
      }
      opts.onDiff?.(diff);
    }
    report.cursor = userId;
    opts.onProgress?.({ done: report.users, changed: report.changed, failed: report.failures.length, cursor: userId });
  };

  if (opts.users !== undefined) {
    for (const id of new Set(opts.users)) await one(id);
    return report;
  }
  let after = opts.after;
  for (;;) {
    const ids = await deps.store.listUsers(after === undefined ? { limit: pageSize } : { after, limit: pageSize });
    for (const id of ids) await one(id);
    if (ids.length < pageSize) return report;
    after = ids[ids.length - 1];
  }
}
