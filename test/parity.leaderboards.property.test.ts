/**
 * Issue 14, leaderboards: runs follow each user's local calendar (docs/rules.md section 7). For any events of
 * any users in any zones (zone changes included, westwards as far as UTC+14 to UTC-12), a user's value in each
 * run of a daily and a weekly board without a zone is the sum of their events whose local date, in the zone
 * the user had at that event, lies in the run, and every run's ranking equals a naive recomputation.
 */
import fc from 'fast-check';
import Redis from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { createEngine, defineConfig, withRankIndex, type Store } from '../src/index.js';
import { createMemoryStore } from '../src/memory.js';
import { createRedisRankIndex } from '../src/redis.js';
import { sequentialIds } from '../src/testing/index.js';
import { REDIS_URL, uniq } from './servers.js';
import { freshStore } from './stores.js';

const config = defineConfig({
  timeZone: 'UTC',
  metrics: [{ key: 'm', name: 'M' }],
  leaderboards: [
    { key: 'daily', name: 'Daily', rankBy: 'metric', metricKey: 'm', start: '2026-01-01', runUnit: 'day' },
    { key: 'weekly', name: 'Weekly', rankBy: 'metric', metricKey: 'm', start: '2026-01-01', runUnit: 'day', runInterval: 7 },
  ],
});

const ZONES = ['Pacific/Kiritimati', 'Asia/Tokyo', 'Asia/Kathmandu', 'Europe/Paris', 'UTC', 'America/St_Johns', 'America/Los_Angeles', 'Pacific/Pago_Pago', 'Etc/GMT+12'];
// Ids whose JavaScript string order differs from a locale's (upper case first, `u10` before `u9`).
const USERS = ['u9', 'u10', 'U', 'b'];
const MINUTE = 60_000;

// The model's own calendar: Intl directly, not the library's calendar module.
const formatters = new Map<string, Intl.DateTimeFormat>();
function localDate(ms: number, tz: string): string {
  let f = formatters.get(tz);
  if (!f) formatters.set(tz, (f = new Intl.DateTimeFormat('en-CA', { timeZone: tz, year: 'numeric', month: '2-digit', day: '2-digit' })));
  return f.format(ms);
}
const dayNumber = (date: string) => Date.UTC(Number(date.slice(0, 4)), Number(date.slice(5, 7)) - 1, Number(date.slice(8, 10))) / 86_400_000;
const dateOf = (n: number) => new Date(n * 86_400_000).toISOString().slice(0, 10);
const START = dayNumber('2026-01-01');
const runOf = (board: 'daily' | 'weekly', date: string) => (board === 'daily' ? date : dateOf(START + Math.floor((dayNumber(date) - START) / 7) * 7));

interface Entry {
  userId: string;
  value: number;
  reachedAt: string;
}
/** Value desc, then who reached it first, then user id in JavaScript string order. */
const naiveOrder = (a: Entry, b: Entry) => b.value - a.value || (a.reachedAt < b.reachedAt ? -1 : a.reachedAt > b.reachedAt ? 1 : a.userId < b.userId ? -1 : a.userId > b.userId ? 1 : 0);

const arbitrary = fc.record({
  events: fc.array(
    fc.record({
      user: fc.nat({ max: USERS.length - 1 }),
      // A new zone for the user with this event (null: keep theirs; the configuration's, UTC, until given).
      zone: fc.option(fc.constantFrom(...ZONES), { freq: 3 }),
      value: fc.integer({ min: -3, max: 9 }),
      gap: fc.constantFrom(0, MINUTE, 37 * MINUTE, 2 * 60 * MINUTE, 5 * 60 * MINUTE, 11 * 60 * MINUTE, 26 * 60 * MINUTE),
    }),
    // Long runs of events, so that a user often moves west across a run boundary back into a run they count in.
    { minLength: 5, maxLength: 40, size: 'max' },
  ),
  start: fc.integer({ min: 0, max: 48 * 60 }),
});

type Input = typeof arbitrary extends fc.Arbitrary<infer T> ? T : never;

async function check(store: Store, { events, start }: Input): Promise<void> {
  let now = Date.parse('2026-01-03T00:00:00Z') + start * MINUTE;
  const engine = createEngine({ config, store, clock: () => new Date(now), newId: sequentialIds() });
  const zones = new Map<string, string>();
  // board -> run start -> user -> entry
  const model = { daily: new Map<string, Map<string, Entry>>(), weekly: new Map<string, Map<string, Entry>>() };
  const ranked = (board: 'daily' | 'weekly', run: string) => [...(model[board].get(run)?.values() ?? [])].filter((e) => e.value > 0).sort(naiveOrder);
  for (const e of events) {
    now += e.gap;
    const userId = USERS[e.user] as string;
    if (e.zone !== null) zones.set(userId, e.zone);
    const r = await engine.recordEvent('m', { user: e.zone === null ? { id: userId } : { id: userId, tz: e.zone }, value: e.value });
    const date = localDate(now, zones.get(userId) ?? 'UTC');
    for (const board of ['daily', 'weekly'] as const) {
      const run = runOf(board, date);
      let runs = model[board].get(run);
      if (!runs) model[board].set(run, (runs = new Map()));
      const entry = runs.get(userId) ?? { userId, value: 0, reachedAt: '' };
      if (e.value === 0) {
        expect(r.leaderboards[board]).toBeUndefined();
        continue;
      }
      entry.value += e.value;
      entry.reachedAt = new Date(now).toISOString();
      runs.set(userId, entry);
      const list = ranked(board, run);
      const rank = list.findIndex((x) => x.userId === userId);
      expect(r.leaderboards[board]).toMatchObject({ start: run, value: entry.value, rank: rank < 0 ? null : rank + 1 });
    }
  }
  for (const board of ['daily', 'weekly'] as const) {
    for (const [run, users] of model[board]) {
      const page = await engine.getLeaderboard(board, { run, limit: 100 });
      expect(page.run.start).toBe(run);
      expect(page.rankings.map((x) => [x.userId, x.rank, x.value])).toEqual(ranked(board, run).map((x, i) => [x.userId, i + 1, x.value]));
      for (const [userId, entry] of users) expect((await engine.getUserLeaderboard(userId, board, { run, numEvents: 0 })).value).toBe(entry.value > 0 ? entry.value : null);
    }
  }
}

const redis = REDIS_URL ? new Redis(REDIS_URL) : null;
afterAll(async () => {
  await redis?.quit();
});

describe('leaderboard runs follow each user\'s local calendar (property)', () => {
  it('memory store: each run value is the sum of the user\'s events whose local date lies in it; ranks equal a naive recomputation', async () => {
    await fc.assert(fc.asyncProperty(arbitrary, (input) => check(createMemoryStore(), input)), { numRuns: 50 });
  }, 120_000);

  it('PostgreSQL: each run value is the sum of the user\'s events whose local date lies in it; ranks equal a naive recomputation', async () => {
    await fc.assert(fc.asyncProperty(arbitrary, async (input) => check(await freshStore('postgres'), input)), { numRuns: 6 });
  }, 120_000);

  it.skipIf(!redis)('Redis rank index: each run value is the sum of the user\'s events whose local date lies in it; ranks equal a naive recomputation', async () => {
    await fc.assert(fc.asyncProperty(arbitrary, (input) => check(withRankIndex(createMemoryStore(), createRedisRankIndex({ redis: redis as Redis, prefix: `${uniq('lbzones')}:` })), input)), { numRuns: 8 });
  }, 120_000);
});
