/**
 * Change notifications, the engine's side (issue 15): reading the outbox, durable subscriptions, due-time
 * sweeps and retention. The change events themselves come from the commits (core/changes.ts); this module
 * adds the changes no user's commit makes (a board run starting, changing and finishing; a configured boost
 * starting and finishing), emitted once per run or boost through the store's marks.
 */
import { randomUUID } from 'node:crypto';
import type { CompiledLeaderboard, LaurelConfig } from '../config/define.js';
import { boostStatus, configuredBoostView } from '../core/boosts.js';
import { addDays, localDateOf, startOfLocalDate } from '../core/calendar.js';
import { wireBoard } from '../core/changes.js';
import { runContaining, runOf, runStatus, type Run } from '../core/leaderboards.js';
import type { ChangeEvent, ChangeType, StoredChange } from '../core/types.js';
import { ConflictError, isLaurelError, ValidationError } from '../errors.js';
import { interruptibleWait } from './wait.js';
import type { ChangesPage, DeliveryRecord, OutboxStore, Store } from '../store/types.js';

/** A page of {@link Engine.readChanges}. */
export type { ChangesPage };

/** Options of {@link Engine.subscribe}. */
export interface SubscribeOptions {
  /** Events per handler call (1 to 1000, default 100). */
  batchSize?: number;
  /** How long to wait before polling again when there was nothing new (default 1000 ms). */
  pollMs?: number;
  /**
   * How long the consumer's lease lasts (default 30 000 ms). It is renewed while the handler runs; a
   * process that dies holding it blocks the consumer for at most this long.
   */
  leaseMs?: number;
  /** Only these types reach the handler (the cursor still moves past the others). Default: every type. */
  types?: readonly ChangeType[];
  /** Called when the handler (or the store) fails; the batch is then tried again after a backoff. */
  onError?: (error: unknown) => void;
  /** The most the backoff after failures grows to (default 60 000 ms). */
  maxBackoffMs?: number;
}

/** A running subscription. */
export interface Subscription {
  /** Stops polling, waits for a handler call in progress to finish, and gives up the lease. */
  stop(): Promise<void>;
  /** The consumer's name. */
  readonly consumer: string;
}

/** What one {@link Engine.sweep} did. */
export interface SweepReport {
  /** Users whose due instant had come and who were brought up to now. */
  users: number;
  /** Users the sweep could not bring up to date (their due instant is retried after the lease). */
  failed: number;
  /** Board-run and boost changes emitted. */
  emitted: number;
  /** True when `limit` users were due: more may be waiting (sweep again). */
  more: boolean;
}

/** What the engine gives this module. */
export interface ChangesDeps {
  config: LaurelConfig;
  store: Store;
  now: () => Date;
  newId: () => string;
  /** Brings one user up to now and commits (with their change events and new due instant). */
  sweepUser: (userId: string) => Promise<void>;
  /** The rankings of a board run (top `limit`), as `getLeaderboard` answers them. */
  rankings: (board: CompiledLeaderboard, run: Run, limit: number) => Promise<{ userId: string; userName: string | null; rank: number; value: number }[]>;
}

const intIn = (value: unknown, name: string, min: number, max: number, fallback: number): number => {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) throw new ValidationError(`${name} must be an integer from ${min} to ${max} (got ${String(value)})`, [{ path: [name], message: `must be an integer from ${min} to ${max}` }]);
  return value;
};
const EARLIEST_OFFSET_MS = 14 * 3_600_000;
const LATEST_OFFSET_MS = 12 * 3_600_000;
/** Rankings a board-run change event carries at most. */
const MAX_RANKINGS = 1000;

/** The outbox of a store that has one; a typed error otherwise. */
export function outboxOf(store: Store): OutboxStore {
  if (typeof store.readChanges !== 'function') throw new ValidationError('this store keeps no change outbox (it does not implement OutboxStore)', [{ path: ['store'], message: 'must implement OutboxStore' }]);
  return store as OutboxStore;
}

/** The engine methods of change notifications. */
export function changesApi(deps: ChangesDeps) {
  const { config, store } = deps;

  /** The changes no user's commit makes: board runs and configured boosts, each emitted once. */
  async function sweepSystem(): Promise<number> {
    const outbox = outboxOf(store);
    const now = deps.now();
    const nowMs = now.getTime();
    const nowIso = now.toISOString();
    type Want = { mark: string; build: (current: string | null) => Promise<{ value: string; changes: ChangeEvent[] } | null> };
    const wants: Want[] = [];
    const event = (type: ChangeType, at: string, body: Record<string, unknown>): ChangeEvent => ({ id: deps.newId(), type, userId: null, at, payload: { type, ...body } });

    for (const board of config.leaderboards) {
      if (board.status === 'inactive') continue;
      // A run's first instant anywhere (UTC+14) and its last (UTC-12), or in the board's own zone.
      const beganAt = (run: Run) => (board.timeZone ? startOfLocalDate(run.start, board.timeZone).getTime() : startOfLocalDate(run.start, 'UTC').getTime() - EARLIEST_OFFSET_MS);
      const endedAt = (run: Run) => {
        const lastDate = run.end ?? board.end;
        if (lastDate === null) return nowMs;
        return board.timeZone ? startOfLocalDate(addDays(lastDate, 1), board.timeZone).getTime() : startOfLocalDate(addDays(lastDate, 1), 'UTC').getTime() + LATEST_OFFSET_MS;
      };
      const view = (run: Run, s: string, rankings: unknown[]) => ({ ...wireBoard(board, s), run: { start: run.start, end: run.end }, rankings });
      const top = (run: Run) => (board.breakdownAttributes.length > 0 ? Promise.resolve([]) : deps.rankings(board, run, Math.min(board.maxParticipants, MAX_RANKINGS)));
      // The newest run that may have begun (in the board's zone, or anywhere: UTC+14) and the one before it;
      // on each user's zone one more, as a run ends after the next one began.
      const newest = board.timeZone ? localDateOf(now, board.timeZone) : localDateOf(nowMs + EARLIEST_OFFSET_MS, 'UTC');
      const recent: Run[] = [];
      let date = newest;
      for (let i = board.timeZone ? 2 : 3; i > 0; i--) {
        const run = runOf(board, date);
        if (!run) break;
        recent.unshift(run);
        date = addDays(run.start, -1);
      }
      // One mark per board, `{ last, open }`: the latest run announced as started and the started runs not yet
      // announced as finished. Every started run is announced finished exactly once, however late the sweep.
      wants.push({
        mark: `leaderboard.runs|${board.key}`,
        build: async (current) => {
          const was = current === null ? { last: '', open: [] as string[] } : (JSON.parse(current) as { last: string; open: string[] });
          const changes: ChangeEvent[] = [];
          const open: string[] = [];
          for (const start of was.open) {
            const run = runContaining(board, start);
            if (runStatus(board, run, now) !== 'finished') open.push(start);
            else changes.push(event('leaderboard.finished', new Date(Math.min(endedAt(run), nowMs)).toISOString(), { leaderboard: view(run, 'finished', await top(run)) }));
          }
          let last = was.last;
          for (const run of recent) {
            if (run.start <= was.last) continue;
            const status = runStatus(board, run, now);
            if (status === 'scheduled' || status === 'inactive') continue;
            last = run.start;
            const rankings = await top(run);
            changes.push(event('leaderboard.started', new Date(Math.min(beganAt(run), nowMs)).toISOString(), { leaderboard: view(run, 'active', rankings) }));
            if (status === 'finished') changes.push(event('leaderboard.finished', new Date(Math.min(endedAt(run), nowMs)).toISOString(), { leaderboard: view(run, 'finished', rankings) }));
            else open.push(run.start);
          }
          if (changes.length === 0) return null;
          return { value: JSON.stringify({ last, open }), changes };
        },
      });
      // `leaderboard.changed` of each active run: at most once per `leaderboardChangedMs`, when the rankings
      // differ from the last ones sent.
      for (const run of recent) {
        if (runStatus(board, run, now) !== 'active') continue;
        wants.push({
          mark: `leaderboard.changed|${board.key}|${run.start}`,
          build: async (current) => {
            const sep = current === null ? -1 : current.indexOf('|');
            const last = sep < 0 ? -Infinity : Number(current!.slice(0, sep));
            if (nowMs - last < config.notifications.leaderboardChangedMs) return null;
            const rankings = await top(run);
            if (rankings.length === 0) return null;
            const fingerprint = JSON.stringify(rankings.map((r) => [r.userId, r.rank, r.value]));
            if (current !== null && current.slice(sep + 1) === fingerprint) return null;
            return { value: `${nowMs}|${fingerprint}`, changes: [event('leaderboard.changed', nowIso, { leaderboard: view(run, 'active', rankings) })] };
          },
        });
      }
    }

    for (const system of config.pointsSystems) {
      for (const b of system.boosts) {
        const status = boostStatus(b, now);
        if (status === 'scheduled') continue;
        const payload = (s: 'active' | 'finished') => ({ ...configuredBoostView(b, s), pointsSystemId: system.id, pointsSystemKey: system.key, pointsSystemName: system.name });
        const start = new Date(Math.min(startOfLocalDate(b.start, 'UTC').getTime() - EARLIEST_OFFSET_MS, nowMs)).toISOString();
        wants.push({ mark: `points.boost_started|${b.id}`, build: async (current) => (current !== null ? null : { value: nowIso, changes: [event('points.boost_started', start, { timestamp: start, boost: payload('active') })] }) });
        if (status === 'finished' && b.end !== null) {
          const end = new Date(Math.min(startOfLocalDate(addDays(b.end, 1), 'UTC').getTime() + LATEST_OFFSET_MS, nowMs)).toISOString();
          wants.push({ mark: `points.boost_finished|${b.id}`, build: async (current) => (current !== null ? null : { value: nowIso, changes: [event('points.boost_finished', end, { timestamp: end, boost: payload('finished') })] }) });
        }
      }
    }
    if (wants.length === 0) return 0;
    const marks = await outbox.getMarks(wants.map((w) => w.mark));
    let emitted = 0;
    for (const w of wants) {
      const current = marks[w.mark] ?? null;
      const built = await w.build(current);
      if (!built) continue;
      // Another process may have emitted it meanwhile: then the mark moved and this append changes nothing.
      if (await outbox.appendChanges({ mark: w.mark, expected: current, value: built.value, changes: built.changes })) emitted += built.changes.length;
    }
    return emitted;
  }

  return {
    /**
     * Change events in commit order, strictly after the cursor `after` (from the oldest kept without it),
     * at most `limit` (1 to 1000, default 100). `next` is the cursor to pass next time.
     * @throws {ValidationError} for a bad limit or cursor, or a store without an outbox.
     */
    async readChanges(opts: { after?: string; limit?: number } = {}): Promise<ChangesPage> {
      opts = opts ?? {};
      const limit = intIn(opts.limit, 'limit', 1, 1000, 100);
      if (opts.after !== undefined && (typeof opts.after !== 'string' || opts.after.length > 200)) throw new ValidationError('after must be a cursor from readChanges', [{ path: ['after'], message: 'must be a cursor from readChanges' }]);
      return outboxOf(store).readChanges(opts.after === undefined ? { limit } : { after: opts.after, limit });
    },

    /**
     * Delivers change events to `handler`, in commit order and in batches, at least once, for the named
     * consumer: its cursor is stored durably and advanced only after the handler resolved. Processes that
     * subscribe with the same name share the work safely: a lease lets only one of them deliver at a time,
     * so a batch is never handed to two handlers at once. A failing handler gets the same batch again after
     * a backoff (doubling from `pollMs` up to `maxBackoffMs`). The lease is renewed from the claim on; should
     * it still run out (a store call slower than `leaseMs`) and another subscriber take it, the handler's
     * `signal` is aborted (stop delivering: the batch is the holder's now), `onError` gets a `ConflictError`,
     * and this subscriber neither advances the cursor nor takes the lease back.
     */
    subscribe(consumer: string, handler: (events: StoredChange[], context: { signal: AbortSignal }) => unknown, opts: SubscribeOptions = {}): Subscription {
      opts = opts ?? {};
      if (typeof consumer !== 'string' || consumer.length === 0 || consumer.length > 200) throw new ValidationError('consumer must be a name of 1 to 200 characters', [{ path: ['consumer'], message: 'must be 1 to 200 characters' }]);
      if (typeof handler !== 'function') throw new ValidationError('handler must be a function', [{ path: ['handler'], message: 'must be a function' }]);
      const batchSize = intIn(opts.batchSize, 'batchSize', 1, 1000, 100);
      const pollMs = intIn(opts.pollMs, 'pollMs', 1, 3_600_000, 1000);
      const leaseMs = intIn(opts.leaseMs, 'leaseMs', 100, 3_600_000, 30_000);
      const maxBackoffMs = intIn(opts.maxBackoffMs, 'maxBackoffMs', 1, 3_600_000, 60_000);
      const types = opts.types ? new Set<string>(opts.types) : null;
      const outbox = outboxOf(store);
      const owner = randomUUID();
      let stopped = false;
      const { wait: pause, interrupt } = interruptibleWait();
      const report = (error: unknown) => {
        try {
          opts.onError?.(error);
        } catch {
          // An observer's failure must not stop the subscription.
        }
      };
      const nowIso = () => deps.now().toISOString();
      /**
       * Keeps the lease just claimed, renewing it every third of `leaseMs` (one renewal at a time) from the
       * claim on, through the read as through the handler. A renewal refused (another subscriber holds the
       * lease: this one's ran out) or answering another cursor (it moved on meanwhile) means the lease is
       * lost: renewing stops (taking it back would hand the batch to two handlers), the handler's signal is
       * aborted, and the batch is left to the holder.
       */
      const keepLease = (cursor: string | null) => {
        const controller = new AbortController();
        let renewing: Promise<void> | null = null;
        const timer = setInterval(() => {
          if (controller.signal.aborted) return;
          renewing ??= outbox
            .claimConsumer({ consumer, owner, now: nowIso(), leaseMs })
            .then((lease) => {
              if ((lease === null || lease.cursor !== cursor) && !controller.signal.aborted) {
                controller.abort();
                report(new ConflictError(`Consumer ${JSON.stringify(consumer)}: the lease ran out while this subscriber held a batch and another one holds it now; the batch is left to it.`));
              }
            }, report)
            .finally(() => {
              renewing = null;
            });
        }, Math.max(50, Math.floor(leaseMs / 3)));
        return {
          signal: controller.signal,
          // A renewal still on its way is waited for: landing after the release at a stop, it would take the
          // lease again and hold it from the other subscribers until it ran out.
          async end(): Promise<void> {
            clearInterval(timer);
            if (renewing) await renewing;
          },
        };
      };
      const loop = async () => {
        let failures = 0;
        while (!stopped) {
          let idle = true;
          let held: ReturnType<typeof keepLease> | null = null;
          try {
            const lease = await outbox.claimConsumer({ consumer, owner, now: nowIso(), leaseMs });
            if (lease) {
              held = keepLease(lease.cursor);
              const page = await outbox.readChanges(lease.cursor === null ? { limit: batchSize } : { after: lease.cursor, limit: batchSize });
              if (page.events.length > 0 || page.next !== lease.cursor) {
                const events = types ? page.events.filter((e) => types.has(e.type)) : page.events;
                if (events.length > 0 && !held.signal.aborted) await handler(events, { signal: held.signal });
                await held.end();
                if (held.signal.aborted) continue;
                if (!(await outbox.advanceConsumer({ consumer, owner, cursor: page.next, now: nowIso(), leaseMs }))) continue;
                idle = page.events.length < batchSize;
              }
              await held.end();
            }
            failures = 0;
          } catch (error) {
            await held?.end();
            // A handler that stopped because the lease was lost (reported then) is not a failure of its own.
            if (held?.signal.aborted) continue;
            report(error);
            failures++;
            if (!stopped) await pause(Math.min(maxBackoffMs, pollMs * 2 ** Math.min(failures - 1, 20)));
            continue;
          }
          if (idle && !stopped) await pause(pollMs);
        }
        await outbox.releaseConsumer({ consumer, owner }).catch(report);
      };
      const running = loop();
      return {
        consumer,
        async stop() {
          stopped = true;
          interrupt();
          await running;
        },
      };
    },

    /**
     * Brings every user whose next time-driven change is due (a streak lapse or freeze, a freeze earned, time
     * grants, a boost starting or ending, a reminder) up to now, at most `limit` of them (1 to 10 000,
     * default 1000), and emits the board-run and configured-boost changes whose time has come. Costs the
     * due users, never all users; several processes may sweep at once without doing a user twice.
     */
    async sweep(opts: { limit?: number; leaseMs?: number } = {}): Promise<SweepReport> {
      opts = opts ?? {};
      const limit = intIn(opts.limit, 'limit', 1, 10_000, 1000);
      const leaseMs = intIn(opts.leaseMs, 'leaseMs', 1000, 3_600_000, 60_000);
      const outbox = outboxOf(store);
      const emitted = await sweepSystem();
      const due = await outbox.claimDue({ now: deps.now().toISOString(), limit, leaseMs });
      let failed = 0;
      for (const userId of due) {
        try {
          await deps.sweepUser(userId);
        } catch (error) {
          // Left due: the lease runs out and a later sweep tries again.
          if (!isLaurelError(error)) throw error;
          failed++;
        }
      }
      return { users: due.length - failed, failed, emitted, more: due.length === limit };
    },

    /**
     * Removes change events dated more than `olderThanMs` before now (at most `limit`, default 10 000); returns
     * how many. `olderThanMs` is required: without it nothing is removed and the call is a ValidationError.
     */
    async pruneChanges(opts: { olderThanMs: number; limit?: number }): Promise<number> {
      if (opts?.olderThanMs === undefined) throw new ValidationError('pruneChanges: olderThanMs is required', [{ path: ['olderThanMs'], message: 'required: how old (ms) a change event must be to be removed' }]);
      const olderThanMs = intIn(opts.olderThanMs, 'olderThanMs', 0, Number.MAX_SAFE_INTEGER, 0);
      const limit = intIn(opts?.limit, 'limit', 1, 1_000_000, 10_000);
      return outboxOf(store).pruneChanges({ before: new Date(deps.now().getTime() - olderThanMs).toISOString(), limit });
    },

    /** The latest delivery outcomes a relay recorded for a consumer, newest first (1 to 1000, default 100). */
    async readDeliveries(consumer: string, opts: { limit?: number } = {}): Promise<DeliveryRecord[]> {
      const limit = intIn(opts?.limit, 'limit', 1, 1000, 100);
      return outboxOf(store).readDeliveries({ consumer, limit });
    },
  };
}

export type ChangesApi = ReturnType<typeof changesApi>;

/**
 * Runs `engine.sweep` every `everyMs` (default 60 000), sweeping again at once while more users are due, and
 * with `retentionMs` prunes change events older than that after each round (retention). Failures go to
 * `onError` and the next round tries again. `stop()` ends it after the round in progress.
 */
export function createSweeper(
  engine: Pick<ChangesApi, 'sweep' | 'pruneChanges'>,
  opts: { everyMs?: number; limit?: number; retentionMs?: number; onError?: (error: unknown) => void; onSweep?: (report: SweepReport) => void } = {},
) {
  opts = opts ?? {};
  const everyMs = intIn(opts.everyMs, 'everyMs', 10, 86_400_000, 60_000);
  const retentionMs = opts.retentionMs === undefined ? undefined : intIn(opts.retentionMs, 'retentionMs', 0, Number.MAX_SAFE_INTEGER, 0);
  let stopped = false;
  const { wait, interrupt } = interruptibleWait();
  const loop = async () => {
    while (!stopped) {
      try {
        const report = await engine.sweep(opts.limit === undefined ? {} : { limit: opts.limit });
        opts.onSweep?.(report);
        if (report.more) continue;
        if (retentionMs !== undefined) await engine.pruneChanges({ olderThanMs: retentionMs });
      } catch (error) {
        try {
          opts.onError?.(error);
        } catch {
          // ignored: the sweeper keeps going
        }
      }
      if (stopped) break;
      await wait(everyMs);
    }
  };
  const running = loop();
  return {
    /** Stops the sweeper: resolves once the round in progress (if any) has ended; no round starts after it. */
    async stop() {
      stopped = true;
      interrupt();
      await running;
    },
  };
}
