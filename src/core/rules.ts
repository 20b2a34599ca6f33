/**
 * The rule fingerprints a state was counted under (`UserState.rules`) and the part of bringing a state in
 * line with a changed configuration that needs no ledger (see evolve.ts for the rest).
 */
import type { LaurelConfig } from '../config/define.js';
import { addExact } from './decimal.js';
import { pointsTotalsIndex } from './leaderboards.js';
import { ceilingOf, pointsState, timeGrantsDueNow } from './points.js';
import { own, ownPoints, type Step } from './step.js';
import { hasDeclaredAttributes, pushAttributeTotals } from './totals.js';
import type { AdjustmentRow, UserState } from './types.js';


/** The parts of a state's `rules` (achievements, streak, points); null for a state from before 0.3. */
export function ruleParts(rules: string): [string, string, string] | null {
  const parts = rules.split('.');
  return parts.length === 3 ? (parts as [string, string, string]) : null;
}

/**
 * True when the state's achievements or streak were counted under rules other than the configuration's:
 * the engine then reads the user's ledger and calls {@link reconcileUser} before anything else.
 */
export function needsReconcile(cfg: LaurelConfig, state: UserState): boolean {
  if (state.rules === cfg.rules.all || state.rules === '' || state.rules === undefined) return false;
  const parts = ruleParts(state.rules);
  return parts === null || parts[0] !== cfg.rules.achievements || parts[1] !== cfg.rules.streak;
}

/**
 * The part of reconciling that needs no ledger, done at the start of every call: a state from before 0.3
 * moves its trigger progress from positional ids to key-derived ones and is taken as in line with the
 * configuration; a changed points part clamps totals above a lowered `maxPoints` (with an adjustment row)
 * and starts newly configured time triggers now (their grants count from this call, not from the user's
 * creation). The achievements and streak parts stay as they were until {@link reconcileUser} runs.
 */
export function alignRules(step: Step): void {
  const cfg = step.cfg;
  const rules = step.state.rules;
  if (rules === cfg.rules.all) return;
  if (rules === '' || rules === undefined) {
    renameLegacyTriggers(step);
    writeAttributeTotals(step);
    step.state.rules = cfg.rules.all;
    return;
  }
  const parts = ruleParts(rules) ?? ['', '', ''];
  if (parts[2] !== cfg.rules.points) {
    alignPoints(step);
    step.state.rules = `${parts[0]}.${parts[1]}.${cfg.rules.points}`;
  }
}

function renameLegacyTriggers(step: Step): void {
  for (const system of step.cfg.pointsSystems) {
    const current = own(step.state.points, system.key);
    if (!current) continue;
    for (const [legacy, t] of system.legacyTriggerIds) {
      if (legacy === t.id) continue;
      const metric = own(current.metric, legacy);
      const time = own(current.time, legacy);
      if ((metric === undefined || own(current.metric, t.id) !== undefined) && (time === undefined || own(current.time, t.id) !== undefined)) continue;
      const ps = ownPoints(step, system.key);
      if (metric !== undefined && own(ps.metric, t.id) === undefined) {
        ps.metric[t.id] = metric;
        delete ps.metric[legacy];
      }
      if (time !== undefined && own(ps.time, t.id) === undefined) {
        ps.time[t.id] = time;
        delete ps.time[legacy];
      }
    }
  }
}

/**
 * The user's totals written to the totals index and the attribute totals indexes of every system, when the
 * user has a declared attribute: a state counted before those indexes (or before an attribute was declared
 * again) fills them at its first call under the configuration.
 */
function writeAttributeTotals(step: Step, skip?: ReadonlySet<string>): void {
  if (!hasDeclaredAttributes(step)) return;
  for (const system of step.cfg.pointsSystems) {
    if (skip?.has(system.key)) continue;
    const total = pointsState(step.state, system.key).total;
    step.effects.leaderboard.push({ index: pointsTotalsIndex(system.key), userId: step.state.user.id, value: total, reachedAt: step.nowIso, date: step.today, unranked: true });
    pushAttributeTotals(step, system, total);
  }
}

function alignPoints(step: Step): void {
  const clamped = new Set<string>();
  for (const system of step.cfg.pointsSystems) {
    for (const t of system.timeTriggers) {
      if (own(pointsState(step.state, system.key).time, t.id) !== undefined) continue;
      ownPoints(step, system.key).time[t.id] = timeGrantsDueNow(step, t);
    }
    const total = pointsState(step.state, system.key).total;
    const cap = ceilingOf(system);
    if (total > cap) {
      const ps = ownPoints(step, system.key);
      ps.total = cap;
      const data: AdjustmentRow = { adjustment: 'maxPoints' };
      step.effects.ledger.push({ id: step.newId(), userId: step.state.user.id, kind: 'points', key: system.key, at: step.nowIso, delta: addExact(cap, -total), total: cap, data });
      step.effects.leaderboard.push({ index: pointsTotalsIndex(system.key), userId: step.state.user.id, value: cap, reachedAt: step.nowIso, date: step.today, unranked: true });
      pushAttributeTotals(step, system, cap);
      clamped.add(system.key);
    }
  }
  writeAttributeTotals(step, clamped);
}

