/**
 * The pure core: `applyEvent` and its siblings take a configuration, the user's prior state and an input,
 * and return the next state, the response and the effects for storage as data. They never await, never
 * read the clock or a random source (time and ids come in the context) and never mutate their inputs.
 */
import type { CompiledAchievement, LaurelConfig } from '../config/define.js';
import { isLaurelError, NotFoundError, ValidationError } from '../errors.js';
import { isSupportedInstant, MAX_INSTANT_MS, MIN_INSTANT_MS } from './calendar.js';
import { completeApiAchievement, recordAchievementProgress, settleAchievements, unlockedViews, userAchievementView } from './achievements.js';
import { addExact, MAX_EXACT } from './decimal.js';
import { updateLeaderboards } from './leaderboards.js';
import {
  accrueTimeGrants,
  awardAchievementTriggers,
  awardCreation,
  awardMetricTriggers,
  awardStreakTriggers,
  eventPoints,
  levelFor,
  pointsState,
} from './points.js';
import { adoptState, awardsOut, createStep, own, ownRecord, record, refreshZone, sealState, stateRecord, type Step } from './step.js';
import { alignRules } from './rules.js';
import { advanceStreak, eventStreak, recordStreakProgress, streakView } from './streaks.js';
import type {
  ApplyResult,
  Award,
  CompletionRowData,
  CoreContext,
  Effects,
  EventInput,
  EventPoints,
  EventResponse,
  MetricRowData,
  UserAchievement,
  UserFields,
  UserInput,
  UserRowData,
  UserState,
} from './types.js';
import { mergeUser, newUserState, validateEvent, validateUserInput } from './users.js';
import { stableId } from './ids.js';

/** Validates an instant: a valid Date whose local date in every zone lies in the supported date range. */
export function checkInstant(value: unknown, path: readonly (string | number)[]): asserts value is Date {
  const ms = value instanceof Date ? value.getTime() : NaN;
  // Errors carry a copy of `path` (callers may pass a shared constant).
  if (Number.isNaN(ms)) throw new ValidationError(`${path.join('.')} must be a valid Date (got ${String(value)})`, [{ path: [...path], message: 'must be a valid Date' }]);
  if (!isSupportedInstant(ms)) {
    throw new ValidationError(`${path.join('.')} must be between ${new Date(MIN_INSTANT_MS).toISOString()} and ${new Date(MAX_INSTANT_MS).toISOString()} (got ${(value as Date).toISOString()})`, [{ path: [...path], message: 'out of the supported range' }]);
  }
}

const CONTEXT_NOW_PATH = ['context', 'now'];

/** Checks that `cfg` is a configuration compiled by `defineConfig`; throws ValidationError otherwise. */
export function checkConfig(cfg: LaurelConfig): void {
  if (typeof cfg !== 'object' || cfg === null || typeof cfg.index !== 'object' || !(cfg.index?.metrics instanceof Map)) {
    throw new ValidationError('config must be a configuration compiled by defineConfig', [{ path: ['config'], message: 'must come from defineConfig' }]);
  }
}

/**
 * Checks what every pure call receives besides its input: a compiled configuration and a context whose `now`
 * is a valid date in the supported range and whose `newId` is a function. Throws ValidationError otherwise.
 */
export function checkCall(cfg: LaurelConfig, ctx: CoreContext): void {
  checkConfig(cfg);
  if (typeof ctx !== 'object' || ctx === null) throw new ValidationError('context must be an object { now, newId }', [{ path: ['context'], message: 'must be an object' }]);
  checkInstant(ctx.now, CONTEXT_NOW_PATH);
  if (typeof ctx.newId !== 'function') throw new ValidationError('context.newId must be a function returning ids', [{ path: ['context', 'newId'], message: 'must be a function' }]);
}

/** Starts a call: adopts or creates the user's state, applies the upsert, and brings lazy parts up to now. */
export function begin(cfg: LaurelConfig, priorInput: UserState | null | undefined, user: UserInput | null, ctx: CoreContext, view = false): Step {
  checkCall(cfg, ctx);
  return beginChecked(cfg, priorInput, user, ctx, view);
}

/** `begin` for a call whose configuration and context were checked (`checkCall`). */
function beginChecked(cfg: LaurelConfig, priorInput: UserState | null | undefined, user: UserInput | null, ctx: CoreContext, view = false): Step {
  // A prior state read from a Map or a store that has no entry is `undefined`: a new user, like null.
  const prior = priorInput ?? null;
  if (prior && user && prior.user?.id !== user.id) throw new ValidationError(`state belongs to user ${JSON.stringify(prior.user?.id)}, not ${JSON.stringify(user.id)}`);
  const created = prior === null;
  if (created && !user) throw new ValidationError('a new user needs a user input');
  const step = created ? createStep(cfg, newUserState(cfg, user as UserInput, ctx.now.toISOString()), ctx.now, ctx.newId, true) : createStep(cfg, adoptState(prior), ctx.now, ctx.newId);
  step.view = view;
  if (created) {
    step.effects.created = true;
    step.effects.counters.users = 1;
    step.userFields = userFieldsOf(user as UserInput);
    awardCreation(step);
  } else {
    alignRules(step);
    if (user) {
      if (mergeUser(step, user)) refreshZone(step);
      // Kept whether or not they changed the user: under another configuration the input that set them
      // first may be refused, and replay must then find them on the next input that sent them.
      if (sentFields(user)) step.userFields = userFieldsOf(user);
    }
  }
  advanceStreak(step);
  accrueTimeGrants(step);
  return step;
}

/** Settles achievements, pays their and the streak's triggers, and updates leaderboards. */
export function finish(step: Step, metricKey: string | null, value: number, attributes: Record<string, string> | undefined) {
  settleAchievements(step);
  for (const system of step.cfg.pointsSystems) {
    if (metricKey !== null) awardMetricTriggers(step, system, metricKey, value, attributes);
    awardStreakTriggers(step, system);
    awardAchievementTriggers(step, system);
  }
  return updateLeaderboards(step, metricKey, value);
}

/**
 * Records one event against a user's prior state (null for a new user).
 *
 * @throws {ValidationError | InvalidAttributeKeysError | NotFoundError} for bad input, before any work.
 * @throws {InsufficientPointsError} when a blocking trigger would overdraw a points system.
 * @example
 * ```ts
 * const { state, response, effects } = applyEvent(config, null,
 *   { metricKey: 'lessons', user: { id: 'u1' }, value: 1 },
 *   { now: new Date('2026-01-05T10:00:00Z'), newId: () => crypto.randomUUID() });
 * ```
 */
export function applyEvent(cfg: LaurelConfig, prior: UserState | null | undefined, event: EventInput, ctx: CoreContext): ApplyResult {
  checkCall(cfg, ctx);
  validateEvent(cfg, event);
  return applyCheckedEvent(cfg, prior, event, ctx);
}

/** `applyEvent` for an event the caller has already validated with `validateEvent` (the engine does, once). */
export function applyValidatedEvent(cfg: LaurelConfig, prior: UserState | null | undefined, event: EventInput, ctx: CoreContext): ApplyResult {
  checkCall(cfg, ctx);
  return applyCheckedEvent(cfg, prior, event, ctx);
}

/** Applies a validated event under a checked configuration and context (checked once per call, not twice). */
function applyCheckedEvent(cfg: LaurelConfig, prior: UserState | null | undefined, event: EventInput, ctx: CoreContext): ApplyResult {
  const step = beginChecked(cfg, prior, event.user, ctx);
  const metric = cfg.index.metrics.get(event.metricKey);
  const eventId = ctx.newId();
  const total = addExact(own(step.state.metrics, event.metricKey) ?? 0, event.value);
  if (!(Math.abs(total) <= MAX_EXACT)) throw new ValidationError(`value: the total of "${event.metricKey}" would become ${total}, beyond the exact range (|total| <= ${MAX_EXACT})`, [{ path: ['value'], message: 'the total would leave the exact range' }]);
  ownRecord(step, 'metrics')[event.metricKey] = total;
  step.effects.ledger.push({ id: eventId, userId: event.user.id, kind: 'metric', key: event.metricKey, at: step.nowIso, delta: event.value, total, data: metricRowData(step, event) });
  recordStreakProgress(step, event.metricKey, event.value);
  recordAchievementProgress(step, event.metricKey, event.value, event.attributes);
  const leaderboards = finish(step, event.metricKey, event.value, event.attributes);
  if (event.idempotencyKey !== undefined) {
    step.effects.idempotency = { userId: event.user.id, metricKey: event.metricKey, key: event.idempotencyKey, eventId, at: step.nowIso };
  }
  const response: EventResponse = {
    metricId: metric?.id as string,
    eventId,
    total,
    achievements: unlockedViews(step),
    currentStreak: eventStreak(step),
    points: eventPoints(step),
    leaderboards,
  };
  if (event.idempotencyKey !== undefined) {
    response.idempotencyKey = event.idempotencyKey;
    response.idempotentReplayed = false;
  }
  return { state: sealState(step), response, effects: step.effects };
}

/** The user fields an input sent besides its id (what a ledger row keeps for replay). */
function userFieldsOf(user: UserInput): UserFields {
  const out: UserFields = {};
  if (user.email !== undefined) out.email = user.email;
  if (user.name !== undefined) out.name = user.name;
  if (user.tz !== undefined) out.tz = user.tz;
  if (user.attributes !== undefined && user.attributes !== null) out.attributes = stateRecord(user.attributes);
  return out;
}

/** True when a user input carries fields besides its id. */
function sentFields(user: UserInput): boolean {
  return user.email !== undefined || user.name !== undefined || user.tz !== undefined || (user.attributes !== undefined && user.attributes !== null);
}

/** What a metric row keeps besides value and instant, so that replay can apply the event again; null if nothing. */
function metricRowData(step: Step, event: EventInput): MetricRowData | null {
  let data: MetricRowData | null = null;
  if (event.attributes) {
    for (const _ in event.attributes) {
      data = { attributes: stateRecord(event.attributes) };
      break;
    }
  }
  if (event.idempotencyKey !== undefined) (data ??= {}).idempotencyKey = event.idempotencyKey;
  if (step.userFields) (data ??= {}).user = step.userFields;
  return data;
}

/** The `user` ledger row of an upsert that created or changed the user (replay applies it again), if any. */
function pushUserRow(step: Step): void {
  if (!step.userFields) return;
  const data: UserRowData = { user: step.userFields };
  step.effects.ledger.push({ id: step.newId(), userId: step.state.user.id, kind: 'user', key: 'user', at: step.nowIso, delta: 0, total: 0, data });
}

/**
 * The response to a repeated idempotency key (docs/rules.md, section 3): nothing applied, the current total and
 * streak (`extended: false`), no achievements, points or leaderboards.
 */
export function replayResponse(cfg: LaurelConfig, state: UserState, metricKey: string, eventId: string, idempotencyKey: string, ctx: CoreContext): EventResponse {
  const view = viewState(cfg, state, ctx);
  if (typeof metricKey !== 'string' || !cfg.index.metrics.has(metricKey)) throw new NotFoundError('metric', String(metricKey));
  return {
    metricId: cfg.index.metrics.get(metricKey)?.id as string,
    eventId,
    total: own(view.state.metrics, metricKey) ?? 0,
    achievements: [],
    currentStreak: { ...streakView(cfg, view.state, view.today), extended: false },
    points: record(),
    leaderboards: record(),
    idempotencyKey,
    idempotentReplayed: true,
  };
}

/** The result of a pure call that is not an event. */
export interface StepResult<R> {
  state: UserState;
  effects: Effects;
  result: R;
}

/**
 * Creates or updates a user (identify, upsert). Time grants and streak maintenance due by `now` are
 * materialised; a new user gets their `user_creation` awards.
 */
export function applyIdentify(cfg: LaurelConfig, prior: UserState | null | undefined, user: UserInput, ctx: CoreContext): StepResult<{ points: Record<string, EventPoints> }> {
  checkCall(cfg, ctx);
  validateUserInput(cfg, user);
  const step = begin(cfg, prior, user, ctx);
  finish(step, null, 0, undefined);
  pushUserRow(step);
  return { state: sealState(step), effects: step.effects, result: { points: eventPoints(step) } };
}

/** Materialises due time grants and streak maintenance for an existing user. */
export function applyAccrue(cfg: LaurelConfig, prior: UserState, ctx: CoreContext): StepResult<{ points: Record<string, EventPoints> }> {
  checkCall(cfg, ctx);
  if (prior === null || prior === undefined) throw new ValidationError('accrue needs the state of an existing user', [{ path: ['prior'], message: 'is required' }]);
  const step = begin(cfg, prior, null, ctx);
  finish(step, null, 0, undefined);
  return { state: sealState(step), effects: step.effects, result: { points: eventPoints(step) } };
}

/**
 * What completing an `api` achievement answers (`Engine.completeAchievement`): the completion's id, the
 * achievement, the points it awarded and the composite achievements it unlocked.
 */
export interface CompletionResult {
  completionId: string;
  achievement: UserAchievement;
  points: Record<string, EventPoints>;
  /** Other achievements this completion unlocked (composites), in configuration order. */
  unlocked: UserAchievement[];
}

/**
 * Completes an `api` achievement for a user. Completing it again returns the first completion and changes
 * nothing (the returned effects are empty and `state` is the prior state).
 *
 * @throws {NotFoundError} for an unknown key; {ValidationError} for a non-api achievement or one whose
 * `userAttributes` the user does not match.
 */
export function applyCompletion(cfg: LaurelConfig, priorInput: UserState | null | undefined, achievementInput: CompiledAchievement, user: UserInput, ctx: CoreContext): StepResult<CompletionResult> & { changed: boolean } {
  checkCall(cfg, ctx);
  const prior = priorInput ?? null;
  const key = (achievementInput as { key?: unknown } | null)?.key;
  const achievement = typeof key === 'string' ? cfg.index.achievements.get(key) : undefined;
  if (!achievement) throw new NotFoundError('achievement', String(key));
  validateUserInput(cfg, user);
  if (achievement.trigger !== 'api') throw new ValidationError(`Achievement "${achievement.key}" has trigger "${achievement.trigger}" and cannot be completed through the API.`);
  const done = own(prior?.achievements, achievement.key);
  if (achievement.status !== 'active' && !done) throw new ValidationError(`Achievement "${achievement.key}" is ${achievement.status} and cannot be completed.`);
  if (prior && done) {
    return {
      state: prior,
      effects: { ledger: [], leaderboard: [], counters: {}, idempotency: null, created: false },
      result: { completionId: done.completionId, achievement: userAchievementView(achievement, prior), points: record(), unlocked: [] },
      changed: false,
    };
  }
  const step = begin(cfg, prior, user, ctx);
  const attrs = step.state.user.attributes;
  for (const [k, v] of Object.entries(achievement.userAttributes)) {
    if (own(attrs, k) !== v) throw new ValidationError(`Achievement "${achievement.key}" is not available to user ${JSON.stringify(user.id)} (needs ${k}=${v}).`);
  }
  completeApiAchievement(step, achievement);
  finish(step, null, 0, undefined);
  const completion = own(step.state.achievements, achievement.key) as { completionId: string };
  const data: CompletionRowData = step.userFields ? { completionId: completion.completionId, user: step.userFields } : { completionId: completion.completionId };
  step.effects.ledger.push({ id: completion.completionId, userId: step.state.user.id, kind: 'achievement', key: achievement.key, at: step.nowIso, delta: 0, total: 0, data });
  const unlocked = unlockedViews(step);
  return {
    state: sealState(step),
    effects: step.effects,
    result: {
      completionId: completion.completionId,
      achievement: userAchievementView(achievement, step.state),
      points: eventPoints(step),
      unlocked: unlocked.filter((a) => a.key !== achievement.key),
    },
    changed: true,
  };
}

/**
 * The context of a read of `state` at `ctx.now`: ids derived from the user, the instant and `kind` (one
 * sequence per kind), so that a read draws nothing from `ctx.newId` and shows the same ids at the same instant.
 */
export function readContext(state: UserState, ctx: CoreContext, kind: string): CoreContext {
  const user = (state as Partial<UserState> | null)?.user;
  const seed = `${String(user?.id)}\u0000${String(user?.created)}\u0000${ctx.now.getTime()}\u0000`;
  let n = 0;
  return { now: ctx.now, newId: () => stableId(kind, seed + n++) };
}

/**
 * The user's state as of `now` without committing anything, as the next write (`applyAccrue`) would leave
 * it: streak maintenance and time grants applied lazily, and, when the configuration changed since the state
 * was committed, what a write settles (an achievement whose prerequisites the user now meets, with its
 * triggers' points, the boards they move).
 * It draws no ids from `ctx.newId`: a due time grant's award id is derived from the grant (the same on every
 * read), anything else made here (a completion, an award, a streak row) from the user and `now`.
 */
export function viewState(cfg: LaurelConfig, state: UserState, ctx: CoreContext): { state: UserState; today: string; tz: string; awards: Map<string, Award[]>; effects: Effects } {
  // What the last write left is settled under the rules it was counted under: a changed configuration is
  // what gives `finish` something to settle (reads without one keep their cost: no board or index work).
  return viewAfter(cfg, state, ctx, (state as Partial<UserState> | null)?.rules !== cfg.rules.all);
}

/**
 * `viewState`, settling what a write settles when `settle` (the configuration changed since the state the
 * read started from was committed: the engine passes the state it reconciled, and says so).
 */
export function viewAfter(cfg: LaurelConfig, state: UserState, ctx: CoreContext, settle: boolean): ReturnType<typeof viewState> {
  if (state === null || state === undefined) throw new ValidationError('viewState needs the state of an existing user', [{ path: ['state'], message: 'is required' }]);
  checkCall(cfg, ctx);
  const step = begin(cfg, state, null, readContext(state, ctx, 'view'), true);
  if (settle) {
    try {
      finish(step, null, 0, undefined);
    } catch (error) {
      // What a write would refuse (a blocking trigger of a newly unlocked achievement would overdraw) is
      // the write's to report: the read shows the user as they are, without settling.
      if (!isLaurelError(error)) throw error;
      return viewAfter(cfg, state, ctx, false);
    }
  }
  return { state: sealState(step), today: step.today, tz: step.tz, awards: awardsOut(step), effects: step.effects };
}

export { levelFor, pointsState };
