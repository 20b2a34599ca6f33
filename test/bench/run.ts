/**
 * `npm run bench [section]`: the performance targets, each measured as a ratio against a bare baseline
 * measured in the same run, with PASS/FAIL, and a closing markdown table for the README. Not part of
 * `npm test`. Run on an idle machine; `LAUREL_PG_URL` and `LAUREL_REDIS_URL` enable the server sections (the
 * PostgreSQL ones run in a database each creates on that server and drops afterwards).
 *
 * Sections: foundation, pure, history, idle, boards, memory, points, leaderboards, http, storage, batch,
 * redis; no argument runs them all. The memory section runs in a child process under
 * `node --expose-gc --max-old-space-size=8192` (it reads the heap after full collections), and the boards
 * section each of its engines in child processes of their own, one after another.
 */
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import { Bench } from 'tinybench';
import { applyEvent, compareEntries, createEngine, defineConfig, type IndexEntry, type LaurelConfig } from '../../src/index.js';
import { createMemoryStore } from '../../src/memory.js';
import { sequentialIds } from '../../src/testing/index.js';

const SECTIONS = ['foundation', 'pure', 'history', 'idle', 'boards', 'memory', 'points', 'leaderboards', 'http', 'storage', 'batch', 'redis'] as const;
type Section = (typeof SECTIONS)[number];
const only = process.argv[2] as Section | undefined;
if (only !== undefined && !SECTIONS.includes(only)) {
  console.error(`unknown section "${only}"; sections: ${SECTIONS.join(', ')} (none runs them all)`);
  process.exit(2);
}
const runs = (s: Section) => !only || only === s;

const fmt = (n: number, digits = 0) =>
  Number.isFinite(n) ? n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits }) : String(n);
const median = (xs: readonly number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] as number;
};
const percentile = (xs: readonly number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(s.length * p))] as number;
};
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function header(title: string) {
  console.log(`\n## ${title}`);
}

// ---------------------------------------------------------------------------------------------------------
// Targets and verdicts

/** The targets, in the order of the summary table. `ratio` says what the ratio column of that row is. */
const TARGETS = {
  memOne: { section: 'foundation', text: 'Memory store, 1 metric: recordEvent within 5x of the bare loop (Map total + Set of keys)', ratio: 'bare rate / recordEvent rate; ≤ 5' },
  memRich: { section: 'foundation', text: 'Memory store, rich config: recordEvent within 10x of the same bare loop', ratio: 'bare rate / recordEvent rate; ≤ 10' },
  pure: { section: 'pure', text: 'Pure applyEvent, rich config (states in a Map): within 5x of the bare loop', ratio: 'bare rate / applyEvent rate; ≤ 5' },
  pureParts: { section: 'pure', text: 'Pure applyEvent: CPU per event with the rich config and with metrics only (no rules), from the same rounds (the section also prints each feature group\'s share)', ratio: 'metrics-only applyEvent / bare loop (figures only)' },
  history: { section: 'history', text: 'Per-event cost flat in history: 100,000-event user / 10-event user ≤ 1.1', ratio: 'median cost ratio; ≤ 1.1' },
  idle: { section: 'idle', text: 'Per-event cost flat in idle time: one year idle / one hour idle ≤ 1.5 (hourly time trigger, no cap)', ratio: 'median cost ratio; ≤ 1.5' },
  pgRatio: { section: 'storage', text: 'PostgreSQL server, 1 process, 8 in flight: recordEvent within 2x of a bare upsert loop', ratio: 'bare rate / recordEvent rate; ≤ 2' },
  pgP99: { section: 'storage', text: 'PostgreSQL server, 1 process, 8 in flight: recordEvent p99 ≤ 10 ms', ratio: 'p99 / bare loop p99 (verdict on the absolute p99)' },
  pgScale: { section: 'storage', text: 'PostgreSQL server: 4 processes at least as fast as 1', ratio: '4-process rate / 1-process rate; ≥ 1' },
  pgFloor: { section: 'storage', text: 'PostgreSQL server, 1 process, 8 in flight: the floor, the rows recordEvent writes as one plain statement per call into Laurel\'s tables (no rules, ranks or function)', ratio: 'bare rate / floor rate (figures only)' },
  batch: { section: 'batch', text: 'PostgreSQL: recordEvents, batches of 100 events over 100 users, ≥ 10x the single-call rate', ratio: 'batch event rate / best single-call rate; ≥ 10' },
  batchFloor: { section: 'batch', text: 'PostgreSQL: the floor of a batch, the rows of 100 events over 100 users as one plain statement into Laurel\'s tables (no rules, ranks or function)', ratio: 'floor batch event rate / best single-call rate (figures only)' },
  redis: { section: 'redis', text: 'Redis, 1,000,000 entries: index.apply update+rank median within 1.5x of a bare ZADD+ZRANK pipeline', ratio: 'apply median / pipeline median; ≤ 1.5' },
  memBytes: { section: 'memory', text: 'Memory store, rich config: bytes per user and per event (heap after gc)', ratio: 'none (figures only)' },
  memFlat: { section: 'memory', text: 'Memory store, rich config: throughput after 1,000,000 events within 10% of the first 10,000', ratio: 'last-10,000 rate / first-10,000 rate; ≥ 0.9' },
  boards: { section: 'boards', text: 'Cost per extra leaderboard on an event ≤ 2 µs (1 vs 9 boards on the metric; CPU time per event, collections included)', ratio: '9-board / 1-board event cost (verdict on the per-board µs)' },
  treap: { section: 'leaderboards', text: 'Memory leaderboard index, 1,000,000 entries: update+rank ≤ 4 µs', ratio: 'naive sort-on-read (100,000) / index (1,000,000) (verdict on the µs)' },
} as const satisfies Record<string, { section: Section; text: string; ratio: string }>;
type TargetId = keyof typeof TARGETS;
type Verdict = 'PASS' | 'FAIL' | 'INFO' | 'NOT MEASURED';
interface Row {
  measured: string;
  ratio: string;
  verdict: Verdict;
}
const rows = new Map<TargetId, Row>();

/** Records one target's outcome and prints it where it was measured. `pass` null: a figure without a limit. */
function verdict(id: TargetId, measured: string, ratio: string, pass: boolean | null) {
  const v: Verdict = pass === null ? 'INFO' : pass ? 'PASS' : 'FAIL';
  rows.set(id, { measured, ratio, verdict: v });
  console.log(`>> ${v}: ${TARGETS[id].text}\n   measured ${measured}; ratio ${ratio} (${TARGETS[id].ratio})`);
}

function notMeasured(id: TargetId, why: string) {
  rows.set(id, { measured: why, ratio: '–', verdict: 'NOT MEASURED' });
  console.log(`>> NOT MEASURED: ${TARGETS[id].text}: ${why}`);
}

const x = (r: number, digits = 2) => `${fmt(r, digits)}x`;

// ---------------------------------------------------------------------------------------------------------
// Timing helpers

/** Calls per second of `call` run `n` times one after another (awaited: the calls may be async), wall clock. */
async function rateOf(n: number, call: () => unknown): Promise<number> {
  const t0 = performance.now();
  for (let i = 0; i < n; i++) await call();
  return n / ((performance.now() - t0) / 1000);
}

/**
 * Calls per second by the wall clock and by this process's CPU time (user + system, GC threads included).
 * The machine may be shared: the CPU-time rate is what the code costs whatever else runs, and is the one
 * the in-process verdicts use; on an idle machine the two agree.
 */
interface Rates {
  wall: number;
  cpu: number;
}
const cpuSeconds = (since: NodeJS.CpuUsage) => {
  const c = process.cpuUsage(since);
  return (c.user + c.system) / 1e6;
};

/** {@link Rates} of `call` run `n` times, awaited (the calls may be async; they must not wait for I/O). */
async function ratesOf(n: number, call: () => unknown): Promise<Rates> {
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  for (let i = 0; i < n; i++) await call();
  const wall = (performance.now() - t0) / 1000;
  return { wall: n / wall, cpu: n / cpuSeconds(c0) };
}

/** {@link Rates} of a synchronous `call` run `n` times (no await between calls). */
function syncRatesOf(n: number, call: () => void): Rates {
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  for (let i = 0; i < n; i++) call();
  const wall = (performance.now() - t0) / 1000;
  return { wall: n / wall, cpu: n / cpuSeconds(c0) };
}

/** Several equal-sized runs taken together: their calls over their total time (the harmonic mean of the rates). */
const together = (runs: readonly Rates[]): Rates => ({
  wall: runs.length / runs.reduce((sum, r) => sum + 1 / r.wall, 0),
  cpu: runs.length / runs.reduce((sum, r) => sum + 1 / r.cpu, 0),
});

/**
 * Rounds of the in-process comparisons: each lasts about half a second, so that a round's rate takes in the
 * collections its calls cause (a round of 3,000 rich calls lasted 0.15 s and ranged from 10,000 to 29,000
 * events/s in one process: a major collection, or a slow moment of the machine, fell on a few), and the
 * engines are warmed up past their first tens of thousands of calls, whose rates still climb (the rich
 * config's first rounds ran at half its later rate). The bare loop starts afresh every 50,000 calls, so its
 * key set stays no larger than the engines'.
 */
const ROUNDS = { warmOne: 20_000, warmRich: 20_000, one: 40_000, rich: 12_000, bareLoops: 4 } as const;

/**
 * Runs the workloads in alternating rounds (so drift and GC hit them alike) and returns each one's median
 * rates over the rounds (wall and CPU medians taken separately).
 */
async function alternate(rounds: number, workloads: Record<string, () => Promise<Rates> | Rates>): Promise<Record<string, Rates>> {
  const rates: Record<string, Rates[]> = Object.fromEntries(Object.keys(workloads).map((k) => [k, []]));
  for (let r = 0; r < rounds; r++) for (const [k, w] of Object.entries(workloads)) (rates[k] as Rates[]).push(await w());
  return Object.fromEntries(Object.entries(rates).map(([k, v]) => [k, { wall: median(v.map((y) => y.wall)), cpu: median(v.map((y) => y.cpu)) }]));
}

const showRates = (r: Rates, unit = 'events/s') => `${fmt(r.cpu)} ${unit} of CPU time (${fmt(r.wall)} by the wall clock)`;

/**
 * The bare-minimum recorder, as an async call like recordEvent: check the idempotency key, add the value
 * to the user's total, keep the key.
 */
function bareLoop(users: number) {
  const totals = new Map<string, number>();
  const keys = new Set<string>();
  let i = 0;
  return async () => {
    const n = i++;
    const user = `u${n % users}`;
    const key = `${user}|lessons|k${n}`;
    if (keys.has(key)) return;
    keys.add(key);
    totals.set(user, (totals.get(user) ?? 0) + 1);
  };
}

// ---------------------------------------------------------------------------------------------------------
// Configurations

/** The rich configuration's feature groups, which the pure section's breakdown leaves out one at a time. */
type RichPart = 'boards' | 'achievements' | 'streak' | 'points';

/**
 * The rich configuration: 2 metrics, 50 achievements (10 on the streak), a daily streak with freezes, 3 points
 * systems x about 10 triggers (metric triggers, a streak trigger, sign-up grants, an hourly energy refill) and
 * 2 boards. `without` leaves feature groups out: the streak takes its achievements and trigger with it, and the
 * points systems take the board ranked by points with them.
 */
function richConfig(without: ReadonlySet<RichPart> = new Set()): LaurelConfig {
  const achievements = Array.from({ length: 50 }, (_, i) =>
    i % 5 === 4
      ? { key: `s${i}`, name: `Streak ${i}`, trigger: 'streak' as const, streakLength: i + 1 }
      : { key: `a${i}`, name: `Ach ${i}`, trigger: 'metric' as const, metricKey: i % 2 ? 'lessons' : 'words', metricValue: (i + 1) * 25, ...(i % 3 === 0 ? { eventAttributes: { device: 'ios' } } : {}) },
  );
  const triggers = (n: number, key: string) =>
    Array.from({ length: n }, (_, i) => ({ key: `t${i}`, type: 'metric' as const, metricKey: i % 2 ? 'lessons' : 'words', metricThreshold: i + 1, points: 1 + i, ...(i % 4 === 0 ? { eventAttributes: { device: 'ios' } } : {}), id: `${key}-${i}` }));
  const streak = !without.has('streak');
  const points = !without.has('points');
  return defineConfig({
    metrics: [{ key: 'lessons', name: 'Lessons' }, { key: 'words', name: 'Words' }],
    attributes: [{ key: 'device', name: 'Device', type: 'event' }],
    achievements: without.has('achievements') ? [] : achievements.filter((a) => streak || a.trigger !== 'streak'),
    ...(streak ? { streak: { frequency: 'daily' as const, freezes: { initial: 1, max: 3, autoEarn: { everyDays: 7, amount: 1 } } } } : {}),
    pointsSystems: points
      ? [
          { key: 'xp', name: 'XP', triggers: triggers(10, 'xp'), levels: Array.from({ length: 10 }, (_, i) => ({ key: `l${i}`, name: `L${i}`, points: i * 100 })) },
          { key: 'coins', name: 'Coins', triggers: [...triggers(8, 'coins'), ...(streak ? [{ key: 'streak', type: 'streak' as const, streakLengthThreshold: 3, points: 5 }] : []), { key: 'signup', type: 'user_creation' as const, points: 10 }] },
          { key: 'energy', name: 'Energy', maxPoints: 10, triggers: [{ key: 'signup', type: 'user_creation' as const, points: 10 }, { key: 'hourly-refill', type: 'time' as const, timeUnit: 'hour' as const, timeInterval: 1, points: 1 }, ...triggers(8, 'energy').map((t) => ({ ...t, points: -1, metricThreshold: 1 }))] },
        ]
      : [],
    leaderboards: without.has('boards')
      ? []
      : [
          { key: 'all', name: 'All', rankBy: 'metric' as const, metricKey: 'lessons', start: '2020-01-01' },
          ...(points ? [{ key: 'weekly', name: 'Weekly', rankBy: 'points' as const, pointsSystemKey: 'xp', start: '2020-01-06', runUnit: 'day' as const, runInterval: 7 }] : []),
        ],
  });
}

const oneMetric = () => defineConfig({ metrics: [{ key: 'lessons', name: 'Lessons' }], attributes: [{ key: 'device', name: 'Device', type: 'event' }] });

/** A rich-config event for call n: the two metrics in turn, device attribute, user n mod `users`. */
const richEvent = (n: number, users: number) => ({
  metricKey: n % 2 ? 'lessons' : 'words',
  user: { id: `u${n % users}` },
  value: 1,
  attributes: { device: n % 3 ? 'web' : 'ios' },
});

// ---------------------------------------------------------------------------------------------------------
// Sections

async function foundation() {
  header('recordEvent on the memory store vs a bare-minimum loop (1,000 users, idempotency keys)');
  const users = 1000;
  let now = Date.parse('2026-01-05T00:00:00Z');
  const clock = () => new Date(now);
  const one = createEngine({ config: oneMetric(), store: createMemoryStore(), clock, newId: sequentialIds() });
  const rich = createEngine({ config: richConfig(), store: createMemoryStore(), clock, newId: sequentialIds() });
  let i1 = 0;
  let i2 = 0;
  const oneCall = () => {
    const n = i1++;
    now += 1000;
    return one.recordEvent('lessons', { user: { id: `u${n % users}` }, value: 1, attributes: { device: 'ios' } }, { idempotencyKey: `k${n}` });
  };
  const richCall = () => {
    const n = i2++;
    now += 1000;
    const e = richEvent(n, users);
    return rich.recordEvent(e.metricKey, { user: e.user, value: 1, attributes: e.attributes }, { idempotencyKey: `k${n}` });
  };
  // Warm-up, then seven alternating rounds (see ROUNDS); each figure is the median round.
  await ratesOf(ROUNDS.warmOne, oneCall);
  await ratesOf(ROUNDS.warmRich, richCall);
  await ratesOf(50_000, bareLoop(users));
  const bareRound = async () => {
    const runs: Rates[] = [];
    for (let i = 0; i < ROUNDS.bareLoops; i++) runs.push(await ratesOf(50_000, bareLoop(users)));
    return together(runs);
  };
  const r = await alternate(7, { bare: bareRound, one: () => ratesOf(ROUNDS.one, oneCall), rich: () => ratesOf(ROUNDS.rich, richCall) });
  const { bare, one: oneR, rich: richR } = r as Record<'bare' | 'one' | 'rich', Rates>;
  console.log(`bare-minimum loop (async call; Map total + Set of keys): ${showRates(bare, 'calls/s')}`);
  console.log(`recordEvent, 1 metric:      ${showRates(oneR)}`);
  console.log(`recordEvent, rich config:   ${showRates(richR)}  (50 achievements, streak with freezes, 3 points systems x 10 triggers, 2 boards)`);
  const ratioOne = bare.cpu / oneR.cpu;
  const ratioRich = bare.cpu / richR.cpu;
  console.log(`by the wall clock: ${x(bare.wall / oneR.wall, 1)} and ${x(bare.wall / richR.wall, 1)}`);
  verdict('memOne', `${fmt(oneR.cpu)} events/s vs bare ${fmt(bare.cpu)}/s (CPU time)`, x(ratioOne, 1), ratioOne <= 5);
  verdict('memRich', `${fmt(richR.cpu)} events/s vs bare ${fmt(bare.cpu)}/s (CPU time)`, x(ratioRich, 1), ratioRich <= 10);
}

/** Runs the pure section in a child process; collects its verdicts. */
async function pure() {
  // In a process of its own: its six workloads leave a large heap behind, which weighed on the sections after
  // it when it ran in this one (the history section's ratio read 1.11-1.14x after it, 1.03-1.04x on its own).
  const failed = await child('pure', [], (tag, json) => {
    if (tag === 'rows') for (const [id, row] of json as [TargetId, Row][]) rows.set(id, row);
  });
  if (failed !== null) {
    console.log(`!! the pure child process ended with ${failed}`);
    for (const id of ['pure', 'pureParts'] as const) if (!rows.has(id)) notMeasured(id, `the child process ended with ${failed}`);
  }
}

/**
 * Pure applyEvent with the rich configuration against the bare loop (the verdict), and where the time goes: the
 * same calls with the configuration without each feature group (its share is the difference) and with metrics
 * only. All in alternating rounds, each workload with its own users' states and the same key check, after the
 * same warm-up. The breakdown is a figure, not a target: it says how far the 5x target is from what each group
 * costs, and from what a call costs with no rules at all.
 */
async function pureMeasure() {
  header('pure applyEvent, rich config, each user\'s state kept in a Map by the caller, vs the bare loop (both synchronous)');
  const users = 1000;
  /** A workload of applyEvent calls under the rich configuration without `without`: its own states, keys and clock. */
  const workload = (without: RichPart[]) => {
    const config = richConfig(new Set(without));
    const newId = sequentialIds();
    const states = new Map<string, ReturnType<typeof applyEvent>['state']>();
    const keys = new Set<string>();
    let now = Date.parse('2026-01-05T00:00:00Z');
    let i = 0;
    const call = () => {
      const n = i++;
      now += 1000;
      const e = { ...richEvent(n, users), idempotencyKey: `k${n}` };
      const key = `${e.user.id}|${e.metricKey}|${e.idempotencyKey}`;
      if (keys.has(key)) return;
      const { state } = applyEvent(config, states.get(e.user.id) ?? null, e, { now: new Date(now), newId });
      states.set(e.user.id, state);
      keys.add(key);
    };
    syncRatesOf(ROUNDS.warmRich, call);
    return () => syncRatesOf(ROUNDS.rich, call);
  };
  /** The bare loop, afresh: 50,000 synchronous calls. */
  const bareLoopSync = () => {
    const totals = new Map<string, number>();
    const bareKeys = new Set<string>();
    let n = 0;
    return syncRatesOf(50_000, () => {
      const user = `u${n % users}`;
      const key = `${user}|lessons|k${n++}`;
      if (bareKeys.has(key)) return;
      bareKeys.add(key);
      totals.set(user, (totals.get(user) ?? 0) + 1);
    });
  };
  /** One round of the bare loop (see ROUNDS). */
  const bareRound = () => together(Array.from({ length: ROUNDS.bareLoops }, bareLoopSync));
  const RICH = 'the rich config';
  const parts: [string, RichPart[]][] = [[RICH, []], ['without boards', ['boards']], ['without achievements', ['achievements']], ['without the streak', ['streak']], ['without points systems', ['points']], ['metrics only', ['boards', 'achievements', 'streak', 'points']]];
  const workloads: Record<string, () => Rates> = { bare: bareRound };
  for (const [name, without] of parts) workloads[name] = workload(without);
  bareLoopSync();
  const r = await alternate(7, workloads);
  const bare = r.bare as Rates;
  const pureR = r[RICH] as Rates;
  console.log(`bare-minimum loop (synchronous; Map total + Set of keys): ${showRates(bare, 'calls/s')}`);
  console.log(`applyEvent (+ the same key check, state kept in a Map):    ${showRates(pureR)}`);
  const ratio = bare.cpu / pureR.cpu;
  console.log(`by the wall clock: ${x(bare.wall / pureR.wall, 1)}`);
  verdict('pure', `${fmt(pureR.cpu)} events/s vs bare ${fmt(bare.cpu)}/s (CPU time)`, x(ratio, 1), ratio <= 5);
  const us = (name: string) => 1e6 / (r[name] as Rates).cpu;
  const whole = us(RICH);
  const bareUs = 1e6 / bare.cpu;
  console.log(`pure applyEvent, CPU per event (medians of the same rounds; the bare loop: ${fmt(bareUs, 2)} µs, so the 5x target is ${fmt(5 * bareUs, 1)} µs):`);
  for (const [name] of parts) console.log(`  ${name.padEnd(24)} ${fmt(us(name), 2)} µs${name === RICH ? '' : ` (${name === 'metrics only' ? 'all groups' : 'the group'}: ${fmt(whole - us(name), 2)} µs)`}`);
  console.log('  (a group\'s share is the difference of two medians of alternating rounds: it swings by a few µs between runs)');
  verdict('pureParts', `${fmt(whole, 1)} µs per event with the rich config, ${fmt(us('metrics only'), 1)} µs with metrics only (no rules at all); the 5x target is ${fmt(5 * bareUs, 1)} µs`, x(us('metrics only') / bareUs, 1), null);
}

async function history() {
  header('per-event cost as a user\'s history grows (rich config: 50 achievements, streak with freezes, 3 points systems x 10 triggers, 2 boards)');
  const config = richConfig();
  let now = Date.parse('2020-01-06T00:00:00Z');
  const engine = createEngine({ config, store: createMemoryStore(), clock: () => new Date(now), newId: sequentialIds() });
  const record = (user: string, i: number) => {
    now += 20 * 60_000; // three events an hour keep the streak alive and energy flowing
    return engine.recordEvent(i % 2 ? 'lessons' : 'words', { user: { id: user }, value: 1, attributes: { device: i % 3 ? 'web' : 'ios' } });
  };
  const sample = async (user: string) => {
    const times: number[] = [];
    for (let i = 0; i < 2000; i++) {
      const t0 = performance.now();
      await record(user, i);
      times.push(performance.now() - t0);
    }
    return median(times) * 1000;
  };
  // Warm the JIT on another user first, so the first sample is not also the slowest.
  for (let i = 0; i < 5000; i++) await record('warm-up', i);
  for (let i = 0; i < 10; i++) await record('short', i);
  const short = await sample('short');
  const t0 = performance.now();
  for (let i = 0; i < 100_000; i++) await record('long', i);
  const fill = (performance.now() - t0) / 1000;
  // The 100,000-event user and a fresh 10-event user, measured interleaved in the same heap, so that the
  // comparison isolates history from heap size and drift.
  for (let i = 0; i < 10; i++) await record('short-after', i);
  const longTimes: number[] = [];
  const shortTimes: number[] = [];
  for (let i = 0; i < 3000; i++) {
    for (const [user, times] of [['long', longTimes], ['short-after', shortTimes]] as const) {
      const s = performance.now();
      await record(user, i);
      times.push(performance.now() - s);
    }
  }
  const long = median(longTimes) * 1000;
  const shortAfter = median(shortTimes) * 1000;
  console.log(`filled a 100,000-event history in ${fmt(fill, 1)} s (${fmt(100_000 / fill)} events/s for that one user)`);
  console.log(`median per-event cost, user with 10 events, before the fill:        ${fmt(short, 1)} µs`);
  console.log(`median per-event cost, user with 100,000 events (interleaved):      ${fmt(long, 1)} µs`);
  console.log(`median per-event cost, user with 10 events (interleaved with it):  ${fmt(shortAfter, 1)} µs`);
  const ratio = long / shortAfter;
  verdict('history', `${fmt(long, 1)} µs vs ${fmt(shortAfter, 1)} µs per event`, x(ratio), ratio <= 1.1);
}

async function idle() {
  header('per-event cost after one hour vs one year idle (energy: hourly time trigger, no maxPoints cap)');
  const config = defineConfig({
    metrics: [{ key: 'lessons', name: 'Lessons' }],
    pointsSystems: [
      {
        key: 'energy',
        name: 'Energy',
        triggers: [
          { key: 'signup', type: 'user_creation', points: 10 },
          { key: 'hourly-refill', type: 'time', timeUnit: 'hour', timeInterval: 1, points: 1 },
          { key: 'per-lesson', type: 'metric', metricKey: 'lessons', metricThreshold: 1, points: -1 },
        ],
      },
    ],
  });
  const T0 = Date.parse('2025-01-06T00:00:00Z');
  const HOUR = 3_600_000;
  const YEAR = 365 * 24 * HOUR;
  let now = T0;
  const engine = createEngine({ config, store: createMemoryStore(), clock: () => new Date(now), newId: sequentialIds() });
  // Many users, each measured once; but a year of hourly awards may be kept row by row, so the measuring
  // stops early (and says so) when the heap passes 1.5 GiB or it has taken 60 s.
  const U = 3000;
  const WARM = 200;
  // Every user's previous event is at T0; each user is then measured once, at T0 + 1 hour or T0 + 1 year.
  now = T0;
  for (let i = 0; i < U; i++) {
    await engine.recordEvent('lessons', { user: { id: `h${i}` }, value: 1 });
    await engine.recordEvent('lessons', { user: { id: `y${i}` }, value: 1 });
  }
  for (let i = 0; i < WARM; i++) {
    await engine.recordEvent('lessons', { user: { id: `wh${i}` }, value: 1 });
    await engine.recordEvent('lessons', { user: { id: `wy${i}` }, value: 1 });
  }
  const one = async (user: string, at: number) => {
    now = at;
    const s = performance.now();
    const response = await engine.recordEvent('lessons', { user: { id: user }, value: 1 });
    const t = performance.now() - s;
    return { t, bytes: Buffer.byteLength(JSON.stringify(response)), response };
  };
  // Warm-up users (not counted) exercise both paths first; then the two groups interleaved, one call each.
  for (let i = 0; i < WARM; i++) {
    await one(`wh${i}`, T0 + HOUR);
    if (i % 10 === 0) await one(`wy${i}`, T0 + YEAR);
  }
  const hour: number[] = [];
  const year: number[] = [];
  const hourBytes: number[] = [];
  const yearBytes: number[] = [];
  let lastYear: unknown;
  const measureStart = performance.now();
  let stopped = '';
  for (let i = 0; i < U; i++) {
    if (i % 50 === 0 && i > 0) {
      const heapUsed = process.memoryUsage().heapUsed;
      if (heapUsed > 1.5 * 2 ** 30 || performance.now() - measureStart > 60_000) {
        stopped = ` (stopped early at ${fmt(i)} users per group: ${heapUsed > 1.5 * 2 ** 30 ? `heap ${fmt(heapUsed / 2 ** 20)} MiB` : 'over 60 s'})`;
        break;
      }
    }
    const h = await one(`h${i}`, T0 + HOUR);
    hour.push(h.t);
    hourBytes.push(h.bytes);
    const y = await one(`y${i}`, T0 + YEAR);
    year.push(y.t);
    yearBytes.push(y.bytes);
    lastYear = y.response;
  }
  const h = median(hour) * 1000;
  const y = median(year) * 1000;
  const energy = (lastYear as { points?: Record<string, { total?: number }> }).points?.energy?.total;
  console.log(`${fmt(hour.length)} users per idle length, each measured once, interleaved (previous event at ${new Date(T0).toISOString().slice(0, 10)})${stopped}`);
  console.log(`one hour idle: median ${fmt(h, 1)} µs per event, p99 ${fmt(percentile(hour, 0.99) * 1000, 1)} µs; response ${fmt(median(hourBytes))} bytes of JSON`);
  console.log(`one year idle: median ${fmt(y, 1)} µs per event, p99 ${fmt(percentile(year, 0.99) * 1000, 1)} µs; response ${fmt(median(yearBytes))} bytes of JSON (energy total after the year: ${energy ?? 'n/a'})`);
  const ratio = y / h;
  verdict('idle', `year ${fmt(y, 1)} µs vs hour ${fmt(h, 1)} µs (${fmt(hour.length)} users each${stopped ? ', stopped early' : ''}); response ${fmt(median(yearBytes))} vs ${fmt(median(hourBytes))} bytes`, x(ratio), ratio <= 1.5);
}

/** The nine boards of the boards section, all on the one metric: each extra board a different kind of run. */
function boardsConfig(n: number): LaurelConfig {
  const board = (key: string, extra: Record<string, unknown> = {}) => ({ key, name: key, rankBy: 'metric' as const, metricKey: 'lessons', start: '2020-01-06', ...extra });
  const nine = [
    board('all'),
    board('all2021', { start: '2021-01-01' }),
    board('allParis', { timeZone: 'Europe/Paris' }),
    board('daily', { runUnit: 'day' }),
    board('every3', { runUnit: 'day', runInterval: 3 }),
    board('weekly', { runUnit: 'day', runInterval: 7 }),
    board('monthly', { runUnit: 'month' }),
    board('quarterly', { runUnit: 'month', runInterval: 3 }),
    board('yearly', { runUnit: 'year' }),
  ];
  return defineConfig({ metrics: [{ key: 'lessons', name: 'Lessons' }], leaderboards: nine.slice(0, n) });
}

/** What a boards child process measured (see {@link boardsMeasure}). */
interface BoardsFigures {
  /** CPU time of this process per call over the timed calls (GC included), µs. */
  cpuUs: number;
  /** The median call by the wall clock, µs (GC pauses fall on few calls: the median leaves them out). */
  medianUs: number;
}

/**
 * The same events against 1 or 9 boards (`LAUREL_BENCH_CHILD=boards:N`), in a process of its own: 5,000
 * calls of warm-up, then 40,000 timed.
 */
async function boardsMeasure(n: number): Promise<BoardsFigures> {
  let now = Date.parse('2026-01-05T00:00:00Z');
  const engine = createEngine({ config: boardsConfig(n), store: createMemoryStore(), clock: () => new Date(now), newId: sequentialIds() });
  const users = 1000;
  const one = (i: number) => {
    now += 1000;
    return engine.recordEvent('lessons', { user: { id: `u${i % users}` }, value: 1 + (i % 3) });
  };
  for (let i = 0; i < 5000; i++) await one(i);
  const times: number[] = [];
  const c0 = process.cpuUsage();
  for (let i = 5000; i < 45_000; i++) {
    const s = performance.now();
    await one(i);
    times.push((performance.now() - s) * 1000);
  }
  return { cpuUs: (cpuSeconds(c0) * 1e6) / times.length, medianUs: median(times) };
}

/** Runs `role` of this script in a child process; hands each of its `@@` lines to `onData`, prints the rest. */
async function child(role: string, nodeArgs: string[], onData: (tag: string, json: unknown) => void): Promise<string | null> {
  const proc = spawn(process.execPath, [...nodeArgs, '--import', 'tsx', fileURLToPath(import.meta.url)], {
    env: { ...process.env, LAUREL_BENCH_CHILD: role },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let pending = '';
  proc.stdout.setEncoding('utf8');
  proc.stdout.on('data', (chunk: string) => {
    pending += chunk;
    for (let i = pending.indexOf('\n'); i >= 0; i = pending.indexOf('\n')) {
      const line = pending.slice(0, i);
      pending = pending.slice(i + 1);
      const tag = /^@@(\w+) /.exec(line);
      if (tag) onData(tag[1] as string, JSON.parse(line.slice(tag[0].length)));
      else console.log(line);
    }
  });
  const [code, signal] = await new Promise<[number | null, string | null]>((resolve) => proc.on('close', (c, sig) => resolve([c, sig])));
  if (pending) console.log(pending);
  return code === 0 ? null : (signal ?? `exit code ${code}`);
}

async function boards() {
  header('cost per extra leaderboard: the same one-metric events against 1 and 9 boards on that metric (memory store, 1,000 users, 40,000 timed calls, each engine in a process of its own, 3 runs each in the order 1 9 9 1 1 9)');
  // Each engine runs in a process of its own, so that neither pays for the other's garbage collection (the
  // 9-board engine's outbox keeps some 6 change events per call: in one process the 1-board engine's calls
  // paid part of that collection, and a median per call leaves collections out altogether). One process at a
  // time (two side by side share the caches and the cores their collectors' threads use), in alternating
  // order, each engine's figure the median of its runs, so that a phase of the machine's speed weighs on both.
  const runs: Record<1 | 9, BoardsFigures[]> = { 1: [], 9: [] };
  const failed: string[] = [];
  for (const n of [1, 9, 9, 1, 1, 9] as const) {
    const f = await child(`boards:${n}`, [], (tag, json) => tag === 'boards' && runs[n].push(json as BoardsFigures));
    if (f !== null) failed.push(f);
  }
  if (failed.length > 0 || runs[1].length !== 3 || runs[9].length !== 3) {
    notMeasured('boards', failed.length > 0 ? `a child process ended with ${failed.join(', ')}` : 'a child process gave no figures');
    return;
  }
  /** The median run's figures (CPU and median call each the median of the runs'). */
  const pick = (all: BoardsFigures[]) => ({ cpuUs: median(all.map((r) => r.cpuUs)), medianUs: median(all.map((r) => r.medianUs)) });
  const one = pick(runs[1]);
  const nine = pick(runs[9]);
  const perBoard = (nine.cpuUs - one.cpuUs) / 8;
  console.log(`runs, µs of CPU per event: 1 board ${runs[1].map((r) => fmt(r.cpuUs, 2)).join(', ')}; 9 boards ${runs[9].map((r) => fmt(r.cpuUs, 2)).join(', ')}`);
  console.log(`1 board:  ${fmt(one.cpuUs, 2)} µs of CPU per event, the median run (median call ${fmt(one.medianUs, 2)} µs by the wall clock)`);
  console.log(`9 boards: ${fmt(nine.cpuUs, 2)} µs of CPU per event, the median run (median call ${fmt(nine.medianUs, 2)} µs by the wall clock)`);
  console.log(`per extra board: (${fmt(nine.cpuUs, 2)} - ${fmt(one.cpuUs, 2)}) / 8 = ${fmt(perBoard, 2)} µs of CPU; by the median calls ${fmt((nine.medianUs - one.medianUs) / 8, 2)} µs (collections left out)`);
  verdict('boards', `${fmt(perBoard, 2)} µs of CPU per extra board (1 board ${fmt(one.cpuUs, 1)} µs, 9 boards ${fmt(nine.cpuUs, 1)} µs per event; by the median calls ${fmt((nine.medianUs - one.medianUs) / 8, 2)} µs)`, x(nine.cpuUs / one.cpuUs), perBoard <= 2);
}

/** Runs the memory section in a child process with gc exposed and a larger heap; collects its verdicts. */
async function memory() {
  const failed = await child('memory', ['--expose-gc', '--max-old-space-size=8192'], (tag, json) => {
    if (tag === 'rows') for (const [id, row] of json as [TargetId, Row][]) rows.set(id, row);
  });
  if (failed !== null) {
    console.log(`!! the memory child process ended with ${failed}`);
    for (const id of ['memBytes', 'memFlat'] as const) if (!rows.has(id)) notMeasured(id, `the child process ended with ${failed}`);
  }
}

/** The memory section itself (in the child process). */
async function memoryMeasure() {
  header('memory store, rich config: heap per user and per event, throughput over 1,000,000 events (10,000 users, no idempotency keys)');
  const gc = globalThis.gc;
  if (typeof gc !== 'function') {
    notMeasured('memBytes', 'global.gc unavailable (run node with --expose-gc)');
    notMeasured('memFlat', 'global.gc unavailable (run node with --expose-gc)');
    return;
  }
  const heap = async () => {
    for (let i = 0; i < 3; i++) {
      gc();
      await sleep(10);
    }
    return process.memoryUsage().heapUsed;
  };
  const config = richConfig();
  let now = Date.parse('2026-01-05T00:00:00Z');
  const clock = () => new Date(now);
  // Warm the JIT on a throwaway engine, so the first measured window does not also pay for compilation.
  {
    const warm = createEngine({ config, store: createMemoryStore(), clock, newId: sequentialIds('w') });
    for (let n = 0; n < 30_000; n++) {
      now += 1000;
      const e = richEvent(n, 1000);
      await warm.recordEvent(e.metricKey, { user: e.user, value: 1, attributes: e.attributes });
    }
  }
  now = Date.parse('2026-01-05T00:00:00Z');
  const U = 10_000;
  const N = 1_000_000;
  const WINDOW = 10_000;
  const store = createMemoryStore();
  const engine = createEngine({ config, store, clock, newId: sequentialIds() });
  let n = 0;
  const call = () => {
    const e = richEvent(n++, U);
    now += 1000;
    return engine.recordEvent(e.metricKey, { user: e.user, value: 1, attributes: e.attributes });
  };
  /** One window of events: its rates, and the median wall time of one call in it (µs). */
  const window = async (size: number) => {
    const times = new Float64Array(size);
    const c0 = process.cpuUsage();
    const t0 = performance.now();
    for (let i = 0; i < size; i++) {
      const s = performance.now();
      await call();
      times[i] = performance.now() - s;
    }
    const wall = (performance.now() - t0) / 1000;
    return { wall: size / wall, cpu: size / cpuSeconds(c0), medianUs: median([...times]) * 1000 };
  };
  const h0 = await heap();
  // The users' first events (they create the users): counted for bytes per user, not in the million.
  const creation = await window(U);
  const h1 = await heap();
  // Guards, so that a slow or memory-hungry library yields a report instead of a crash or an endless run.
  const TIME_LIMIT_S = 900;
  const HEAP_LIMIT = 6 * 2 ** 30;
  const windows: { wall: number; cpu: number; medianUs: number }[] = [];
  const t0 = performance.now();
  const c0 = process.cpuUsage();
  let stopped = '';
  for (let w = 0; w < N / WINDOW; w++) {
    windows.push(await window(WINDOW));
    const heapUsed = process.memoryUsage().heapUsed;
    if (w + 1 < N / WINDOW && (heapUsed > HEAP_LIMIT || performance.now() - t0 > TIME_LIMIT_S * 1000)) {
      stopped = `stopped after ${fmt((w + 1) * WINDOW)} of ${fmt(N)} events: ${heapUsed > HEAP_LIMIT ? `heap ${fmt(heapUsed / 2 ** 30, 1)} GiB` : `over ${TIME_LIMIT_S} s`}`;
      break;
    }
  }
  const seconds = (performance.now() - t0) / 1000;
  const cpu = cpuSeconds(c0);
  const done = windows.length * WINDOW;
  const h2 = await heap();
  const perUser = (h1 - h0) / U;
  const perEvent = (h2 - h1) / done;
  const first = windows[0] as (typeof windows)[number];
  const last = windows[windows.length - 1] as (typeof windows)[number];
  if (stopped) console.log(`!! ${stopped}`);
  console.log(`heap used after gc: ${fmt(h0 / 2 ** 20, 1)} MiB empty, ${fmt(h1 / 2 ** 20, 1)} MiB with ${fmt(U)} users (one event each), ${fmt(h2 / 2 ** 20, 1)} MiB after ${fmt(done)} more events`);
  console.log(`bytes per user (its first event included): ${fmt(perUser)}; bytes per further event: ${fmt(perEvent)}`);
  console.log(`the ${fmt(U)} user-creating events: ${showRates(creation)}`);
  console.log(`then ${fmt(done)} events: ${fmt(done / cpu)} events/s of CPU time, ${fmt(done / seconds)} by the wall clock (${fmt(seconds, 1)} s)`);
  const marks = [...new Set([0, 1, 9, 24, 49, 74, 98, windows.length - 1])].filter((i) => i < windows.length);
  console.log('per 10,000-event window: events/s of CPU time (by the wall clock; median µs per call)');
  console.log(`  ${marks.map((i) => `#${i + 1} ${fmt(windows[i]?.cpu as number)} (${fmt(windows[i]?.wall as number)}; ${fmt(windows[i]?.medianUs as number, 1)} µs)`).join(', ')}`);
  const cpus = windows.map((w) => w.cpu);
  console.log(`  CPU-time rate over all windows: min ${fmt(Math.min(...cpus))}, median ${fmt(median(cpus))}, max ${fmt(Math.max(...cpus))}`);
  verdict('memBytes', `${fmt(perUser)} bytes per user, ${fmt(perEvent)} bytes per event`, '–', null);
  const ratio = last.cpu / first.cpu;
  console.log(`last / first window: ${x(ratio)} by CPU time, ${x(last.wall / first.wall)} by the wall clock, median call cost ${x(first.medianUs / last.medianUs)}`);
  // Context for the single-window verdict (a major collection may land in either window): ten windows each.
  const span = Math.min(10, Math.floor(windows.length / 2));
  if (span > 1) {
    const rateOver = (ws: typeof windows) => (ws.length * WINDOW) / ws.reduce((t, w) => t + WINDOW / w.cpu, 0);
    const early = rateOver(windows.slice(0, span));
    const late = rateOver(windows.slice(-span));
    console.log(`context: the last ${fmt(span * WINDOW)} events / the first ${fmt(span * WINDOW)}: ${fmt(late)} / ${fmt(early)} events/s of CPU time = ${x(late / early)}`);
  }
  const measured = `events ${fmt(done - WINDOW + 1)}-${fmt(done)}: ${fmt(last.cpu)}/s vs events 1-10,000: ${fmt(first.cpu)}/s (CPU time)`;
  if (stopped) {
    rows.set('memFlat', { measured: `${measured} (${stopped})`, ratio: x(ratio), verdict: 'NOT MEASURED' });
    console.log(`>> NOT MEASURED: ${TARGETS.memFlat.text}: ${measured}, ratio ${x(ratio)} (${stopped})`);
  } else verdict('memFlat', measured, x(ratio), ratio >= 0.9);
  void store;
}

async function summaries() {
  header('points event summary: 400 daily buckets for a user with 100,000 awards');
  const config = defineConfig({ metrics: [{ key: 'lessons', name: 'Lessons' }], pointsSystems: [{ key: 'xp', name: 'XP', triggers: [{ key: 'per-lesson', type: 'metric', metricKey: 'lessons', metricThreshold: 1, points: 1 }] }] });
  const start = Date.parse('2024-01-01T00:00:00Z');
  let now = start;
  const engine = createEngine({ config, store: createMemoryStore(), clock: () => new Date(now), newId: sequentialIds() });
  // 100,000 awards spread over ~2.5 years: one every 13 minutes.
  for (let i = 0; i < 100_000; i++) {
    now += 13 * 60_000;
    await engine.recordEvent('lessons', { user: { id: 'heavy' }, value: 1 });
  }
  const bench = new Bench({ iterations: 50 });
  bench.add('getPointsEventSummary daily x 400', () => engine.getPointsEventSummary('heavy', 'xp', { aggregation: 'daily', startDate: '2025-01-01', endDate: '2026-02-05' }));
  bench.add('getPointsEventSummary weekly x 58', () => engine.getPointsEventSummary('heavy', 'xp', { aggregation: 'weekly', startDate: '2025-01-01', endDate: '2026-02-05' }));
  bench.add('getPointsSummary (10 awards)', () => engine.getPointsSummary('heavy', 'xp'));
  await bench.run();
  for (const task of bench.tasks) {
    const r = task.result as { latency?: { p50?: number } } | undefined;
    console.log(`${task.name}: median ${fmt(r?.latency?.p50 ?? Number.NaN, 3)} ms`);
  }
}

/** The part of the memory store's leaderboard index the bench uses (the implementation is being replaced). */
interface RankIndexLike {
  insert(e: IndexEntry): unknown;
  remove(e: IndexEntry): unknown;
  rank(e: IndexEntry): unknown;
  range(offset: number, limit: number): unknown;
}

async function leaderboards() {
  header('memory leaderboard index at 1,000,000 entries vs naive sort-on-read at 100,000');
  // Loaded by name at run time, so the bench keeps type-checking while the index is rewritten.
  const spec = '../../src/store/ordered-index.js';
  const mod = (await import(spec)) as Record<string, unknown>;
  const Index = mod.OrderedIndex as (new () => RankIndexLike) | undefined;
  if (typeof Index !== 'function') {
    notMeasured('treap', 'src/store/ordered-index.ts exports no OrderedIndex class');
    return;
  }
  const build = (n: number) => {
    const idx = new Index();
    const entries = new Map<string, IndexEntry>();
    for (let i = 0; i < n; i++) {
      const e = { userId: `u${i}`, value: (i * 7919) % 100_003, reachedAt: new Date(1_700_000_000_000 + i).toISOString() };
      idx.insert(e);
      entries.set(e.userId, e);
    }
    return { idx, entries };
  };
  const { idx, entries } = build(1_000_000);
  const updates: number[] = [];
  const pages: number[] = [];
  for (let i = 0; i < 20_000; i++) {
    const id = `u${(i * 104729) % 1_000_000}`;
    const old = entries.get(id) as IndexEntry;
    const next = { userId: id, value: old.value + 1, reachedAt: new Date(1_800_000_000_000 + i).toISOString() };
    const t0 = performance.now();
    idx.remove(old);
    idx.insert(next);
    idx.rank(next);
    updates.push(performance.now() - t0);
    entries.set(id, next);
    if (i % 10 === 0) {
      const p0 = performance.now();
      idx.range(500_000, 10);
      pages.push(performance.now() - p0);
    }
  }
  const indexUpdate = median(updates) * 1000;
  const indexPage = median(pages) * 1000;
  // The naive model: an array of entries, sorted on every read.
  const naive = [...build(100_000).entries.values()];
  const nUpdates: number[] = [];
  const nPages: number[] = [];
  for (let i = 0; i < 30; i++) {
    const j = (i * 7) % naive.length;
    const t0 = performance.now();
    const e = naive[j] as IndexEntry;
    naive[j] = { ...e, value: e.value + 1 };
    naive.sort(compareEntries);
    naive.findIndex((y) => y.userId === e.userId);
    nUpdates.push(performance.now() - t0);
    const p0 = performance.now();
    naive.sort(compareEntries);
    naive.slice(50_000, 50_010);
    nPages.push(performance.now() - p0);
  }
  const naiveUpdate = median(nUpdates) * 1000;
  const naivePage = median(nPages) * 1000;
  console.log(`index, 1,000,000 entries: update+rank median ${fmt(indexUpdate, 2)} µs; page of 10 at offset 500,000 median ${fmt(indexPage, 2)} µs`);
  console.log(`naive, 100,000 entries:   update+rank median ${fmt(naiveUpdate, 0)} µs; page of 10 at offset 50,000 median ${fmt(naivePage, 0)} µs`);
  console.log(`ratio naive(100k) / index(1M): update+rank ${fmt(naiveUpdate / indexUpdate, 0)}x, page ${fmt(naivePage / indexPage, 0)}x`);
  verdict('treap', `${fmt(indexUpdate, 2)} µs update+rank (naive at 100,000: ${fmt(naiveUpdate)} µs)`, x(naiveUpdate / indexUpdate, 0), indexUpdate <= 4);
}

async function httpBench() {
  header('HTTP: the event route over loopback (node:http server + toNodeListener; node:http keep-alive client, 16 in flight) vs in-process');
  const http = await import('node:http');
  const { createHttpHandler, toNodeListener } = await import('../../src/http.js');
  const config = oneMetric();
  const engine = createEngine({ config, store: createMemoryStore() });
  const server = http.createServer(toNodeListener(createHttpHandler(engine, { apiKeys: ['bench'] })));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  const N = 20_000;
  let next = 0;
  // node:http's own client with keep-alive: lighter than fetch, so more of the 2 cores go to the server.
  const agent = new http.Agent({ keepAlive: true, maxSockets: 16 });
  const send = (i: number) =>
    new Promise<void>((resolve, reject) => {
      const body = JSON.stringify({ user: { id: `u${i % 1000}` }, value: 1, attributes: { device: 'ios' } });
      const req = http.request(
        { host: '127.0.0.1', port, path: '/v1/metrics/lessons/event', method: 'POST', agent, headers: { 'x-api-key': 'bench', 'content-type': 'application/json', 'idempotency-key': `k${i}`, 'content-length': Buffer.byteLength(body) } },
        (res) => {
          if (res.statusCode !== 201) reject(new Error(`status ${res.statusCode}`));
          res.resume();
          res.on('end', () => resolve());
        },
      );
      req.on('error', reject);
      req.end(body);
    });
  const worker = async () => {
    while (next < N) await send(next++);
  };
  const t0 = performance.now();
  await Promise.all(Array.from({ length: 16 }, worker));
  const httpRate = N / ((performance.now() - t0) / 1000);
  server.close();
  agent.destroy();
  const inProcess = createEngine({ config, store: createMemoryStore() });
  let i = 0;
  const direct = await rateOf(N, () => {
    const n = i++;
    return inProcess.recordEvent('lessons', { user: { id: `u${n % 1000}` }, value: 1, attributes: { device: 'ios' } }, { idempotencyKey: `k${n}` });
  });
  console.log(`HTTP event route: ${fmt(httpRate)} requests/s (client and server share this machine's 2 cores)`);
  console.log(`in-process recordEvent, same events: ${fmt(direct)} events/s`);
}

// ---------------------------------------------------------------------------------------------------------
// PostgreSQL and Redis

interface WorkerReport {
  applied: number;
  replayed: number;
  /** Version or idempotency conflicts the store reported, each retried by the engine (engine workers only). */
  conflicts?: number;
  /** The worker's CPU time over its timed calls, in ms. */
  cpuMs?: number;
  p50: number;
  p99: number;
  seconds: number;
}
interface RunFigures {
  rate: number;
  calls: number;
  /** Conflicts the store reported, all workers together (engine runs only). */
  conflicts?: number;
  /** CPU per call of the worker processes, and of the rest of the machine in the same window (µs). */
  workerCpuUs?: number;
  restCpuUs?: number;
  /** The machine's busy fraction (all cores) from the start of the timed calls to the last worker's end. */
  busy?: number;
  p50: number;
  p99: number;
}
const describe = (f: RunFigures) =>
  `${fmt(f.rate)} calls/s (${fmt(f.calls)} calls); p50 ${fmt(f.p50, 1)} ms, p99 ${fmt(f.p99, 1)} ms` +
  (f.workerCpuUs !== undefined ? `; CPU per call: ${fmt(f.workerCpuUs, 0)} µs in the workers${f.restCpuUs !== undefined ? `, ${fmt(f.restCpuUs, 0)} µs in the rest of the machine (the database server, mostly)` : ''}` : '') +
  (f.busy !== undefined ? `; machine ${fmt(f.busy * 100, 0)}% busy` : '') +
  (f.conflicts !== undefined ? `; ${fmt(f.conflicts)} conflicts retried` : '');

/** The machine's busy CPU time so far in ms (all cores; /proc/stat), or null where there is none. */
function machineBusyMs(): number | null {
  try {
    const cpu = readFileSync('/proc/stat', 'utf8').split('\n')[0]?.trim().split(/\s+/).slice(1).map(Number) ?? [];
    // user nice system idle iowait irq softirq (steal, time another VM had, left out): busy is all but idle and iowait.
    const busy = cpu.slice(0, 7).reduce((s, v, i) => (i === 3 || i === 4 ? s : s + v), 0);
    return (busy * 1000) / 100; // USER_HZ is 100 on Linux
  } catch {
    return null;
  }
}
const benchSchema = (tag: string) => `bench_${Date.now().toString(36)}_${tag}`;

async function withPool<T>(url: string, fn: (pool: import('pg').Pool) => Promise<T>): Promise<T> {
  const pg = (await import('pg')).default;
  const pool = new pg.Pool({ connectionString: url, max: 8 });
  try {
    return await fn(pool);
  } finally {
    await pool.end();
  }
}

/**
 * Warns when the database holds many schemas (test runs leave one per test behind): each call of a schema's
 * function looks its name up through all of them, which costs the server some 120 µs per call at 20,000.
 */
async function warnOfCrowdedDatabase(url: string) {
  const n = await withPool(url, async (pool) => Number((await pool.query<{ n: string }>('SELECT count(*) AS n FROM pg_namespace')).rows[0]?.n ?? 0));
  if (n > 1000) console.log(`!! this database holds ${fmt(n)} schemas: function name look-ups slow every call down; measure in a fresh database (CREATE DATABASE ...)`);
}

/**
 * A database made for one section on `given`'s server, and how to drop it: so that what other runs left in
 * `given`'s database (test runs leave a schema per test) does not weigh on the figures. Without the
 * privilege to create one, `given` itself (with a warning when it is crowded).
 */
async function benchDatabase(given: string): Promise<{ url: string; drop: () => Promise<void> }> {
  const name = `laurel_bench_${Date.now().toString(36)}`;
  try {
    await withPool(given, (pool) => pool.query(`CREATE DATABASE "${name}"`));
  } catch (error) {
    console.log(`(could not create a database for this section: ${(error as Error).message}; measuring in the given one)`);
    await warnOfCrowdedDatabase(given);
    return { url: given, drop: async () => undefined };
  }
  const url = new URL(given);
  url.pathname = `/${name}`;
  return { url: url.toString(), drop: () => withPool(given, (pool) => pool.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`)).then(() => undefined) };
}

async function dropSchema(url: string, schema: string) {
  await withPool(url, (pool) => pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`));
}

async function dropRedisPrefix(redisUrl: string, prefix: string) {
  const Redis = (await import('ioredis')).default;
  const redis = new Redis(redisUrl);
  let cursor = '0';
  do {
    const [next, keys] = (await redis.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000)) as [string, string[]];
    cursor = next;
    if (keys.length) await redis.del(...keys);
  } while (cursor !== '0');
  await redis.quit();
}

/**
 * Runs bench worker scripts (test/bench/workers) in `processes` processes and combines their reports. The
 * workers start their timed calls together: each warms up, says `@@ready`, and gets `go` once all have
 * (workers/shared.ts, `startTogether`).
 */
async function runWorkers(url: string, processes: number, args: (w: number) => string[]): Promise<RunFigures> {
  const children = Array.from({ length: processes }, (_, w) => spawn(process.execPath, ['--import', 'tsx', ...args(w)], { env: { ...process.env, LAUREL_PG_URL: url }, stdio: ['pipe', 'pipe', 'pipe'] }));
  let ready = 0;
  let busy0: number | null = null;
  let wall0 = 0;
  const outs = await Promise.all(
    children.map(
      (child) =>
        new Promise<string>((resolve, reject) => {
          let out = '';
          let err = '';
          let said = false;
          child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
            out += chunk;
            if (said || !out.includes('@@ready\n')) return;
            said = true;
            // The last worker ready starts them all.
            if (++ready === processes) {
              busy0 = machineBusyMs();
              wall0 = performance.now();
              for (const c of children) c.stdin.end('go\n');
            }
          });
          child.stderr.setEncoding('utf8').on('data', (chunk: string) => (err += chunk));
          child.on('error', reject);
          child.on('close', (code, signal) => {
            if (code === 0) resolve(out);
            else {
              for (const c of children) c.kill();
              reject(new Error(`bench worker ${args(0)[0]} ended with ${signal ?? `exit code ${code}`}: ${err.trim()}`));
            }
          });
        }),
    ),
  );
  const reports = outs.map((o) => JSON.parse(o.trim().split('\n').pop() as string) as WorkerReport);
  const calls = reports.reduce((s, r) => s + r.applied + r.replayed, 0);
  const figures: RunFigures = { calls, rate: calls / Math.max(...reports.map((r) => r.seconds)), p50: median(reports.map((r) => r.p50)), p99: Math.max(...reports.map((r) => r.p99)) };
  if (reports.every((r) => r.conflicts !== undefined)) figures.conflicts = reports.reduce((s, r) => s + (r.conflicts as number), 0);
  // CPU per call: the workers' own (engine, driver), and the rest of the machine's busy time over the same
  // window (the database server, mostly, and the workers' exit; Linux only).
  const busy1 = machineBusyMs();
  if (busy0 !== null && busy1 !== null && cpus().length > 0) figures.busy = (busy1 - busy0) / ((performance.now() - wall0) * cpus().length);
  if (reports.every((r) => r.cpuMs !== undefined)) {
    figures.workerCpuUs = (reports.reduce((s, r) => s + (r.cpuMs as number), 0) * 1000) / calls;
    if (busy0 !== null && busy1 !== null) figures.restCpuUs = Math.max(0, ((busy1 - busy0) * 1000) / calls - figures.workerCpuUs);
  }
  return figures;
}

/** recordEvent through `processes` worker processes, 8 calls in flight each, over `calls` planned calls. */
async function engineRun(url: string, processes: number, calls: number, redisPrefix?: string): Promise<RunFigures> {
  const schema = benchSchema(`${processes}${redisPrefix ? 'r' : ''}`);
  if (url !== 'pglite') {
    const { createPostgresStore } = await import('../../src/postgres.js');
    await withPool(url, (pool) => createPostgresStore({ client: pool, schema }).migrate());
  }
  try {
    return await runWorkers(url, processes, (w) => ['test/bench/workers/record.ts', String(w), schema, redisPrefix ?? '-', String(processes), String(calls)]);
  } finally {
    if (url !== 'pglite') await dropSchema(url, schema);
    if (redisPrefix) await dropRedisPrefix(process.env.LAUREL_REDIS_URL as string, redisPrefix);
  }
}

/**
 * The floor (test/bench/workers/floor.ts): the same planned calls, each writing the rows a recordEvent writes,
 * at their real sizes, into a migrated Laurel schema with one plain statement; 8 in flight, one process.
 */
async function floorRun(url: string, calls: number): Promise<RunFigures> {
  const schema = benchSchema('floor');
  const { createPostgresStore } = await import('../../src/postgres.js');
  await withPool(url, (pool) => createPostgresStore({ client: pool, schema }).migrate());
  try {
    return await runWorkers(url, 1, () => ['test/bench/workers/floor.ts', schema, String(calls)]);
  } finally {
    await dropSchema(url, schema);
  }
}

/** The bare baseline: the same planned calls, each one upsert statement, 8 in flight per process (one by default). */
async function bareRun(url: string, calls: number, processes = 1): Promise<RunFigures> {
  const schema = benchSchema('bare');
  await withPool(url, async (pool) => {
    await pool.query(`CREATE SCHEMA "${schema}"`);
    await pool.query(`CREATE TABLE "${schema}".bare_totals (user_id text PRIMARY KEY, total bigint NOT NULL)`);
  });
  try {
    return await runWorkers(url, processes, (w) => ['test/bench/workers/bare.ts', schema, String(calls), String(processes), String(w)]);
  } finally {
    await dropSchema(url, schema);
  }
}

async function storage() {
  const CALLS = 10_000;
  header(`recordEvent on PostgreSQL (the multi-process workload: ${fmt(CALLS)} calls over 200 users, 20% duplicate keys, 8 in flight per process)`);
  console.log(`PGlite (in-process WASM Postgres), 1 process, 2,000 calls: ${describe(await engineRun('pglite', 1, 2000))}`);
  const given = process.env.LAUREL_PG_URL;
  if (!given) {
    console.log('(set LAUREL_PG_URL for the PostgreSQL server figures)');
    for (const id of ['pgRatio', 'pgP99', 'pgScale', 'pgFloor'] as const) notMeasured(id, 'LAUREL_PG_URL not set');
    return;
  }
  const db = await benchDatabase(given);
  try {
    await storageIn(db.url, CALLS);
  } finally {
    await db.drop();
  }
}

/** The PostgreSQL server figures of {@link storage}, in the database at `url`. */
async function storageIn(url: string, CALLS: number) {
  // The bare loop runs just before and just after the engine's 1-process run; its figures are the mean of
  // the two, so that load on the shared server during the engine run weighs on both sides alike.
  const bareBefore = await bareRun(url, CALLS);
  console.log(`bare upsert loop (one INSERT ... ON CONFLICT DO UPDATE per call, pg Pool), 1 process, before: ${describe(bareBefore)}`);
  const one = await engineRun(url, 1, CALLS);
  console.log(`recordEvent, PostgreSQL server, 1 process:   ${describe(one)}`);
  const bareAfter = await bareRun(url, CALLS);
  console.log(`bare upsert loop, after:                     ${describe(bareAfter)}`);
  const mean = (a: number, b: number) => (a + b) / 2;
  const bare = { calls: CALLS, rate: mean(bareBefore.rate, bareAfter.rate), p50: mean(bareBefore.p50, bareAfter.p50), p99: mean(bareBefore.p99, bareAfter.p99) };
  const floor = await floorRun(url, CALLS);
  console.log(`floor (the rows of each call, one plain statement into Laurel's tables), 1 process: ${describe(floor)}`);
  // 4 processes against 1 in the order 1 4 4 1 (the first 1-process run is the one above), so that a drift of
  // the machine's speed over the section weighs on both alike; each side is the mean of its two runs.
  const four = await engineRun(url, 4, CALLS);
  console.log(`recordEvent, PostgreSQL server, 4 processes: ${describe(four)}`);
  const fourAgain = await engineRun(url, 4, CALLS);
  console.log(`recordEvent, PostgreSQL server, 4 processes, again: ${describe(fourAgain)}`);
  const oneAgain = await engineRun(url, 1, CALLS);
  console.log(`recordEvent, PostgreSQL server, 1 process, again:   ${describe(oneAgain)}`);
  if (process.env.LAUREL_REDIS_URL) console.log(`recordEvent, PostgreSQL server + Redis ranks, 4 processes: ${describe(await engineRun(url, 4, CALLS, `bench_${Date.now().toString(36)}:`))}`);
  // How the machine itself scales: the bare loop with 4 processes (the same calls, shared out as above).
  const bareFour = await bareRun(url, CALLS, 4);
  console.log(`bare upsert loop, 4 processes:               ${describe(bareFour)}`);
  const ratio = bare.rate / one.rate;
  verdict('pgRatio', `${fmt(one.rate)} calls/s vs bare upsert ${fmt(bare.rate)} calls/s (mean of 2 runs)`, x(ratio), ratio <= 2);
  verdict('pgP99', `p99 ${fmt(one.p99, 1)} ms (p50 ${fmt(one.p50, 1)} ms; bare p99 ${fmt(bare.p99, 1)} ms)`, x(one.p99 / bare.p99, 1), one.p99 <= 10);
  verdict('pgFloor', `floor ${fmt(floor.rate)} calls/s vs bare upsert ${fmt(bare.rate)} calls/s; recordEvent ${fmt(one.rate)} calls/s is ${x(floor.rate / one.rate)} below the floor`, x(bare.rate / floor.rate), null);
  const fourRate = mean(four.rate, fourAgain.rate);
  const oneRate = mean(one.rate, oneAgain.rate);
  verdict('pgScale', `4 processes ${fmt(fourRate)} calls/s vs 1 process ${fmt(oneRate)} calls/s (means of 2 runs each, in the order 1 4 4 1); the bare loop: 4 processes ${x(bareFour.rate / bare.rate)} of 1`, x(fourRate / oneRate), fourRate >= oneRate);
}

interface BatchEvent {
  metricKey: string;
  user: { id: string };
  value: number;
  attributes?: Record<string, string>;
  idempotencyKey?: string;
}
type BatchOutcome = { ok: true; response: unknown } | { ok: false; error: unknown };

async function batch() {
  header('recordEvents on PostgreSQL: batches of 100 events over 100 users vs single recordEvent calls (same server, config and users)');
  const given = process.env.LAUREL_PG_URL;
  if (!given) {
    console.log('(set LAUREL_PG_URL for the batch figures)');
    notMeasured('batch', 'LAUREL_PG_URL not set');
    notMeasured('batchFloor', 'LAUREL_PG_URL not set');
    return;
  }
  const db = await benchDatabase(given);
  try {
    await batchIn(db.url);
  } finally {
    await db.drop();
  }
}

/** The figures of {@link batch}, in the database at `url`. */
async function batchIn(url: string) {
  const { createPostgresStore } = await import('../../src/postgres.js');
  const { multiConfig } = await import('./workers/shared.js');
  const schema = benchSchema('batch');
  await withPool(url, async (pool) => {
    const store = createPostgresStore({ client: pool, schema });
    await store.migrate();
    try {
      const engine = createEngine({ config: multiConfig, store, retry: { attempts: 100, baseDelayMs: 2 } });
      const USERS = 100;
      let k = 0;
      const single = () => {
        const n = k++;
        return engine.recordEvent('lessons', { user: { id: `b${n % USERS}` }, value: 1 + (n % 3) }, { idempotencyKey: `s${n}` });
      };
      await rateOf(500, single); // warm-up (creates the users)
      const oneInFlight = await rateOf(2000, single);
      const eightCalls = 4000;
      let done = 0;
      const t0 = performance.now();
      await Promise.all(Array.from({ length: 8 }, async () => {
        while (done < eightCalls) {
          done++;
          await single();
        }
      }));
      const eightInFlight = eightCalls / ((performance.now() - t0) / 1000);
      console.log(`recordEvent, 1 call in flight:   ${fmt(oneInFlight)} events/s`);
      console.log(`recordEvent, 8 calls in flight:  ${fmt(eightInFlight)} events/s`);
      const best = Math.max(oneInFlight, eightInFlight);
      const recordEvents = (engine as unknown as { recordEvents?: (events: readonly BatchEvent[]) => Promise<BatchOutcome[]> }).recordEvents;
      if (typeof recordEvents !== 'function') {
        console.log('recordEvents: not available');
        notMeasured('batch', `recordEvents: not available (single calls: ${fmt(oneInFlight)}/s at 1 in flight, ${fmt(eightInFlight)}/s at 8)`);
        return;
      }
      let b = 0;
      const events = (): BatchEvent[] => {
        const n = b++;
        return Array.from({ length: USERS }, (_, u) => ({ metricKey: 'lessons', user: { id: `b${u}` }, value: 1 + ((n + u) % 3), idempotencyKey: `batch-${n}-${u}` }));
      };
      let failed = 0;
      let firstError: unknown;
      const oneBatch = async () => {
        const out = await recordEvents.call(engine, events());
        for (const o of out) if (!o.ok) {
          failed++;
          firstError ??= o.error;
        }
      };
      for (let i = 0; i < 5; i++) await oneBatch(); // warm-up
      failed = 0;
      const BATCHES = 50;
      const batches = await rateOf(BATCHES, oneBatch);
      const rate = batches * USERS;
      console.log(`recordEvents, batches of ${USERS} (1 batch in flight): ${fmt(batches, 1)} batches/s = ${fmt(rate)} events/s; ${failed} of ${BATCHES * USERS} events refused${firstError ? ` (first: ${String((firstError as Error).message ?? firstError)})` : ''}`);
      console.log(`ratio to single calls: ${x(rate / oneInFlight, 1)} (1 in flight), ${x(rate / eightInFlight, 1)} (8 in flight)`);
      verdict('batch', `${fmt(rate)} events/s in batches vs single calls ${fmt(oneInFlight)}/s (1 in flight), ${fmt(eightInFlight)}/s (8 in flight)${failed ? `; ${failed} refused` : ''}`, x(rate / best, 1), rate / best >= 10 && failed === 0);
      // The floor of a batch: the rows of the same 100 events, written by one plain statement a batch.
      const floorRate = await batchFloorRate(pool, USERS, BATCHES);
      console.log(`floor, the rows of batches of ${USERS} as one plain statement (1 batch in flight): ${fmt(floorRate)} events/s`);
      verdict('batchFloor', `floor ${fmt(floorRate)} events/s in batches vs single calls ${fmt(best)}/s (best); recordEvents ${fmt(rate)} events/s is ${x(floorRate / rate)} below it`, x(floorRate / best, 1), null);
    } finally {
      await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    }
  });
}

/**
 * Events per second of the batch floor (test/bench/workers/floor-rows.ts): batches of `users` events (users
 * b0.., one event each, as the batch section's), each written by one plain statement into a migrated schema
 * of its own; `batches` timed after 5 untimed, one in flight.
 */
async function batchFloorRate(pool: import('pg').Pool, users: number, batches: number): Promise<number> {
  const { createPostgresStore } = await import('../../src/postgres.js');
  const { floorStatement, sampleRows } = await import('./workers/floor-rows.js');
  const schema = benchSchema('batchfloor');
  await createPostgresStore({ client: pool, schema }).migrate();
  try {
    const sample = await sampleRows();
    const text = floorStatement(schema);
    const ids = Array.from({ length: users }, (_, u) => `b${u}`);
    const totals = new Array<number>(users).fill(0);
    let n = 0;
    const oneBatch = async () => {
      const b = n++;
      const values = ids.map((_, u) => 1 + ((b + u) % 3));
      values.forEach((v, u) => (totals[u] = (totals[u] as number) + v));
      const keys = ids.map((_, u) => `batch-${b}-${u}`);
      await pool.query({ name: `laurel_bench_batch_floor_${schema}`, text, values: [ids, ids.map((_, u) => `f${b}-${u}`), new Date().toISOString(), values, [...totals], keys, sample.state, sample.metricData, sample.awardData, sample.payloads] });
    };
    for (let i = 0; i < 5; i++) await oneBatch();
    return (await rateOf(batches, oneBatch)) * users;
  } finally {
    await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  }
}

async function redisBench() {
  header('Redis rank index at 1,000,000 entries: index.apply (update+rank) vs a bare ZADD + ZRANK pipeline, same server and set size');
  const redisUrl = process.env.LAUREL_REDIS_URL;
  if (!redisUrl) {
    console.log('(set LAUREL_REDIS_URL for the Redis rank-index figures)');
    notMeasured('redis', 'LAUREL_REDIS_URL not set');
    return;
  }
  const Redis = (await import('ioredis')).default;
  const { createRedisRankIndex } = await import('../../src/redis.js');
  const redis = new Redis(redisUrl);
  const prefix = `bench_${Date.now().toString(36)}:`;
  try {
    const index = createRedisRankIndex({ redis, prefix, timeoutMs: 10_000 });
    const name = 'lb|bench|2026-01-01|';
    const bareKey = `${prefix}bare:z`;
    const N = 1_000_000;
    // Fill the index through the index itself as rebuildRankIndex does (unranked writes: the same sorted set
    // and hash, no rank lookups or rank-history rows), applies of 5,000 writes, 4 in flight.
    let t0 = performance.now();
    const CHUNK = 5000;
    let nextChunk = 0;
    await Promise.all(
      Array.from({ length: 4 }, async () => {
        while (nextChunk < N) {
          const b = nextChunk;
          nextChunk += CHUNK;
          await index.apply(Array.from({ length: CHUNK }, (_, i) => ({ index: name, userId: `u${b + i}`, value: ((b + i) * 7919) % 100_003, reachedAt: new Date(1_700_000_000_000 + b + i).toISOString(), date: '2026-01-01', version: 1, unranked: true })));
        }
      }),
    );
    console.log(`filled the index with ${fmt(N)} entries in ${fmt((performance.now() - t0) / 1000, 1)} s`);
    // The bare sorted set of the same size: the same users and values, filled with plain ZADDs.
    t0 = performance.now();
    for (let b = 0; b < N; b += 10_000) {
      const args: (string | number)[] = [];
      for (let i = b; i < b + 10_000; i++) args.push(-(((i) * 7919) % 100_003), `u${i}`);
      await redis.zadd(bareKey, ...args);
    }
    console.log(`filled the bare sorted set with ${fmt(await redis.zcard(bareKey))} members in ${fmt((performance.now() - t0) / 1000, 1)} s`);
    const applyTimes: number[] = [];
    const bareTimes: number[] = [];
    const pages: number[] = [];
    const ROUNDS = 3000;
    for (let i = -300; i < ROUNDS; i++) {
      const u = `u${((i + 300) * 104729) % N}`;
      const s = performance.now();
      await index.apply([{ index: name, userId: u, value: 200_000 + i, reachedAt: new Date(1_800_000_000_000 + i).toISOString(), date: '2026-01-02', version: 2 + i + 300 }]);
      const a = performance.now() - s;
      const s2 = performance.now();
      await redis.pipeline().zadd(bareKey, -(200_000 + i), u).zrank(bareKey, u).exec();
      const bt = performance.now() - s2;
      if (i < 0) continue; // warm-up
      applyTimes.push(a);
      bareTimes.push(bt);
      if (i % 5 === 0) {
        const p = performance.now();
        await index.readRange(name, 500_000, 10);
        pages.push(performance.now() - p);
      }
    }
    const am = median(applyTimes) * 1000;
    const bm = median(bareTimes) * 1000;
    console.log(`index.apply update+rank (one Lua script, one round trip): median ${fmt(am, 0)} µs, p99 ${fmt(percentile(applyTimes, 0.99) * 1000, 0)} µs`);
    console.log(`bare pipeline ZADD + ZRANK (one round trip):              median ${fmt(bm, 0)} µs, p99 ${fmt(percentile(bareTimes, 0.99) * 1000, 0)} µs`);
    console.log(`index.readRange, page of 10 at offset 500,000: median ${fmt(median(pages) * 1000, 0)} µs`);
    verdict('redis', `apply ${fmt(am, 0)} µs vs bare pipeline ${fmt(bm, 0)} µs (medians)`, x(am / bm), am / bm <= 1.5);
  } finally {
    await redis.quit();
    await dropRedisPrefix(redisUrl, prefix);
  }
}

// ---------------------------------------------------------------------------------------------------------

const childRole = process.env.LAUREL_BENCH_CHILD;
if (childRole) {
  // A child process (see `child`): its output goes to the parent, its figures as one JSON line.
  if (childRole === 'memory' || childRole === 'pure') {
    await (childRole === 'memory' ? memoryMeasure() : pureMeasure());
    console.log(`@@rows ${JSON.stringify([...rows])}`);
  } else if (childRole.startsWith('boards:')) {
    console.log(`@@boards ${JSON.stringify(await boardsMeasure(Number(childRole.slice('boards:'.length))))}`);
  } else {
    throw new Error(`unknown child role ${childRole}`);
  }
  process.exit(0);
}

const started = performance.now();
const date = new Date().toISOString();
const load = () => loadavg().map((l) => l.toFixed(1)).join(' ');
const loadAtStart = load();
console.log(`Laurel bench: node ${process.version}, ${cpus().length} cores, ${date}, section ${only ?? 'all'}; load average ${loadAtStart}`);
const sections: Record<Section, () => unknown> = {
  foundation,
  pure,
  history,
  idle,
  boards,
  memory,
  points: summaries,
  leaderboards,
  http: httpBench,
  storage,
  batch,
  redis: redisBench,
};
for (const s of SECTIONS) {
  if (!runs(s)) continue;
  try {
    await sections[s]();
  } catch (error) {
    console.log(`\n!! section ${s} failed: ${(error as Error)?.stack ?? String(error)}`);
    for (const [id, t] of Object.entries(TARGETS) as [TargetId, (typeof TARGETS)[TargetId]][]) {
      if (t.section === s && !rows.has(id)) notMeasured(id, `section failed: ${String((error as Error)?.message ?? error).split('\n')[0]}`);
    }
  }
}

const minutes = (performance.now() - started) / 60_000;
header(`Summary (${date.slice(0, 10)}, node ${process.version}, \`npm run bench${only ? ` ${only}` : ''}\`, ${fmt(minutes, 1)} min)`);
console.log(`\n${cpus().length} cores; load average ${loadAtStart} at the start, ${load()} at the end. Each ratio is measured against its baseline in this run; in-process rates are per second of CPU time.\n`);
console.log('| Target | Measured | Ratio | Verdict |');
console.log('| --- | --- | --- | --- |');
const cell = (s: string) => s.replaceAll('|', '\\|');
for (const [id, t] of Object.entries(TARGETS) as [TargetId, (typeof TARGETS)[TargetId]][]) {
  const row = rows.get(id);
  if (!row) continue;
  console.log(`| ${cell(t.text)} | ${cell(row.measured)} | ${cell(row.ratio === '–' ? '–' : `${row.ratio} (${t.ratio})`)} | ${row.verdict} |`);
}
if (rows.size === 0) console.log('| (no targets in the sections run) | | | |');
const counts = [...rows.values()].reduce<Record<string, number>>((c, r) => ({ ...c, [r.verdict]: (c[r.verdict] ?? 0) + 1 }), {});
console.log(`\n${Object.entries(counts).map(([v, n]) => `${n} ${v}`).join(', ')}`);
