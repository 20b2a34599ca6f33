/**
 * Configuration evolution (docs/rules.md, "When the configuration changes"): what a changed configuration
 * does to a user who already has a state, and replay, which recomputes a user from their ledger.
 *
 * A state remembers the rule fingerprints it was last brought in line with (`UserState.rules`). When they
 * differ from the configuration's:
 * - points part (caps, time triggers): clamped totals and newly configured time triggers starting now; cheap,
 *   done by every call ({@link alignRules});
 * - achievements or streak part: the user's history is re-applied under the new rules ({@link rebuildUser})
 *   to backdate achievements the user already meets and recompute the streak ({@link reconcileUser}); this
 *   needs the ledger, so the engine reads it and reconciles before the call.
 */
import type { LaurelConfig } from '../config/define.js';
import { isLaurelError } from '../errors.js';
import { applyCompletion, applyIdentify, applyValidatedEvent, applyAccrue, begin, checkCall, readContext } from './apply.js';
import { addExact } from './decimal.js';
import { boardIndexOf, pointsTotalsIndex, updateLeaderboards } from './leaderboards.js';
import { refillYearlyChanges } from './wrapped.js';
import { award, isAdjustment, pointsState } from './points.js';
import { alignRules, ruleParts } from './rules.js';
import { attributesMoved, pushAttributeTotals } from './totals.js';
import { adoptState, awardsOut, createStep, localDateIn, matchesFilter, own, ownPoints, ownRecord, sealState, type Step } from './step.js';
import type {
  AdjustmentRow,
  Award,
  AwardRow,
  CompletionRowData,
  CoreContext,
  Effects,
  EventInput,
  GrantRun,
  LeaderboardWrite,
  LedgerRow,
  MetricRowData,
  OperationInput,
  OperationRowData,
  PointsState,
  StreakPeriodRow,
  UserFields,
  UserInput,
  UserRowData,
  UserState,
} from './types.js';
import { validateEvent, validateUserInput } from './users.js';
import { applyOperation } from './operations.js';

// ---------------------------------------------------------------------------------------------------------
// Rebuild: a user's history applied again from nothing under the current configuration

/** What {@link rebuildUser} returns. */
export interface Rebuilt {
  /** The state recording the same inputs from scratch would have; null when nothing could be applied. */
  state: UserState | null;
  /** The rows that recording would have written (awards, streak periods, inputs), in order. */
  ledger: LedgerRow[];
  /** Event rows the configuration now refuses (a blocking trigger would overdraw): recording them fails. */
  rejected: LedgerRow[];
}

const pick = (attrs: Readonly<Record<string, string>> | undefined, declared: ReadonlySet<string>): Record<string, string> | undefined => {
  if (!attrs) return undefined;
  let out: Record<string, string> | undefined;
  for (const k of Object.keys(attrs)) if (declared.has(k)) (out ??= {})[k] = attrs[k] as string;
  return out;
};

/** An input's user fields as the configuration accepts them now (attributes it no longer declares dropped). */
function userInputOf(cfg: LaurelConfig, userId: string, fields: UserFields | undefined): UserInput {
  const input: UserInput = { id: userId };
  if (!fields) return input;
  if (fields.email !== undefined) input.email = fields.email;
  if (fields.name !== undefined) input.name = fields.name;
  if (fields.tz !== undefined) input.tz = fields.tz;
  const attributes = pick(fields.attributes ?? undefined, cfg.index.userAttributes);
  if (attributes) input.attributes = attributes;
  return input;
}

/**
 * Applies a user's input rows (events, upserts, API completions) again, in ledger order, each at its own
 * instant, from an empty state under `cfg`, then brings the result up to `now`: the state and rows that
 * recording the same inputs from scratch under `cfg` would have given. Inputs the configuration no longer
 * knows (a removed metric or achievement) are skipped; events it refuses are listed in `rejected`. Rows
 * written before 0.3 lack the user fields of their inputs: such a history starts from the user's current
 * record, created at its creation instant.
 */
export function rebuildUser(cfg: LaurelConfig, userId: string, rows: readonly LedgerRow[], now: Date, current: UserState | null): Rebuilt {
  let seq = 0;
  const newId = () => `rebuild-${++seq}`;
  const reversed = new Set<string>();
  for (const r of rows) {
    const rev = r.kind === 'metric' ? (r.data as MetricRowData | null)?.reverses : undefined;
    if (rev !== undefined) reversed.add(rev);
  }
  let state: UserState | null = null;
  const ledger: LedgerRow[] = [];
  const rejected: LedgerRow[] = [];
  const keep = (effects: Effects) => {
    for (const row of effects.ledger) ledger.push(row);
  };
  /** Creates the user from their current record (a history without a creating input, written before 0.3). */
  const seed = (u: UserState['user'], at: Date) => {
    const out = applyIdentify(cfg, null, userInputOf(cfg, userId, { email: u.email, name: u.name, tz: u.tz, attributes: u.attributes }), { now: at, newId });
    state = out.state;
    keep(out.effects);
  };
  const created = (r: LedgerRow) => {
    if (state !== null || !current) return;
    const fields = r.kind === 'user' ? (r.data as UserRowData).user : r.kind === 'metric' ? (r.data as MetricRowData | null)?.user : (r.data as CompletionRowData | null)?.user;
    if (fields !== undefined) return;
    const u = current.user;
    seed(u, Date.parse(u.created) <= Date.parse(r.at) ? new Date(u.created) : new Date(r.at));
  };
  const operations = new Map<string, LedgerRow>();
  const groups = new Map<string, readonly string[]>();
  for (const r of rows) {
    if (r.kind !== 'operation') continue;
    operations.set(r.id, r);
    const batch = (r.data as OperationRowData).batch;
    if (batch) for (const id of batch) groups.set(id, batch);
  }
  const done = new Set<string>();
  for (const r of rows) {
    const ctx: CoreContext = { now: new Date(r.at), newId };
    try {
      if (r.kind === 'user') {
        created(r);
        const out = applyIdentify(cfg, state, userInputOf(cfg, userId, (r.data as UserRowData).user), ctx);
        state = out.state;
        keep(out.effects);
      } else if (r.kind === 'metric') {
        const data = r.data as MetricRowData | null;
        if (data?.reverses !== undefined || reversed.has(r.id) || !cfg.index.metrics.has(r.key)) continue;
        created(r);
        const event: EventInput = { metricKey: r.key, user: userInputOf(cfg, userId, data?.user), value: r.delta };
        const attributes = pick(data?.attributes, cfg.index.eventAttributes);
        if (attributes) event.attributes = attributes;
        if (data?.idempotencyKey !== undefined) event.idempotencyKey = data.idempotencyKey;
        validateEvent(cfg, event);
        const out = applyValidatedEvent(cfg, state, event, ctx);
        state = out.state;
        keep(out.effects);
      } else if (r.kind === 'operation') {
        if (state === null || done.has(r.id)) continue;
        // The operations of one `runOperations` call (their rows named by its last row's `batch`) apply
        // together or not at all, as the call did.
        const group = groups.get(r.id)?.flatMap((id) => {
          const m = operations.get(id);
          return m ? [m] : [];
        }) ?? [r];
        for (const m of group) done.add(m.id);
        let next: UserState = state;
        const effects: Effects[] = [];
        try {
          for (const m of group) {
            const out = applyOperation(cfg, next, operationOf(m), { now: new Date(m.at), newId });
            next = out.state;
            effects.push(out.effects);
          }
        } catch (error) {
          if (!isLaurelError(error)) throw error;
          for (const m of group) rejected.push(m);
          continue;
        }
        state = next;
        effects.forEach(keep);
      } else if (r.kind === 'achievement') {
        const achievement = cfg.index.achievements.get(r.key);
        if (!achievement || achievement.trigger !== 'api') continue;
        created(r);
        const user = userInputOf(cfg, userId, (r.data as CompletionRowData | null)?.user);
        validateUserInput(cfg, user);
        const out = applyCompletion(cfg, state, achievement, user, ctx);
        state = out.state;
        keep(out.effects);
      }
    } catch (error) {
      // What the configuration now refuses, recording the same input from scratch would have refused too.
      if (!isLaurelError(error)) throw error;
      rejected.push(r);
    }
  }
  if (state === null && current) seed(current.user, new Date(current.user.created));
  if (state !== null) {
    const out = applyAccrue(cfg, state, { now, newId });
    state = out.state;
    keep(out.effects);
  }
  return { state, ledger, rejected };
}

/** An `operation` row's operation as it was called (a pause and a boost keep the id they were given). */
function operationOf(r: LedgerRow): OperationInput {
  const { result, batch: _batch, ...op } = r.data as OperationRowData;
  // A pause keeps the id it was given, which a later deletePause row names.
  const id = op.op === 'pauseStreak' ? (result as { pause?: { id?: unknown } } | undefined)?.pause?.id : op.op === 'createBoost' ? (result as { boost?: { id?: unknown } } | undefined)?.boost?.id : undefined;
  return typeof id === 'string' ? ({ ...op, id } as OperationInput) : (op as OperationInput);
}

// ---------------------------------------------------------------------------------------------------------
// Reconcile: the forward rules, applied on the next read or write after a change

/** What {@link reconcileUser} and {@link replayUser} return. */
export interface Reconciled {
  /** The state brought in line with the configuration. */
  state: UserState;
  /** What to commit with the state (ledger rows, board writes, counters), as for any call. */
  effects: Effects;
  /** Achievements backdated or gained (keys, in the order their points were paid). */
  backdated: string[];
  /** Awards made, per points system (backdated ones are dated when they were earned). */
  awards: Map<string, Award[]>;
}

/**
 * Brings a state counted under earlier rules in line with `cfg` the forward way (docs/rules.md): an
 * achievement the user already meets is backdated to the instant its condition was first met (not listed in
 * any response; its points paid, dated then), a changed streak rule recomputes the streak and its history
 * from the ledger, and the points part is aligned as `alignRules` does. Nothing already paid or
 * unlocked is taken back. `rows` is the user's whole ledger in commit order. Pure; inputs never mutated.
 */
export function reconcileUser(cfg: LaurelConfig, prior: UserState, rows: readonly LedgerRow[], ctx: CoreContext): Reconciled {
  checkCall(cfg, ctx);
  const step = createStep(cfg, adoptState(prior), ctx.now, ctx.newId);
  alignRules(step);
  const backdated: string[] = [];
  if (step.state.rules !== cfg.rules.all) {
    const parts = ruleParts(step.state.rules);
    const rebuilt = rebuildUser(cfg, step.state.user.id, rows, ctx.now, step.state);
    if (rebuilt.state) {
      if (parts?.[1] !== cfg.rules.streak) replaceStreak(step, rebuilt, rows);
      backdateAchievements(step, rebuilt.state, backdated);
    }
    step.state.rules = cfg.rules.all;
    updateLeaderboards(step, null, 0);
  }
  refillYearlyChanges(step, rows);
  return { state: sealState(step), effects: step.effects, backdated, awards: awardsOut(step) };
}

/** The streak of the rebuilt state, with its history rows (only periods whose row differs are written). */
function replaceStreak(step: Step, rebuilt: Rebuilt, rows: readonly LedgerRow[]): void {
  const next = rebuilt.state?.streak ?? null;
  step.state.streak = next;
  const rule = step.cfg.rules.streak;
  const old = new Map<string, StreakPeriodRow>();
  for (const r of rows) {
    if (r.kind !== 'streak') continue;
    const p = r.data as StreakPeriodRow;
    if (p.rule === undefined || p.rule === rule) old.set(p.periodStart, p);
  }
  const fresh = new Map<string, LedgerRow>();
  for (const r of rebuilt.ledger) if (r.kind === 'streak') fresh.set((r.data as StreakPeriodRow).periodStart, r);
  const userId = step.state.user.id;
  for (const [period, r] of fresh) {
    const p = r.data as StreakPeriodRow;
    const was = old.get(period);
    if (was && was.length === p.length && was.usedFreeze === p.usedFreeze && (was.usedPause === true) === (p.usedPause === true)) continue;
    step.effects.ledger.push({ ...r, id: step.newId(), userId, data: { ...p, rule } });
  }
  // A period the new rule does not count shows as none in history.
  for (const [period, p] of old) {
    if (fresh.has(period) || p.rule !== rule) continue;
    step.effects.ledger.push({ id: step.newId(), userId, kind: 'streak', key: 'streak', at: step.nowIso, delta: 0, total: 0, data: { ...p, length: 0, usedFreeze: false, usedPause: false, rule } });
  }
}

/** Backdates every achievement the rebuilt state holds and the user does not, paying its triggers dated then. */
function backdateAchievements(step: Step, rebuilt: UserState, out: string[]): void {
  const gained = step.cfg.achievements
    .filter((a) => own(step.state.achievements, a.key) === undefined && own(rebuilt.achievements, a.key) !== undefined)
    .map((a) => ({ a, at: (own(rebuilt.achievements, a.key) as { achievedAt: string }).achievedAt }))
    .sort((x, y) => (x.at < y.at ? -1 : x.at > y.at ? 1 : x.a.index - y.a.index));
  if (gained.length === 0) return;
  const achievements = ownRecord(step, 'achievements');
  for (const { a, at } of gained) {
    achievements[a.key] = { achievedAt: at, completionId: step.newId() };
    step.effects.counters[`achievement:${a.key}`] = (step.effects.counters[`achievement:${a.key}`] ?? 0) + 1;
    out.push(a.key);
    for (const system of step.cfg.pointsSystems) {
      for (const t of system.achievementTriggers.get(a.key) ?? []) {
        if (t.type !== 'achievement') continue;
        if (!matchesFilter(t.userAttributes, step.state.user.attributes)) continue;
        // A backdated unlock cannot be refused: a blocking trigger is cut at the floor like any other.
        award(step, system, t, t.points, new Date(at), false, true);
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------------------
// Replay

/** How replay treats what was already paid or unlocked (docs/rules.md, "Replay"). */
export type ReplayPolicy = 'forward' | 'retroactive' | 'grandfather';

/** What replay changes (or would change, in a dry run) for one user. */
export interface ReplayDiff {
  /** The user replayed. */
  userId: string;
  /** True when replay changes anything for this user. */
  changed: boolean;
  /**
   * Achievement keys the user gains and loses, and (`retroactive`) those they keep whose `achievedAt` moves
   * to when the condition was first met under the current rules.
   */
  achievements: { gained: string[]; lost: string[]; redated: string[] };
  /** Systems whose total changes: before, after, and the change. */
  points: Record<string, { before: number; after: number; delta: number }>;
  /**
   * The streak's length and the user's freezes (0 without a streak) before, as any call at the replay's
   * instant finds them (kept up to that day, freezes used), and after.
   */
  streak: { before: number; after: number; freezesBefore: number; freezesAfter: number };
  /**
   * Boards whose value for the user changes (current runs): value before and after (null: no entry), and,
   * filled by `engine.replay` (the pure functions leave them null), the user's rank before and the rank the
   * new value takes against the board as it stands when the user is replayed (null: unranked).
   */
  leaderboards: Record<string, { before: number | null; after: number | null; rankBefore: number | null; rankAfter: number | null }>;
  /** Award rows taken back and award rows added (`retroactive`, `grandfather`). */
  awards: { reversed: number; added: number };
  /** Events the configuration now refuses, taken back with reversal rows (`retroactive` only). */
  rejectedEvents: number;
}

/** An award row's identity without its amount: trigger, date and run of grants. */
function awardSlot(row: LedgerRow): string {
  const d = row.data as AwardRow;
  const g: GrantRun | undefined = d.grants;
  return `${d.trigger}|${d.dated ?? row.at}|${g ? `${g.count}/${g.unit}/${g.every}/${g.tz}` : ''}`;
}

/** An award row's identity for matching recorded awards with recomputed ones: its slot and amount. */
const awardKey = (row: LedgerRow): string => `${awardSlot(row)}|${row.delta}`;


/**
 * Recomputes one user from their ledger under `cfg` with a policy, and returns the next state, the effects
 * to commit and the diff. `forward`: the rules of {@link reconcileUser} (nothing past changes).
 * `retroactive`: the state recording the same history from scratch under `cfg` would have; awards it would
 * not pay are taken back with reversal rows, awards it would pay and were not are added (dated when they
 * fell due, booked now), events it refuses are taken back, achievements it does not hold are removed.
 * `grandfather`: as retroactive, but nothing is taken back (achievements kept, awards kept, events kept).
 * Data of configured entities that were removed stays as it is. Pure; inputs never mutated.
 */
export function replayUser(cfg: LaurelConfig, prior: UserState, rows: readonly LedgerRow[], policy: ReplayPolicy, ctx: CoreContext): Reconciled & { diff: ReplayDiff } {
  checkCall(cfg, ctx);
  const before = adoptState(prior);
  if (policy === 'forward') {
    const out = reconcileUser(cfg, before, rows, ctx);
    return { ...out, diff: diffOf(cfg, before, out.state, out.backdated, [], 0, 0, 0) };
  }
  const rebuilt = rebuildUser(cfg, before.user.id, rows, ctx.now, before);
  const target = rebuilt.state;
  const step = createStep(cfg, before, ctx.now, ctx.newId);
  alignRules(step);
  const userId = before.user.id;
  const take = policy === 'retroactive';
  if (!target) return { state: sealState(step), effects: step.effects, backdated: [], awards: awardsOut(step), diff: diffOf(cfg, before, step.state, [], [], 0, 0, 0) };

  // The user record as the history gives it: an upsert sent with an event refused now is refused with it.
  if (take) step.state.user = target.user;

  // Metrics: recomputed totals (events refused now are taken back under `retroactive`).
  const metrics = ownRecord(step, 'metrics');
  if (take) {
    for (const r of rebuilt.rejected) {
      if (r.kind !== 'metric') continue;
      const total = addExact(own(metrics, r.key) ?? 0, -r.delta);
      metrics[r.key] = total;
      const data: MetricRowData = { reverses: r.id };
      step.effects.ledger.push({ id: step.newId(), userId, kind: 'metric', key: r.key, at: step.nowIso, delta: -r.delta, total, data });
    }
  }
  const progress = ownRecord(step, 'achievementProgress');
  for (const m of cfg.metrics) {
    const v = own(target.metrics, m.key);
    if (take) {
      if (v === undefined) delete metrics[m.key];
      else metrics[m.key] = v;
    }
  }
  for (const a of cfg.achievements) {
    const v = own(target.achievementProgress, a.key);
    if (v === undefined) delete progress[a.key];
    else progress[a.key] = v;
  }

  // Achievements: those of the recomputed state; `grandfather` keeps every one already held.
  const achievements = ownRecord(step, 'achievements');
  const gained: string[] = [];
  const lost: string[] = [];
  const redated: string[] = [];
  for (const a of cfg.achievements) {
    const was = own(before.achievements, a.key);
    const now = own(target.achievements, a.key);
    if (now && !was) {
      achievements[a.key] = { achievedAt: now.achievedAt, completionId: step.newId() };
      gained.push(a.key);
      step.effects.counters[`achievement:${a.key}`] = (step.effects.counters[`achievement:${a.key}`] ?? 0) + 1;
    } else if (was && now && take && was.achievedAt !== now.achievedAt) {
      // Recomputed: the instant the condition was first met under the current rules.
      achievements[a.key] = { achievedAt: now.achievedAt, completionId: was.completionId };
      redated.push(a.key);
    } else if (was && !now && take && a.status === 'active') {
      // An inactive or locked achievement unlocks for nobody now, so a recount cannot earn it: holders keep it.
      delete achievements[a.key];
      lost.push(a.key);
      step.effects.counters[`achievement:${a.key}`] = (step.effects.counters[`achievement:${a.key}`] ?? 0) - 1;
    }
  }

  // Streak: recomputed under every policy (it follows the current rule), with its history.
  replaceStreak(step, rebuilt, rows);

  // Points: awards matched between the ledger and the recomputation; the difference booked now.
  const totalsWritten = new Set<string>();
  let reversed = 0;
  let added = 0;
  for (const system of cfg.pointsSystems) {
    const recorded = new Map<string, LedgerRow[]>();
    const takenBack = new Set<string>();
    for (const r of rows) {
      if (r.kind !== 'points' || r.key !== system.key) continue;
      const rev = (r.data as AwardRow | AdjustmentRow | null)?.reverses;
      if (rev !== undefined) takenBack.add(rev);
    }
    for (const r of rows) {
      if (r.kind !== 'points' || r.key !== system.key || takenBack.has(r.id)) continue;
      if ((r.data as AwardRow | AdjustmentRow | null)?.reverses !== undefined) continue;
      // Adjustments are not awards: the correction below squares the total they moved.
      if (r.data === null || isAdjustment(r) || typeof (r.data as { trigger?: unknown }).trigger !== 'string') continue;
      const k = awardKey(r);
      const list = recorded.get(k);
      if (list) list.push(r);
      else recorded.set(k, [r]);
    }
    const missing: LedgerRow[] = [];
    for (const r of rebuilt.ledger) {
      if (r.kind !== 'points' || r.key !== system.key) continue;
      const list = recorded.get(awardKey(r));
      if (list && list.length > 0) list.shift();
      else missing.push(r);
    }
    const surplus = take ? [...recorded.values()].flat() : [];
    // What to add: each missing award whole, except that `grandfather` tops up a re-priced award (same
    // trigger and date, another amount) by what it gained, and keeps one that lost as it was.
    let owed: { row: LedgerRow; delta: number }[] = missing.map((row) => ({ row, delta: row.delta }));
    if (!take) {
      const kept = new Map<string, LedgerRow[]>();
      for (const r of [...recorded.values()].flat()) {
        const slot = awardSlot(r);
        const list = kept.get(slot);
        if (list) list.push(r);
        else kept.set(slot, [r]);
      }
      owed = owed.flatMap((o) => {
        const old = kept.get(awardSlot(o.row))?.shift();
        if (!old) return [o];
        return o.row.delta > old.delta ? [{ row: o.row, delta: addExact(o.row.delta, -old.delta) }] : [];
      });
    }
    if (surplus.length === 0 && owed.length === 0 && !take) continue;
    const ps = ownPoints(step, system.key);
    const tps = own(target.points, system.key);
    // Progress on triggers follows the recomputation, so future awards follow the current rules.
    if (tps) {
      for (const t of system.triggers) {
        const m = own(tps.metric, t.id);
        if (m !== undefined) ps.metric[t.id] = m;
        else delete ps.metric[t.id];
        const n = own(tps.time, t.id);
        if (n !== undefined) ps.time[t.id] = n;
        else delete ps.time[t.id];
      }
      // With the restart instants of `anchor: 'lastSpend'` schedules the counts above are read against
      // (never written in place: shared, not copied).
      if (tps.anchors !== undefined) ps.anchors = tps.anchors;
      else delete ps.anchors;
    }
    surplus.sort((x, y) => (x.at < y.at ? -1 : x.at > y.at ? 1 : 0));
    for (const r of surplus) {
      ps.total = addExact(ps.total, -r.delta);
      const d = r.data as AwardRow;
      const data: AwardRow = { trigger: d.trigger, type: d.type, reverses: r.id };
      step.effects.ledger.push({ id: step.newId(), userId, kind: 'points', key: system.key, at: step.nowIso, delta: -r.delta, total: ps.total, data });
      reversed++;
    }
    for (const { row: r, delta } of owed) {
      ps.total = addExact(ps.total, delta);
      const d = r.data as AwardRow;
      const data: AwardRow = { ...d, dated: d.dated ?? r.at };
      step.effects.ledger.push({ id: step.newId(), userId, kind: 'points', key: system.key, at: step.nowIso, delta, total: ps.total, data });
      added++;
    }
    // What adjustments (clamps to a cap) and rows before 0.3 moved: one correction to the recomputed total.
    const want = tps?.total ?? 0;
    if (take && ps.total !== want) {
      const delta = addExact(want, -ps.total);
      ps.total = want;
      const data: AdjustmentRow = { adjustment: 'replay' };
      step.effects.ledger.push({ id: step.newId(), userId, kind: 'points', key: system.key, at: step.nowIso, delta, total: want, data });
    }
    if (ps.total !== pointsState(before, system.key).total) {
      step.effects.leaderboard.push({ index: pointsTotalsIndex(system.key), userId, value: ps.total, reachedAt: step.nowIso, date: step.today, unranked: true });
      pushAttributeTotals(step, system, ps.total);
      totalsWritten.add(system.key);
    }
  }
  // A user record the history changed (`retroactive`) moves the user between attribute totals indexes.
  if (attributesMoved(step)) {
    for (const system of cfg.pointsSystems) {
      if (totalsWritten.has(system.key)) continue;
      const total = pointsState(step.state, system.key).total;
      step.effects.leaderboard.push({ index: pointsTotalsIndex(system.key), userId, value: total, reachedAt: step.nowIso, date: step.today, unranked: true });
      pushAttributeTotals(step, system, total);
    }
  }

  // Boards: the recomputed values of current runs (`grandfather`: never below what the user has).
  const boards = ownRecord(step, 'leaderboards');
  for (const b of cfg.leaderboards) {
    // An inactive board is not tracked: replay leaves the entries it had as they are.
    if (b.status === 'inactive') continue;
    const was = own(before.leaderboards, b.key);
    let now = own(target.leaderboards, b.key);
    if (!take && was && now && was.run === now.run && was.group === now.group && was.value > now.value) now = was;
    if (was === now || (was && now && was.run === now.run && was.group === now.group && was.value === now.value)) continue;
    const date = localDateIn(step, b.timeZone ?? step.tz);
    const writes: LeaderboardWrite[] = step.effects.leaderboard;
    if (was && (!now || (was.run === now.run && was.group !== now.group) || (was.run === now.run && now.value <= 0))) {
      writes.push({ index: boardIndexOf(b, was.run, was.group), userId, remove: true, date, thresholdRank: b.maxParticipants });
    }
    if (now && now.value > 0) writes.push({ index: boardIndexOf(b, now.run, now.group), userId, value: now.value, reachedAt: now.reachedAt, date, thresholdRank: b.maxParticipants });
    if (now) boards[b.key] = now;
    else if (was && take) delete boards[b.key];
  }
  step.state.rules = cfg.rules.all;
  refillYearlyChanges(step, rows);
  const state = sealState(step);
  // The streak as any call now would find it (kept up to today, freezes used), so that what time alone
  // does is not a change of replay's.
  const seen = asOfNow(cfg, before, ctx);
  const diff = diffOf(cfg, before, state, gained, lost, reversed, added, take ? rebuilt.rejected.filter((r) => r.kind === 'metric').length : 0, redated, seen.streak);
  // What else the recomputation moves that the next calls read: the streak (its period, expiry and
  // freezes), filtered achievement progress, trigger progress and the restart instants of `lastSpend`
  // schedules. Then the user changed, and the engine commits the new state. (Time grant counts are left out:
  // a call that only passes grants by commits nothing, and a count a later call settles the same way is not
  // a change.)
  if (!diff.changed && !(sameData(seen.streak, state.streak) && sameData(before.achievementProgress, state.achievementProgress) && cfg.pointsSystems.every((sys) => sameProgress(pointsState(before, sys.key), pointsState(state, sys.key))))) diff.changed = true;
  return { state, effects: step.effects, backdated: gained, awards: awardsOut(step), diff };
}

/**
 * A user's state as a call at `ctx.now` would find it before doing anything (streak kept up, freezes used,
 * time grants due), under `cfg`; the state as it is when that call would be refused.
 */
function asOfNow(cfg: LaurelConfig, state: UserState, ctx: CoreContext): UserState {
  try {
    return sealState(begin(cfg, state, null, readContext(state, ctx, 'replay-now'), true));
  } catch (error) {
    if (!isLaurelError(error)) throw error;
    return state;
  }
}

/** A points system's trigger progress and `lastSpend` restart instants, equal in both states. */
const sameProgress = (a: PointsState, b: PointsState): boolean => sameData(a.metric, b.metric) && sameData(a.anchors ?? {}, b.anchors ?? {});

/** Deep equality of two JSON-like values (plain objects, arrays, primitives; an undefined property is absent). */
function sameData(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  const ka = Object.keys(a).filter((k) => (a as Record<string, unknown>)[k] !== undefined);
  const kb = Object.keys(b).filter((k) => (b as Record<string, unknown>)[k] !== undefined);
  if (ka.length !== kb.length) return false;
  for (const k of ka) if (!Object.hasOwn(b, k) || !sameData((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k])) return false;
  return true;
}

function diffOf(cfg: LaurelConfig, before: UserState, after: UserState, gained: string[], lost: string[], reversed: number, added: number, rejected: number, redated: string[] = [], streakBefore = before.streak): ReplayDiff {
  const points: ReplayDiff['points'] = {};
  for (const s of cfg.pointsSystems) {
    const b = pointsState(before, s.key).total;
    const a = pointsState(after, s.key).total;
    if (a !== b) points[s.key] = { before: b, after: a, delta: addExact(a, -b) };
  }
  const leaderboards: ReplayDiff['leaderboards'] = {};
  for (const l of cfg.leaderboards) {
    if (l.status === 'inactive') continue;
    const b = own(before.leaderboards, l.key);
    const a = own(after.leaderboards, l.key);
    if (b === a || (a && b && a.run === b.run && a.group === b.group && a.value === b.value)) continue;
    leaderboards[l.key] = { before: b ? b.value : null, after: a ? a.value : null, rankBefore: null, rankAfter: null };
  }
  const streak = { before: streakBefore?.length ?? 0, after: after.streak?.length ?? 0, freezesBefore: streakBefore?.freezes ?? 0, freezesAfter: after.streak?.freezes ?? 0 };
  const diff: ReplayDiff = {
    userId: before.user.id,
    changed: false,
    achievements: { gained: [...gained], lost: [...lost], redated: [...redated] },
    points,
    streak,
    leaderboards,
    awards: { reversed, added },
    rejectedEvents: rejected,
  };
  diff.changed =
    gained.length > 0 ||
    lost.length > 0 ||
    redated.length > 0 ||
    Object.keys(points).length > 0 ||
    streak.before !== streak.after ||
    streak.freezesBefore !== streak.freezesAfter ||
    Object.keys(leaderboards).length > 0 ||
    reversed > 0 ||
    added > 0 ||
    rejected > 0;
  return diff;
}
