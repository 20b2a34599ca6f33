/**
 * Achievements (docs/rules.md, section 4): metric, streak, api and composite, each unlocked at most once per
 * user and never revoked.
 */
import type { CompiledAchievement, LaurelConfig } from '../config/define.js';
import { addExact } from './decimal.js';
import { matchesFilter, own, ownRecord, type Step } from './step.js';
import type { AchievementView, AttributePair, UserAchievement, UserState } from './types.js';

const pairs = (filter: Readonly<Record<string, string>> | undefined): AttributePair[] =>
  Object.entries(filter ?? {}).map(([key, value]) => ({ key, value }));

/** The wire view of a configured achievement. */
export function achievementView(a: CompiledAchievement): AchievementView {
  const view: AchievementView = {
    id: a.id,
    key: a.key,
    name: a.name,
    trigger: a.trigger,
    description: a.description,
    badgeUrl: a.badgeUrl,
    userAttributes: pairs(a.userAttributes),
  };
  if (a.trigger === 'metric') {
    view.metricId = a.metricId as string;
    view.metricName = a.metricName as string;
    view.metricValue = a.metricValue;
    view.eventAttributes = pairs(a.eventAttributes);
  } else if (a.trigger === 'streak') {
    view.streakLength = a.streakLength;
  } else if (a.trigger === 'achievement') {
    view.achievementIds = [...(a.achievementIds ?? [])];
  }
  return view;
}

export function userAchievementView(a: CompiledAchievement, state: UserState | null): UserAchievement {
  return { ...achievementView(a), achievedAt: own(state?.achievements, a.key)?.achievedAt ?? null };
}

/** A user's view of an achievement: completed with `achievedAt`, else `achievedAt: null` and its `progress`. */
export function achievementWithProgress(cfg: LaurelConfig, a: CompiledAchievement, state: UserState): UserAchievement {
  const view = userAchievementView(a, state);
  return own(state.achievements, a.key) ? view : { ...view, progress: achievementProgress(cfg, a, state) };
}

/** Current progress toward an achievement, as `{ current, target }`. */
export function achievementProgress(cfg: LaurelConfig, a: CompiledAchievement, state: UserState | null): { current: number; target: number } {
  switch (a.trigger) {
    case 'metric': {
      const value = a.eventAttributes ? own(state?.achievementProgress, a.key) : own(state?.metrics, a.metricKey);
      return { current: Number(value ?? 0), target: a.metricValue };
    }
    case 'streak':
      return { current: state?.streak?.length ?? 0, target: a.streakLength };
    case 'api':
      return { current: own(state?.achievements, a.key) ? 1 : 0, target: 1 };
    case 'achievement':
      return { current: a.achievementKeys.filter((k) => own(state?.achievements, k)).length, target: a.achievementKeys.length };
  }
  return { current: 0, target: 0 };
}

function unlock(step: Step, a: CompiledAchievement): void {
  ownRecord(step, 'achievements')[a.key] = { achievedAt: step.nowIso, completionId: step.newId() };
  step.unlocked.push(a);
  step.effects.counters[`achievement:${a.key}`] = (step.effects.counters[`achievement:${a.key}`] ?? 0) + 1;
}

const available = (step: Step, a: CompiledAchievement) => a.status === 'active' && own(step.state.achievements, a.key) === undefined && matchesFilter(a.userAttributes, step.state.user.attributes);

/**
 * Whether a user's lists show an achievement: never an `inactive` one, a `locked` one only to a user who
 * holds it (the hosted service's statuses).
 */
export function listedFor(a: CompiledAchievement, state: UserState | null): boolean {
  return a.status === 'active' || (a.status === 'locked' && own(state?.achievements, a.key) !== undefined);
}

/** Updates filtered progress for the event's metric and unlocks what it reaches. */
export function recordAchievementProgress(step: Step, metricKey: string, value: number, attributes: Record<string, string> | undefined): void {
  const list = step.cfg.index.achievementsByMetric.get(metricKey);
  if (list === undefined) return;
  // The metric's total, read once: nothing in the loop writes it.
  const total = own(step.state.metrics, metricKey) ?? 0;
  for (const a of list) {
    if (a.trigger !== 'metric') continue;
    let progress: number;
    if (a.eventAttributes) {
      progress = own(step.state.achievementProgress, a.key) ?? 0;
      if (matchesFilter(a.eventAttributes, attributes)) {
        progress = addExact(progress, value);
        ownRecord(step, 'achievementProgress')[a.key] = progress;
      }
    } else {
      progress = total;
    }
    if (progress >= a.metricValue && available(step, a)) unlock(step, a);
  }
}

/**
 * Unlocks every achievement the user now qualifies for that the call's own metric progress did not already
 * settle: metric achievements limited by user attributes (the user may just have gained the attribute),
 * streak achievements the current length reaches, then composites whose prerequisites are all met. Every
 * call that can change the answer (events, identify and update, completions, accrue) runs it.
 */
export function settleAchievements(step: Step): void {
  const state = step.state;
  for (const a of step.cfg.index.gatedMetricAchievements) {
    if (a.trigger !== 'metric' || !available(step, a)) continue;
    const progress = (a.eventAttributes ? own(state.achievementProgress, a.key) : own(state.metrics, a.metricKey)) ?? 0;
    if (progress >= a.metricValue) unlock(step, a);
  }
  const length = state.streak?.length ?? 0;
  for (const a of step.cfg.index.streakAchievements) {
    if (a.trigger === 'streak' && length >= a.streakLength && available(step, a)) unlock(step, a);
  }
  // Composites come in dependency order, so one pass settles chains of any length in linear time.
  for (const a of step.cfg.index.compositeAchievements) {
    if (a.trigger === 'achievement' && available(step, a) && a.achievementKeys.every((k) => own(state.achievements, k) !== undefined)) unlock(step, a);
  }
}

/** Completes an `api` achievement (the caller checked it is not yet complete). */
export function completeApiAchievement(step: Step, a: CompiledAchievement): void {
  unlock(step, a);
}

/** The achievements unlocked in this call, ordered by the configuration's order. */
export function unlockedViews(step: Step): UserAchievement[] {
  if (step.unlocked.length === 0) return [];
  return [...step.unlocked].sort((x, y) => x.index - y.index).map((a) => userAchievementView(a, step.state));
}
