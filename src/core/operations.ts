/**
 * Operator operations on one user (docs/rules.md, "Operations"): pure like `applyEvent`. Each writes an
 * `operation` ledger row (key: the operation's name, data: its input) that replay applies again in order, so
 * a user rebuilt from their ledger has the freezes, restores and pauses an operator gave them.
 */
import type { LaurelConfig } from '../config/define.js';
import { NotFoundError, ValidationError } from '../errors.js';
import type { CompiledPointsSystem } from '../config/define.js';
import { MAX_EXACT } from './decimal.js';
import { adjust, eventPoints, pointsState } from './points.js';
import { validateText } from './users.js';
import { addDays, isValidLocalDate, periodStartOf, previousPeriodStart, type LocalDate } from './calendar.js';
import { begin, finish } from './apply.js';
import { createBoost, deleteBoost, validateCreateBoost, validateDeleteBoost, type BoostRecord } from './boosts.js';
import { ownStreak, record, sealState, type Step } from './step.js';
import { extendedAt, streakRuleOf, streakView } from './streaks.js';
import type { CoreContext, Effects, EventPoints, NotificationChannel, NotificationType, OperationInput, OperationRowData, PreferencesPatch, StreakPause, StreakView, UserPreferences, UserState } from './types.js';

/** The most pauses a user may have scheduled or running at once. */
export const MAX_PAUSES = 10;
/** The longest pause, in days. */
export const MAX_PAUSE_DAYS = 366;

/**
 * What every streak, points and preferences operation answers: the user's streak afterwards, and a warning
 * when the operation changed nothing or less than asked.
 */
export interface StreakOperationResult {
  /** The streak after the operation, as `getStreak` shows it (without history). */
  streak: StreakView & { extended: string | null; pauses: StreakPause[] };
  /** Set when the operation changed nothing or less than asked (the hosted service's warnings). */
  warning?: string;
}

/** What `Engine.grantFreezes` answers: the freezes added and those refused beyond the configured maximum. */
export interface GrantFreezesResult extends StreakOperationResult {
  /** Freezes added. */
  granted: number;
  /** Freezes asked for beyond the configured maximum (not added). */
  excess: number;
}

/** What `Engine.restoreStreak` answers: `restored: false` (with a `warning`) when there was nothing to restore. */
export interface RestoreStreakResult extends StreakOperationResult {
  restored: boolean;
}

/** What `Engine.pauseStreak` answers: the pause stored, with its id. */
export interface PauseStreakResult extends StreakOperationResult {
  pause: StreakPause;
}

/** What `Engine.deletePause` answers: `deleted: false` (with a `warning`) when the user had no such pause. */
export interface DeletePauseResult extends StreakOperationResult {
  deleted: boolean;
}

/** A user's preferences with the defaults filled in (what `getPreferences` answers). */
export interface PreferencesView {
  notifications: Record<NotificationType, NotificationChannel[]>;
  streak: { enabled: boolean; mode: 'any' | 'all'; metrics: { key: string; threshold: number }[] } | null;
}

/** What `Engine.updatePreferences` answers: the user's preferences afterwards, with the defaults filled in. */
export interface UpdatePreferencesResult extends StreakOperationResult {
  preferences: PreferencesView;
}

/** What `Engine.adjustPoints` answers: the points actually added or spent and the system's new total. */
export interface AdjustPointsResult extends StreakOperationResult {
  /** Points actually added (negative for a spend; less than asked when a grant reaches `maxPoints`). */
  awarded: number;
  /** The system's total after the adjustment. */
  total: number;
  /** The system as an event response shows it (total, level, the adjustment award); empty when nothing changed. */
  points: Record<string, EventPoints>;
}

/** What `Engine.createBoost` answers: the runtime boost created. */
export interface CreateBoostResult extends StreakOperationResult {
  /** The boost created, as the store lists it. */
  boost: BoostRecord;
}

/** What `Engine.deleteBoost` answers: the id of the boost deleted. */
export interface DeleteBoostResult extends StreakOperationResult {
  /** The boost's id. */
  id: string;
}

/** One result of `Engine.runOperations`, in the order of the operations: the result type of the operation's `op`. */
export type OperationResult = AdjustPointsResult | GrantFreezesResult | RestoreStreakResult | PauseStreakResult | DeletePauseResult | UpdatePreferencesResult | CreateBoostResult | DeleteBoostResult;

export const NOTIFICATION_TYPES: readonly NotificationType[] = ['achievement_completed', 'recap', 'reactivation', 'streak_reminder'];
const CHANNELS: readonly NotificationChannel[] = ['email', 'push'];

/**
 * A user's preferences with defaults: every notification type on every channel, and the configuration's
 * streak rule (null without a streak).
 */
export function preferencesView(cfg: LaurelConfig, state: UserState | null): PreferencesView {
  const p = state?.preferences;
  const notifications = {} as Record<NotificationType, NotificationChannel[]>;
  for (const t of NOTIFICATION_TYPES) notifications[t] = [...(p?.notifications?.[t] ?? CHANNELS)];
  const sc = cfg.streak;
  // The rule that counts (a rule the configuration's customization no longer allows does not).
  const rule = sc ? streakRuleOf(sc, p) : null;
  const streak = sc && rule ? { enabled: p?.streak?.enabled ?? true, mode: rule.mode, metrics: (rule.metrics ?? []).map((m) => ({ key: m.key, threshold: m.threshold })) } : null;
  return { notifications, streak };
}

function validatePreferences(cfg: LaurelConfig, patch: PreferencesPatch): void {
  const bad = (path: (string | number)[], message: string): never => {
    throw new ValidationError(`preferences.${path.join('.')} ${message}`, [{ path: ['preferences', ...path], message }]);
  };
  if (typeof patch !== 'object' || patch === null || Array.isArray(patch)) bad([], 'must be an object { notifications, streak }');
  for (const k of Object.keys(patch)) if (k !== 'notifications' && k !== 'streak') bad([k], 'is not a preference');
  if (patch.notifications !== undefined) {
    if (typeof patch.notifications !== 'object' || patch.notifications === null || Array.isArray(patch.notifications)) bad(['notifications'], 'must be an object');
    for (const [t, channels] of Object.entries(patch.notifications)) {
      if (!NOTIFICATION_TYPES.includes(t as NotificationType)) bad(['notifications', t], `is not a notification type (${NOTIFICATION_TYPES.join(', ')})`);
      if (!Array.isArray(channels) || channels.some((c) => !CHANNELS.includes(c)) || new Set(channels).size !== channels.length) bad(['notifications', t], 'must be a list of distinct channels among "email" and "push"');
    }
  }
  const s = patch.streak;
  if (s === undefined) return;
  const sc = cfg.streak;
  if (!sc) bad(['streak'], 'needs a streak in the configuration');
  if (typeof s !== 'object' || s === null || Array.isArray(s)) bad(['streak'], 'must be an object { enabled, mode, metrics }');
  for (const k of Object.keys(s)) if (k !== 'enabled' && k !== 'mode' && k !== 'metrics') bad(['streak', k], 'is not a streak preference');
  if (s.enabled !== undefined && s.enabled !== null && typeof s.enabled !== 'boolean') bad(['streak', 'enabled'], 'must be a boolean');
  const custom = (sc as NonNullable<LaurelConfig['streak']>).customization;
  if ((s.mode !== undefined && s.mode !== null) || (s.metrics !== undefined && s.metrics !== null)) {
    if (!custom) bad(['streak'], 'mode and metrics need `streak.customization` in the configuration');
  }
  if (s.mode !== undefined && s.mode !== null && s.mode !== 'any' && s.mode !== 'all') bad(['streak', 'mode'], 'must be "any" or "all"');
  if (s.metrics !== undefined && s.metrics !== null) {
    const c = custom as NonNullable<typeof custom>;
    if (!Array.isArray(s.metrics) || s.metrics.length === 0 || s.metrics.length > c.metrics.length) bad(['streak', 'metrics'], `must list 1 to ${c.metrics.length} metrics`);
    const seen = new Set<string>();
    s.metrics.forEach((m, i) => {
      if (typeof m !== 'object' || m === null || typeof m.key !== 'string' || !c.metrics.includes(m.key) || seen.has(m.key)) bad(['streak', 'metrics', i, 'key'], `must be one of ${c.metrics.join(', ')}, each once`);
      seen.add(m.key);
      if (typeof m.threshold !== 'number' || !Number.isFinite(m.threshold) || m.threshold <= 0) bad(['streak', 'metrics', i, 'threshold'], 'must be a positive number');
      if (c.minThreshold !== null && m.threshold < c.minThreshold) bad(['streak', 'metrics', i, 'threshold'], `must be at least ${c.minThreshold}`);
      if (c.maxThreshold !== null && m.threshold > c.maxThreshold) bad(['streak', 'metrics', i, 'threshold'], `must be at most ${c.maxThreshold}`);
    });
  }
}

function updatePreferences(step: Step, patch: PreferencesPatch): UpdatePreferencesResult {
  const before = step.state.preferences ?? {};
  const next: UserPreferences = {};
  const notifications = { ...before.notifications };
  for (const [t, channels] of Object.entries(patch.notifications ?? {})) notifications[t as NotificationType] = [...(channels as NotificationChannel[])];
  if (Object.keys(notifications).length > 0) next.notifications = notifications;
  const streak: NonNullable<UserPreferences['streak']> = { ...before.streak };
  const s = patch.streak;
  if (s) {
    if (s.enabled === null) delete streak.enabled;
    else if (s.enabled !== undefined) streak.enabled = s.enabled;
    if (s.mode === null) delete streak.mode;
    else if (s.mode !== undefined) streak.mode = s.mode;
    if (s.metrics === null) delete streak.metrics;
    else if (s.metrics !== undefined) streak.metrics = s.metrics.map((m) => ({ key: m.key, threshold: m.threshold }));
  }
  if (Object.keys(streak).length > 0) next.streak = streak;
  const wasEnabled = before.streak?.enabled !== false;
  const state = step.state as UserState;
  if (Object.keys(next).length > 0) state.preferences = next;
  else delete state.preferences;
  if (wasEnabled && streak.enabled === false && step.state.streak) {
    // Turned off: the streak is 0 while off, and starts again from 0 when turned back on.
    const st = ownStreak(step);
    st.length = 0;
    st.started = null;
    st.coveredThrough = null;
    st.lost = null;
  }
  return { streak: result(step), preferences: preferencesView(step.cfg, step.state) };
}

const positiveInt = (value: unknown, path: string, max: number): number => {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1 || value > max) {
    throw new ValidationError(`${path} must be an integer from 1 to ${max} (got ${String(value)})`, [{ path: [path], message: `must be an integer from 1 to ${max}` }]);
  }
  return value;
};

const localDate = (value: unknown, path: string): LocalDate => {
  if (typeof value !== 'string' || !isValidLocalDate(value)) throw new ValidationError(`${path} must be a date in YYYY-MM-DD form (got ${String(value)})`, [{ path: [path], message: 'must be a date' }]);
  return value;
};

function needStreak(cfg: LaurelConfig) {
  if (!cfg.streak) throw new ValidationError('no streak is configured', [{ path: ['streak'], message: 'is not configured' }]);
  return cfg.streak;
}

/**
 * Checks an operation's input against the configuration before any work (the same checks replay meets).
 * @throws {ValidationError} for a malformed operation or one the configuration cannot take.
 */
export function validateOperation(cfg: LaurelConfig, op: OperationInput): void {
  if (typeof op !== 'object' || op === null) throw new ValidationError('operation must be an object', [{ path: ['operation'], message: 'must be an object' }]);
  switch (op.op) {
    case 'grantFreezes':
      if (!needStreak(cfg).freezes) throw new ValidationError('streak freezes are not configured', [{ path: ['streak', 'freezes'], message: 'are not configured' }]);
      positiveInt(op.count, 'count', 1_000_000);
      if (op.requireRoom !== undefined && typeof op.requireRoom !== 'boolean') throw new ValidationError('requireRoom must be a boolean', [{ path: ['requireRoom'], message: 'must be a boolean' }]);
      return;
    case 'restoreStreak':
      needStreak(cfg);
      return;
    case 'pauseStreak': {
      needStreak(cfg);
      const start = localDate(op.start, 'start');
      const end = localDate(op.end, 'end');
      if (op.id !== undefined && (typeof op.id !== 'string' || op.id.length === 0 || op.id.length > 255)) throw new ValidationError('a pause id must be a non-empty string', [{ path: ['id'], message: 'must be a non-empty string' }]);
      if (end < start) throw new ValidationError(`end (${end}) must not be before start (${start})`, [{ path: ['end'], message: 'must not be before start' }]);
      if (addDays(start, MAX_PAUSE_DAYS - 1) < end) throw new ValidationError(`a pause lasts at most ${MAX_PAUSE_DAYS} days`, [{ path: ['end'], message: `at most ${MAX_PAUSE_DAYS} days after start` }]);
      return;
    }
    case 'updatePreferences':
      validatePreferences(cfg, op.preferences);
      return;
    case 'adjustPoints':
      if (typeof op.system !== 'string' || !cfg.index.pointsSystems.has(op.system)) throw new NotFoundError('pointsSystem', String(op.system));
      if (typeof op.amount !== 'number' || !Number.isInteger(op.amount) || op.amount === 0 || Math.abs(op.amount) > MAX_EXACT) {
        throw new ValidationError(`amount must be a non-zero integer within +-${MAX_EXACT} (got ${String(op.amount)})`, [{ path: ['amount'], message: 'must be a non-zero integer' }]);
      }
      if (op.reason !== undefined) validateText(op.reason, ['reason'], 1000, { nonEmpty: true });
      return;
    case 'createBoost':
      validateCreateBoost(cfg, op);
      return;
    case 'deleteBoost':
      validateDeleteBoost(op);
      return;
    case 'deletePause':
      needStreak(cfg);
      if (typeof op.id !== 'string' || op.id.length === 0 || op.id.length > 255) throw new ValidationError('pauseId must be a non-empty string', [{ path: ['pauseId'], message: 'must be a non-empty string' }]);
      return;
    default:
      throw new ValidationError(`unknown operation ${JSON.stringify((op as { op?: unknown }).op)}`, [{ path: ['op'], message: 'is not an operation' }]);
  }
}

/** The pauses of a streak that are not over by `today` (upcoming and running), in start order. */
export function pausesFrom(state: UserState, today: LocalDate): StreakPause[] {
  return (state.streak?.pauses ?? []).filter((p) => p.end >= today);
}

/**
 * The earliest period start a lost streak can be restored from (the hosted service's windows): daily, 90
 * days back; weekly, the week containing 1 January of this year; monthly, the start of last year.
 */
export function restoreWindowStart(cfg: LaurelConfig, today: LocalDate): LocalDate {
  const sc = needStreak(cfg);
  const year = Number(today.slice(0, 4));
  if (sc.frequency === 'daily') return addDays(today, -90);
  if (sc.frequency === 'weekly') return periodStartOf(`${String(year).padStart(4, '0')}-01-01`, 'weekly', cfg.weekStartsOn);
  return `${String(year - 1).padStart(4, '0')}-01-01`;
}

/** The streak part of an operation's result: the streak as `getStreak` shows it, without history. */
export function operationStreak(cfg: LaurelConfig, state: UserState, today: LocalDate): StreakOperationResult['streak'] {
  return { ...streakView(cfg, state, today), extended: extendedAt(state), pauses: pausesFrom(state, today) };
}

const result = (step: Step) => operationStreak(step.cfg, step.state, step.today);

function grantFreezes(step: Step, count: number, requireRoom: boolean): GrantFreezesResult {
  const max = step.cfg.streak?.freezes?.max ?? 0;
  const have = step.state.streak?.freezes ?? 0;
  if (requireRoom && have + count > max) throw new ValidationError(`Would exceed maximum freeze limit (${have} of ${max}, ${count} more asked)`, [{ path: ['count'], message: 'would exceed the maximum freeze limit' }]);
  const s = ownStreak(step);
  const granted = Math.max(0, Math.min(count, max - s.freezes));
  s.freezes += granted;
  const excess = count - granted;
  return { streak: result(step), granted, excess, ...(excess > 0 ? { warning: 'Would exceed maximum freeze limit' } : {}) };
}

function restoreStreak(step: Step): RestoreStreakResult {
  const sc = step.cfg.streak as NonNullable<LaurelConfig['streak']>;
  const lost = step.state.streak?.lost ?? null;
  // A streak the user turned off stays 0 (updatePreferences; turning it off also forgot the loss).
  if (step.state.preferences?.streak?.enabled === false) return { streak: result(step), restored: false, warning: "The user's streak is turned off" };
  if (!lost || lost.period < restoreWindowStart(step.cfg, step.today)) {
    return { streak: result(step), restored: false, warning: lost ? 'The lost streak is outside the restore window' : 'No lost streak to restore' };
  }
  const s = ownStreak(step);
  const current = periodStartOf(step.today, sc.frequency, step.cfg.weekStartsOn);
  step.streakRestored = { lost: lost.length, since: s.length };
  if (s.length > 0) {
    // A streak begun since the loss continues the restored one, as if the streak had never been lost.
    s.length += lost.length;
  } else {
    s.length = lost.length;
    // Alive again: acting in the current period extends it.
    s.coveredThrough = previousPeriodStart(current, sc.frequency);
  }
  s.started = lost.started;
  s.lost = null;
  return { streak: result(step), restored: true };
}

function pauseStreak(step: Step, start: LocalDate, end: LocalDate, id: string | undefined): PauseStreakResult {
  if (start < step.today) throw new ValidationError(`start (${start}) must not be before today (${step.today}) in the user's zone`, [{ path: ['start'], message: 'must not be before today' }]);
  const pauses = pausesFrom(step.state, step.today);
  if (pauses.length >= MAX_PAUSES) throw new ValidationError(`a user may have at most ${MAX_PAUSES} pauses scheduled`, [{ path: ['start'], message: `at most ${MAX_PAUSES} pauses` }]);
  const clash = pauses.find((p) => p.start <= end && p.end >= start);
  if (clash) throw new ValidationError(`the pause overlaps pause ${clash.id} (${clash.start} to ${clash.end})`, [{ path: ['start'], message: 'overlaps another pause' }]);
  const pause: StreakPause = { id: id ?? step.newId(), start, end };
  const s = ownStreak(step);
  // Every pause the state keeps stays, those over before today too: one that ended earlier in the current
  // week or month still keeps that period (the state drops a pause once its period is over).
  s.pauses = [...(s.pauses ?? []), pause].sort((a, b) => (a.start < b.start ? -1 : a.start > b.start ? 1 : 0));
  return { streak: result(step), pause };
}

function deletePause(step: Step, id: string): DeletePauseResult {
  const pauses = step.state.streak?.pauses ?? [];
  if (!pauses.some((p) => p.id === id)) return { streak: result(step), deleted: false, warning: 'No such pause' };
  const s = ownStreak(step);
  s.pauses = pauses.filter((p) => p.id !== id);
  return { streak: result(step), deleted: true };
}

/**
 * Applies one operator operation to an existing user's state (null: the user does not exist, which is an
 * error for every operation). The returned effects carry the `operation` ledger row and whatever the
 * operation changed (streak boards, streak achievements and triggers).
 *
 * @throws {ValidationError} for an operation the configuration cannot take or bad input.
 */
export function applyOperation(cfg: LaurelConfig, prior: UserState, op: OperationInput, ctx: CoreContext): { state: UserState; effects: Effects; result: OperationResult } {
  validateOperation(cfg, op);
  if (prior === null || prior === undefined) throw new ValidationError('an operation needs the state of an existing user', [{ path: ['state'], message: 'is required' }]);
  const step = begin(cfg, prior, null, ctx);
  let out: OperationResult;
  switch (op.op) {
    case 'grantFreezes':
      out = grantFreezes(step, op.count, op.requireRoom === true);
      break;
    case 'restoreStreak':
      out = restoreStreak(step);
      break;
    case 'pauseStreak':
      out = pauseStreak(step, op.start, op.end, op.id);
      break;
    case 'deletePause':
      out = deletePause(step, op.id);
      break;
    case 'updatePreferences':
      out = updatePreferences(step, op.preferences);
      break;
    case 'adjustPoints': {
      const system = step.cfg.index.pointsSystems.get(op.system) as CompiledPointsSystem;
      const awarded = adjust(step, system, op.amount, op.reason ?? null);
      out = { streak: result(step), awarded, total: pointsState(step.state, system.key).total, points: record() };
      break;
    }
    case 'createBoost':
      out = { streak: result(step), boost: createBoost(step, op) };
      break;
    case 'deleteBoost':
      deleteBoost(step, op.id);
      out = { streak: result(step), id: op.id };
      break;
  }
  finish(step, null, 0, undefined);
  out.streak = result(step);
  if (op.op === 'adjustPoints') (out as AdjustPointsResult).points = eventPoints(step);
  const { streak: _streak, ...answered } = out;
  const { id: _replayedId, ...input } = op as OperationInput & { id?: string };
  // A pause's or boost's id is in the result (replay gives it back): the row's input is the caller's.
  const data: OperationRowData = { ...(op.op === 'pauseStreak' || op.op === 'createBoost' ? input : op), result: answered } as OperationRowData;
  step.effects.ledger.push({ id: step.newId(), userId: step.state.user.id, kind: 'operation', key: op.op, at: step.nowIso, delta: 0, total: 0, data });
  return { state: sealState(step), effects: step.effects, result: out };
}
