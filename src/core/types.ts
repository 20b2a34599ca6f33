/**
 * The data the pure core reads and writes: per-user state, the event input, the event response and the
 * effects (ledger rows, leaderboard writes, counters, idempotency record) a store commits atomically.
 * Everything here is plain JSON, so any store can persist it.
 */
import type { ConfigKeys } from '../config/define.js';
import type { Frequency, LocalDate } from './calendar.js';

/** A user as sent with an event, an achievement completion or an identify call. */
export interface UserInput {
  /** The user's id in your application (non-empty, at most 255 characters). */
  id: string;
  /** The user's email; the latest non-empty value wins. */
  email?: string | null;
  /** The user's display name; the latest non-empty value wins. */
  name?: string | null;
  /** The user's IANA time zone (their calendar for streaks, summaries and runs); the latest non-empty value wins. */
  tz?: string | null;
  /** User attributes (declared with `type: 'user'`), merged key by key into the stored ones. */
  attributes?: Record<string, string>;
}

/** The stored user record (wire shape `User`). */
export interface UserRecord {
  /** The user's id. */
  id: string;
  /** The latest non-empty email, or null. */
  email: string | null;
  /** The latest non-empty name, or null. */
  name: string | null;
  /** The latest non-empty zone, or null (the configuration's `timeZone` applies). */
  tz: string | null;
  /** The user's attributes. */
  attributes: Record<string, string>;
  /** ISO instant of creation. */
  created: string;
  /** In the experiment's control group (`config.experiment`), fixed at creation; absent: not in it. */
  control?: boolean;
  /** ISO instant of the last change. */
  updated: string;
}

/**
 * A user's streak state: its length, the periods it covers, the progress of the current period, freezes and
 * pauses.
 *
 * @inline
 */
export interface StreakState {
  length: number;
  /** Local date of the event that started the current streak; null when length is 0. */
  started: LocalDate | null;
  /** Start of the last period that qualified or was covered by a freeze. */
  coveredThrough: LocalDate | null;
  /** Start of the period whose progress `sums` tracks. */
  progressPeriod: LocalDate | null;
  /** Per-metric sums inside `progressPeriod`. */
  sums: Record<string, number>;
  /** True when `progressPeriod` has qualified. */
  qualified: boolean;
  freezes: number;
  /** How many auto-earn grants have been applied since creation. */
  freezeGrants: number;
  /** ISO instant of the last extension. */
  lastExtendedAt: string | null;
  /** Pauses set by `pauseStreak` that are not over yet (absent: none). */
  pauses?: StreakPause[];
  /** The streak as it was when it was last lost (absent or null: nothing to restore). */
  lost?: { length: number; started: LocalDate | null; period: LocalDate } | null;
}

/** A streak pause: local dates, both included. */
export interface StreakPause {
  /** The pause's id (for `deletePause`). */
  id: string;
  /** The first paused date, in the user's zone. */
  start: LocalDate;
  /** The last paused date (included). */
  end: LocalDate;
}

/** An `operation` ledger row's data (key: `op`): an operator's call, applied again by replay. */
export type OperationInput =
  /** `requireRoom`: fail (instead of reporting the excess) when the freezes would exceed the maximum. */
  | { op: 'grantFreezes'; count: number; requireRoom?: boolean }
  | { op: 'restoreStreak' }
  /** `id`: the pause's id when replay applies a recorded pause again (else a new one). */
  | { op: 'pauseStreak'; start: LocalDate; end: LocalDate; id?: string }
  | { op: 'deletePause'; id: string }
  | { op: 'updatePreferences'; preferences: PreferencesPatch }
  | { op: 'adjustPoints'; system: string; amount: number; reason?: string }
  /** A boost of the user's own awards in one points system (`id`: the boost's id when replay applies it again). */
  | { op: 'createBoost'; system: string; name: string; start: LocalDate; end?: LocalDate | null; multiplier: number; rounding?: BoostRounding; id?: string }
  | { op: 'deleteBoost'; id: string };

/** How a boosted award is rounded to whole points: down (`down`, the default), up (`up`) or to the nearest. */
export type BoostRounding = 'down' | 'up' | 'nearest';

/**
 * A user's own boost (`createBoost`), kept in their state: it multiplies their positive awards in one points
 * system from `start` to `end` (local dates in the user's zone, both included; `end` null: no end).
 */
export interface UserBoost {
  id: string;
  system: string;
  name: string;
  start: LocalDate;
  end: LocalDate | null;
  multiplier: number;
  rounding: BoostRounding;
}

/** An `operation` ledger row's data: the operation and what it answered (besides the streak view), for idempotent repeats. */
export type OperationRowData = OperationInput & {
  result?: Record<string, unknown>;
  /** On the last row of several operations run as one call: the ids of all their rows, in order. */
  batch?: string[];
};

/**
 * A user's state in one points system: the total and what the system's triggers have counted so far.
 *
 * @inline
 */
export interface PointsState {
  total: number;
  /** Metric triggers: the filtered running sum and its high-water mark. */
  metric: Record<string, { sum: number; hw: number }>;
  /** Time triggers: number of grants already materialised (since the anchor, for `anchor: 'lastSpend'`). */
  time: Record<string, number>;
  /** Time triggers with `anchor: 'lastSpend'`: the instant (ISO) of the spend their schedule counts from. */
  anchors?: Record<string, string>;
}

/**
 * A user's entry on a board in one run: the run, the breakdown group, the value and when it was reached (ISO
 * instant), which breaks ties.
 *
 * @inline
 */
export interface BoardEntry {
  /** First date of the run the value belongs to. */
  run: LocalDate;
  /** The breakdown group the user was ranked in. */
  group: string;
  value: number;
  reachedAt: string;
}

/**
 * A user's standing on a board: the entry of the latest run they counted in.
 *
 * @inline
 */
export interface BoardState extends BoardEntry {
  /**
   * Boards whose runs follow each user's zone: the entries of earlier runs that a later event can still
   * fall in after the user moves zone westwards (runs that ended at most 2 days before `run` started),
   * latest first. Absent when there are none.
   */
  earlier?: BoardEntry[];
}

/**
 * Everything Laurel keeps about one user: bounded by the configuration, never by the user's history.
 *
 * A state is an immutable value. Each call returns a new state that shares every record it did not change
 * with the prior one (outside production the new parts are frozen), so stores and callers keep and pass
 * states around without copying them. Numbers are exact decimal sums rounded to the nearest number: a total
 * of 0.1 + 0.2 is 0.3. (States written before 0.2 hold decimal strings; every call still reads them.)
 */
export interface UserState {
  user: UserRecord;
  metrics: Record<string, number>;
  /** Filtered progress of metric achievements with `eventAttributes`. */
  achievementProgress: Record<string, number>;
  achievements: Record<string, { achievedAt: string; completionId: string }>;
  streak: StreakState | null;
  points: Record<string, PointsState>;
  leaderboards: Record<string, BoardState>;
  /**
   * The configuration's rule fingerprints this state was last brought in line with (`LaurelConfig.rules.all`);
   * '' for a state written before 0.3 (taken as in line with the configuration that first reads it).
   */
  rules: string;
  /** Set by `updatePreferences` (absent: the configuration's defaults). */
  preferences?: UserPreferences;
  /** The user's own boosts (`createBoost`) not finished at the last boost operation, in creation order (absent: none). */
  boosts?: UserBoost[];
  /** Wrapped: the user's changes in the latest year they changed in (absent: none since Wrapped; core/wrapped.ts). */
  yearly?: YearlyChanges;
  /** Change notifications: reminders emitted and the instant changes were last looked at (absent: none yet). */
  notices?: Notices;
}

/**
 * A user's changes in one local calendar year (sums of the ledger rows booked in it), per metric and per
 * points system: what the yearly indexes of `getWrapped`'s percentiles hold for the user.
 */
export interface YearlyChanges {
  year: number;
  metrics: Record<string, number>;
  points: Record<string, number>;
}

/** The notification types a user chooses channels for (the hosted service's). */
export type NotificationType = 'achievement_completed' | 'recap' | 'reactivation' | 'streak_reminder';
/** A channel a user can receive a notification type on. */
export type NotificationChannel = 'email' | 'push';

/** A user's stored preferences: only what they set; reads fill in the defaults. */
export interface UserPreferences {
  notifications?: Partial<Record<NotificationType, NotificationChannel[]>>;
  streak?: {
    /** false: the user's streak stays 0. */
    enabled?: boolean;
    /** Per-user streak rule, within the configuration's `streak.customization`. */
    mode?: 'any' | 'all';
    metrics?: { key: string; threshold: number }[];
  };
}

/** A change of preferences: each field given replaces the stored one; `null` returns it to the default. */
export interface PreferencesPatch {
  notifications?: Partial<Record<NotificationType, NotificationChannel[]>>;
  streak?: { enabled?: boolean | null; mode?: 'any' | 'all' | null; metrics?: { key: string; threshold: number }[] | null };
}

/** A recorded event as given to the pure core. */
export interface EventInput {
  /** The metric's key. */
  metricKey: string;
  /** The user (created on their first event). */
  user: UserInput;
  /** The event's value: finite, positive or negative, whole or decimal. */
  value: number;
  /** The event's attributes (declared with `type: 'event'`). */
  attributes?: Record<string, string>;
  /** An idempotency key: a repeat of (user, metric, key) applies nothing and answers a replay. */
  idempotencyKey?: string;
}

/** What time and ids the pure core may use: it never reads the clock or a random source itself. */
export interface CoreContext {
  now: Date;
  /** Returns a fresh, unique id for the rows, awards and pauses the call creates. */
  newId: () => string;
}

/**
 * What a ledger row records. `metric`, `user` and `achievement` rows are the inputs a user's history is
 * made of (events, upserts that changed the user, API completions): replay re-applies them in order.
 * `points` and `streak` rows are what those inputs caused (awards and adjustments, streak periods).
 */
export type LedgerKind = 'metric' | 'points' | 'streak' | 'user' | 'achievement' | 'operation';

/** The user fields of an input (what an event, upsert or completion sent besides the id). */
export type UserFields = Omit<UserInput, 'id'>;

/**
 * A metric row's data: what replay needs besides the value (`delta`) and instant (`at`). Null when the
 * event had none of it.
 */
export interface MetricRowData {
  attributes?: Record<string, string>;
  idempotencyKey?: string;
  /** The user fields sent with the event (always kept when the event created the user). */
  user?: UserFields;
  /** A reversal row (delta: minus the event's value) of an event the configuration now refuses: its id. */
  reverses?: string;
}

/** A `user` row's data: the fields of an upsert (identify, update) that created the user or sent fields. */
export interface UserRowData {
  user: UserFields;
}

/** An `achievement` row's data (key: the achievement's key): an API completion. */
export interface CompletionRowData {
  completionId: string;
  /** The user fields sent with the completion (always kept when it created the user). */
  user?: UserFields;
}

/** One append-only ledger row: an input (event, upsert, completion), a points award or a streak period. */
export interface LedgerRow {
  id: string;
  userId: string;
  kind: LedgerKind;
  /** Metric key, points-system key, or `streak`. */
  key: string;
  /** ISO instant the row is dated at (a time grant is dated when it fell due). */
  at: string;
  delta: number;
  /** Running total after this row. */
  total: number;
  /**
   * Metric rows: {@link MetricRowData} or null (the row's id is the event's id). Points rows: the award's
   * trigger by id or an adjustment ({@link AwardRow}; rows written before 0.2 hold the whole {@link Award}).
   * Streak rows: the period. User and achievement rows: {@link UserRowData}, {@link CompletionRowData}.
   */
  data: AwardRow | AdjustmentRow | StreakPeriodRow | Award | MetricRowData | UserRowData | CompletionRowData | OperationRowData | { eventId: string } | null;
}

/**
 * A points award as the ledger keeps it: the row's id, `at`, `delta` and `total` are the award's id, date,
 * amount and total; the trigger is named by id and its view comes from the configuration when read.
 */
export interface AwardRow {
  /** The trigger's id. */
  trigger: string;
  /** The trigger's type (what a read shows if the trigger has since left the configuration). */
  type: PointsTriggerView['type'];
  boosts?: BoostView[];
  grants?: GrantRun;
  /** An explicit adjustment's reason (`adjustPoints`). */
  reason?: string;
  /**
   * The instant the award counts from, when it was booked later than that (the row's `at` is when it was
   * booked): an achievement's points paid when a configuration change backdated it, or an award replay
   * found missing. Reads show it as the award's date; charts count the row when it was booked.
   */
  dated?: string;
  /** A reversal: the id of the award row this row takes back (replay under the `retroactive` policy). */
  reverses?: string;
}

/**
 * A points row that is not an award: `maxPoints`, a total above a lowered cap clamped to it; `replay`, a
 * correction replay made (taking back an earlier adjustment, `reverses`, or squaring a total that rows
 * written before 0.3 did not account for).
 */
export interface AdjustmentRow {
  adjustment: 'maxPoints' | 'replay';
  reverses?: string;
}

/**
 * A run of grants of one time trigger made as one award: `count` grants of the trigger's points, the first
 * falling due at the award's date and each next one `every` hours (`unit: 'hour'`) or `every` local days
 * later at the start of the day in `tz` (`unit: 'day'`). Summaries and boards spread it over the periods in
 * which its grants fell due.
 *
 * @inline
 */
export interface GrantRun {
  count: number;
  unit: 'hour' | 'day';
  every: number;
  tz: string;
  /**
   * Daily grants whose first fell due on a date the zone skipped (Pacific/Apia's 2011-12-30): that date,
   * whose start is the next date's, so the run's later grants keep their own dates. Absent otherwise (the
   * first grant's date is that of its instant).
   */
  date?: LocalDate;
}

/**
 * One streak period as the ledger keeps it (a `streak` row's `data`): the period, the streak's length at its
 * end, and whether a freeze or a pause kept the streak through it. The streak history is read from these.
 */
export interface StreakPeriodRow {
  periodStart: LocalDate;
  periodEnd: LocalDate;
  length: number;
  usedFreeze: boolean;
  /** True when a pause kept the streak through this period (absent: false). */
  usedPause?: boolean;
  /**
   * The streak rule's fingerprint (`LaurelConfig.rules.streak`) the period was counted under; history
   * shows only rows of the current rule (rows before 0.3 have none and always show).
   */
  rule?: string;
}

/**
 * A leaderboard entry write: an absolute value (never an increment), or a removal. `unranked` marks an index
 * read only by value ranges (every user's points total): a store need not compute ranks or keep rank history
 * for it. `thresholdRank` (a board's `maxParticipants`) asks the store to report the value at that rank after
 * the write in the rank change's `threshold`.
 */
export type LeaderboardWrite =
  | { index: string; userId: string; value: number; reachedAt: string; date: LocalDate; remove?: false; unranked?: boolean; thresholdRank?: number }
  | { index: string; userId: string; remove: true; date: LocalDate; unranked?: boolean; thresholdRank?: number };

/**
 * The record of one event sent with an idempotency key: the (user, metric, key) it is stored under and the
 * event it was recorded as. A second event with the same (user, metric, key) replays the first one's response.
 */
export interface IdempotencyRecord {
  userId: string;
  metricKey: string;
  key: string;
  eventId: string;
  at: string;
}

/** What a store must apply atomically for one call. */
export interface Effects {
  ledger: LedgerRow[];
  leaderboard: LeaderboardWrite[];
  /** Counter increments (`users`, `achievement:<key>`). */
  counters: Record<string, number>;
  idempotency: IdempotencyRecord | null;
  created: boolean;
}

/**
 * An attribute key and value (the achievements' `eventAttributes` filters as the wire API lists them).
 *
 * @inline
 */
export interface AttributePair {
  key: string;
  value: string;
}

/** Achievement as the wire API shows it. */
export interface AchievementView {
  /** The achievement's id (from the configuration, else derived from its key). */
  id: string;
  /** The achievement's key. */
  key: string;
  /** The achievement's name. */
  name: string;
  /** What unlocks it: a metric total, a streak length, `completeAchievement`, or other achievements. */
  trigger: 'metric' | 'streak' | 'api' | 'achievement';
  /** Its description, or null. */
  description: string | null;
  /** Its badge image, or null. */
  badgeUrl: string | null;
  /** `metric` achievements: the metric's id. */
  metricId?: string;
  /** `metric` achievements: the metric's name. */
  metricName?: string;
  /** `metric` achievements: the total that unlocks it. */
  metricValue?: number;
  /** `streak` achievements: the streak length that unlocks it. */
  streakLength?: number;
  /** `achievement` (composite) achievements: the ids of the prerequisites. */
  achievementIds?: string[];
  /** The user attributes a user needs to unlock it (empty: none). */
  userAttributes: AttributePair[];
  /** `metric` achievements: the event attributes an event needs to count. */
  eventAttributes?: AttributePair[];
}

/**
 * An achievement as a user holds it. `A` is the configuration's achievement keys (literal when the
 * configuration was typed by `defineConfig`), so that `key` compares only with keys that exist.
 */
export interface UserAchievement<A extends string = string> extends AchievementView {
  /** The achievement's key. */
  key: A;
  /** When the user unlocked it (ISO instant), or null while incomplete. */
  achievedAt: string | null;
  /** For incomplete achievements read with `includeIncomplete`. */
  progress?: { current: number; target: number };
}

/**
 * A user's streak as responses show it: its length and frequency, the current period, the last date to act
 * on without losing it or using a freeze (`expires`), and the user's freezes when the configuration has them.
 */
export interface StreakView {
  /** The streak's length in periods; 0 when there is none. */
  length: number;
  /** The length of a period. */
  frequency: Frequency;
  /** The local date the streak started, or null with length 0. */
  started: LocalDate | null;
  /** The first date of the current period. */
  periodStart: LocalDate | null;
  /** The last date of the current period. */
  periodEnd: LocalDate | null;
  /** The last date to act on without losing the streak or using a freeze, or null with length 0. */
  expires: LocalDate | null;
  /** With freezes configured: the freezes the user has. */
  freezes?: number;
  /** With freezes configured: the most a user can have. */
  maxFreezes?: number;
  /** With freezes earned automatically: every how many days. */
  freezeAutoEarnInterval?: number;
  /** With freezes earned automatically: how many each time. */
  freezeAutoEarnAmount?: number;
}

/** A user's streak in an event response: the {@link StreakView} and whether this call extended it. */
export interface EventStreak extends StreakView {
  extended: boolean;
}

/**
 * A points system's trigger as responses show it (in an award, `getPointsSystem`): what fires it and the
 * points it gives. Only the fields of its `type` are present.
 */
export interface PointsTriggerView {
  /** The trigger's id. */
  id: string;
  /** `adjustment`: an explicit grant or spend (`adjustPoints`), not a configured trigger. */
  type: 'metric' | 'streak' | 'achievement' | 'time' | 'user_creation' | 'adjustment';
  /** The points it gives each time it fires (negative: consumes). */
  points: number;
  /** An adjustment's reason, when one was given. */
  reason?: string;
  /** `metric` triggers: the metric's id. */
  metricId?: string;
  /** `metric` triggers: the metric's name. */
  metricName?: string;
  /** `metric` triggers: it fires once per this many units of growth. */
  metricThreshold?: number;
  /** `streak` triggers: it fires at each multiple of this length. */
  streakLengthThreshold?: number;
  /** `achievement` triggers: the achievement's id. */
  achievementId?: string;
  /** `achievement` triggers: the achievement's name. */
  achievementName?: string;
  /** `time` triggers: the unit of the interval. */
  timeUnit?: 'hour' | 'day';
  /** `time` triggers: it grants every this many `timeUnit`s. */
  timeInterval?: number;
  /** The trigger's user-attribute filter, on any type, when it has one. */
  userAttributes?: AttributePair[];
  /** A metric trigger's event-attribute filter, when it has one. */
  eventAttributes?: AttributePair[];
}

/** A boost that multiplied an award: its id, key, name and multiplier. */
export interface BoostView {
  /** The boost's id. */
  id: string;
  /** The boost's key (a runtime boost's is its id). */
  key: string;
  /** The boost's name. */
  name: string;
  /** The factor it multiplied the award by. */
  multiplier: number;
}

/**
 * One award of points, as responses list it: the points added (`awarded`), the system's total after it,
 * the trigger that made it and the boosts applied to it.
 */
export interface Award {
  /** The award's id. */
  id: string;
  /** The points actually added (after caps and boosts; negative for consumption). */
  awarded: number;
  /** When the award was made; for a run of time grants, when its first grant fell due. */
  date: string;
  /** The system's total after the award. */
  total: number;
  /** The trigger that made it. */
  trigger: PointsTriggerView;
  /** The boosts that multiplied it. */
  boosts?: BoostView[];
  /** Present when the award is a run of time grants made at once (a user idle for a while). */
  grants?: GrantRun;
}

/** A level of a points system: reached at `points` points. */
export interface LevelView {
  /** The level's id. */
  id: string;
  /** The level's key. */
  key: string;
  /** The level's name. */
  name: string;
  /** Its description. */
  description: string;
  /** Its badge image, or null. */
  badgeUrl: string | null;
  /** The total at which a user reaches it. */
  points: number;
}

/** A points system's configuration as responses show it (without its triggers and levels). */
export interface PointsSystemView {
  /** The system's id. */
  id: string;
  /** The system's key. */
  key: string;
  /** The system's name. */
  name: string;
  /** Its description, or null. */
  description: string | null;
  /** Its badge image, or null. */
  badgeUrl: string | null;
  /** The cap on a user's total, or null for none. */
  maxPoints: number | null;
}

/** A points system an event (or a completion, an accrual) awarded points in. `P`: the system's key. */
export interface EventPoints<P extends string = string> extends PointsSystemView {
  /** The system's key. */
  key: P;
  /** The user's total after the call. */
  total: number;
  /** The user's level after the call, or null. */
  level: LevelView | null;
  /** The sum of the call's awards in this system. */
  added: number;
  /** The call's awards in this system, in order. */
  awards: Award[];
}

/**
 * A leaderboard's configuration as responses show it: what it ranks by, its dates, its size and, for a
 * repeating board, the length of its runs (`runUnit`, `runInterval`).
 */
export interface LeaderboardView {
  /** The board's id. */
  id: string;
  /** The board's key. */
  key: string;
  /** The board's name. */
  name: string;
  /** Its description, or null. */
  description: string | null;
  /** What it ranks: a metric's sum, points earned, or the streak's length. */
  rankBy: 'metric' | 'points' | 'streak';
  /** `metric` boards: the metric's key. */
  metricKey?: string;
  /** `metric` boards: the metric's name. */
  metricName?: string;
  /** `points` boards: the points system's key. */
  pointsSystemKey?: string;
  /** `points` boards: the points system's name. */
  pointsSystemName?: string;
  /** The first date of the board's first run. */
  start: LocalDate;
  /** The board's last date, or null for none. */
  end: LocalDate | null;
  /** How many users a run (of a breakdown group) ranks. */
  maxParticipants: number;
  /** The unit of a run's length; null for a perpetual board (one run). */
  runUnit: 'day' | 'month' | 'year' | null;
  /** A run's length in `runUnit`s; null for a perpetual board. */
  runInterval: number | null;
  /** The board's zone; null when runs follow each user's own zone. */
  timeZone: string | null;
  /** The user attributes that split the board into groups (empty: one group). */
  breakdownAttributes: string[];
  /** The daily window of local time in which activity counts (`HH:mm` or `HH:mm:ss`; null when unset). */
  startTime: string | null;
  /** The end of the daily window (exclusive), or null when unset. */
  endTime: string | null;
}

/** A leaderboard an event moved the user on. `L`: the board's key. */
export interface EventLeaderboard<L extends string = string> extends LeaderboardView {
  /** The board's key. */
  key: L;
  /** The user's rank after the call, or null when not ranked. */
  rank: number | null;
  /** The user's rank before the call, or null when not ranked. */
  previousRank: number | null;
  /** The value of the last ranked entry when the run is full, else 0. */
  threshold: number;
  /** The user's value in the run after the call. */
  value: number;
  /** The user's breakdown group (attribute key -> value); empty without breakdown attributes. */
  userAttributes: Record<string, string>;
}

/**
 * The points systems a call awarded points in, by key. With literal keys `P` (a configuration typed by
 * `defineConfig`) it has those keys, each optional: a system the call awarded nothing in is absent (and a
 * repeated idempotency key awards nothing). With `string` keys it is a plain record.
 */
export type EventPointsMap<P extends string = string> = string extends P ? Record<string, EventPoints> : { [S in P]?: EventPoints<S> };

/**
 * The leaderboards a call moved the user on, by key. With literal keys `L` it has those keys, each optional:
 * a board the call did not move the user on (another metric, no value change, outside its run or daily
 * window, inactive) is absent. With `string` keys it is a plain record.
 */
export type EventLeaderboardMap<L extends string = string> = string extends L ? Record<string, EventLeaderboard> : { [B in L]?: EventLeaderboard<B> };

/**
 * The response of recording one event (wire shape `EventResponse`). `K` carries the configuration's key
 * types (see {@link EventPointsMap}): `response.points.hert` does not compile when the system is `heart`.
 */
export interface EventResponse<K extends ConfigKeys = ConfigKeys> {
  /** The metric's id. */
  metricId: string;
  /** The event's id (on a replay, the first call's). */
  eventId: string;
  /** The user's total of the metric after the event. */
  total: number;
  /** The achievements the event completed, in configuration order. */
  achievements: UserAchievement<K['achievement']>[];
  /** The user's streak after the event; `extended` is true when this event extended it. */
  currentStreak: EventStreak;
  /** Each points system the call awarded points in, by key. */
  points: EventPointsMap<K['points']>;
  /** Each board whose value for the user changed, by key, with the user's rank before and after. */
  leaderboards: EventLeaderboardMap<K['leaderboard']>;
  /** The idempotency key sent, when one was. */
  idempotencyKey?: string;
  /** With an idempotency key: true when the key was used before and nothing was applied. */
  idempotentReplayed?: boolean;
}

/** What the pure core returns for one event. */
export interface ApplyResult {
  state: UserState;
  response: EventResponse;
  effects: Effects;
}

/** The change event types: the hosted service's 18 webhook types, under the same names. */
export const CHANGE_TYPES = [
  'achievement.completed',
  'streak.started',
  'streak.extended',
  'streak.lost',
  'streak.freeze_consumed',
  'streak.freeze_earned',
  'points.changed',
  'points.level_changed',
  'points.boost_started',
  'points.boost_finished',
  'leaderboard.started',
  'leaderboard.changed',
  'leaderboard.rank_changed',
  'leaderboard.finished',
  'emails.streak_reminder_due',
  'emails.reactivation_due',
  'emails.recap_due',
  'emails.achievement_due',
] as const;
/** The type of a change event (the hosted service's webhook event types), one of {@link CHANGE_TYPES}. */
export type ChangeType = (typeof CHANGE_TYPES)[number];

/**
 * One change event, as a commit writes it to the outbox. `payload` is the hosted service's webhook body for
 * `type` (it includes `type`). `at` is when the change happened: a change materialised lazily (a streak lost
 * at local midnight, seen at the user's next call or sweep) is dated when it was due.
 */
export interface ChangeEvent {
  id: string;
  type: ChangeType;
  /** The user it is about; null for changes of a board run or a boost of everyone. */
  userId: string | null;
  at: string;
  payload: Record<string, unknown>;
  /**
   * `leaderboard.rank_changed` in a commit only: the store fills `payload.leaderboard.previousRank` and
   * `.rank` from this commit's rank change of (`index`, the user) (the first write's previous rank, the last
   * write's rank, each null when above `cap`), drops this field, and drops the whole event when the two
   * are equal. Stored events never have it. Only an object is a marker (any other value marks nothing), and a
   * marked event's payload that is missing or not an object is settled as `{}` (every store reads it so). The
   * marker `deriveChanges` makes is a class instance whose own fields are these two (what JSON and a spread
   * give); it also carries, privately, the event's leaderboard object and the board description it was spread
   * from, for the memory store (see `rankMarkerBoard`).
   */
  rank?: { index: string; cap: number };
}

/** A change event as the outbox hands it out, with its place in commit order (an opaque cursor). */
export interface StoredChange {
  id: string;
  type: ChangeType;
  userId: string | null;
  at: string;
  payload: Record<string, unknown>;
  /** The event's place in the outbox: `readChanges({ after: position })` continues after it. */
  position: string;
}

/**
 * What Laurel keeps per user for change notifications (`UserState.notices`): the reminders already
 * emitted, so each is emitted once, and the instant time-driven changes were last looked at.
 */
export interface Notices {
  /** ISO instant up to which time-driven changes (boost starts and ends) were emitted. */
  through: string;
  /** ISO instant of the user's last event (reactivation and recap count from it); null: none yet. */
  active: string | null;
  /** Start date of the streak period a streak reminder was emitted for. */
  streakReminder?: LocalDate;
  /** Reactivation messages emitted since the last event. */
  reactivation?: number;
  /** End date of the last period a recap was emitted for. */
  recap?: LocalDate;
  /** ISO instant of the first event since the last recap was due (absent: none). */
  recapActivity?: string;
  /** The user's boosts whose start (1) or start and end (2) were announced (absent: none). */
  boosts?: Record<string, number>;
}
