/**
 * Change events (issue 15): what a commit changed for one user, as the hosted service's webhook payloads.
 *
 * `deriveChanges` compares the state a call loaded with the state it is about to commit (and reads the
 * call's ledger rows for the instants lazily materialised changes fell due at), so every committed change
 * is reported exactly once, by the commit that made it. It also emits the reminders (`emails.*`) whose time
 * has come, records them in the state's `notices` so each is emitted once, and computes the user's next due
 * instant: when the next time-driven change (a streak lapse or freeze, a freeze earned, a time grant, a boost
 * starting or ending, a reminder) falls due, for the sweep's index.
 *
 * Pure and deterministic: ids come from `ctx.newId`, time from `ctx.now`; inputs are never mutated.
 */
import type { CompiledLeaderboard, CompiledPointsSystem, LaurelConfig } from '../config/define.js';
import { userAchievementView } from './achievements.js';
import { addDays, localDateOf, nextPeriodStart, periodEndOf, periodStartOf, startOfLocalDate, type LocalDate } from './calendar.js';
import { boardIndexOf, leaderboardView, runContaining, runStatus, type Run } from './leaderboards.js';
import { operationStreak, preferencesView } from './operations.js';
import { awardOfRow, grantInstant, isAdjustment, levelFor, pushNextGrantInstants, systemView } from './points.js';
import { isoOf } from './instants.js';
import { own, userZone, withNotices } from './step.js';
import { freezesHeld, streakView } from './streaks.js';
import type { Award, AwardRow, LeaderboardView, PointsTriggerView, ChangeEvent, ChangeType, CoreContext, Effects, LedgerRow, Notices, NotificationType, OperationRowData, StreakPeriodRow, UserBoost, UserRecord, UserState } from './types.js';

const DAY_MS = 86_400_000;

/** The hosted service's `User` as webhooks carry it (device tokens and e-mail opt-in are not kept by Laurel). */
export function wireUser(user: UserRecord) {
  // Built once per user record (records are shared between a user's states until they change).
  let wired = wiredUsers.get(user);
  if (!wired) {
    wired = Object.freeze({ ...user, attributes: Object.freeze({ ...user.attributes }), deviceTokens: Object.freeze([]) as unknown as string[], subscribeToEmails: true, control: user.control === true });
    wiredUsers.set(user, wired);
  }
  return wired;
}
const wiredUsers = new WeakMap<UserRecord, Readonly<UserRecord & { deviceTokens: string[]; subscribeToEmails: boolean; control: boolean }>>();

/** The hosted service's `LeaderboardResponse` of a board with its status (`breakdownAttribute`: the first breakdown). */
export function wireBoard(board: CompiledLeaderboard, status: string) {
  let byStatus = wiredBoards.get(board);
  if (!byStatus) wiredBoards.set(board, (byStatus = new Map()));
  let wired = byStatus.get(status);
  if (!wired) {
    const view = leaderboardView(board);
    wired = Object.freeze({ ...view, breakdownAttribute: view.breakdownAttributes[0] ?? null, status });
    byStatus.set(status, wired);
  }
  return wired;
}
const wiredBoards = new WeakMap<CompiledLeaderboard, Map<string, Readonly<LeaderboardView & { breakdownAttribute: string | null; status: string }>>>();

/**
 * The `leaderboard` of a board's `leaderboard.rank_changed` payload before its values: {@link wireBoard}
 * with `rank`, `value`, `previousRank` and `previousValue` in that order. Private and never handed out: each
 * event spreads it (a plain object spreads on V8's fast path, a frozen one does not) and sets its values.
 */
function rankTemplate(board: CompiledLeaderboard, status: string): Record<string, unknown> {
  let byStatus = rankTemplates.get(board);
  if (!byStatus) rankTemplates.set(board, (byStatus = new Map()));
  let template = byStatus.get(status);
  if (!template) {
    template = { ...wireBoard(board, status), rank: null, value: 0, previousRank: null, previousValue: null };
    byStatus.set(status, template);
  }
  return template;
}
const rankTemplates = new WeakMap<CompiledLeaderboard, Map<string, Record<string, unknown>>>();

/**
 * The `rank` marker of a `leaderboard.rank_changed` event (`{ index, cap }` to every store and in JSON), which
 * also carries, privately, the event's `leaderboard` object and the board description it was spread from
 * (its {@link rankTemplate}: the fields but for the event's values and ranks). A store that keeps events in
 * memory keeps that one shared description and the event's values instead of a copy of the description per
 * event (the memory outbox, see `store/outbox.ts`). Private: not serialised, and not carried by any copy of
 * the marker (a spread, a JSON round trip, `structuredClone`, a clone that keeps the prototype).
 */
class RankMarker {
  readonly #board: Readonly<Record<string, unknown>>;
  readonly #leaderboard: Readonly<Record<string, unknown>>;
  constructor(
    readonly index: string,
    readonly cap: number,
    board: Readonly<Record<string, unknown>>,
    leaderboard: Readonly<Record<string, unknown>>,
  ) {
    this.#board = board;
    this.#leaderboard = leaderboard;
  }

  static boardFor(marker: unknown, leaderboard: unknown): Readonly<Record<string, unknown>> | undefined {
    // A brand check, not instanceof: a clone that keeps the prototype has no private fields.
    return typeof marker === 'object' && marker !== null && #board in marker && marker.#leaderboard === leaderboard ? marker.#board : undefined;
  }
}

/**
 * The board description a rank event's marker was made with by {@link deriveChanges}, when `leaderboard` is
 * the very object the event was made with (a spread of the description with the event's `value` and
 * `previousValue` set); else undefined (any other marker, or a payload whose leaderboard was replaced). A
 * store that relies on it must not see edits made to that object in place (the events of a commit are the
 * store's once handed over; a wrapper that changes one replaces it or its payload). Never write to it.
 */
export function rankMarkerBoard(marker: ChangeEvent['rank'], leaderboard: unknown): Readonly<Record<string, unknown>> | undefined {
  return RankMarker.boardFor(marker, leaderboard);
}

/** The run starting on `start` of a board (`runContaining`), remembered per board for its last run. */
function runStarting(board: CompiledLeaderboard, start: LocalDate): Run {
  const last = lastRuns.get(board);
  if (last && last.from === start) return last.run;
  const run = runContaining(board, start);
  lastRuns.set(board, { from: start, run });
  return run;
}
const lastRuns = new WeakMap<CompiledLeaderboard, { from: LocalDate; run: Run }>();

/**
 * The `points` of a system's payloads before their values: `systemView(system)` with `total` (`total`), and
 * `added` and `awards` (`changed`), and `level` (`level`), in that order. Private and never handed out: each
 * event spreads it and sets its values (as {@link rankTemplate}).
 */
function pointsTemplate(system: CompiledPointsSystem, shape: 'total' | 'changed' | 'level'): Record<string, unknown> {
  let byShape = pointsTemplates.get(system);
  if (!byShape) pointsTemplates.set(system, (byShape = new Map()));
  let template = byShape.get(shape);
  if (!template) {
    template = { ...systemView(system), total: 0 };
    if (shape !== 'total') Object.assign(template, { added: 0, awards: null });
    if (shape === 'level') template.level = null;
    byShape.set(shape, template);
  }
  return template;
}
const pointsTemplates = new WeakMap<CompiledPointsSystem, Map<string, Record<string, unknown>>>();

/** The local date a user was created on in `tz`, remembered per (shared) user record. */
function createdDate(user: UserRecord, tz: string): LocalDate {
  const hit = createdDates.get(user);
  if (hit && hit.tz === tz) return hit.date;
  const date = localDateOf(new Date(user.created), tz);
  createdDates.set(user, { tz, date });
  return date;
}
const createdDates = new WeakMap<UserRecord, { tz: string; date: LocalDate }>();

/** The hosted service's `PointsBoostWebhookPayload` of a user's own boost. */
function wireUserBoost(system: CompiledPointsSystem, userId: string, b: UserBoost, status: 'active' | 'finished') {
  return { id: b.id, name: b.name, status, userId, pointsSystemId: system.id, pointsSystemKey: system.key, pointsSystemName: system.name, start: b.start, end: b.end, multiplier: b.multiplier, rounding: b.rounding };
}

/** A state to commit with its change events and due instant (both absent when change notifications are off). */
export interface Noted {
  state: UserState;
  changes?: ChangeEvent[];
  due?: string | null;
}

/**
 * What a trigger's `created` and `updated` read in webhook payloads: Laurel's configuration is code, so a
 * trigger has no creation time of its own.
 */
export const CONFIG_EPOCH = '1970-01-01T00:00:00.000Z';

/**
 * The hosted service's `PointsAward` of an award: its trigger with `status` (`active` while the configuration
 * has it, else `archived`), `userAttributes` (empty without a filter) and `created`/`updated`
 * ({@link CONFIG_EPOCH}); each boost as a `PointsBoost` (a configured one or the user's own, `active` as it
 * applied; one since deleted shows the award's date as its start).
 */
export function wireAward(system: CompiledPointsSystem, award: Award, userBoosts: readonly UserBoost[]) {
  const out: Record<string, unknown> = { ...award, trigger: wireTrigger(system, award.trigger) };
  if (award.boosts) {
    out.boosts = award.boosts.map((b) => {
      const found = system.boosts.find((c) => c.id === b.id) ?? userBoosts.find((u) => u.id === b.id);
      return { id: b.id, name: b.name, status: 'active', start: found?.start ?? award.date.slice(0, 10), end: found?.end ?? null, multiplier: b.multiplier, rounding: found?.rounding ?? 'down' };
    });
  }
  return out;
}

// Wired trigger views, built once per (shared, frozen) view of a configured trigger.
const wiredTriggers = new WeakMap<PointsTriggerView, Record<string, unknown>>();

/** The hosted service's `PointsTrigger` of a trigger view (see {@link wireAward}). */
export function wireTrigger(system: CompiledPointsSystem, view: PointsTriggerView): Record<string, unknown> {
  const cached = Object.isFrozen(view) ? wiredTriggers.get(view) : undefined;
  if (cached) return cached;
  const configured = system.triggers.some((t) => t.id === view.id);
  const wired = Object.freeze({ ...view, status: configured ? 'active' : 'archived', userAttributes: view.userAttributes ?? [], created: CONFIG_EPOCH, updated: CONFIG_EPOCH });
  if (Object.isFrozen(view) && configured) wiredTriggers.set(view, wired);
  return wired;
}

/** What {@link deriveChanges} returns. */
export interface DerivedChanges {
  /** The state to commit: `after` with its `notices` brought up to `ctx.now`. */
  state: UserState;
  /** The change events, in the order they happened (by `at`; a commit's own changes in the order found). */
  changes: ChangeEvent[];
  /** The user's next due instant (ISO), or null when no time-driven change is ahead. */
  due: string | null;
}

/**
 * The change events of one commit as {@link deriveChanges} finds them, with what they share (the wired user,
 * the user's preferences), each built once and only when needed. A class rather than closures per call.
 */
class Found {
  /** The events, in the order found. */
  readonly out: ChangeEvent[] = [];
  private user: ReturnType<typeof wireUser> | null = null;
  private prefs: ReturnType<typeof preferencesView> | null = null;

  constructor(
    private readonly cfg: LaurelConfig,
    private readonly state: UserState,
    private readonly ctx: CoreContext,
  ) {}

  /** The user as webhooks carry it. */
  wired() {
    return (this.user ??= wireUser(this.state.user));
  }

  /** Adds a change event; `payload` starts with `type` (the payload is built whole, never re-spread). */
  emit(type: ChangeType, at: string, payload: Record<string, unknown> & { type: ChangeType }, rank?: ChangeEvent['rank']): void {
    // Made whole in one literal (a property added afterwards changes the object's shape, a cost per event).
    const id = this.ctx.newId();
    this.out.push(rank ? { id, type, userId: this.state.user.id, at, payload, rank } : { id, type, userId: this.state.user.id, at, payload });
  }

  /** Reminders go to users outside the experiment's control group who keep a channel for them. */
  reminds(type: NotificationType): boolean {
    return this.state.user.control !== true && ((this.prefs ??= preferencesView(this.cfg, this.state)).notifications[type]?.length ?? 0) > 0;
  }
}

/** Change events by instant (ISO strings of one format compare as the instants do). */
const byInstant = (a: ChangeEvent, b: ChangeEvent) => (a.at < b.at ? -1 : a.at > b.at ? 1 : 0);

/**
 * The instant of the last auto-earn grant of a commit that added a freeze: the grants after the stored state's
 * (`before`), each adding `amount` up to `max`, and the commit's frozen periods, each using one when it ended
 * (a grant falling at that same instant comes after it, as the streak's maintenance takes them), in time order
 * from what the user held before. The last grant's instant when none added one (not announced then).
 */
function lastGrantThatAdded(sc: NonNullable<LaurelConfig['streak']>, before: NonNullable<UserState['streak']>, after: NonNullable<UserState['streak']>, frozen: readonly LedgerRow[] | null, created: LocalDate, tz: string): number {
  const freezes = sc.freezes as NonNullable<NonNullable<LaurelConfig['streak']>['freezes']>;
  const auto = freezes.autoEarn as NonNullable<typeof freezes.autoEarn>;
  const grantAt = (k: number) => dayStart(addDays(created, k * auto.everyDays), tz);
  const uses = (frozen ?? []).map((r) => Date.parse(r.at)).sort((a, b) => a - b);
  let held = freezesHeld(sc, before.freezes);
  let used = 0;
  let last = grantAt(after.freezeGrants);
  for (let k = before.freezeGrants + 1; k <= after.freezeGrants; k++) {
    const t = grantAt(k);
    for (; used < uses.length && (uses[used] as number) <= t; used++) held = Math.max(0, held - 1);
    const next = Math.min(freezes.max, held + auto.amount);
    if (next > held) last = t;
    held = next;
  }
  return last;
}

/** The instant a local date begins in `tz`, in ms. */
const dayStart = (date: LocalDate, tz: string) => startOfLocalDate(date, tz).getTime();

/**
 * The change events of one commit of a user, from the state it loaded (`before`, null for a new user) to the
 * state it commits (`after`) with the commit's `effects`.
 */
export function deriveChanges(cfg: LaurelConfig, before: UserState | null, after: UserState, effects: Effects, ctx: CoreContext): DerivedChanges {
  const nowMs = ctx.now.getTime();
  const nowIso = isoOf(nowMs);
  const tz = userZone(cfg, after);
  const today = localDateOf(ctx.now, tz);
  const userId = after.user.id;
  const found = new Found(cfg, after, ctx);
  const out = found.out;

  // One pass over the commit's rows: freezes used, operations, the last event (each collection made only when
  // needed: most commits have none). Points rows are read per system below.
  let frozen: LedgerRow[] | null = null;
  let extendedHere = false;
  let granted = false;
  let activeNow: string | null = null;
  const rows = effects.ledger;
  for (let i = 0; i < rows.length; i++) {
    const r = rows[i] as LedgerRow;
    if (r.kind === 'metric') {
      if (activeNow === null || r.at > activeNow) activeNow = r.at;
    } else if (r.kind === 'streak') {
      if ((r.data as StreakPeriodRow | null)?.usedFreeze === true) (frozen ??= []).push(r);
      // A period that extended the streak (its row adds one to the length).
      else if (r.delta > 0) extendedHere = true;
    } else if (r.kind === 'operation') {
      const op = (r.data as OperationRowData | null)?.op;
      if (op === 'grantFreezes') granted = true;
    }
  }

  // Achievements, in configuration order (never the state's key order: stores may reorder keys).
  // Records a call did not change are the very same objects (structural sharing): nothing to compare there.
  for (const a of before?.achievements === after.achievements ? [] : cfg.achievements) {
    const got = own(after.achievements, a.key);
    if (!got) continue;
    const had = before ? own(before.achievements, a.key) : undefined;
    if (had && had.completionId === got.completionId) continue;
    const achievement = userAchievementView(a, after);
    found.emit('achievement.completed', got.achievedAt, { type: 'achievement.completed', user: found.wired(), achievement });
    if (cfg.notifications.achievement && found.reminds('achievement_completed')) found.emit('emails.achievement_due', got.achievedAt, { type: 'emails.achievement_due', timestamp: got.achievedAt, user: found.wired(), achievement });
  }

  // Streak.
  const sc = cfg.streak;
  const bs = before?.streak ?? null;
  const as = after.streak;
  let streakLostNow = false;
  // The streak as `getStreak` shows it today: computed once, for an event and the due instant.
  let shown: ReturnType<typeof streakView> | null = null;
  if (sc && as && as !== bs) {
    const lost = as.lost ?? null;
    const hadLost = bs?.lost ?? null;
    if (lost && !(hadLost && hadLost.period === lost.period && hadLost.length === lost.length && hadLost.started === lost.started)) {
      streakLostNow = true;
      found.emit('streak.lost', isoOf(dayStart(addDays(periodEndOf(lost.period, sc.frequency), 1), tz)), { type: 'streak.lost', user: found.wired(), length: lost.length });
    }
    const consumed = frozen === null ? 0 : frozen.length;
    // A new user's initial freezes are not earned: they start with them. Counted from what the user held as the
    // call began: a lowered `freezes.max` brings a count above it down first (core/streaks.ts), with no event.
    const earned = bs ? as.freezes - freezesHeld(sc, bs.freezes) + consumed : 0;
    if (earned > 0) {
      // Auto-earned freezes fall due at the start of the day they were earned (the last grant that added one:
      // grants at the maximum add none); granted ones when granted.
      const auto = sc.freezes?.autoEarn;
      let at = nowIso;
      if (!granted && auto && bs && as.freezeGrants > bs.freezeGrants) {
        const ms = lastGrantThatAdded(sc, bs, as, frozen, createdDate(after.user, tz), tz);
        if (ms <= nowMs) at = isoOf(ms);
      }
      found.emit('streak.freeze_earned', at, { type: 'streak.freeze_earned', user: found.wired(), earned, freezes: as.freezes });
    }
    if (consumed > 0) found.emit('streak.freeze_consumed', ((frozen as LedgerRow[])[consumed - 1] as LedgerRow).at, { type: 'streak.freeze_consumed', user: found.wired(), consumed, freezes: as.freezes });
    // Extended by this commit: a new instant of extension, or (two extensions at one instant, the user's zone
    // moved east between them) a period row that extended it under the same rules (a changed rule's recount
    // writes such rows too, and extends nothing).
    if (as.length > 0 && as.lastExtendedAt !== null && (as.lastExtendedAt !== (bs?.lastExtendedAt ?? null) || (extendedHere && before?.rules === after.rules))) {
      const fresh = !bs || bs.length === 0 || streakLostNow || bs.started !== as.started;
      if (fresh || as.length > bs.length) {
        const type = fresh ? 'streak.started' : 'streak.extended';
        found.emit(type, as.lastExtendedAt, { type, user: found.wired(), streak: (shown ??= streakView(cfg, after, today)) });
      }
    }
  }

  // Points and levels (the user's boosts, after and before, for the awards' boosts: built once, when needed).
  let userBoosts: UserBoost[] | null = null;
  for (const system of before?.points === after.points ? [] : cfg.pointsSystems) {
    const was = (before ? own(before.points, system.key)?.total : undefined) ?? 0;
    const total = own(after.points, system.key)?.total ?? 0;
    if (was === total) continue;
    let at = '';
    const awards = [];
    for (let i = 0; i < rows.length; i++) {
      const r = rows[i] as LedgerRow;
      if (r.kind !== 'points' || r.key !== system.key) continue;
      const grants = (r.data as AwardRow | null)?.grants;
      const last = grants ? isoOf(grantInstant(r.at, grants, grants.count - 1)) : r.at;
      if (last > at) at = last;
      // Only trigger awards are listed (the service's trigger types); adjustments count in `added`.
      if (!isAdjustment(r) && (r.data as AwardRow | null)?.type !== 'adjustment') awards.push(wireAward(system, awardOfRow(system, r), (userBoosts ??= [...(after.boosts ?? []), ...(before?.boosts ?? [])])));
    }
    if (at === '' || at > nowIso) at = nowIso;
    const from = levelFor(system, was);
    const to = levelFor(system, total);
    const levelChanged = (from?.key ?? null) !== (to?.key ?? null);
    // Keys in the order of `{ ...systemView(system), total, added, awards, level? }` (see pointsTemplate).
    const points = { ...pointsTemplate(system, levelChanged ? 'level' : 'changed') };
    points.total = total;
    points.added = total - was;
    points.awards = awards;
    if (levelChanged) points.level = to;
    found.emit('points.changed', at, { type: 'points.changed', user: found.wired(), points });
    if (levelChanged) {
      const view = { ...pointsTemplate(system, 'total') };
      view.total = total;
      found.emit('points.level_changed', at, { type: 'points.level_changed', user: found.wired(), points: view, previousLevel: from, newLevel: to });
    }
  }

  // Leaderboards: a change of the user's value in a run (the store fills the ranks and drops it when the
  // rank stayed the same).
  for (const board of before?.leaderboards === after.leaderboards ? [] : cfg.leaderboards) {
    const now = own(after.leaderboards, board.key);
    if (!now) continue;
    const was = before ? own(before.leaderboards, board.key) : undefined;
    if (was === now) continue;
    const sameRun = was !== undefined && was.run === now.run && was.group === now.group;
    if (sameRun && was.value === now.value) continue;
    const status = runStatus(board, runStarting(board, now.run), ctx.now);
    // Keys in the order of `{ ...wireBoard(board, status), rank: null, value, previousRank: null, previousValue }`.
    const template = rankTemplate(board, status);
    const leaderboard = { ...template };
    leaderboard.value = now.value;
    leaderboard.previousValue = sameRun ? was.value : null;
    found.emit('leaderboard.rank_changed', now.reachedAt <= nowIso ? now.reachedAt : nowIso, { type: 'leaderboard.rank_changed', user: found.wired(), leaderboard }, new RankMarker(boardIndexOf(board, now.run, now.group), board.maxParticipants, template, leaderboard));
  }

  // A user's own boosts starting and ending (time-driven), each announced once: what was announced is
  // recorded in `notices.boosts`, so a zone change (which moves a boost's days) neither repeats nor skips one.
  const prior = before?.notices;
  let announced: Record<string, number> | undefined;
  // (Nothing to look at for a user who has no boosts, before or after.)
  if ((before?.boosts?.length ?? 0) > 0 || (after.boosts?.length ?? 0) > 0) {
    // Written whenever the user has boosts (empty when nothing was announced), so that a missing record
    // means a state from before it.
    announced = {};
    const through = prior ? Date.parse(prior.through) : Date.parse(after.user.created);
    const known = new Set((before?.boosts ?? []).map((b) => b.id));
    const kept = new Set((after.boosts ?? []).map((b) => b.id));
    const boosts = new Map<string, UserBoost>();
    for (const b of before?.boosts ?? []) boosts.set(b.id, b);
    for (const b of after.boosts ?? []) boosts.set(b.id, b);
    for (const b of boosts.values()) {
      const system = cfg.index.pointsSystems.get(b.system);
      if (!system) continue;
      const start = dayStart(b.start, tz);
      const end = b.end === null ? null : dayStart(addDays(b.end, 1), tz);
      // 0 nothing announced, 1 the start, 2 the end too. A state from before the record: what fell due by the
      // instant changes were last looked at.
      let done = prior?.boosts !== undefined ? (own(prior.boosts, b.id) ?? 0) : !known.has(b.id) ? 0 : end !== null && end <= through ? 2 : start <= through ? 1 : 0;
      // A boost deleted by this commit keeps what fell due before it; one made with dates already past is
      // announced as started and as finished.
      if (done < 1 && start <= nowMs) {
        found.emit('points.boost_started', isoOf(known.has(b.id) ? Math.min(Math.max(start, through), nowMs) : start), { type: 'points.boost_started', timestamp: isoOf(start), boost: wireUserBoost(system, userId, b, 'active') });
        done = 1;
      }
      if (done < 2 && end !== null && end <= nowMs) {
        found.emit('points.boost_finished', isoOf(end), { type: 'points.boost_finished', timestamp: isoOf(end), boost: wireUserBoost(system, userId, b, 'finished') });
        done = 2;
      }
      // A boost deleted while it ran finishes with its deletion (announced, so no consumer thinks it active).
      if (done === 1 && !kept.has(b.id)) found.emit('points.boost_finished', nowIso, { type: 'points.boost_finished', timestamp: nowIso, boost: wireUserBoost(system, userId, b, 'finished') });
      if (done > 0 && kept.has(b.id)) announced[b.id] = done;
    }
  }

  // Reminders, each emitted once (recorded in `notices`).
  const notices: Notices = { through: nowIso, active: prior?.active ?? null };
  if (prior?.streakReminder !== undefined) notices.streakReminder = prior.streakReminder;
  if (prior?.reactivation !== undefined) notices.reactivation = prior.reactivation;
  if (prior?.recap !== undefined) notices.recap = prior.recap;
  if (prior?.recapActivity !== undefined) notices.recapActivity = prior.recapActivity;
  if (announced !== undefined) notices.boosts = announced;
  const candidates: number[] = [];
  const n = cfg.notifications;

  // Recap of the last period that ended, when the user was active since the last recap was due.
  if (n.recap && found.reminds('recap')) {
    const period = periodStartOf(today, n.recap, cfg.weekStartsOn);
    const dueMs = dayStart(period, tz);
    const activity = notices.recapActivity;
    if (activity !== undefined && Date.parse(activity) < dueMs) {
      // The recap of the period the activity fell in, due when the next began (with no commit in between,
      // that is not the period just ended: idle periods after it get none). After a move west the activity
      // can read as a period already recapped: then the first period after that one.
      let recapStart = periodStartOf(localDateOf(new Date(activity), tz), n.recap, cfg.weekStartsOn);
      if (notices.recap !== undefined && periodEndOf(recapStart, n.recap) <= notices.recap) recapStart = periodStartOf(addDays(notices.recap, 1), n.recap, cfg.weekStartsOn);
      if (recapStart < period) {
        const recapEnd = periodEndOf(recapStart, n.recap);
        const at = isoOf(dayStart(nextPeriodStart(recapStart, n.recap), tz));
        found.emit('emails.recap_due', at, { type: 'emails.recap_due', timestamp: at, user: found.wired(), recap: { periodStart: recapStart, periodEnd: recapEnd } });
        notices.recap = recapEnd;
        delete notices.recapActivity;
      }
    }
    if (activeNow !== null && notices.recapActivity === undefined) notices.recapActivity = activeNow;
    if (notices.recapActivity !== undefined) candidates.push(dayStart(nextPeriodStart(period, n.recap), tz));
  } else if (activeNow !== null && n.recap) {
    notices.recapActivity ??= activeNow;
  }

  // Reactivation: message k is due `days[k-1]` whole days after the last event.
  if (activeNow !== null) {
    notices.active = activeNow;
    delete notices.reactivation;
  } else if (n.reactivationDays && notices.active !== null && found.reminds('reactivation')) {
    const idle = nowMs - Date.parse(notices.active);
    const sent = notices.reactivation ?? 0;
    let k = sent;
    while (k < n.reactivationDays.length && (n.reactivationDays[k] as number) * DAY_MS <= idle) k++;
    if (k > sent) {
      const days = n.reactivationDays[k - 1] as number;
      const at = isoOf(Date.parse(notices.active) + days * DAY_MS);
      found.emit('emails.reactivation_due', at, { type: 'emails.reactivation_due', timestamp: at, user: found.wired(), reactivation: { messageNumber: k, daysSinceLastActive: days } });
      notices.reactivation = k;
    }
  }
  if (n.reactivationDays && notices.active !== null && found.reminds('reactivation')) {
    const next = n.reactivationDays[notices.reactivation ?? 0];
    if (next !== undefined) candidates.push(Date.parse(notices.active) + next * DAY_MS);
  }

  // The streak: lapse (or freeze), freezes earned, and the reminder before it expires.
  if (sc && as && as.length > 0 && as.coveredThrough !== null) {
    const view = (shown ??= streakView(cfg, after, today));
    if (view.expires !== null) {
      const lapse = dayStart(addDays(view.expires, 1), tz);
      candidates.push(lapse);
      if (n.streakReminderHours !== null && found.reminds('streak_reminder') && notices.streakReminder !== view.expires) {
        // Only while the current period is not yet extended: a reminder whose time falls in an extended
        // period (`hoursBefore` longer than a period, or a short DST day) is due when the next one begins.
        const currentStart = periodStartOf(today, sc.frequency, cfg.weekStartsOn);
        const extended = as.coveredThrough >= currentStart;
        const from = dayStart(extended ? nextPeriodStart(currentStart, sc.frequency) : currentStart, tz);
        const remind = Math.max(lapse - n.streakReminderHours * 3_600_000, from);
        if (!extended && remind <= nowMs && nowMs < lapse) {
          const at = isoOf(remind);
          found.emit('emails.streak_reminder_due', at, { type: 'emails.streak_reminder_due', timestamp: at, user: found.wired(), streak: { ...operationStreak(cfg, after, today), streakHistory: [] } });
          notices.streakReminder = view.expires;
        } else if (remind > nowMs) candidates.push(remind);
      }
    }
  }
  const auto = sc?.freezes?.autoEarn;
  if (sc?.freezes && auto && as && as.freezes < sc.freezes.max) {
    candidates.push(dayStart(addDays(createdDate(after.user, tz), (as.freezeGrants + 1) * auto.everyDays), tz));
  }
  // Time grants.
  if (cfg.index.hasTimeTriggers) pushNextGrantInstants(cfg, after, ctx.now, candidates);
  // Boosts starting or ending.
  for (const b of after.boosts ?? []) {
    const start = dayStart(b.start, tz);
    if (start > nowMs) candidates.push(start);
    if (b.end !== null) {
      const end = dayStart(addDays(b.end, 1), tz);
      if (end > nowMs) candidates.push(end);
    }
  }

  let due = Infinity;
  for (const c of candidates) if (c > nowMs && c < due) due = c;
  // Changes in the order they happened; those of one instant in the order found (the sort is stable).
  let sorted = true;
  for (let i = 1; i < out.length && sorted; i++) sorted = (out[i - 1] as ChangeEvent).at <= (out[i] as ChangeEvent).at;
  if (!sorted) out.sort(byInstant);
  return {
    state: withNotices(after, notices),
    changes: out,
    due: due === Infinity ? null : isoOf(due),
  };
}
