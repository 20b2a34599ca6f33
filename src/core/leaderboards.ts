/**
 * Leaderboards (semantics section 7), the per-user half: which run an instant falls in, the user's value in
 * the current run, and the absolute entry writes a store applies. Ranks are cross-user, so they come from
 * the store's ordered index after the commit, never from here.
 */
import type { CompiledLeaderboard } from '../config/define.js';
import { addDays, addMonths, daysBetween, localDateOf, startOfLocalDate, type LocalDate } from './calendar.js';
import { grantsBefore } from './points.js';
import { addExact, MAX_EXACT } from './decimal.js';
import { ValidationError } from '../errors.js';
import { stableId } from './ids.js';
import { localDateIn, own, ownRecord, record, type Step } from './step.js';
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

const totalsIndexes = new Map<string, string>();

/** The store index of every user's total in a points system (for level summaries and histograms). */
export function pointsTotalsIndex(systemKey: string): string {
  let name = totalsIndexes.get(systemKey);
  if (name === undefined) {
    name = `pt|${systemKey}`;
    // Keys come from configurations; the bound only guards against a caller inventing them without end.
    if (totalsIndexes.size < 10_000) totalsIndexes.set(systemKey, name);
  }
  return name;
}

// The index name of the last (run, group) used per board: the same string object call after call, so
// stores that key maps by it hash it once.
const lastIndex = new WeakMap<CompiledLeaderboard, { run: LocalDate; group: string; name: string }>();

/** `boardIndex` for a board, reusing the name of its last (run, group) when they are the same. */
export function boardIndexOf(board: CompiledLeaderboard, run: LocalDate, group: string): string {
  const last = lastIndex.get(board);
  if (last && last.run === run && last.group === group) return last.name;
  const name = boardIndex(board.key, run, group);
  lastIndex.set(board, { run, group, name });
  return name;
}

const boardViews = new WeakMap<CompiledLeaderboard, LeaderboardView>();

/** The wire view of a board: built once per board and shared (frozen; spread it to extend it). */
export function leaderboardView(board: CompiledLeaderboard): LeaderboardView {
  let view = boardViews.get(board);
  if (!view) {
    view = {
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
      breakdownAttributes: Object.freeze([...board.breakdownAttributes]) as string[],
    };
    if (board.metricKey) Object.assign(view, { metricKey: board.metricKey, metricName: board.metricName });
    if (board.pointsSystemKey) Object.assign(view, { pointsSystemKey: board.pointsSystemKey, pointsSystemName: board.pointsSystemName });
    boardViews.set(board, Object.freeze(view));
  }
  return view;
}

// The run of the last date asked, per board: consecutive calls mostly fall on the same local day.
const lastRun = new WeakMap<CompiledLeaderboard, { date: LocalDate; run: Run | null }>();

function currentRun(board: CompiledLeaderboard, date: LocalDate): Run | null {
  const cached = lastRun.get(board);
  if (cached && cached.date === date) return cached.run;
  const run = runOf(board, date);
  lastRun.set(board, { date, run });
  return run;
}

/** The boards an event or call feeds, in configuration order: only those whose source changed. */
function touchedBoards(step: Step, metricKey: string | null, streakChanged: boolean): readonly CompiledLeaderboard[] {
  const bySource = step.cfg.index.leaderboardsBySource;
  if (bySource.size === 0) return [];
  const lists: (readonly CompiledLeaderboard[])[] = [];
  const add = (source: string) => {
    const list = bySource.get(source);
    if (list) lists.push(list);
  };
  if (metricKey !== null) add(`metric:${metricKey}`);
  for (const [system, awards] of step.awards) if (awards.length > 0) add(`points:${system}`);
  if (streakChanged) add('streak');
  if (lists.length <= 1) return lists[0] ?? [];
  const touched = new Set(lists.flat());
  return step.cfg.leaderboards.filter((b) => touched.has(b));
}

/**
 * Sets the user's value in the current run of each board this call touched and returns the response
 * entries (ranks left null for the engine to fill from the store's commit result).
 */
export function updateLeaderboards(step: Step, metricKey: string | null, metricValue: number): Record<string, EventLeaderboard> {
  const out = record<EventLeaderboard>();
  const streakChanged = (step.state.streak?.length ?? 0) !== step.streakLengthBefore;
  const userId = step.state.user.id;
  for (const board of touchedBoards(step, metricKey, streakChanged)) {
    const date = localDateIn(step, board.timeZone);
    const run = currentRun(board, date);
    if (!run) continue;
    let delta = 0;
    let absolute: number | null = null;
    if (board.rankBy === 'metric') {
      delta = metricValue;
    } else if (board.rankBy === 'points') {
      // Points earned in a run are the awards dated inside it; those dated in an earlier run stay out.
      for (const a of step.awards.get(board.pointsSystemKey as string) ?? []) {
        if (a.grants) {
          // A run of time grants counts the grants that fell due inside this board run.
          const inside = a.grants.count - grantsBefore(a.date, a.grants, startOfLocalDate(run.start, board.timeZone).getTime());
          if (inside > 0) delta = addExact(delta, (a.awarded / a.grants.count) * inside);
          continue;
        }
        const day = a.date === step.nowIso ? date : localDateOf(new Date(a.date), board.timeZone);
        if (day >= run.start) delta = addExact(delta, a.awarded);
      }
    } else {
      absolute = step.state.streak?.length ?? 0;
    }
    const group = groupOf(board, step.state.user.attributes);
    const prior = own(step.state.leaderboards, board.key);
    const sameRun = prior !== undefined && prior.run === run.start;
    const previous = sameRun ? prior.value : 0;
    const value = absolute ?? addExact(previous, delta);
    if (!(Math.abs(value) <= MAX_EXACT)) {
      throw new ValidationError(`value: the user's value on leaderboard "${board.key}" would become ${value}, beyond the exact range (|value| <= ${MAX_EXACT})`, [{ path: ['value'], message: 'the leaderboard value would leave the exact range' }]);
    }
    const groupMoved = sameRun && prior.group !== group;
    if (value === previous && !groupMoved) continue;
    const reachedAt = value === previous && sameRun ? prior.reachedAt : step.nowIso;
    if (groupMoved) step.effects.leaderboard.push({ index: boardIndex(board.key, run.start, prior.group), userId, remove: true, date });
    const index = boardIndexOf(board, run.start, group);
    const thresholdRank = board.maxParticipants;
    if (value > 0) step.effects.leaderboard.push({ index, userId, value, reachedAt, date, thresholdRank });
    else step.effects.leaderboard.push({ index, userId, remove: true, date, thresholdRank });
    ownRecord(step, 'leaderboards')[board.key] = { run: run.start, group, value, reachedAt };
    const entry = { ...leaderboardView(board) } as EventLeaderboard;
    entry.start = run.start;
    entry.end = run.end;
    entry.rank = null;
    entry.previousRank = null;
    entry.threshold = 0;
    entry.value = value;
    entry.userAttributes = groupAttributes(board, step.state.user.attributes);
    out[board.key] = entry;
  }
  // Every user's points total, for level summaries and histograms across users.
  for (const system of step.cfg.pointsSystems) {
    if (!step.effects.created && !(step.awards.get(system.key)?.length ?? 0)) continue;
    const total = own(step.state.points, system.key)?.total ?? 0;
    step.effects.leaderboard.push({ index: pointsTotalsIndex(system.key), userId: step.state.user.id, value: total, reachedAt: step.nowIso, date: step.today, unranked: true });
  }
  return out;
}
