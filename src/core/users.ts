/**
 * Users and input validation (docs/rules.md, sections 1 and 2): user upsert, attribute keys, values, zones.
 */
import type { LaurelConfig } from '../config/define.js';
import { InvalidAttributeKeysError, isLaurelError, NotFoundError, ValidationError, type LaurelError } from '../errors.js';
import { MAX_EXACT } from './decimal.js';
import { isStorableText } from './text.js';
import { canonicalTimeZone, isValidTimeZone } from './calendar.js';
import { emptyPointsState } from './points.js';
import { stableId } from './ids.js';
import { emptyStreak } from './streaks.js';
import { own, ownUser, stateRecord, type Step } from './step.js';
import type { EventInput, PointsState, UserInput, UserRecord, UserState } from './types.js';

const MAX_USER_ID = 255;

function fail(path: readonly (string | number)[], message: string): never {
  // A copy: callers pass shared constant paths (no array built per valid input).
  throw new ValidationError(`${path.join('.')}: ${message}`, [{ path: [...path], message }]);
}

// The paths of the checks every event makes, built once.
const USER_PATH = ['user'];
const USER_ID_PATH = ['user', 'id'];
const USER_EMAIL_PATH = ['user', 'email'];
const USER_NAME_PATH = ['user', 'name'];
const USER_TZ_PATH = ['user', 'tz'];
const USER_ATTRIBUTES_PATH = ['user', 'attributes'];
const EVENT_PATH = ['event'];
const VALUE_PATH = ['value'];
const ATTRIBUTES_PATH = ['attributes'];
const IDEMPOTENCY_KEY_PATH = ['idempotencyKey'];
const NON_EMPTY = { nonEmpty: true } as const;

/**
 * What reading caller input threw (a getter, a Proxy trap) as a `ValidationError` at `path`, with the thrown
 * value as `cause`; a Laurel error (the input read fine and was refused) passes through as it is.
 */
export function unreadableInput(error: unknown, path: readonly (string | number)[]): LaurelError {
  if (isLaurelError(error)) return error;
  const message = `could not be read: ${error instanceof Error ? error.message : String(error)}`;
  return new ValidationError(path.length > 0 ? `${path.join('.')}: ${message}` : `input ${message}`, [{ path: [...path], message }], { cause: error });
}

/**
 * A user as sent by a caller, read once into plain data: the fields Laurel reads (`id`, `email`, `name`, `tz`
 * and a copy of `attributes`, see {@link plainRecord}) in a fresh object, so that what is validated is what the
 * rules read later (a getter is not read twice). Anything but a plain object is returned as it is, for
 * validation to refuse. A throw while reading is the caller's to catch (see {@link unreadableInput}).
 */
export function plainUserInput(value: unknown): unknown {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return value;
  const { id, email, name, tz, attributes } = value as Record<string, unknown>;
  const out: Record<string, unknown> = { id };
  if (email !== undefined) out.email = email;
  if (name !== undefined) out.name = name;
  if (tz !== undefined) out.tz = tz;
  if (attributes !== undefined) out.attributes = plainRecord(attributes);
  return out;
}

/** An attributes object's own enumerable keys and values, read once into a fresh object (`__proto__` kept as a key, to be refused). */
export function plainRecord(value: unknown): unknown {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return value;
  const out: Record<string, unknown> = {};
  for (const k of Object.keys(value)) {
    const v = (value as Record<string, unknown>)[k];
    if (k === '__proto__') Object.defineProperty(out, k, { value: v, enumerable: true, writable: true, configurable: true });
    else out[k] = v;
  }
  return out;
}

/** Validates a string input: type, length and storable text (see {@link isStorableText}). */
export function validateText(value: unknown, path: readonly (string | number)[], max: number, options?: { nonEmpty?: boolean }): asserts value is string {
  if (typeof value !== 'string') fail(path, 'must be a string');
  if (options?.nonEmpty && value.length === 0) fail(path, 'must not be empty');
  if (value.length > max) fail(path, `must be at most ${max} characters (got ${value.length})`);
  if (!isStorableText(value)) fail(path, 'must be well-formed text without NUL characters (no lone surrogates, no U+0000)');
}

function optionalString(value: unknown, path: readonly (string | number)[], max = 1000): void {
  if (value === undefined || value === null) return;
  validateText(value, path, max);
}

/** Validates attributes: an object whose keys are all declared and whose values are storable strings. */
export function checkAttributes(value: unknown, declared: ReadonlySet<string>, path: readonly (string | number)[]): void {
  if (value === undefined || value === null) return;
  if (typeof value !== 'object' || Array.isArray(value)) fail(path, 'must be an object of string values');
  const keys = Object.keys(value);
  let unknown: string[] | null = null;
  for (const k of keys) if (!declared.has(k)) (unknown ??= []).push(k);
  if (unknown !== null) throw new InvalidAttributeKeysError(unknown);
  for (const k of keys) {
    const v = (value as Record<string, unknown>)[k];
    // The path of a value is built only for one that fails.
    if (typeof v !== 'string' || v.length > 1000 || !isStorableText(v)) validateText(v, [...path, k], 1000);
  }
}

/** Validates a user id (non-empty, well-formed text of at most 255 characters without NUL). */
export function validateUserId(id: unknown, path: readonly (string | number)[] = USER_ID_PATH): asserts id is string {
  validateText(id, path, MAX_USER_ID, NON_EMPTY);
}

/**
 * Validates a user as sent with an event, completion or identify call. What reading it throws (a getter, a
 * Proxy trap) is a `ValidationError` (see {@link unreadableInput}).
 */
export function validateUserInput(cfg: LaurelConfig, user: unknown): asserts user is UserInput {
  try {
    checkUserInput(cfg, user);
  } catch (error) {
    throw unreadableInput(error, USER_PATH);
  }
}

function checkUserInput(cfg: LaurelConfig, user: unknown): void {
  if (typeof user !== 'object' || user === null || Array.isArray(user)) fail(USER_PATH, 'must be an object with an id');
  const u = user as Record<string, unknown>;
  validateUserId(u.id);
  optionalString(u.email, USER_EMAIL_PATH, 320);
  optionalString(u.name, USER_NAME_PATH, 255);
  optionalString(u.tz, USER_TZ_PATH, 100);
  if (typeof u.tz === 'string' && u.tz !== '' && !isValidTimeZone(u.tz)) fail(USER_TZ_PATH, `unknown IANA time zone ${JSON.stringify(u.tz)}`);
  checkAttributes(u.attributes, cfg.index.userAttributes, USER_ATTRIBUTES_PATH);
}

/**
 * A caller's user read once into plain data ({@link plainUserInput}) and validated; what reading it throws is
 * a `ValidationError` (see {@link unreadableInput}).
 */
export function readUserInput(cfg: LaurelConfig, read: () => unknown): UserInput {
  try {
    const user = plainUserInput(read());
    validateUserInput(cfg, user);
    return user;
  } catch (error) {
    throw unreadableInput(error, USER_PATH);
  }
}

/**
 * Validates an event before anything is read or written. What reading it throws (a getter, a Proxy trap) is
 * a `ValidationError` (see {@link unreadableInput}); the engine reads the caller's objects once, into plain
 * data, before (`readEvent`), while the pure core reads the event it is given where the rules need it.
 */
export function validateEvent(cfg: LaurelConfig, event: EventInput): void {
  try {
    checkEvent(cfg, event);
  } catch (error) {
    throw unreadableInput(error, EMPTY_PATH);
  }
}

const EMPTY_PATH: readonly string[] = [];

function checkEvent(cfg: LaurelConfig, event: EventInput): void {
  if (typeof event !== 'object' || event === null) fail(EVENT_PATH, 'must be an object');
  if (typeof event.metricKey !== 'string' || !cfg.index.metrics.has(event.metricKey)) throw new NotFoundError('metric', String(event.metricKey));
  validateUserInput(cfg, event.user);
  validateValue(event.value, VALUE_PATH);
  checkAttributes(event.attributes, cfg.index.eventAttributes, ATTRIBUTES_PATH);
  if (event.idempotencyKey !== undefined) validateText(event.idempotencyKey, IDEMPOTENCY_KEY_PATH, 255, NON_EMPTY);
}

/** Validates an event value: a finite number within the exact range, +-(2^53 - 1) (see {@link MAX_EXACT}). */
export function validateValue(value: unknown, path: readonly (string | number)[]): asserts value is number {
  if (typeof value !== 'number' || !Number.isFinite(value)) fail(path, `must be a finite number (got ${String(value)})`);
  if (Math.abs(value) > MAX_EXACT) fail(path, `must be between -${MAX_EXACT} and ${MAX_EXACT} (got ${value})`);
}

/** A fresh state for a user created at `nowIso`. */
export function newUserState(cfg: LaurelConfig, input: UserInput, nowIso: string): UserState {
  const user: UserRecord = {
    id: input.id,
    email: input.email || null,
    name: input.name || null,
    tz: input.tz ? canonicalTimeZone(input.tz) : null,
    attributes: stateRecord(input.attributes),
    created: nowIso,
    updated: nowIso,
  };
  if (inControlGroup(cfg, input.id)) user.control = true;
  const points: Record<string, PointsState> = {};
  for (const ps of cfg.pointsSystems) points[ps.key] = emptyPointsState();
  return {
    user,
    metrics: {},
    achievementProgress: {},
    achievements: {},
    streak: cfg.streak ? emptyStreak(cfg.streak) : null,
    points,
    leaderboards: {},
    rules: cfg.rules.all,
  };
}

/**
 * Whether a new user falls in the experiment's control group: a hash of the id, read as a fraction of 2^32,
 * below `controlRatio`. Deterministic, so every process and store assigns the same users.
 */
export function inControlGroup(cfg: LaurelConfig, userId: string): boolean {
  if (!cfg.experiment || cfg.experiment.controlRatio <= 0) return false;
  return parseInt(stableId('experiment', userId).slice(0, 8), 16) / 2 ** 32 < cfg.experiment.controlRatio;
}

/** Applies the upsert rules to an existing user: latest non-empty email, name and tz win; attributes merge. */
export function mergeUser(step: Step, input: UserInput): boolean {
  const current = step.state.user;
  let user: UserRecord | null = null;
  for (const field of ['email', 'name', 'tz'] as const) {
    // Zones are kept by their canonical name, so `europe/paris` after `Europe/Paris` changes nothing.
    const v = field === 'tz' && input.tz ? canonicalTimeZone(input.tz) : input[field];
    if (v && v !== current[field]) {
      user ??= ownUser(step);
      user[field] = v;
    }
  }
  if (input.attributes) {
    for (const k of Object.keys(input.attributes)) {
      const v = input.attributes[k] as string;
      if (own(current.attributes, k) !== v) {
        user ??= ownUser(step);
        user.attributes[k] = v;
      }
    }
  }
  if (user) user.updated = step.nowIso;
  return user !== null;
}
