/**
 * Users and input validation (semantics sections 1 and 2): user upsert, attribute keys, values, zones.
 */
import type { LaurelConfig } from '../config/define.js';
import { InvalidAttributeKeysError, NotFoundError, ValidationError } from '../errors.js';
import { isValidTimeZone } from './calendar.js';
import { emptyPointsState } from './points.js';
import { emptyStreak } from './streaks.js';
import type { EventInput, UserInput, UserRecord, UserState } from './types.js';

const MAX_USER_ID = 255;

function fail(path: (string | number)[], message: string): never {
  throw new ValidationError(`${path.join('.')}: ${message}`, [{ path, message }]);
}

function optionalString(value: unknown, path: (string | number)[], max = 1000): void {
  if (value === undefined || value === null) return;
  if (typeof value !== 'string') fail(path, 'must be a string');
  if (value.length > max) fail(path, `must be at most ${max} characters`);
}

function checkAttributes(value: unknown, declared: ReadonlySet<string>, path: (string | number)[]): void {
  if (value === undefined || value === null) return;
  if (typeof value !== 'object' || Array.isArray(value)) fail(path, 'must be an object of string values');
  const keys = Object.keys(value);
  const unknown = keys.filter((k) => !declared.has(k));
  if (unknown.length > 0) throw new InvalidAttributeKeysError(unknown);
  for (const k of keys) {
    const v = (value as Record<string, unknown>)[k];
    if (typeof v !== 'string') fail([...path, k], 'must be a string');
    if (v.length > 1000) fail([...path, k], 'must be at most 1000 characters');
  }
}

/** Validates a user id (non-empty string of at most 255 characters). */
export function validateUserId(id: unknown, path: (string | number)[] = ['user', 'id']): asserts id is string {
  if (typeof id !== 'string') fail(path, 'must be a string');
  if (id.length === 0) fail(path, 'must not be empty');
  if (id.length > MAX_USER_ID) fail(path, `must be at most ${MAX_USER_ID} characters (got ${id.length})`);
}

/** Validates a user as sent with an event, completion or identify call. */
export function validateUserInput(cfg: LaurelConfig, user: unknown): asserts user is UserInput {
  if (typeof user !== 'object' || user === null || Array.isArray(user)) fail(['user'], 'must be an object with an id');
  const u = user as Record<string, unknown>;
  validateUserId(u.id);
  optionalString(u.email, ['user', 'email'], 320);
  optionalString(u.name, ['user', 'name'], 255);
  optionalString(u.tz, ['user', 'tz'], 100);
  if (typeof u.tz === 'string' && u.tz !== '' && !isValidTimeZone(u.tz)) fail(['user', 'tz'], `unknown IANA time zone "${u.tz}"`);
  checkAttributes(u.attributes, cfg.index.userAttributes, ['user', 'attributes']);
}

/** Validates an event before anything is read or written. */
export function validateEvent(cfg: LaurelConfig, event: EventInput): void {
  if (!cfg.index.metrics.has(event.metricKey)) throw new NotFoundError('metric', String(event.metricKey));
  if (typeof event !== 'object' || event === null) fail([], 'event must be an object');
  validateUserInput(cfg, event.user);
  if (typeof event.value !== 'number' || !Number.isFinite(event.value)) fail(['value'], `must be a finite number (got ${String(event.value)})`);
  checkAttributes(event.attributes, cfg.index.eventAttributes, ['attributes']);
  if (event.idempotencyKey !== undefined) {
    if (typeof event.idempotencyKey !== 'string' || event.idempotencyKey.length === 0 || event.idempotencyKey.length > 255) {
      fail(['idempotencyKey'], 'must be a non-empty string of at most 255 characters');
    }
  }
}

/** A fresh state for a user created at `nowIso`. */
export function newUserState(cfg: LaurelConfig, input: UserInput, nowIso: string): UserState {
  const user: UserRecord = {
    id: input.id,
    email: input.email || null,
    name: input.name || null,
    tz: input.tz || null,
    attributes: { ...(input.attributes ?? {}) },
    created: nowIso,
    updated: nowIso,
  };
  return {
    user,
    metrics: {},
    achievementProgress: {},
    achievements: {},
    streak: cfg.streak ? emptyStreak(cfg.streak) : null,
    points: Object.fromEntries(cfg.pointsSystems.map((ps) => [ps.key, emptyPointsState()])),
    leaderboards: {},
  };
}

/** Applies the upsert rules to an existing user: latest non-empty email, name and tz win; attributes merge. */
export function mergeUser(user: UserRecord, input: UserInput, nowIso: string): boolean {
  let changed = false;
  for (const field of ['email', 'name', 'tz'] as const) {
    const v = input[field];
    if (v && v !== user[field]) {
      user[field] = v;
      changed = true;
    }
  }
  if (input.attributes) {
    for (const [k, v] of Object.entries(input.attributes)) {
      if (user.attributes[k] !== v) {
        user.attributes[k] = v;
        changed = true;
      }
    }
  }
  if (changed) user.updated = nowIso;
  return changed;
}
