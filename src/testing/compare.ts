/**
 * `compareWithMemoryStore`: a differential property test for storage adapters. The same random engine calls
 * run on two engines with the same clock and ids, one over the memory store (the reference behaviour) and
 * one over the adapter; every answer, every error code and a set of reads after the calls must be equal.
 * No test framework is imported: it throws on a mismatch, which any runner reports.
 */
import fc from 'fast-check';
import { defineConfig, type LaurelConfig } from '../config/define.js';
import type { ConfigInput } from '../config/schema.js';
import { createEngine, type Engine } from '../engine/engine.js';
import { isLaurelError } from '../errors.js';
import { createMemoryStore } from '../store/memory.js';
import type { Store } from '../store/types.js';
import { arbConfig, arbScenario, runScenarioStep, sequentialIds, type ArbConfigOptions, type ArbScenarioOptions, type ScenarioStep, type TimedStep } from './arbitraries.js';

/** Options of {@link compareWithMemoryStore}. */
export interface CompareOptions {
  /** fast-check runs, each with a new configuration (unless `config` is given), scenario and store (default 25). */
  runs?: number;
  /** Use this configuration in every run instead of generated ones. */
  config?: LaurelConfig;
  /** Bounds of the generated configurations (see `arbConfig`). */
  configOptions?: ArbConfigOptions;
  /** Options of the generated scenarios (see `arbScenario`: users, zones, values, steps...). */
  scenario?: ArbScenarioOptions;
  /** fast-check's seed, to replay a failure (printed with it). */
  seed?: number;
  /** Report the first failing run as found, without shrinking it (shrinking creates a store per attempt). */
  endOnFailure?: boolean;
  /** Called with each store `factory` made once its run is over (e.g. to drop a schema or close a pool). */
  dispose?: (store: Store) => void | Promise<void>;
}

/** A call's outcome in comparable form. */
type Outcome = { ok: unknown } | { error: string } | { thrown: string };

/**
 * Errors as their code (the message is each store's own wording); anything else as JSON would write it:
 * dates as ISO strings, `undefined` properties left out.
 */
function canonical(value: unknown): unknown {
  if (value === undefined) return undefined;
  return JSON.parse(
    JSON.stringify(value, (_key, v: unknown) => {
      if (v instanceof Error) return isLaurelError(v) ? { error: v.code } : { thrown: `${v.name}: ${v.message}` };
      return v;
    }),
  ) as unknown;
}

async function outcome(call: () => Promise<unknown>): Promise<Outcome> {
  try {
    return { ok: canonical(await call()) };
  } catch (error) {
    if (isLaurelError(error)) return { error: error.code };
    return { thrown: error instanceof Error ? `${error.name}: ${error.message}` : String(error) };
  }
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null;

/** The path of the first difference between two canonical values (`$` for the root), or null when equal. */
function firstDifference(a: unknown, b: unknown, path = '$'): string | null {
  if (Object.is(a, b)) return null;
  if (Array.isArray(a) && Array.isArray(b)) {
    for (let i = 0; i < Math.max(a.length, b.length); i++) {
      if (i >= a.length || i >= b.length) return `${path}[${i}] (lengths ${a.length} and ${b.length})`;
      const d = firstDifference(a[i], b[i], `${path}[${i}]`);
      if (d) return d;
    }
    return null;
  }
  if (isObject(a) && isObject(b) && !Array.isArray(a) && !Array.isArray(b)) {
    for (const key of [...new Set([...Object.keys(a), ...Object.keys(b)])].sort()) {
      if (!(key in a) || !(key in b)) return `${path}.${key} (present on one side only)`;
      const d = firstDifference(a[key], b[key], `${path}.${key}`);
      if (d) return d;
    }
    return null;
  }
  return path;
}

const MAX_SHOWN = 4000;
const show = (value: unknown): string => {
  const text = JSON.stringify(value) ?? 'undefined';
  return text.length > MAX_SHOWN ? `${text.slice(0, MAX_SHOWN)}... (${text.length} characters)` : text;
};

/** Throws when the two outcomes differ, naming the call, the first differing path and both results. */
function check(call: string, expected: Outcome, actual: Outcome): void {
  const at = firstDifference(expected, actual);
  if (at === null) return;
  throw new Error(`${call}: the adapter differs from the memory store at ${at}\n  memory store: ${show(expected)}\n  adapter:      ${show(actual)}`);
}

const describeStep = (step: ScenarioStep): string => `${step.kind} ${show(step)}`;
const dateOf = (at: Date, days = 0) => new Date(at.getTime() + days * 86_400_000).toISOString().slice(0, 10);

/** Every user id of a page walk of `store.listUsers` (pages of 2, to cross page bounds). */
async function allUsers(store: Store): Promise<string[]> {
  const out: string[] = [];
  for (let after: string | undefined; ; ) {
    const page = await store.listUsers(after === undefined ? { limit: 2 } : { after, limit: 2 });
    out.push(...page);
    if (page.length < 2 || out.length > 10_000) return out;
    after = page[page.length - 1];
  }
}

/** Every change event of an engine, without its `position` (each store's own). */
async function allChanges(engine: Engine): Promise<unknown[]> {
  const out: unknown[] = [];
  for (let after: string | undefined; ; ) {
    const page = await engine.readChanges(after === undefined ? { limit: 1000 } : { after, limit: 1000 });
    out.push(...page.events.map(({ position: _position, ...event }) => event));
    if (page.events.length === 0) return out;
    after = page.next;
  }
}

/** The reads compared after a scenario: per user, per system, per board, per metric, and global ones. */
function finalReads(config: LaurelConfig, users: readonly string[], now: Date, first: Date): [string, (e: Engine) => Promise<unknown>][] {
  const reads: [string, (e: Engine) => Promise<unknown>][] = [];
  // Summaries cover the scenario (at most 400 days back, the summaries' limit).
  const start = dateOf(new Date(Math.max(first.getTime() - 86_400_000, now.getTime() - 399 * 86_400_000)));
  const range = { startDate: start, endDate: dateOf(now, 1) };
  for (const u of users) {
    reads.push([`getProfile(${show(u)})`, (e) => e.getProfile(u)]);
    reads.push([`getPreferences(${show(u)})`, (e) => e.getPreferences(u)]);
    reads.push([`getUserAchievements(${show(u)}, { includeIncomplete: true })`, (e) => e.getUserAchievements(u, { includeIncomplete: true })]);
    reads.push([`getUserEvents(${show(u)}) pages`, (e) => runScenarioStep(e, { kind: 'read', read: 'events', userId: u }, now)]);
    if (config.streak) reads.push([`getStreak(${show(u)}, { historyPeriods: 30 })`, (e) => e.getStreak(u, { historyPeriods: 30 })]);
    for (const m of config.metrics) reads.push([`getMetricEventSummary(${show(u)}, ${show(m.key)}, weekly ${start}..)`, (e) => e.getMetricEventSummary(u, m.key, { aggregation: 'weekly', ...range })]);
    for (const p of config.pointsSystems) {
      reads.push([`getPointsSummary(${show(u)}, ${show(p.key)}, { awards: 100 })`, (e) => e.getPointsSummary(u, p.key, { awards: 100 })]);
      reads.push([`getPointsEventSummary(${show(u)}, ${show(p.key)}, daily ${start}..)`, (e) => e.getPointsEventSummary(u, p.key, { aggregation: 'daily', ...range })]);
      reads.push([`getUserBoosts(${show(u)}, ${show(p.key)})`, (e) => e.getUserBoosts(u, p.key)]);
    }
    for (const b of config.leaderboards) {
      reads.push([`getUserLeaderboard(${show(u)}, ${show(b.key)})`, (e) => e.getUserLeaderboard(u, b.key, { numEvents: 10 })]);
      if (b.breakdownAttributes.length > 0) reads.push([`getLeaderboard(${show(b.key)}, { userId: ${show(u)} })`, (e) => e.getLeaderboard(b.key, { userId: u, offset: -5, limit: 20 })]);
    }
  }
  for (const b of config.leaderboards) if (b.breakdownAttributes.length === 0) reads.push([`getLeaderboard(${show(b.key)})`, (e) => e.getLeaderboard(b.key, { limit: 100 })]);
  reads.push(['listLeaderboards({ includeFinished, includeInactive })', (e) => e.listLeaderboards({ includeFinished: true, includeInactive: true })]);
  reads.push(['listAchievements({ includeUnavailable: true })', (e) => e.listAchievements({ includeUnavailable: true })]);
  for (const p of config.pointsSystems) {
    reads.push([`getLevelSummary(${show(p.key)})`, (e) => e.getLevelSummary(p.key)]);
    reads.push([`getPointsHistogram(${show(p.key)})`, (e) => e.getPointsHistogram(p.key)]);
    reads.push([`listBoosts(${show(p.key)}, { includeFinished: true })`, (e) => e.listBoosts(p.key, { includeFinished: true })]);
  }
  if (users.length > 0) reads.push([`getStreaks(${show(users)})`, (e) => e.getStreaks(users.slice(0, 100))]);
  return reads;
}

/** One run: the scenario on both engines, step by step, then the final reads. */
async function compareRun(factory: () => Store | Promise<Store>, config: LaurelConfig, steps: readonly TimedStep[], options: CompareOptions): Promise<void> {
  const adapter = await factory();
  try {
    // Change notifications are compared when the adapter keeps an outbox; else both engines write none.
    const changes = typeof (adapter as Partial<Store> & { readChanges?: unknown }).readChanges === 'function';
    const first = steps[0]?.at ?? new Date('2026-01-05T10:00:00Z');
    let now = first;
    const make = (store: Store): Engine => createEngine({ config, store, clock: () => now, newId: sequentialIds('cmp'), changes });
    const memory = createMemoryStore();
    const reference = make(memory);
    const tested = make(adapter);
    for (const [i, { at, step }] of steps.entries()) {
      now = at;
      const expected = await outcome(() => runScenarioStep(reference, step, at));
      const actual = await outcome(() => runScenarioStep(tested, step, at));
      check(`step ${i} at ${at.toISOString()}: ${describeStep(step)}`, expected, actual);
    }
    const listed = await outcome(() => allUsers(memory));
    check('store.listUsers (all pages of 2)', listed, await outcome(() => allUsers(adapter)));
    const users = [...new Set([...('ok' in listed ? (listed.ok as string[]) : []), ...steps.flatMap(({ step }) => usersOf(step))])].sort();
    for (const [name, read] of finalReads(config, users, now, first)) check(`after the scenario, ${name}`, await outcome(() => read(reference)), await outcome(() => read(tested)));
    if (changes) {
      const expected = await outcome(() => allChanges(reference));
      let actual = await outcome(() => allChanges(tested));
      // An outbox may hold recent events back while other transactions are in flight (PostgreSQL does): an
      // event is never skipped, it comes later, so read again until as many have come as on the memory store.
      const count = (o: Outcome) => ('ok' in o && Array.isArray(o.ok) ? o.ok.length : -1);
      for (let i = 0; i < 50 && 'ok' in actual && count(actual) < count(expected); i++) {
        await new Promise((resolve) => setTimeout(resolve, 50));
        actual = await outcome(() => allChanges(tested));
      }
      check('after the scenario, readChanges (every change event, positions left out)', expected, actual);
    }
  } finally {
    await options.dispose?.(adapter);
  }
}

/** The user ids a step names. */
function usersOf(step: ScenarioStep): string[] {
  switch (step.kind) {
    case 'recordEvent':
      return [step.event.user.id];
    case 'recordEvents':
      return step.events.map((e) => e.user.id);
    case 'identifyUser':
    case 'completeAchievement':
      return [step.user.id];
    case 'sweep':
      return [];
    default:
      return [step.userId];
  }
}

/**
 * A differential property test of a storage adapter: for `runs` fast-check runs (default 25), generates a
 * configuration (`arbConfig`, or the given `config`) and a timed scenario of events and operator actions
 * (`arbScenario`), and plays it on two engines with the same clock and ids, one over `createMemoryStore()`
 * and one over `await factory()` (a fresh store per run). Every answer must be equal, or both calls must
 * fail with the same error code; then reads after the scenario must be equal too: `store.listUsers` (paged),
 * every user's profile, preferences, achievements, events, streak, metric and points summaries, boosts and
 * board standings, every board's rankings, level summaries, histograms, boosts and, when the adapter keeps a
 * change outbox, every change event.
 *
 * On a mismatch it throws (after fast-check shrinks the run to a small one) an error naming the step or
 * read, the call, the first differing path and both results, with the seed to replay it.
 *
 * What is normalised, because it legitimately differs between stores: error messages (codes are compared),
 * event-page cursors (opaque; the pages they lead to are compared), change-event positions (the events,
 * ids and payloads are compared), and JSON-level details (`undefined` properties equal missing ones, dates
 * compare as ISO strings). Nothing else.
 *
 * It imports no test framework; fast-check must be installed (a peer dependency of `laurel/testing`).
 * @example
 * ```ts
 * it('my adapter behaves like the memory store', async () => {
 *   await compareWithMemoryStore(async () => createMyStore({ schema: uniqueName() }), { runs: 20 });
 * }, 300_000);
 * ```
 */
export async function compareWithMemoryStore(factory: () => Store | Promise<Store>, options: CompareOptions = {}): Promise<void> {
  if (typeof factory !== 'function') throw new TypeError('compareWithMemoryStore needs a factory: () => Store | Promise<Store>');
  const given = options.config;
  const runs: fc.Arbitrary<{ config: ConfigInput | 'the given configuration'; steps: TimedStep[] }> = given
    ? arbScenario(given, options.scenario).map((steps) => ({ config: 'the given configuration' as const, steps }))
    : arbConfig(options.configOptions).chain((input) => arbScenario(defineConfig(input), options.scenario).map((steps) => ({ config: input, steps })));
  const details = await fc.check(
    fc.asyncProperty(runs, async ({ config, steps }) => {
      await compareRun(factory, config === 'the given configuration' ? (given as LaurelConfig) : defineConfig(config), steps, options);
    }),
    { numRuns: options.runs ?? 25, ...(options.seed === undefined ? {} : { seed: options.seed }), ...(options.endOnFailure ? { endOnFailure: true } : {}) },
  );
  if (!details.failed) return;
  // The mismatch first (fast-check's own report keeps it only as the error's cause), then the shrunk run and its seed.
  const cause = details.errorInstance;
  const mismatch = cause instanceof Error ? cause.message : String(cause);
  throw new Error(`compareWithMemoryStore: ${mismatch}\n\n${fc.defaultReportMessage(details) ?? ''}`, { cause });
}
