/**
 * The working context of one pure call: a private copy of the user's state that the feature modules update
 * in place, plus the effects and response parts they collect. A Step never escapes the core; `applyEvent`
 * and its siblings return plain data built from it.
 */
import type { CompiledAchievement, LaurelConfig } from '../config/define.js';
import type { LocalDate } from './calendar.js';
import { localDateOf } from './calendar.js';
import type { Award, Effects, UserState } from './types.js';

export interface Step {
  readonly cfg: LaurelConfig;
  readonly state: UserState;
  readonly now: Date;
  readonly nowIso: string;
  readonly newId: () => string;
  readonly effects: Effects;
  /** Awards made in this call, per points system, in order. */
  readonly awards: Map<string, Award[]>;
  /** Achievements unlocked in this call, in unlock order. */
  readonly unlocked: CompiledAchievement[];
  /** Streak length before this call's lazy maintenance; used to see whether it changed. */
  streakLengthBefore: number;
  streakExtended: boolean;
  /** The user's zone for this call (latest valid tz, else the config's). */
  tz: string;
  today: LocalDate;
}

export function userZone(cfg: LaurelConfig, state: UserState): string {
  return state.user.tz ?? cfg.timeZone;
}

export function createStep(cfg: LaurelConfig, state: UserState, now: Date, newId: () => string): Step {
  const tz = userZone(cfg, state);
  return {
    cfg,
    state,
    now,
    nowIso: now.toISOString(),
    newId,
    effects: { ledger: [], leaderboard: [], counters: {}, idempotency: null, created: false },
    awards: new Map(),
    unlocked: [],
    streakLengthBefore: state.streak?.length ?? 0,
    streakExtended: false,
    tz,
    today: localDateOf(now, tz),
  };
}

/** Re-reads the zone after a user update changed `tz`. */
export function refreshZone(step: Step): void {
  step.tz = userZone(step.cfg, step.state);
  step.today = localDateOf(step.now, step.tz);
}

/** True when every pair of `filter` is present in `attributes`. */
export function matchesFilter(filter: Readonly<Record<string, string>> | undefined, attributes: Readonly<Record<string, string>> | undefined): boolean {
  if (!filter) return true;
  for (const key in filter) {
    if (!attributes || !Object.hasOwn(attributes, key) || attributes[key] !== filter[key]) return false;
  }
  return true;
}

/** Deep copy of a user state (plain JSON data, bounded by the configuration; a JSON round trip is the fastest copy V8 has for it). */
export function cloneState(state: UserState): UserState {
  return JSON.parse(JSON.stringify(state)) as UserState;
}
