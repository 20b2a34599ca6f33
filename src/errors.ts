/**
 * Laurel's typed errors. Every failure the library reports is a {@link LaurelError} with a stable `code`
 * from a closed union and a suggested HTTP `status` (docs/rules.md, section 8).
 */

/** The closed set of error codes Laurel reports. */
export type LaurelErrorCode =
  | 'VALIDATION'
  | 'INVALID_ATTRIBUTE_KEYS'
  | 'NOT_FOUND'
  | 'CONFLICT'
  | 'INSUFFICIENT_POINTS'
  | 'NO_LEVELS'
  | 'CONFIG'
  | 'UNAUTHORIZED'
  | 'STORAGE_UNAVAILABLE';

// A registered symbol, so the brand survives when both the ESM and the CJS build are loaded.
const BRAND = Symbol.for('laurel.error');

/**
 * Base class of every error Laurel throws.
 *
 * @example
 * ```ts
 * try { await engine.recordEvent('lessons', input); }
 * catch (e) { if (isLaurelError(e)) console.log(e.code, e.status, e.message); }
 * ```
 */
export class LaurelError extends Error {
  /** Stable machine-readable code. */
  readonly code: LaurelErrorCode;
  /** Suggested HTTP status for this failure. */
  readonly status: number;

  constructor(code: LaurelErrorCode, status: number, message: string, options?: { cause?: unknown }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.status = status;
    this.name = new.target.name;
    Object.defineProperty(this, BRAND, { value: true });
  }
}

/** One problem found by validation: where it is and what is wrong. */
export interface ValidationIssue {
  path: (string | number)[];
  message: string;
}

/** Input that is malformed: a non-finite value, an empty user id, a bad time zone, bad query parameters. */
export class ValidationError extends LaurelError {
  declare readonly code: 'VALIDATION';
  /** Each problem found, with the path of the offending input (`['opts', 'limit']`) and a message. */
  readonly issues: ValidationIssue[];
  constructor(message: string, issues: ValidationIssue[] = [], options?: { cause?: unknown }) {
    super('VALIDATION', 400, message, options);
    this.issues = issues;
  }
}

/** An event or user named attribute keys that the configuration does not declare (docs/rules.md, section 2). */
export class InvalidAttributeKeysError extends LaurelError {
  declare readonly code: 'INVALID_ATTRIBUTE_KEYS';
  /** The undeclared keys, in the order they were sent. */
  readonly keys: string[];
  constructor(keys: string[]) {
    super(
      'INVALID_ATTRIBUTE_KEYS',
      400,
      `Invalid attribute keys: ${keys.join(', ')}. Please ensure all attribute keys match those set up in the configuration.`,
    );
    this.keys = keys;
  }
}

/** The kinds of thing a {@link NotFoundError} can be about. */
export type NotFoundKind = 'metric' | 'user' | 'achievement' | 'pointsSystem' | 'leaderboard' | 'boost' | 'attribute' | 'level' | 'trigger';

/** An unknown metric, user, achievement, points system, leaderboard, boost, or (admin API) attribute, level or trigger. */
export class NotFoundError extends LaurelError {
  declare readonly code: 'NOT_FOUND';
  /** What was not found. */
  readonly kind: NotFoundKind;
  /** The key (or id) that was asked for. */
  readonly key: string;
  constructor(kind: NotFoundKind, key: string) {
    const label = { metric: 'Metric', user: 'User', achievement: 'Achievement', pointsSystem: 'Points system', leaderboard: 'Leaderboard', boost: 'Boost', attribute: 'Attribute', level: 'Points level', trigger: 'Points trigger' }[kind];
    super('NOT_FOUND', 404, `${label} not found: ${JSON.stringify(key)}`);
    this.kind = kind;
    this.key = key;
  }
}

/**
 * A commit lost an optimistic-concurrency race. Stores throw it for a stale version; the engine retries and
 * only lets it escape once its retries are spent.
 */
export class ConflictError extends LaurelError {
  declare readonly code: 'CONFLICT';
  constructor(message: string, options?: { cause?: unknown }) {
    super('CONFLICT', 409, message, options);
  }
}

/** An event would take a `blockIfOutOfPoints` system below zero; nothing was recorded. */
export class InsufficientPointsError extends LaurelError {
  declare readonly code: 'INSUFFICIENT_POINTS';
  /** The points system that would go below zero. */
  readonly pointsSystemKey: string;
  /** The user's total in that system before the call. */
  readonly total: number;
  /** The points the call needed to take. */
  readonly required: number;
  constructor(pointsSystemKey: string, total: number, required: number) {
    super(
      'INSUFFICIENT_POINTS',
      422,
      `Insufficient points in "${pointsSystemKey}": the event needs ${required} and the user has ${total}.`,
    );
    this.pointsSystemKey = pointsSystemKey;
    this.total = total;
    this.required = required;
  }
}

/** A level summary was asked of a points system that has no levels (the hosted service answers 422). */
export class NoLevelsError extends LaurelError {
  declare readonly code: 'NO_LEVELS';
  /** The points system without levels. */
  readonly pointsSystemKey: string;
  constructor(pointsSystemKey: string) {
    super('NO_LEVELS', 422, `Points system "${pointsSystemKey}" has no levels.`);
    this.pointsSystemKey = pointsSystemKey;
  }
}

/** The configuration given to `defineConfig` is invalid; `issues` lists every problem with its path. */
export class ConfigError extends LaurelError {
  declare readonly code: 'CONFIG';
  /** Every problem of the configuration, each with its path (`['achievements', 0, 'metricKey']`) and a message. */
  readonly issues: ValidationIssue[];
  constructor(issues: ValidationIssue[]) {
    super(
      'CONFIG',
      500,
      `Invalid Laurel configuration:\n${issues.map((i) => `  - ${i.path.length ? i.path.join('.') : '(root)'}: ${i.message}`).join('\n')}`,
    );
    this.issues = issues;
  }
}

/**
 * The store (or the rank index) could not be reached or failed: a dropped connection, a server that is
 * down or restarting, a timeout. `cause` keeps the driver's error. The call that reports it committed
 * nothing (see `committed` for the one case where that cannot be known); retrying it later is safe, and with
 * an idempotency key it is safe even then.
 */
export class StorageUnavailableError extends LaurelError {
  declare readonly code: 'STORAGE_UNAVAILABLE';
  /**
   * `false`: nothing was committed. `'unknown'`: the connection broke while the database was committing and
   * its outcome could not be read back in time (retry with the same idempotency key to settle it).
   */
  readonly committed: false | 'unknown';
  constructor(message: string, options?: { cause?: unknown; committed?: false | 'unknown' }) {
    super('STORAGE_UNAVAILABLE', 503, message, options);
    this.committed = options?.committed ?? false;
  }
}

/**
 * `error` itself when it is already a Laurel error, else a {@link StorageUnavailableError} saying
 * "`where` failed: <its message>" with `error` as `cause`: how every storage layer (the engine's guard, the
 * Postgres store, the Redis rank index, `rebuildRankIndex`) keeps raw driver errors from escaping.
 */
export function storageError(where: string, error: unknown): LaurelError {
  if (isLaurelError(error)) return error;
  return new StorageUnavailableError(`${where} failed: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
}

/** A request without a valid API key (HTTP layer). */
export class UnauthorizedError extends LaurelError {
  declare readonly code: 'UNAUTHORIZED';
  constructor(message = 'Unauthorized: missing or invalid X-API-KEY header.') {
    super('UNAUTHORIZED', 401, message);
  }
}

/** True for any Laurel error, from whichever copy of the package (ESM or CJS) created it. */
export function isLaurelError(value: unknown): value is LaurelError {
  return typeof value === 'object' && value !== null && (value as Record<symbol, unknown>)[BRAND] === true;
}

/**
 * The class each error code is thrown as: `isLaurelErrorCode(e, code)` narrows `e` to it, so that the
 * subclass's fields (`total` and `required` of {@link InsufficientPointsError}, `issues` of
 * {@link ValidationError}, ...) can be read without a cast. Every code has its own subclass.
 */
export interface LaurelErrorByCode {
  VALIDATION: ValidationError;
  INVALID_ATTRIBUTE_KEYS: InvalidAttributeKeysError;
  NOT_FOUND: NotFoundError;
  CONFLICT: ConflictError;
  INSUFFICIENT_POINTS: InsufficientPointsError;
  NO_LEVELS: NoLevelsError;
  CONFIG: ConfigError;
  UNAUTHORIZED: UnauthorizedError;
  STORAGE_UNAVAILABLE: StorageUnavailableError;
}

/**
 * True when `value` is a Laurel error with the given code; narrows it to that code's class
 * ({@link LaurelErrorByCode}).
 *
 * @example
 * ```ts
 * try { await engine.recordEvent('quizzes', input); }
 * catch (e) { if (isLaurelErrorCode(e, 'INSUFFICIENT_POINTS')) console.log(e.total, e.required); }
 * ```
 */
export function isLaurelErrorCode<C extends LaurelErrorCode>(value: unknown, code: C): value is LaurelErrorByCode[C] {
  return isLaurelError(value) && value.code === code;
}
