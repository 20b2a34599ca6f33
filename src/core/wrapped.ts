/**
 * Wrapped (the year in review, docs/rules.md "Wrapped"), the per-user half: each user's change in one
 * calendar year per metric and per points system, for the percentiles among users that `getWrapped` answers
 * with bounded reads. The state keeps the running sums of one year only (the latest year the user changed
 * in, `UserState.yearly`); each call that books metric or points rows writes the sums it changed as absolute
 * values to unranked store indexes (`wy|m|<metric>|<year>`, `wy|p|<system>|<year>`), one write per metric
 * and per points system the call moved. A year is the user's local calendar year (their zone at the call).
 * The sums are those of the ledger rows the calls book (every metric row, every points row; a run of time
 * grants split between the years its grants fell due in), so they match what `getWrapped` reads back from
 * the ledger as long as the user's zone stays the same.
 */
import { localDateOf, startOfLocalDate } from './calendar.js';
import { addExact } from './decimal.js';
import { grantInstant, grantsBefore } from './points.js';
import { own, type Step } from './step.js';
import type { AwardRow, GrantRun, LedgerRow, YearlyChanges } from './types.js';

/** The unranked store index of every user's change in `year` of a metric (`metric`) or a points system (`points`). */
export function yearlyIndex(kind: 'metric' | 'points', key: string, year: number): string {
  return `wy|${kind === 'metric' ? 'm' : 'p'}|${key}|${year}`;
}

/** The calendar year of a local date (`YYYY-MM-DD`). */
export const yearOfDate = (date: string): number => Number(date.slice(0, 4));

/** The first instant (ms) of a calendar year in `tz`. */
export function yearStartMs(year: number, tz: string): number {
  return startOfLocalDate(`${String(year).padStart(4, '0')}-01-01`, tz).getTime();
}

/**
 * Calls `add(year, amount)` for the part of a metric or points row that fell in each local calendar year of
 * `tz`: the whole row in the year of its instant, or a run of time grants (`grants`) split between the years
 * its grants fell due in (the last part takes what rounding left, so the parts add up to the row's delta).
 */
export function yearParts(row: LedgerRow, tz: string, yearOfAt: (at: string) => number, add: (year: number, amount: number) => void): void {
  const grants: GrantRun | undefined = row.kind === 'points' ? (row.data as AwardRow | null)?.grants : undefined;
  if (!grants || grants.count <= 1) {
    add(yearOfAt(row.at), row.delta);
    return;
  }
  const each = row.delta / grants.count;
  const upTo = (k: number) => (k >= grants.count ? row.delta : each * k);
  let j = 0;
  while (j < grants.count) {
    const year = yearOfDate(localDateOf(grantInstant(row.at, grants, j), tz));
    const k = Math.max(j + 1, grantsBefore(row.at, grants, yearStartMs(year + 1, tz)));
    add(year, addExact(upTo(k), -upTo(j)));
    j = k;
  }
}

const counted = (row: LedgerRow): row is LedgerRow & { kind: 'metric' | 'points' } => row.kind === 'metric' || row.kind === 'points';

/** The year of a row booked by this call (`step.today`'s year for rows dated now, without formatting). */
const yearOfAtIn = (step: Step) => (at: string) => (at === step.nowIso ? yearOfDate(step.today) : yearOfDate(localDateOf(Date.parse(at), step.tz)));

// The index names of the last year used per (kind, key): the same string call after call (a map per kind, so
// that no lookup key is built per call).
const metricNames = new Map<string, { year: number; name: string }>();
const pointsNames = new Map<string, { year: number; name: string }>();

function indexName(kind: 'metric' | 'points', key: string, year: number): string {
  const names = kind === 'metric' ? metricNames : pointsNames;
  const hit = names.get(key);
  if (hit !== undefined && hit.year === year) return hit.name;
  const name = yearlyIndex(kind, key, year);
  // Keys come from configurations; the bound only guards against a caller inventing them without end.
  if (hit !== undefined || names.size < 10_000) names.set(key, { year, name });
  return name;
}

/**
 * What one call adds up (module-level functions over it rather than closures: this runs on every event).
 * `sums` is copied on the call's first change (each record on its own first change), never written in place.
 */
interface Acc {
  sums: YearlyChanges | undefined;
  /** `sums` is this call's own object; `metrics`/`points`: that record is this call's own too. */
  own: boolean;
  metrics: boolean;
  points: boolean;
  /** (kind, key, year) changed, in order of first change; `value` set when the call moved on to a later year. */
  written: { kind: 'metric' | 'points'; key: string; year: number; value?: number }[];
}

function addPart(acc: Acc, kind: 'metric' | 'points', key: string, year: number, amount: number): void {
  let sums = acc.sums;
  if (sums !== undefined && year < sums.year) return;
  if (sums === undefined || year > sums.year) {
    // A run of time grants reaching over New Year: the earlier year's entries keep their last values.
    const left = sums;
    if (left !== undefined) for (const w of acc.written) if (w.year === left.year) w.value = own(w.kind === 'metric' ? left.metrics : left.points, w.key) as number;
    sums = acc.sums = { year, metrics: {}, points: {} };
    acc.own = acc.metrics = acc.points = true;
  } else if (!acc.own) {
    sums = acc.sums = { year: sums.year, metrics: sums.metrics, points: sums.points };
    acc.own = true;
  }
  let record: Record<string, number>;
  if (kind === 'metric') {
    if (!acc.metrics) {
      sums.metrics = { ...sums.metrics };
      acc.metrics = true;
    }
    record = sums.metrics;
  } else {
    if (!acc.points) {
      sums.points = { ...sums.points };
      acc.points = true;
    }
    record = sums.points;
  }
  record[key] = addExact(own(record, key) ?? 0, amount);
  for (const w of acc.written) if (w.kind === kind && w.key === key && w.year === year) return;
  acc.written.push({ kind, key, year });
}

/**
 * Adds this call's metric and points rows to the user's yearly sums and writes the sums it changed to the
 * yearly indexes. Parts of a year before the one the state keeps are left out (the state keeps one year: a
 * clock that went back, or a move westwards across New Year); a part of a later year starts that year.
 */
export function pushYearlyChanges(step: Step): void {
  const rows = step.effects.ledger;
  let acc: Acc | null = null;
  let today = 0;
  for (const r of rows) {
    if (!counted(r)) continue;
    if (acc === null) {
      acc = { sums: step.state.yearly, own: false, metrics: false, points: false, written: [] };
      today = yearOfDate(step.today);
    }
    // The usual row: dated now, no run of grants.
    if (r.at === step.nowIso && (r.kind === 'metric' || (r.data as AwardRow | null)?.grants === undefined)) {
      addPart(acc, r.kind, r.key, today, r.delta);
      continue;
    }
    const kind = r.kind;
    const into = acc;
    yearParts(r, step.tz, yearOfAtIn(step), (year, amount) => addPart(into, kind, r.key, year, amount));
  }
  if (acc === null || !acc.own || acc.sums === undefined) return;
  const next = acc.sums;
  step.owned.add(next);
  if (acc.metrics) step.owned.add(next.metrics);
  if (acc.points) step.owned.add(next.points);
  step.state.yearly = next;
  const userId = step.state.user.id;
  for (const w of acc.written) {
    const value = w.value ?? (own(w.kind === 'metric' ? next.metrics : next.points, w.key) as number);
    step.effects.leaderboard.push({ index: indexName(w.kind, w.key, w.year), userId, value, reachedAt: step.nowIso, date: step.today, unranked: true });
  }
}

/**
 * Recomputes the user's sums of the current year (the year of the call's `now` in the user's zone) from the
 * whole ledger (`rows`, the stored rows, and the rows this call booked) and writes the entries that differ
 * from what the state kept: replay's refill for users whose yearly sums are missing (written before Wrapped)
 * or off (a zone change). Writes nothing when the state already agrees, or keeps a later year.
 */
export function refillYearlyChanges(step: Step, rows: readonly LedgerRow[]): void {
  const year = yearOfDate(step.today);
  const kept = step.state.yearly;
  if (kept && kept.year > year) return;
  const from = new Date(yearStartMs(year, step.tz)).toISOString();
  const to = new Date(yearStartMs(year + 1, step.tz)).toISOString();
  const metrics: Record<string, number> = {};
  const points: Record<string, number> = {};
  let any = false;
  const yearOf = yearOfAtIn(step);
  const visit = (r: LedgerRow) => {
    if (!counted(r)) return;
    const run = r.kind === 'points' && (r.data as AwardRow | null)?.grants;
    if (!run && (r.at < from || r.at >= to)) return;
    const record = r.kind === 'metric' ? metrics : points;
    yearParts(r, step.tz, yearOf, (y, amount) => {
      if (y !== year) return;
      record[r.key] = addExact(own(record, r.key) ?? 0, amount);
      any = true;
    });
  };
  for (const r of rows) visit(r);
  for (const r of step.effects.ledger) visit(r);
  const same = kept !== undefined && kept.year === year;
  if (!any && !same) return;
  const userId = step.state.user.id;
  let changed = !same;
  const write = (kind: 'metric' | 'points', now: Record<string, number>, before: Record<string, number> | undefined) => {
    for (const key of Object.keys(now)) {
      const value = now[key] as number;
      if (before !== undefined && own(before, key) === value) continue;
      changed = true;
      step.effects.leaderboard.push({ index: yearlyIndex(kind, key, year), userId, value, reachedAt: step.nowIso, date: step.today, unranked: true });
    }
    if (before === undefined) return;
    for (const key of Object.keys(before)) {
      if (own(now, key) !== undefined) continue;
      changed = true;
      step.effects.leaderboard.push({ index: yearlyIndex(kind, key, year), userId, remove: true, date: step.today, unranked: true });
    }
  };
  write('metric', metrics, same ? kept.metrics : undefined);
  write('points', points, same ? kept.points : undefined);
  if (!changed) return;
  const next: YearlyChanges = { year, metrics, points };
  step.owned.add(next).add(metrics).add(points);
  step.state.yearly = next;
}
