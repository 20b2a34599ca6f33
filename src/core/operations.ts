/**
 * Operator operations on one user (docs/rules.md, "Operations"): pure like `applyEvent`. Each writes an
 * `operation` ledger row (key: the operation's name, data: its input) that replay applies again in order, so
 * a user rebuilt from their ledger has the freezes, restores and pauses an operator gave them.
 */
import type { LaurelConfig } from '../config/define.js';
import { ValidationError } from '../errors.js';
import { addDays, isValidLocalDate, periodStartOf, previousPeriodStart, type LocalDate } from './calendar.js';
import { begin, finish } from './apply.js';
import { ownStreak, sealState, type Step } from './step.js';
import { extendedAt, streakView } from './streaks.js';
import type { CoreContext, Effects, OperationInput, OperationRowData, StreakPause, StreakView, UserState } from './types.js';

/** The most pauses a user may have scheduled or running at once. */
export const MAX_PAUSES = 10;
/** The longest pause, in days. */
export const MAX_PAUSE_DAYS = 366;

export interface StreakOperationResult {
  /** The streak after the operation, as `getStreak` shows it (without history). */
  streak: StreakView & { extended: string | null; pauses: StreakPause[] };
  /** Set when the operation changed nothing or less than asked (the hosted service's warnings). */
  warning?: string;
}

export interface GrantFreezesResult extends StreakOperationResult {
  /** Freezes added. */
  granted: number;
  /** Freezes asked for beyond the configured maximum (not added). */
  excess: number;
}

export interface RestoreStreakResult extends StreakOperationResult {
  restored: boolean;
}

export interface PauseStreakResult extends StreakOperationResult {
  pause: StreakPause;
}

export interface DeletePauseResult extends StreakOperationResult {
  deleted: boolean;
}

export type OperationResult = GrantFreezesResult | RestoreStreakResult | PauseStreakResult | DeletePauseResult;

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

function grantFreezes(step: Step, count: number): GrantFreezesResult {
  const max = step.cfg.streak?.freezes?.max ?? 0;
  const s = ownStreak(step);
  const granted = Math.max(0, Math.min(count, max - s.freezes));
  s.freezes += granted;
  const excess = count - granted;
  return { streak: result(step), granted, excess, ...(excess > 0 ? { warning: 'Would exceed maximum freeze limit' } : {}) };
}

function restoreStreak(step: Step): RestoreStreakResult {
  const sc = step.cfg.streak as NonNullable<LaurelConfig['streak']>;
  const lost = step.state.streak?.lost ?? null;
  if (!lost || lost.period < restoreWindowStart(step.cfg, step.today)) {
    return { streak: result(step), restored: false, warning: lost ? 'The lost streak is outside the restore window' : 'No lost streak to restore' };
  }
  const s = ownStreak(step);
  const current = periodStartOf(step.today, sc.frequency, step.cfg.weekStartsOn);
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
  s.pauses = [...pauses, pause].sort((a, b) => (a.start < b.start ? -1 : a.start > b.start ? 1 : 0));
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
      out = grantFreezes(step, op.count);
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
  }
  finish(step, null, 0, undefined);
  out.streak = result(step);
  const { streak: _streak, ...answered } = out;
  const { id: _replayedId, ...input } = op as OperationInput & { id?: string };
  const data: OperationRowData = { ...(op.op === 'pauseStreak' ? input : op), result: answered } as OperationRowData;
  step.effects.ledger.push({ id: step.newId(), userId: step.state.user.id, kind: 'operation', key: op.op, at: step.nowIso, delta: 0, total: 0, data });
  return { state: sealState(step), effects: step.effects, result: out };
}
