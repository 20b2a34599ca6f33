/**
 * Issue 15: every change event's payload validates against its webhook schema in the hosted service's
 * OpenAPI description (vendored in test/fixtures/openapi), over a long random scenario (many users, clock
 * moves, operator operations, sweeps) that emits all 18 types, on the memory store and PostgreSQL.
 */
import fc from 'fast-check';
import { expect, it } from 'vitest';
import { CHANGE_TYPES, defineConfig } from '../src/index.js';
import { allChanges, DAY, HOUR } from './helpers.js';
import { openapi } from './openapi.js';
import { onEachStore, setupOn } from './stores.js';

const { ajv } = openapi('application.json');

/** The validator of one webhook type's request body. */
export function webhookValidator(type: string) {
  const validate = ajv.getSchema(`application.json#/webhooks/${type}/post/requestBody/content/application~1json/schema`);
  if (!validate) throw new Error(`no webhook schema for ${type}`);
  return (payload: unknown): string[] => (validate(payload) ? [] : (validate.errors ?? []).map((e) => `${e.instancePath} ${e.message}`));
}

export const notificationsConfig = defineConfig({
  metrics: [
    { key: 'lessons', name: 'Lessons' },
    { key: 'quiz', name: 'Quiz' },
  ],
  attributes: [{ key: 'plan', name: 'Plan', type: 'user' }],
  achievements: [
    { key: 'first', name: 'First lesson', trigger: 'metric', metricKey: 'lessons', metricValue: 1 },
    { key: 'ten', name: 'Ten lessons', trigger: 'metric', metricKey: 'lessons', metricValue: 10 },
    { key: 'streak-3', name: 'Three days', trigger: 'streak', streakLength: 3 },
  ],
  streak: { frequency: 'daily', freezes: { initial: 1, max: 2, autoEarn: { everyDays: 4, amount: 1 } } },
  pointsSystems: [
    {
      key: 'xp',
      name: 'XP',
      triggers: [
        { key: 'per-lesson', type: 'metric', metricKey: 'lessons', metricThreshold: 1, points: 10 },
        { key: 'streak', type: 'streak', streakLengthThreshold: 2, points: 20 },
      ],
      levels: [
        { key: 'bronze', name: 'Bronze', points: 20 },
        { key: 'silver', name: 'Silver', points: 100 },
      ],
      boosts: [{ key: 'launch', name: 'Launch week', multiplier: 2, start: '2026-01-07', end: '2026-01-09' }],
    },
    {
      key: 'energy',
      name: 'Energy',
      maxPoints: 3,
      triggers: [
        { key: 'signup', type: 'user_creation', points: 3 },
        { key: 'refill', type: 'time', timeUnit: 'hour', timeInterval: 6, points: 1 },
        { key: 'per-quiz', type: 'metric', metricKey: 'quiz', metricThreshold: 1, points: -1 },
      ],
    },
  ],
  leaderboards: [
    { key: 'daily', name: 'Daily lessons', rankBy: 'metric', metricKey: 'lessons', runUnit: 'day', runInterval: 1, start: '2026-01-01', maxParticipants: 50 },
    { key: 'xp-all', name: 'XP', rankBy: 'points', pointsSystemKey: 'xp', start: '2026-01-01', maxParticipants: 50, timeZone: 'UTC' },
  ],
  notifications: { streakReminder: { hoursBefore: 6 }, reactivation: { days: [2, 5] }, recap: { frequency: 'weekly' }, achievement: {}, leaderboardChangedMinutes: 60 },
});

const ZONES = ['UTC', 'America/New_York', 'Asia/Tokyo', 'Pacific/Kiritimati', 'Pacific/Pago_Pago'];

onEachStore('change events validate against the webhook schemas', (kind) => {
  it('a long random scenario emits all 18 types, each payload valid', { timeout: 120_000 }, async () => {
    const t = await setupOn(kind, notificationsConfig, '2026-01-05T10:00:00Z');
    const { engine } = t;
    const rnd = fc.sample(fc.integer({ min: 0, max: 1_000_000 }), { numRuns: 4000, seed: 15 });
    let k = 0;
    const next = (n: number) => (rnd[k++ % rnd.length] as number) % n;
    const users = Array.from({ length: 12 }, (_, i) => `u${i}`);
    for (const [i, id] of users.entries()) await engine.identifyUser({ id, tz: ZONES[i % ZONES.length] as string, attributes: { plan: i % 2 ? 'pro' : 'free' } });
    await engine.updatePreferences('u3', { notifications: { streak_reminder: [] } });
    for (let step = 0; step < 500; step++) {
      const user = users[next(users.length)] as string;
      const roll = next(100);
      if (roll < 45) await engine.recordEvent('lessons', { user: { id: user }, value: 1 + next(3) });
      else if (roll < 55) await engine.recordEvent('quiz', { user: { id: user }, value: 1 }).catch(() => undefined);
      else if (roll < 58) await engine.grantFreezes(user, 1);
      else if (roll < 60) await engine.createBoost({ userId: user, pointsSystemKey: 'xp', name: 'Comeback', start: t.now().toISOString().slice(0, 10), end: new Date(t.now().getTime() + 2 * DAY).toISOString().slice(0, 10), multiplier: 1.5 });
      else if (roll < 62) await engine.adjustPoints(user, 'xp', next(2) ? 15 : -5).catch(() => undefined);
      else if (roll < 85) t.advance((1 + next(10)) * HOUR);
      else if (roll < 90) t.advance((1 + next(3)) * DAY);
      else await engine.sweep();
    }
    // Long idle: streaks lapse, freezes go, reminders and recaps fall due, runs finish.
    for (let d = 0; d < 8; d++) {
      t.advance(DAY / 2);
      await engine.sweep();
    }
    const events = await allChanges(engine);
    const seen = new Set<string>();
    const bad: string[] = [];
    for (const e of events) {
      seen.add(e.type);
      expect(e.payload.type).toBe(e.type);
      const errors = webhookValidator(e.type)(e.payload);
      if (errors.length > 0) bad.push(`${e.type} ${e.id}: ${errors.join('; ')} ${JSON.stringify(e.payload).slice(0, 400)}`);
    }
    expect(bad.slice(0, 5)).toEqual([]);
    expect([...CHANGE_TYPES].filter((type) => !seen.has(type))).toEqual([]);
    // Unique ids, and positions strictly increasing.
    expect(new Set(events.map((e) => e.id)).size).toBe(events.length);
  });
});
