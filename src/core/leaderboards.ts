/**
 * Leaderboards (semantics section 7), the per-user half: which run an instant falls in, the user's value in
 * the current run, and the absolute entry writes a store applies. Ranks are cross-user, so they come from
 * the store's ordered index after the commit, never from here.
 */
import type { CompiledLeaderboard } from '../config/define.js';
import { addDays, addMonths, daysBetween, localDateOf, type LocalDate } from './calendar.js';
import { addDecimal, compareDecimal, decimalOf, MAX_EXACT, representable } from './decimal.js';
import { ValidationError } from '../errors.js';
import { stableId } from './ids.js';
import { record, type Step } from './step.js';
import type { EventLeaderboard, LeaderboardView } from './types.js';

export interface Run {
  start: LocalDate;
  end: LocalDate | null;
}

function monthsBetween(a: LocalDate, b: LocalDate): number {
  return (Number(b.slice(0, 4)) - Number(a.slice(0, 4))) * 12 + (Number(b.slice(5, 7)) - Number(a.slice(5, 7)));
}

const clipEnd = (board: CompiledLeaderboard, end: LocalDate): LocalDate => (board.end !== null && board.end < end ? board.end : end);

/**
 * The run containing `date` (board-local), ignoring the board's start and end: run k covers
 * [start + k x interval units, start + (k+1) x interval units). Dates before `start` give negative k.
 */
export function runContaining(board: CompiledLeaderboard, date: LocalDate): Run {
  if (!board.runUnit || !board.runInterval) return { start: board.start, end: board.end };
  const interval = board.runInterval;
  if (board.runUnit === 'day') {
    const days = daysBetween(board.start, date);
    const k = Math.floor(days / interval);
    const start = addDays(board.start, k * interval);
    return { start, end: clipEnd(board, addDays(start, interval - 1)) };
  }
  const months = board.runUnit === 'year' ? 12 * interval : interval;
  let k = Math.floor(monthsBetween(board.start, date) / months);
  // Month arithmetic clamps (Jan 31 + 1 month = Feb 28), so step back when the estimate overshoots.
  while (addMonths(board.start, k * months) > date) k -= 1;
  while (addMonths(board.start, (k + 1) * months) <= date) k += 1;
  const start = addMonths(board.start, k * months);
  return { start, end: clipEnd(board, addDays(addMonths(board.start, (k + 1) * months), -1)) };
}

/** The run containing `date`, or null when the board has not started or has finished by then. */
export function runOf(board: CompiledLeaderboard, date: LocalDate): Run | null {
  if (date < board.start || (board.end !== null && date > board.end)) return null;
  return runContaining(board, date);
}

/** `scheduled`, `active` or `finished` on `date` (board-local). */
export function boardStatus(board: CompiledLeaderboard, date: LocalDate): 'scheduled' | 'active' | 'finished' {
  if (date < board.start) return 'scheduled';
  if (board.end !== null && date > board.end) return 'finished';
  return 'active';
}

/** The breakdown group of a user: one value per breakdown attribute ("" when the user has none). */
export function groupOf(board: CompiledLeaderboard, attributes: Readonly<Record<string, string>>): string {
  if (board.breakdownAttributes.length === 0) return '';
  return JSON.stringify(board.breakdownAttributes.map((k) => (Object.hasOwn(attributes, k) ? attributes[k] : '')));
}

export function groupAttributes(board: CompiledLeaderboard, attributes: Readonly<Record<string, string>>): Record<string, string> {
  const out = record<string>();
  for (const k of board.breakdownAttributes) out[k] = Object.hasOwn(attributes, k) ? (attributes[k] as string) : '';
  return out;
}

/**
 * The store index name of one run (and group) of a board. A group longer than 200 characters (breakdown
 * attribute values may have up to 1000 each) is named by a 128-bit hash of it instead, so that the name fits
 * every store's keys (PostgreSQL's btree entries hold at most 2704 bytes) and all stores accept the same input.
 */
export function boardIndex(boardKey: string, runStart: LocalDate, group: string): string {
  return `lb|${boardKey}|${runStart}|${group.length > 200 ? `#${stableId('group', group)}` : group}`;
}

/** The store index of every user's total in a points system (for level summaries and histograms). */
export function pointsTotalsIndex(systemKey: string): string {
  return `pt|${systemKey}`;
}

export function leaderboardView(board: CompiledLeaderboard): LeaderboardView {
  const view: LeaderboardView = {
    id: board.id,
    key: board.key,
    name: board.name,
    description: board.description,
    rankBy: board.rankBy,
    start: board.start,
    end: board.end,
    maxParticipants: board.maxParticipants,
    runUnit: board.runUnit,
    runInterval: board.runInterval,
    timeZone: board.timeZone,
    breakdownAttributes: [...board.breakdownAttributes],
  };
  if (board.metricKey) Object.assign(view, { metricKey: board.metricKey, metricName: board.metricName });
  if (board.pointsSystemKey) Object.assign(view, { pointsSystemKey: board.pointsSystemKey, pointsSystemName: board.pointsSystemName });
  return view;
}

/**
 * Sets the user's value in the current run of each board this call touched and returns the response
 * entries (ranks left null for the engine to fill from the store's commit result).
 */
export function updateLeaderboards(step: Step, metricKey: string | null, metricValue: number): Record<string, EventLeaderboard> {
  const out = record<EventLeaderboard>();
  const streakChanged = (step.state.streak?.length ?? 0) !== step.streakLengthBefore;
  for (const board of step.cfg.leaderboards) {
    const source = board.rankBy === 'metric' ? board.metricKey === metricKey : board.rankBy === 'points' ? (step.awards.get(board.pointsSystemKey as string)?.length ?? 0) > 0 : streakChanged;
    if (!source) continue;
    const date = localDateOf(step.now, board.timeZone);
    const run = runOf(board, date);
    if (!run) continue;
    let delta: string | null = null;
    let absolute: string | null = null;
    if (board.rankBy === 'metric') {
      delta = decimalOf(metricValue);
    } else if (board.rankBy === 'points') {
      delta = '0';
      // Points earned in a run are the awards dated inside it; those dated in an earlier run stay out.
      for (const a of step.awards.get(board.pointsSystemKey as string) ?? []) {
        if (localDateOf(new Date(a.date), board.timeZone) >= run.start) delta = addDecimal(delta, decimalOf(a.awarded));
      }
    } else {
      absolute = String(step.state.streak?.length ?? 0);
    }
    const group = groupOf(board, step.state.user.attributes);
    const prior = step.state.leaderboards[board.key];
    const sameRun = prior !== undefined && prior.run === run.start;
    const previous = sameRun ? prior.value : '0';
    const sum = absolute ?? addDecimal(previous, delta ?? '0');
    const value = representable(sum);
    if (value === null) {
      throw new ValidationError(`value: the user's value on leaderboard "${board.key}" would become ${sum}, beyond the exact range (|value| <= ${MAX_EXACT})`, [{ path: ['value'], message: 'the leaderboard value would leave the exact range' }]);
    }
    const groupMoved = sameRun && prior.group !== group;
    if (compareDecimal(value, previous) === 0 && !groupMoved) continue;
    const reachedAt = compareDecimal(value, previous) === 0 && sameRun ? prior.reachedAt : step.nowIso;
    if (groupMoved) step.effects.leaderboard.push({ index: boardIndex(board.key, run.start, prior.group), userId: step.state.user.id, remove: true, date });
    const index = boardIndex(board.key, run.start, group);
    if (compareDecimal(value, '0') > 0) step.effects.leaderboard.push({ index, userId: step.state.user.id, value: Number(value), reachedAt, date });
    else step.effects.leaderboard.push({ index, userId: step.state.user.id, remove: true, date });
    step.state.leaderboards[board.key] = { run: run.start, group, value, reachedAt };
    out[board.key] = {
      ...leaderboardView(board),
      start: run.start,
      end: run.end,
      rank: null,
      previousRank: null,
      threshold: 0,
      value: Number(value),
      userAttributes: groupAttributes(board, step.state.user.attributes),
    };
  }
  // Every user's points total, for level summaries and histograms across users.
  for (const system of step.cfg.pointsSystems) {
    if (!step.effects.created && !(step.awards.get(system.key)?.length ?? 0)) continue;
    const total = step.state.points[system.key]?.total ?? 0;
    step.effects.leaderboard.push({ index: pointsTotalsIndex(system.key), userId: step.state.user.id, value: total, reachedAt: step.nowIso, date: step.today, unranked: true });
  }
  return out;
}
