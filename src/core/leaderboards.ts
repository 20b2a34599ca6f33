/**
 * Leaderboards (docs/rules.md, section 7), the per-user half: which run an instant falls in, the user's value in
 * the current run, and the absolute entry writes a store applies. Ranks are cross-user, so they come from
 * the store's ordered index after the commit, never from here.
 */
import type { CompiledLeaderboard, LaurelConfig } from '../config/define.js';
import { addDays, addMonths, daysBetween, localDateOf, localTimeOfDay, startOfLocalDate, type LocalDate } from './calendar.js';
import { grantInstant, grantsBefore } from './points.js';
import { addExact, MAX_EXACT } from './decimal.js';
import { ValidationError } from '../errors.js';
import { stableId } from './ids.js';
import { attributesMoved, pushAttributeTotals } from './totals.js';
import { pushYearlyChanges } from './wrapped.js';
import { localDateIn, own, ownRecord, record, type Step } from './step.js';
import type { BoardEntry, BoardState, EventLeaderboard, GrantRun, LeaderboardView } from './types.js';

export interface Run {
  start: LocalDate;
  end: LocalDate | null;
}

function monthsBetween(a: LocalDate, b: LocalDate): number {
  return (Number(b.slice(0, 4)) - Number(a.slice(0, 4))) * 12 + (Number(b.slice(5, 7)) - Number(a.slice(5, 7)));
}

const clipEnd = (board: CompiledLeaderboard, end: LocalDate): LocalDate => (board.end !== null && board.end < end ? board.end : end);

/**
 * The run containing `date` (a local date: in the board's zone, or the user's when the board has none),
 * ignoring the board's start and end: run k covers
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

/**
 * A board's or a run's status: `inactive` for a board the configuration switched off.
 *
 * @inline
 */
export type BoardStatus = 'scheduled' | 'active' | 'finished' | 'inactive';

/** The widest UTC offsets in use: a date begins first at UTC+14 and ends last at UTC-12. */
const EARLIEST_OFFSET_MS = 14 * 3_600_000;
const LATEST_OFFSET_MS = 12 * 3_600_000;

/**
 * The dates a status reads at `now`: the board's local date; for a board whose runs follow each user's zone,
 * the date in the earliest zone (a run has begun once its first date has begun there) and in the latest one
 * (it has ended once its last date has ended there, 12 hours after that date ends in UTC).
 */
function statusDates(board: CompiledLeaderboard, now: Date): { first: LocalDate; last: LocalDate } {
  if (board.timeZone !== null) {
    const date = localDateOf(now, board.timeZone);
    return { first: date, last: date };
  }
  // The same for every board that follows each user's zone: remembered for the last instant asked (a call
  // asks once per board it moved the user on).
  const ms = now.getTime();
  if (ms !== everyZone.ms) everyZone = { ms, first: localDateOf(ms + EARLIEST_OFFSET_MS, 'UTC'), last: localDateOf(ms - LATEST_OFFSET_MS, 'UTC') };
  return everyZone;
}
let everyZone: { ms: number; first: LocalDate; last: LocalDate } = { ms: Number.NaN, first: '', last: '' };

/** A board's status at `now`, from its `start` and `end` (see {@link runStatus}). */
export function boardStatus(board: CompiledLeaderboard, now: Date): BoardStatus {
  return runStatus(board, { start: board.start, end: board.end }, now);
}

/**
 * A run's status at `now`: `scheduled` until its first date has begun (in the board's zone; for a board
 * following each user's zone, in the earliest zone, UTC+14), `finished` once its last date (or the board's
 * `end`) has ended (in the board's zone; else in every zone, the latest being UTC-12), `active` between;
 * `inactive` whatever the dates for a board the configuration switched off.
 */
export function runStatus(board: CompiledLeaderboard, run: Run, now: Date): BoardStatus {
  if (board.status === 'inactive') return 'inactive';
  const { first, last } = statusDates(board, now);
  if (first < run.start) return 'scheduled';
  if ((run.end !== null && last > run.end) || (board.end !== null && last > board.end)) return 'finished';
  return 'active';
}

/** True when an instant falls in the board's daily window of local time (always, without one). */
export function inWindow(board: CompiledLeaderboard, ms: number, tz: string): boolean {
  const w = board.timeWindow;
  if (w === null) return true;
  const t = localTimeOfDay(ms, tz);
  return w.from <= w.to ? t >= w.from && t < w.to : t >= w.from || t < w.to;
}

/** How many grants of a run of time grants fell due at or after `fromMs` and inside the board's window. */
function grantsInside(board: CompiledLeaderboard, first: string, grants: GrantRun, fromMs: number, tz: string): number {
  const before = grantsBefore(first, grants, fromMs);
  if (board.timeWindow === null) return grants.count - before;
  let inside = 0;
  for (let j = before; j < grants.count; j++) if (inWindow(board, grantInstant(first, grants, j), tz)) inside++;
  return inside;
}

/**
 * True while an event can still fall in the run starting `run` once the user counts in the run starting
 * `latest`: at one instant the local dates of two zones differ by at most 2 days (the widest offsets are
 * UTC+14 and UTC-12), so a move westwards reaches back at most to runs that ended 2 days before `latest`.
 */
function revisitable(board: CompiledLeaderboard, run: LocalDate, latest: LocalDate): boolean {
  const end = runContaining(board, run).end;
  return end === null || end >= addDays(latest, -2);
}

const entryOf = (b: BoardEntry): BoardEntry => ({ run: b.run, group: b.group, value: b.value, reachedAt: b.reachedAt });

/**
 * The user's board state after writing `next` (the entry of one run): the latest run's entry, with the
 * entries of earlier runs a move westwards or a clock stepping back can still reach (the list changes only
 * when the run does, so the usual write costs nothing more).
 */
function nextBoardState(board: CompiledLeaderboard, prior: BoardState | undefined, run: LocalDate, group: string, value: number, reachedAt: string): BoardState {
  // The usual write, another one in the same run: one object, built whole (no intermediate entry to spread).
  if (prior !== undefined && prior.run === run) return prior.earlier ? { run, group, value, reachedAt, earlier: prior.earlier } : { run, group, value, reachedAt };
  const next: BoardEntry = { run, group, value, reachedAt };
  if (prior === undefined) return next;
  if (next.run < prior.run) {
    // An earlier run (the user moved westwards, or the clock went back): kept among the earlier ones.
    if (!revisitable(board, next.run, prior.run)) return prior;
    const earlier = (prior.earlier ?? []).filter((e) => e.run !== next.run);
    earlier.push(next);
    earlier.sort((a, b) => (a.run < b.run ? 1 : a.run > b.run ? -1 : 0));
    return { ...entryOf(prior), earlier };
  }
  // Boards with a zone of their own keep them too: the clock can step back across the run's end.
  const earlier = [entryOf(prior), ...(prior.earlier ?? [])].filter((e) => revisitable(board, e.run, next.run));
  return earlier.length > 0 ? { ...next, earlier } : next;
}

/** The breakdown group of a user: one value per breakdown attribute ("" when the user has none). */
export function groupOf(board: CompiledLeaderboard, attributes: Readonly<Record<string, string>>): string {
  if (board.breakdownAttributes.length === 0) return '';
  return JSON.stringify(board.breakdownAttributes.map((k) => (Object.hasOwn(attributes, k) ? attributes[k] : '')));
}

/**
 * A user's breakdown attributes on a board, for a response entry: a record without inherited members
 * (`record`, which V8 keeps in fast mode), so an attribute key that is not there reads undefined.
 */
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
      startTime: board.startTime,
      endTime: board.endTime,
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

/** A configuration's boards by what feeds them (`index.leaderboardsBySource` split by kind, keyed by the plain key). */
interface BoardSources {
  readonly metric: ReadonlyMap<string, readonly CompiledLeaderboard[]>;
  readonly points: ReadonlyMap<string, readonly CompiledLeaderboard[]>;
  readonly streak: readonly CompiledLeaderboard[] | undefined;
}

const boardSources = new WeakMap<LaurelConfig['index'], BoardSources>();
let lastSources: { index: LaurelConfig['index'] | null; sources: BoardSources | null } = { index: null, sources: null };

/** The boards by source of a configuration, split once per configuration: no key is built per call. */
function sourcesOf(cfg: LaurelConfig): BoardSources {
  const index = cfg.index;
  if (lastSources.index === index) return lastSources.sources as BoardSources;
  let sources = boardSources.get(index);
  if (!sources) {
    const metric = new Map<string, readonly CompiledLeaderboard[]>();
    const points = new Map<string, readonly CompiledLeaderboard[]>();
    let streak: readonly CompiledLeaderboard[] | undefined;
    for (const [source, list] of index.leaderboardsBySource) {
      if (source.startsWith('metric:')) metric.set(source.slice('metric:'.length), list);
      else if (source.startsWith('points:')) points.set(source.slice('points:'.length), list);
      else if (source === 'streak') streak = list;
    }
    sources = { metric, points, streak };
    boardSources.set(index, sources);
  }
  lastSources = { index, sources };
  return sources;
}

const NO_BOARDS: readonly CompiledLeaderboard[] = Object.freeze([]);

/** The boards an event or call feeds, in configuration order: only those whose source changed. */
function touchedBoards(step: Step, metricKey: string | null, streakChanged: boolean): readonly CompiledLeaderboard[] {
  if (step.cfg.index.leaderboardsBySource.size === 0) return NO_BOARDS;
  const sources = sourcesOf(step.cfg);
  // The usual case is one list (or none): it is returned as it is; only several are merged.
  let one: readonly CompiledLeaderboard[] | undefined;
  let lists: (readonly CompiledLeaderboard[])[] | null = null;
  const metric = metricKey !== null ? sources.metric.get(metricKey) : undefined;
  if (metric) one = metric;
  for (const [system, awards] of step.awards) {
    if (awards.length === 0) continue;
    const list = sources.points.get(system);
    if (!list) continue;
    if (one === undefined) one = list;
    else (lists ??= [one]).push(list);
  }
  // A streak board also when the user, with a streak going, has no entry there yet (a board added to the
  // configuration since): it holds the length set at the user's last call, whatever that call was.
  if (sources.streak && (streakChanged || ((step.state.streak?.length ?? 0) > 0 && sources.streak.some((b) => own(step.state.leaderboards, b.key) === undefined)))) {
    if (one === undefined) one = sources.streak;
    else (lists ??= [one]).push(sources.streak);
  }
  if (lists === null) return one ?? NO_BOARDS;
  const out: CompiledLeaderboard[] = [];
  for (const b of step.cfg.leaderboards) {
    for (const list of lists) {
      if (list.includes(b)) {
        out.push(b);
        break;
      }
    }
  }
  return out;
}

// Per board, a private copy of its view with the response entry's other keys: each entry spreads it (a
// spread of the shared, frozen view would take V8's slow path) and sets its values. Never handed out.
const entryTemplates = new WeakMap<CompiledLeaderboard, EventLeaderboard>();

function entryTemplate(board: CompiledLeaderboard): EventLeaderboard {
  let template = entryTemplates.get(board);
  if (!template) {
    // Keys in the order of `{ ...leaderboardView(board) }` then `rank, previousRank, threshold, value, userAttributes`.
    template = { ...leaderboardView(board), rank: null, previousRank: null, threshold: 0, value: 0, userAttributes: {} } as EventLeaderboard;
    entryTemplates.set(board, template);
  }
  return template;
}

/** The user's entry in run `run` of a board: the latest one, or, after a move westwards, the kept entry of an earlier run. */
function entryIn(prior: BoardState | undefined, run: LocalDate): BoardEntry | undefined {
  return prior === undefined || prior.run === run ? prior : run < prior.run ? prior.earlier?.find((e) => e.run === run) : undefined;
}

/**
 * A user whose breakdown attributes changed moves, with their value and the instant they reached it, to their
 * new group in the current run of every breakdown board they have an entry in (docs/rules.md, section 7).
 * The boards this call fed (`touched`) moved the user already; this moves them on the others, which a
 * profile update or an event on another metric leaves as they were. The response lists neither: the
 * user's value did not change.
 */
function moveGroups(step: Step, touched: readonly CompiledLeaderboard[]): void {
  const userId = step.state.user.id;
  for (const board of step.cfg.leaderboards) {
    if (board.breakdownAttributes.length === 0 || touched.includes(board)) continue;
    const tz = board.timeZone ?? step.tz;
    const date = localDateIn(step, tz);
    const run = currentRun(board, date);
    if (!run) continue;
    const prior = own(step.state.leaderboards, board.key);
    const mine = entryIn(prior, run.start);
    if (mine === undefined) continue;
    const group = groupOf(board, step.state.user.attributes);
    if (mine.group === group) continue;
    step.effects.leaderboard.push({ index: boardIndex(board.key, run.start, mine.group), userId, remove: true, date });
    const index = boardIndexOf(board, run.start, group);
    if (mine.value > 0) step.effects.leaderboard.push({ index, userId, value: mine.value, reachedAt: mine.reachedAt, date, thresholdRank: board.maxParticipants });
    else step.effects.leaderboard.push({ index, userId, remove: true, date, thresholdRank: board.maxParticipants });
    ownRecord(step, 'leaderboards')[board.key] = nextBoardState(board, prior, run.start, group, mine.value, mine.reachedAt);
  }
}

/**
 * Adds `delta` to the user's value in the run of `board` starting `start` (or sets it to `absolute`), in their
 * current group: the index writes and the user's board state. Returns the new value, or null when nothing
 * was written (the value did not change, or the run is one before the latest that the state no longer keeps:
 * the user's value there is unknown here, and writing the call's part alone would replace it in the rankings,
 * so it is left as it is; an earlier run within reach without an entry is one the user has no value in yet).
 */
function writeRun(step: Step, board: CompiledLeaderboard, start: LocalDate, delta: number, absolute: number | null, date: LocalDate, attributes: Readonly<Record<string, string>>): number | null {
  const userId = step.state.user.id;
  const group = groupOf(board, attributes);
  const prior = own(step.state.leaderboards, board.key);
  const mine = entryIn(prior, start);
  if (mine === undefined && absolute === null && prior !== undefined && start < prior.run && !revisitable(board, start, prior.run)) return null;
  const previous = mine !== undefined ? mine.value : 0;
  const value = absolute ?? addExact(previous, delta);
  if (!(Math.abs(value) <= MAX_EXACT)) {
    throw new ValidationError(`value: the user's value on leaderboard "${board.key}" would become ${value}, beyond the exact range (|value| <= ${MAX_EXACT})`, [{ path: ['value'], message: 'the leaderboard value would leave the exact range' }]);
  }
  const groupMoved = mine !== undefined && mine.group !== group;
  if (value === previous && !groupMoved) return null;
  const reachedAt = value === previous && mine !== undefined ? mine.reachedAt : step.nowIso;
  if (mine !== undefined && groupMoved) step.effects.leaderboard.push({ index: boardIndex(board.key, start, mine.group), userId, remove: true, date });
  const index = boardIndexOf(board, start, group);
  const thresholdRank = board.maxParticipants;
  if (value > 0) step.effects.leaderboard.push({ index, userId, value, reachedAt, date, thresholdRank });
  else step.effects.leaderboard.push({ index, userId, remove: true, date, thresholdRank });
  ownRecord(step, 'leaderboards')[board.key] = nextBoardState(board, prior, start, group, value, reachedAt);
  return value;
}

/**
 * The points of this call's time grants for a points board's system that fell due in runs before the current one
 * (starting `current`) whose value the user's state knows: those it still reaches (see `revisitable`) and the
 * run of its latest entry. Per run, oldest first: the grants of a user idle across a run's end. Bounded (a
 * few runs), so a call costs the same however long the user was idle; grants in runs between those count in
 * summaries but not on the board. Empty for the usual call, whose awards are dated now.
 */
function earlierRunPoints(step: Step, board: CompiledLeaderboard, current: LocalDate, tz: string): [LocalDate, number][] {
  const awards = step.awards.get(board.pointsSystemKey as string);
  if (awards === undefined || board.runUnit === null) return [];
  const startMs = startOfLocalDate(current, tz).getTime();
  let runs: Run[] | null = null;
  let out: Map<LocalDate, number> | null = null;
  for (const a of awards) {
    const first = Date.parse(a.date);
    // Time grants only: other awards dated in the past (backdated by a configuration change: "past periods
    // never change") leave earlier runs as they are.
    if (a.date === step.nowIso || first >= startMs || (a.grants === undefined && a.trigger.type !== 'time')) continue;
    if (runs === null) {
      runs = [];
      for (let r = runContaining(board, addDays(current, -1)); r.start >= board.start && revisitable(board, r.start, current); r = runContaining(board, addDays(r.start, -1))) {
        // (After a board's end there are no runs: its last one ends with it.)
        if (board.end === null || r.start <= board.end) runs.push(r);
      }
      const latest = own(step.state.leaderboards, board.key)?.run;
      if (latest !== undefined && latest < current && !runs.some((r) => r.start === latest)) runs.push(runContaining(board, latest));
    }
    for (const r of runs) {
      const from = startOfLocalDate(r.start, tz).getTime();
      const to = startOfLocalDate(addDays(r.end ?? r.start, 1), tz).getTime();
      if (to <= first) continue;
      let part = 0;
      if (a.grants) {
        const inside = grantsInside(board, a.date, a.grants, from, tz) - grantsInside(board, a.date, a.grants, to, tz);
        if (inside > 0) part = (a.awarded / a.grants.count) * inside;
      } else if (first >= from && first < to && inWindow(board, first, tz)) {
        part = a.awarded;
      }
      if (part !== 0) (out ??= new Map()).set(r.start, addExact(out.get(r.start) ?? 0, part));
    }
  }
  return out === null ? [] : [...out].sort((x, y) => (x[0] < y[0] ? -1 : 1));
}

/**
 * Sets the user's value in the current run of each board this call touched and returns the response
 * entries (ranks left null for the engine to fill from the store's commit result).
 */
export function updateLeaderboards(step: Step, metricKey: string | null, metricValue: number): Record<string, EventLeaderboard> {
  // Without inherited members, as the response's points: a board key that is not there reads undefined.
  const out = record<EventLeaderboard>();
  const streakChanged = (step.state.streak?.length ?? 0) !== step.streakLengthBefore;
  const touched = touchedBoards(step, metricKey, streakChanged);
  for (const board of touched) {
    // The board's zone, or (no zone configured) the user's: runs then follow each user's calendar.
    const tz = board.timeZone ?? step.tz;
    const date = localDateIn(step, tz);
    const run = currentRun(board, date);
    if (!run) {
      // A points board that has ended: the time grants of a user idle across its end that fell due in its last
      // runs still count there (as across any run's end, below).
      if (board.rankBy === 'points' && board.end !== null && date > board.end) {
        for (const [start, part] of earlierRunPoints(step, board, runContaining(board, date).start, tz)) writeRun(step, board, start, part, null, date, step.attributesBefore);
      }
      continue;
    }
    let delta = 0;
    let absolute: number | null = null;
    if (board.rankBy === 'metric') {
      if (inWindow(board, step.now.getTime(), tz)) delta = metricValue;
    } else if (board.rankBy === 'points') {
      // Points earned in a run are the awards dated inside it (and inside the board's daily window); those
      // dated in an earlier run count there (below).
      for (const a of step.awards.get(board.pointsSystemKey as string) ?? []) {
        if (a.grants) {
          // A run of time grants counts the grants that fell due inside this board run.
          const inside = grantsInside(board, a.date, a.grants, startOfLocalDate(run.start, tz).getTime(), tz);
          if (inside > 0) delta = addExact(delta, (a.awarded / a.grants.count) * inside);
          continue;
        }
        const current = a.date === step.nowIso;
        const day = current ? date : localDateOf(new Date(a.date), tz);
        if (day >= run.start && inWindow(board, current ? step.now.getTime() : Date.parse(a.date), tz)) delta = addExact(delta, a.awarded);
      }
    } else {
      absolute = step.state.streak?.length ?? 0;
    }
    // Points that fell due in an earlier run the state still reaches (time grants of a user idle across the
    // runs' boundary): added to that run, before the current one.
    // (In the group the user had before this call: a change of attributes moves only the current run's entry.)
    if (board.rankBy === 'points') for (const [start, part] of earlierRunPoints(step, board, run.start, tz)) writeRun(step, board, start, part, null, date, step.attributesBefore);
    const value = writeRun(step, board, run.start, delta, absolute, date, step.state.user.attributes);
    if (value === null) continue;
    const entry = { ...entryTemplate(board) };
    entry.start = run.start;
    entry.end = run.end;
    entry.rank = null;
    entry.previousRank = null;
    entry.threshold = 0;
    entry.value = value;
    entry.userAttributes = groupAttributes(board, step.state.user.attributes);
    out[board.key] = entry;
  }
  const moved = attributesMoved(step);
  if (moved) moveGroups(step, touched);
  // Every user's points total, for level summaries and histograms across users; and by user attribute
  // (totals.ts), also written when the call changed the user's attributes.
  for (const system of step.cfg.pointsSystems) {
    if (!moved && !step.effects.created && !(step.awards.get(system.key)?.length ?? 0)) continue;
    const total = own(step.state.points, system.key)?.total ?? 0;
    step.effects.leaderboard.push({ index: pointsTotalsIndex(system.key), userId: step.state.user.id, value: total, reachedAt: step.nowIso, date: step.today, unranked: true });
    pushAttributeTotals(step, system, total);
  }
  // Wrapped: the user's change this year per metric and points system the call moved (core/wrapped.ts).
  pushYearlyChanges(step);
  return out;
}
