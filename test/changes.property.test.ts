/**
 * Issue 15, property: for any sequence of calls and clock moves, the change events the outbox holds are
 * exactly those found by diffing each user's consecutive stored states (an oracle written independently of
 * core/changes.ts, reading only states and, for freezes, the commit's streak rows), each exactly once, in
 * commit order, with unique ids; on the memory store and PostgreSQL.
 */
import fc from 'fast-check';
import { expect, it } from 'vitest';
import { defineConfig, type StoredChange, type UserState } from '../src/index.js';
import { HOUR } from './helpers.js';
import { onEachStore, setupOn } from './stores.js';

const config = defineConfig({
  metrics: [{ key: 'lessons', name: 'Lessons' }],
  achievements: [
    { key: 'first', name: 'First', trigger: 'metric', metricKey: 'lessons', metricValue: 1 },
    { key: 'five', name: 'Five', trigger: 'metric', metricKey: 'lessons', metricValue: 5 },
    { key: 'streak-2', name: 'Two days', trigger: 'streak', streakLength: 2 },
  ],
  streak: { frequency: 'daily', freezes: { initial: 1, max: 2, autoEarn: { everyDays: 3, amount: 1 } } },
  pointsSystems: [
    { key: 'xp', name: 'XP', triggers: [{ key: 'per-lesson', type: 'metric', metricKey: 'lessons', metricThreshold: 1, points: 10 }], levels: [{ key: 'one', name: 'One', points: 20 }, { key: 'two', name: 'Two', points: 60 }] },
    { key: 'energy', name: 'Energy', maxPoints: 2, triggers: [{ key: 'refill', type: 'time', timeUnit: 'hour', timeInterval: 12, points: 1 }] },
  ],
  leaderboards: [{ key: 'all', name: 'All time', rankBy: 'metric', metricKey: 'lessons', start: '2026-01-01', maxParticipants: 2, timeZone: 'UTC' }],
  notifications: { streakReminder: { hoursBefore: 5 }, reactivation: { days: [1, 3] }, recap: { frequency: 'daily' }, achievement: {} },
});

type Action = { kind: 'event'; user: number; value: number } | { kind: 'advance'; ms: number } | { kind: 'sweep' } | { kind: 'freeze'; user: number };
const USERS = ['a', 'b', 'c'];
const ZONES = ['UTC', 'America/Los_Angeles', 'Asia/Kolkata'];

const arbAction: fc.Arbitrary<Action> = fc.oneof(
  { weight: 5, arbitrary: fc.record({ kind: fc.constant('event' as const), user: fc.nat(2), value: fc.integer({ min: 1, max: 3 }) }) },
  { weight: 4, arbitrary: fc.record({ kind: fc.constant('advance' as const), ms: fc.integer({ min: 1, max: 60 }).map((h) => h * HOUR) }) },
  { weight: 2, arbitrary: fc.constant({ kind: 'sweep' as const }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('freeze' as const), user: fc.nat(2) }) },
);

/** Rank of a user in the board (null beyond maxParticipants or absent). */
async function rankOf(engine: { getUserLeaderboard: (u: string, k: 'all') => Promise<{ rank: number | null }> }, userId: string): Promise<number | null> {
  return (await engine.getUserLeaderboard(userId, 'all')).rank;
}

/**
 * The oracle: what a commit from `before` to `after` changed, as `type|detail` strings. Streak freezes
 * consumed come from the commit's streak rows (`frozen`), as states alone cannot tell them from freezes
 * earned in the same commit.
 */
function expected(before: UserState | null, after: UserState, frozen: number, ranks: [number | null, number | null]): string[] {
  const out: string[] = [];
  for (const key of Object.keys(after.achievements)) {
    if (before?.achievements[key]) continue;
    out.push(`achievement.completed|${key}`, `emails.achievement_due|${key}`);
  }
  const bs = before?.streak;
  const as = after.streak;
  if (as) {
    const lost = as.lost ?? null;
    const hadLost = bs?.lost ?? null;
    const lostNow = lost !== null && JSON.stringify(lost) !== JSON.stringify(hadLost);
    if (lostNow) out.push(`streak.lost|${lost.length}`);
    if (frozen > 0) out.push(`streak.freeze_consumed|${frozen}|${as.freezes}`);
    if (bs && as.freezes - bs.freezes + frozen > 0) out.push(`streak.freeze_earned|${as.freezes - bs.freezes + frozen}|${as.freezes}`);
    if (as.length > 0 && as.lastExtendedAt !== (bs?.lastExtendedAt ?? null)) {
      if (!bs || bs.length === 0 || lostNow || bs.started !== as.started) out.push(`streak.started|${as.length}`);
      else if (as.length > bs.length) out.push(`streak.extended|${as.length}`);
    }
  }
  for (const system of ['xp', 'energy']) {
    const was = before?.points[system]?.total ?? 0;
    const now = after.points[system]?.total ?? 0;
    if (was === now) continue;
    out.push(`points.changed|${system}|${now}|${now - was}`);
    const level = (t: number) => (system !== 'xp' ? null : t >= 60 ? 'two' : t >= 20 ? 'one' : null);
    if (level(was) !== level(now)) out.push(`points.level_changed|${system}|${level(was)}|${level(now)}`);
  }
  const bv = before?.leaderboards.all?.value ?? null;
  const av = after.leaderboards.all?.value ?? null;
  if (av !== bv && ranks[0] !== ranks[1]) out.push(`leaderboard.rank_changed|${ranks[0]}|${ranks[1]}|${bv}|${av}`);
  const bn = before?.notices;
  const an = after.notices;
  if (an?.streakReminder !== undefined && an.streakReminder !== bn?.streakReminder) out.push(`emails.streak_reminder_due|${as?.length}`);
  if ((an?.reactivation ?? 0) > (bn?.reactivation ?? 0)) out.push(`emails.reactivation_due|${an?.reactivation}`);
  if (an?.recap !== undefined && an.recap !== bn?.recap) out.push(`emails.recap_due|${an.recap}`);
  return out.sort();
}

/** The same `type|detail` string of an emitted event. */
function described(e: StoredChange): string {
  const p = e.payload as Record<string, any>;
  switch (e.type) {
    case 'achievement.completed':
    case 'emails.achievement_due':
      return `${e.type}|${p.achievement.key}`;
    case 'streak.lost':
      return `${e.type}|${p.length}`;
    case 'streak.freeze_consumed':
      return `${e.type}|${p.consumed}|${p.freezes}`;
    case 'streak.freeze_earned':
      return `${e.type}|${p.earned}|${p.freezes}`;
    case 'streak.started':
    case 'streak.extended':
    case 'emails.streak_reminder_due':
      return `${e.type}|${p.streak.length}`;
    case 'points.changed':
      return `${e.type}|${p.points.key}|${p.points.total}|${p.points.added}`;
    case 'points.level_changed':
      return `${e.type}|${p.points.key}|${p.previousLevel?.key ?? null}|${p.newLevel?.key ?? null}`;
    case 'leaderboard.rank_changed':
      return `${e.type}|${p.leaderboard.previousRank}|${p.leaderboard.rank}|${p.leaderboard.previousValue}|${p.leaderboard.value}`;
    case 'emails.reactivation_due':
      return `${e.type}|${p.reactivation.messageNumber}`;
    case 'emails.recap_due':
      return `${e.type}|${p.recap.periodEnd}`;
    default:
      return e.type;
  }
}

onEachStore('change events equal the diff of consecutive states', (kind) => {
  it('for any calls and clock moves: each change once, in order', { timeout: 240_000 }, async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(arbAction, { minLength: 5, maxLength: 40 }), async (actions) => {
        const t = await setupOn(kind, config, '2026-01-05T10:00:00Z');
        const { engine, store } = t;
        for (const [i, id] of USERS.entries()) await engine.identifyUser({ id, tz: ZONES[i] as string });
        let cursor = (await engine.readChanges({ limit: 1000 })).next;
        const seen = new Set<string>();
        const knownRows = new Map<string, Set<string>>();
        for (const a of actions) {
          const before = new Map<string, { state: UserState; version: number } | null>();
          const ranksBefore = new Map<string, number | null>();
          for (const id of USERS) {
            before.set(id, await store.loadUser(id));
            ranksBefore.set(id, await rankOf(engine, id));
          }
          if (a.kind === 'event') await engine.recordEvent('lessons', { user: { id: USERS[a.user] as string }, value: a.value });
          else if (a.kind === 'advance') t.advance(a.ms);
          else if (a.kind === 'sweep') await engine.sweep();
          else await engine.grantFreezes(USERS[a.user] as string, 1);
          const page = await engine.readChanges({ after: cursor, limit: 1000 });
          cursor = page.next;
          for (const e of page.events) {
            expect(seen.has(e.id)).toBe(false);
            seen.add(e.id);
          }
          for (const id of USERS) {
            const b = before.get(id) ?? null;
            const after = await store.loadUser(id);
            const mine = page.events.filter((e) => e.userId === id);
            if (!after || after.version === b?.version) {
              expect(mine.map(described)).toEqual([]);
              continue;
            }
            // One commit per user per action here: the rows it wrote are those after the loaded version's.
            const rows = await store.readLedger({ userId: id, kind: 'streak', key: 'streak', order: 'asc' });
            const newRows = rows.filter((r) => (r.data as { usedFreeze?: boolean }).usedFreeze === true && !(b && knownRows.get(id)?.has(r.id)));
            for (const r of rows) (knownRows.get(id) ?? knownRows.set(id, new Set()).get(id))!.add(r.id);
            const ranks: [number | null, number | null] = [ranksBefore.get(id) ?? null, await rankOf(engine, id)];
            expect(mine.map(described).sort()).toEqual(expected(b?.state ?? null, after.state, newRows.length, ranks));
            // In the order they happened.
            const ats = mine.map((e) => e.at);
            expect(ats).toEqual([...ats].sort());
          }
        }
      }),
      { numRuns: kind === 'memory' ? 60 : 12 },
    );
  });
});
