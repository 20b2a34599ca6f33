/**
 * Laurel: an embeddable gamification engine. `defineConfig` validates a configuration, `applyEvent` is the
 * pure rules core, and `createEngine` runs it against a pluggable store.
 *
 * @module laurel
 */
export { defineConfig } from './config/define.js';
export { configSchema } from './config/schema.js';
export { applyEvent, applyIdentify, applyAccrue, applyCompletion, replayResponse, viewState } from './core/apply.js';
export { createEngine } from './engine/engine.js';
export { rebuildUser, reconcileUser, replayUser } from './core/evolve.js';
export type { Rebuilt, Reconciled, ReplayDiff, ReplayPolicy } from './core/evolve.js';
export { needsReconcile } from './core/rules.js';
export { addToReplaySummary } from './engine/evolution.js';
export type { ReplayOptions, ReplayProgress, ReplayReport } from './engine/evolution.js';
export {
  LaurelError,
  ValidationError,
  InvalidAttributeKeysError,
  NotFoundError,
  ConflictError,
  InsufficientPointsError,
  NoLevelsError,
  ConfigError,
  UnauthorizedError,
  StorageUnavailableError,
  isLaurelError,
  isLaurelErrorCode,
} from './errors.js';
export { compareEntries } from './store/ordered-index.js';
export { rebuildRankIndex, withRankIndex } from './store/rank-index.js';
export { boardIndex, pointsTotalsIndex } from './core/leaderboards.js';
export { attributeTotalsIndex } from './core/totals.js';
export { addDecimal, addExact, compareDecimal, decimalOf } from './core/decimal.js';
export { awardOfRow } from './core/points.js';

export type {
  LaurelConfig,
  ConfigKeys,
  ConfigKeysOf,
  KeysOf,
  KeysOfSection,
  MetricKeyOf,
  AchievementKeyOf,
  PointsKeyOf,
  LeaderboardKeyOf,
  CompiledAchievement,
  CompiledLeaderboard,
  CompiledMetric,
  CompiledPointsSystem,
  CompiledStreak,
  RuleFingerprints,
  CompiledTrigger,
} from './config/define.js';
export type { ConfigInput, DeepReadonly, ParsedConfig } from './config/schema.js';
export type { StepResult, CompletionResult } from './core/apply.js';
export type {
  AchievementView,
  ApplyResult,
  Award,
  AwardRow,
  AdjustmentRow,
  BoostView,
  CoreContext,
  Effects,
  EventInput,
  EventLeaderboard,
  EventLeaderboardMap,
  EventPoints,
  EventPointsMap,
  EventResponse,
  EventStreak,
  IdempotencyRecord,
  LeaderboardView,
  LeaderboardWrite,
  LedgerKind,
  LedgerRow,
  MetricRowData,
  UserRowData,
  CompletionRowData,
  OperationInput,
  OperationRowData,
  StreakPause,
  NotificationChannel,
  NotificationType,
  PreferencesPatch,
  UserPreferences,
  UserFields,
  LevelView,
  PointsSystemView,
  PointsTriggerView,
  StreakPeriodRow,
  StreakView,
  UserAchievement,
  UserInput,
  UserRecord,
  UserState,
  YearlyChanges,
} from './core/types.js';
export type { LaurelErrorByCode, LaurelErrorCode, NotFoundKind, ValidationIssue } from './errors.js';
export type {
  Engine,
  EngineOptions,
  EngineTenancy,
  EventRequest,
  RecordOptions,
  RetryOptions,
  StreakResponse,
  UserPoints,
  MetricResponse,
  AchievementStats,
  LeaderboardOptions,
  LeaderboardRankings,
  Ranking,
  UserLeaderboard,
  BoardStatus,
  OperationOptions,
  Profile,
  ProfilePoints,
  ProfileStanding,
  UserView,
  Replayable,
} from './engine/engine.js';
export { applyOperation, MAX_PAUSE_DAYS, MAX_PAUSES } from './core/operations.js';
export type { AdjustPointsResult, CreateBoostResult, DeleteBoostResult, DeletePauseResult, GrantFreezesResult, OperationResult, PauseStreakResult, PreferencesView, RestoreStreakResult, StreakOperationResult, UpdatePreferencesResult } from './core/operations.js';
export { MAX_BOOST_MULTIPLIER, MAX_USER_BOOSTS, type BoostRecord, type BoostStatus, type PointsBoost } from './core/boosts.js';
export type { CreateBoostInput } from './engine/boosts.js';
export type { BoostRounding, UserBoost } from './core/types.js';
export { CHANGE_TYPES, type ChangeEvent, type ChangeType, type StoredChange, type Notices } from './core/types.js';
export { deriveChanges, wireUser, type Noted, type DerivedChanges } from './core/changes.js';
export { createSweeper, type SubscribeOptions, type Subscription, type SweepReport } from './engine/changes.js';
export { createWebhookRelay, verifyWebhookSignature, signWebhookPayload, WebhookDeliveryError, SIGNATURE_HEADER, type WebhookRelay, type WebhookRelayEngine, type WebhookRelayOptions } from './engine/webhooks.js';
export type { Aggregation, SummaryOptions, SummaryRow } from './engine/summaries.js';
export type { DeleteUserResult, ResetUserResult, UserEvent, UserEventsOptions, UserEventsPage } from './engine/users.js';
export type { WrappedActivity, WrappedActivityPeriod, WrappedAttributeValue, WrappedLeaderboard, WrappedMetric, WrappedPoints, WrappedResponse, WrappedStreak } from './engine/wrapped.js';
export { yearlyIndex } from './core/wrapped.js';
export type { Store, BatchCommitOutcome, Commit, CommitResult, EventLoad, IdempotencyLookup, LedgerPage, LedgerQuery, RankChange, RankedEntry, RankHistoryRow, VersionedState } from './store/types.js';
export type { Erasure, ErasureResult, EventsPage, OutboxStore, ChangesPage, DeliveryRecord } from './store/types.js';
export type { BatchEvent, BatchEventResult } from './engine/batch.js';
export type { CallErrorInfo, CallInfo, CallMessage, ConflictInfo, DegradedInfo, EngineHooks, RetryInfo } from './engine/observe.js';
export type { IndexEntry } from './store/ordered-index.js';
export type { RankIndex, RankIndexSource, VersionedWrite, WithRankIndexOptions } from './store/rank-index.js';
