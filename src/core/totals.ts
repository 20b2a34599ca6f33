/**
 * Points totals by user attribute, for histograms filtered by `userAttributes` (docs/rules.md, points).
 * Besides every user's total in a system (the unranked `pointsTotalsIndex`), each system keeps one unranked
 * index per (declared user attribute, value) holding the totals of the users who have that value now. A
 * user's entries there are written with their total (a call that changes the total or the user's attributes
 * writes them; a changed value moves the user: removed from the old value's index, written to the new one),
 * so a filtered histogram counts by value ranges like an unfiltered one and never scans users. Users without
 * declared attributes cost nothing more.
 */
import type { CompiledPointsSystem } from '../config/define.js';
import { stableId } from './ids.js';
import { own, type Step } from './step.js';

/**
 * The store index of the totals in `systemKey` of the users whose attribute `attributeKey` is `value`. A
 * value longer than 200 characters (attribute values may have 1000) is named by a 128-bit hash of it, so the
 * name fits every store's keys, as breakdown groups are.
 */
export function attributeTotalsIndex(systemKey: string, attributeKey: string, value: string): string {
  return `pa|${systemKey}|${attributeKey}|${value.length > 200 ? `#${stableId('attributeValue', value)}` : value}`;
}

/** True when this call changed one of the user's declared attributes (only then do entries move). */
export function attributesMoved(step: Step): boolean {
  const now = step.state.user.attributes;
  const before = step.attributesBefore;
  if (now === before) return false;
  for (const k of step.cfg.index.userAttributes) if (own(now, k) !== own(before, k)) return true;
  return false;
}

/** True when the user has a declared attribute (a value in some attribute totals index). */
export function hasDeclaredAttributes(step: Step): boolean {
  const attrs = step.state.user.attributes;
  for (const k of Object.keys(attrs)) if (step.cfg.index.userAttributes.has(k)) return true;
  return false;
}

/**
 * The user's entries in `system`'s attribute totals indexes, set to `total`: one per declared attribute the
 * user has, and a removal from the index of each value this call replaced. Absolute writes, so writing them
 * again changes nothing.
 */
export function pushAttributeTotals(step: Step, system: CompiledPointsSystem, total: number): void {
  const declared = step.cfg.index.userAttributes;
  if (declared.size === 0) return;
  const userId = step.state.user.id;
  const now = step.state.user.attributes;
  const before = step.attributesBefore;
  const writes = step.effects.leaderboard;
  if (now !== before) {
    for (const k of Object.keys(before)) {
      const was = before[k] as string;
      if (!declared.has(k) || own(now, k) === was) continue;
      writes.push({ index: attributeTotalsIndex(system.key, k, was), userId, remove: true, date: step.today, unranked: true });
    }
  }
  for (const k of Object.keys(now)) {
    if (!declared.has(k)) continue;
    writes.push({ index: attributeTotalsIndex(system.key, k, now[k] as string), userId, value: total, reachedAt: step.nowIso, date: step.today, unranked: true });
  }
}

// ---------------------------------------------------------------------------------------------------------
// Histogram buckets

/** One bucket of a points histogram: totals `t` with `from - 1 < t <= to` (the first: `t <= 0`). */
export interface HistogramBucket {
  from: number;
  to: number;
}

/**
 * The highest total rounded up to a power of ten, at least 10: the top of the histogram's last range.
 * Exact for every total in the exact range (10^16 is a double).
 */
export function histogramTop(max: number): number {
  let top = 10;
  while (top < max) top *= 10;
  return top;
}

/** The eleven buckets for a highest total `max`: 0-0, then ten equal ranges from 1 to {@link histogramTop}. */
export function histogramBuckets(max: number): HistogramBucket[] {
  const width = histogramTop(max) / 10;
  const out: HistogramBucket[] = [{ from: 0, to: 0 }];
  for (let i = 0; i < 10; i++) out.push({ from: i * width + 1, to: (i + 1) * width });
  return out;
}

/** The bucket (0..10) of a total `t` among {@link histogramBuckets}`(max)`; totals at or below 0 are in the first. */
export function bucketOf(max: number, t: number): number {
  if (t <= 0) return 0;
  const width = histogramTop(max) / 10;
  let k = Math.min(10, Math.max(1, Math.ceil(t / width)));
  // The quotient can round; the products are exact (whole numbers up to 10^16).
  while (k < 10 && k * width < t) k++;
  while (k > 1 && (k - 1) * width >= t) k--;
  return k;
}

/** The least double above `x` (for `x >= 0`): `value > x` is `value >= nextUp(x)`. */
function nextUp(x: number): number {
  if (x === 0) return Number.MIN_VALUE;
  const f = new Float64Array([x]);
  const bits = new BigInt64Array(f.buffer);
  bits[0] = (bits[0] as bigint) + 1n;
  return f[0] as number;
}

/** A bucket as a store's value range (`min <= value < max`): `from - 1 < value <= to`, the first `value <= 0`. */
export function bucketRange(bucket: HistogramBucket, first: boolean): { min?: number; max: number } {
  return first ? { max: nextUp(0) } : { min: nextUp(bucket.from - 1), max: nextUp(bucket.to) };
}
