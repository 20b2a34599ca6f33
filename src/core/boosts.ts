/**
 * Runtime boosts (issue 13, docs/rules.md section 12): a boost of one user's awards in one points system,
 * created and deleted by operator operations (`createBoost`, `deleteBoost`). The user's state keeps their
 * boosts, so the pure core applies them with the configured ones (core/points.ts `boosted`); the store keeps a
 * listing of every runtime boost (one record per `createBoost` ledger row, see `Store.listBoosts`) for reads
 * across users.
 */
import type { CompiledBoost, CompiledPointsSystem, LaurelConfig } from '../config/define.js';
import { NotFoundError, ValidationError } from '../errors.js';
import { isValidLocalDate, localDateOf, type LocalDate } from './calendar.js';
import { matchesFilter, type Step } from './step.js';
import type { BoostRounding, OperationInput, UserBoost, UserState } from './types.js';

/** The most boosts a user may have that are not finished (scheduled or active) in one points system. */
export const MAX_USER_BOOSTS = 20;
/** Multipliers are greater than 0, not 1, and less than this (the hosted service's admin API). */
export const MAX_BOOST_MULTIPLIER = 100;

/** A boost's status today: not yet started, running, or ended. */
export type BoostStatus = 'scheduled' | 'active' | 'finished';

/**
 * A runtime boost as the store keeps it (`Store.listBoosts`, `Store.getBoost`): a `createBoost` ledger row's
 * `data.result.boost`.
 */
export interface BoostRecord {
  id: string;
  userId: string;
  pointsSystemKey: string;
  name: string;
  start: LocalDate;
  end: LocalDate | null;
  multiplier: number;
  rounding: BoostRounding;
}

/** A boost as `listBoosts` and `getUserBoosts` answer it (the hosted service's `PointsBoost`, plus `userId`). */
export interface PointsBoost {
  id: string;
  name: string;
  status: BoostStatus;
  start: LocalDate;
  end: LocalDate | null;
  multiplier: number;
  rounding: BoostRounding;
  /** The user a runtime boost is for; null for a configured (global) boost. */
  userId: string | null;
}

const ROUNDINGS: readonly BoostRounding[] = ['down', 'up', 'nearest'];

const bad = (path: string, message: string): never => {
  throw new ValidationError(`${path} ${message}`, [{ path: [path], message }]);
};

/** Checks a `createBoost` operation (the same checks replay meets). */
export function validateCreateBoost(cfg: LaurelConfig, op: Extract<OperationInput, { op: 'createBoost' }>): void {
  if (typeof op.system !== 'string' || !cfg.index.pointsSystems.has(op.system)) throw new NotFoundError('pointsSystem', String(op.system));
  if (typeof op.name !== 'string' || op.name.trim().length === 0 || op.name.length > 255) bad('name', 'must be a non-empty string of at most 255 characters');
  if (typeof op.start !== 'string' || !isValidLocalDate(op.start)) bad('start', `must be a date in YYYY-MM-DD form (got ${String(op.start)})`);
  if (op.end !== undefined && op.end !== null) {
    if (typeof op.end !== 'string' || !isValidLocalDate(op.end)) bad('end', `must be a date in YYYY-MM-DD form or null (got ${String(op.end)})`);
    if (op.end < op.start) bad('end', `must not be before start (${op.start})`);
  }
  const m = op.multiplier;
  if (typeof m !== 'number' || !Number.isFinite(m) || m <= 0 || m === 1 || m >= MAX_BOOST_MULTIPLIER) bad('multiplier', `must be a number greater than 0, not 1, and less than ${MAX_BOOST_MULTIPLIER} (got ${String(m)})`);
  if (op.rounding !== undefined && !ROUNDINGS.includes(op.rounding)) bad('rounding', 'must be "down", "up" or "nearest"');
  if (op.id !== undefined && (typeof op.id !== 'string' || op.id.length === 0 || op.id.length > 255)) bad('id', 'must be a non-empty string');
}

/** Checks a `deleteBoost` operation. */
export function validateDeleteBoost(op: Extract<OperationInput, { op: 'deleteBoost' }>): void {
  if (typeof op.id !== 'string' || op.id.length === 0 || op.id.length > 255) bad('id', 'must be a non-empty string');
}

/** The user's boosts not finished by `today` (their zone), those a boost operation keeps. */
const unfinished = (state: UserState, today: LocalDate): UserBoost[] => (state.boosts ?? []).filter((b) => b.end === null || b.end >= today);

const setBoosts = (step: Step, boosts: UserBoost[]): void => {
  const state = step.state as UserState;
  if (boosts.length > 0) state.boosts = boosts;
  else delete state.boosts;
};

/** Applies `createBoost`: the boost joins the user's state (finished ones are dropped). Returns its record. */
export function createBoost(step: Step, op: Extract<OperationInput, { op: 'createBoost' }>): BoostRecord {
  const kept = unfinished(step.state, step.today);
  if (kept.filter((b) => b.system === op.system).length >= MAX_USER_BOOSTS) bad('userId', `a user may have at most ${MAX_USER_BOOSTS} scheduled or active boosts in a points system`);
  const boost: UserBoost = { id: op.id ?? step.newId(), system: op.system, name: op.name, start: op.start, end: op.end ?? null, multiplier: op.multiplier, rounding: op.rounding ?? 'down' };
  setBoosts(step, [...kept, boost]);
  return { id: boost.id, userId: step.state.user.id, pointsSystemKey: boost.system, name: boost.name, start: boost.start, end: boost.end, multiplier: boost.multiplier, rounding: boost.rounding };
}

/** Applies `deleteBoost`: the boost leaves the user's state (finished ones are dropped). True when it was there. */
export function deleteBoost(step: Step, id: string): boolean {
  const had = (step.state.boosts ?? []).some((b) => b.id === id);
  setBoosts(step, unfinished(step.state, step.today).filter((b) => b.id !== id));
  return had;
}

/** The user's boosts in one points system (any status). */
export function userBoostsIn(state: UserState, systemKey: string): UserBoost[] {
  const mine = state.boosts;
  return mine === undefined ? [] : mine.filter((b) => b.system === systemKey);
}

/** True when the user has a boost of their own in the system (of any status). */
export function hasUserBoosts(state: UserState, systemKey: string): boolean {
  return state.boosts !== undefined && state.boosts.some((b) => b.system === systemKey);
}

const EARLIEST_OFFSET_MS = 14 * 3_600_000;
const LATEST_OFFSET_MS = 12 * 3_600_000;

/**
 * A boost's status at `now` for listings across users (`listBoosts`), whose zones differ: `scheduled` until its
 * start date has begun in the earliest zone (UTC+14), `finished` once its end date has ended in the latest
 * zone (UTC-12), `active` between (the rule of leaderboards following each user's zone).
 */
export function boostStatus(b: { start: LocalDate; end: LocalDate | null }, now: Date): BoostStatus {
  const ms = now.getTime();
  if (localDateOf(ms + EARLIEST_OFFSET_MS, 'UTC') < b.start) return 'scheduled';
  if (b.end !== null && localDateOf(ms - LATEST_OFFSET_MS, 'UTC') > b.end) return 'finished';
  return 'active';
}

/** True when the boost applies on `date` (a local date in the user's zone). */
export const activeOn = (b: { start: LocalDate; end: LocalDate | null }, date: LocalDate): boolean => b.start <= date && (b.end === null || date <= b.end);

export const configuredBoostView = (b: CompiledBoost, status: BoostStatus): PointsBoost => ({ id: b.id, name: b.name, status, start: b.start, end: b.end, multiplier: b.multiplier, rounding: b.rounding, userId: null });

export const recordView = (b: BoostRecord, status: BoostStatus): PointsBoost => ({ id: b.id, name: b.name, status, start: b.start, end: b.end, multiplier: b.multiplier, rounding: b.rounding, userId: b.userId });

/**
 * `getUserBoosts`: the boosts that apply to the user's awards in the system today (their zone): the active
 * configured boosts whose `userAttributes` the user has, then their own active boosts, in the order `boosted`
 * applies them.
 */
export function userBoostViews(system: CompiledPointsSystem, state: UserState, today: LocalDate): PointsBoost[] {
  const out: PointsBoost[] = [];
  for (const b of system.boosts) if (activeOn(b, today) && matchesFilter(b.userAttributes, state.user.attributes)) out.push(configuredBoostView(b, 'active'));
  for (const b of userBoostsIn(state, system.key)) {
    if (activeOn(b, today)) out.push({ id: b.id, name: b.name, status: 'active', start: b.start, end: b.end, multiplier: b.multiplier, rounding: b.rounding, userId: state.user.id });
  }
  return out;
}
