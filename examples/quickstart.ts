/**
 * Quickstart: a language-learning app adds gamification with Laurel. Run with `npm run demo`.
 *
 * It defines metrics, achievements, a daily streak with freezes, an XP system with levels, an energy system
 * and leaderboards, then records a realistic week of events for three users in three time zones, printing
 * what each call returned. The clock is simulated so the output is the same on every run.
 */
import { createEngine, defineConfig, isLaurelError, type EventResponse } from 'laurel';
import { createMemoryStore } from 'laurel/memory';

const config = defineConfig({
  timeZone: 'UTC',
  weekStartsOn: 1,
  metrics: [
    { key: 'lessons', name: 'Lessons completed' },
    { key: 'words', name: 'Words learned' },
  ],
  attributes: [
    { key: 'device', name: 'Device', type: 'event' },
    { key: 'country', name: 'Country', type: 'user' },
  ],
  achievements: [
    { key: 'first-lesson', name: 'First lesson', description: 'Complete your first lesson', trigger: 'metric', metricKey: 'lessons', metricValue: 1 },
    { key: 'five-on-mobile', name: 'Pocket learner', trigger: 'metric', metricKey: 'lessons', metricValue: 5, eventAttributes: { device: 'ios' } },
    { key: 'three-day-streak', name: '3-day streak', trigger: 'streak', streakLength: 3 },
    { key: 'onboarded', name: 'Finished onboarding', trigger: 'api' },
    { key: 'committed', name: 'Committed', trigger: 'achievement', achievementKeys: ['onboarded', 'three-day-streak'] },
  ],
  streak: { frequency: 'daily', freezes: { initial: 1, max: 2, autoEarn: { everyDays: 7, amount: 1 } } },
  pointsSystems: [
    {
      key: 'xp',
      name: 'XP',
      levels: [
        { key: 'novice', name: 'Novice', points: 0 },
        { key: 'learner', name: 'Learner', points: 50 },
        { key: 'scholar', name: 'Scholar', points: 150 },
      ],
      triggers: [
        { key: 'per-lesson', type: 'metric', metricKey: 'lessons', metricThreshold: 1, points: 10 },
        { key: 'per-ten-words', type: 'metric', metricKey: 'words', metricThreshold: 10, points: 5 },
        { key: 'three-day-streak', type: 'streak', streakLengthThreshold: 3, points: 30 },
        { key: 'onboarded', type: 'achievement', achievementKey: 'onboarded', points: 25 },
      ],
      boosts: [{ key: 'launch-week', name: 'Launch week', multiplier: 2, start: '2026-01-10', end: '2026-01-11' }],
    },
    {
      key: 'energy',
      name: 'Energy',
      maxPoints: 3,
      triggers: [
        { key: 'signup', type: 'user_creation', points: 3 },
        { key: 'refill', type: 'time', timeUnit: 'hour', timeInterval: 4, points: 1 },
        { key: 'per-lesson', type: 'metric', metricKey: 'lessons', metricThreshold: 1, points: -1, blockIfOutOfPoints: true },
      ],
    },
  ],
  leaderboards: [
    { key: 'all-time', name: 'All time', rankBy: 'metric', metricKey: 'lessons', start: '2026-01-01' },
    { key: 'weekly-xp', name: 'Weekly XP', rankBy: 'points', pointsSystemKey: 'xp', start: '2026-01-05', runUnit: 'day', runInterval: 7, maxParticipants: 100 },
    { key: 'streaks', name: 'Longest streaks', rankBy: 'streak', start: '2026-01-01' },
  ],
});

let now = new Date('2026-01-05T08:00:00Z');
let ids = 0;
const engine = createEngine({
  config,
  store: createMemoryStore(),
  clock: () => now,
  newId: () => `00000000-0000-4000-8000-${String(++ids).padStart(12, '0')}`,
});

const users = {
  ana: { id: 'ana', name: 'Ana', email: 'ana@example.com', tz: 'Europe/Lisbon', attributes: { country: 'PT' } },
  kenji: { id: 'kenji', name: 'Kenji', tz: 'Asia/Tokyo', attributes: { country: 'JP' } },
  maya: { id: 'maya', name: 'Maya', tz: 'America/Los_Angeles', attributes: { country: 'US' } },
};

function summarise(who: string, what: string, r: EventResponse): void {
  const parts = [`total=${r.total}`, `streak=${r.currentStreak.length}${r.currentStreak.extended ? ' (extended)' : ''}`];
  if (r.achievements.length) parts.push(`unlocked: ${r.achievements.map((a) => a.name).join(', ')}`);
  for (const p of Object.values(r.points)) {
    const boosts = p.awards.flatMap((a) => a.boosts ?? []).map((b) => b.name);
    parts.push(`${p.name} ${p.added >= 0 ? '+' : ''}${p.added} -> ${p.total}${p.level ? ` [${p.level.name}]` : ''}${boosts.length ? ` (boost: ${[...new Set(boosts)].join(', ')})` : ''}`);
  }
  for (const b of Object.values(r.leaderboards)) parts.push(`${b.name}: #${b.rank ?? '-'}`);
  if (r.idempotentReplayed) parts.push('(idempotent replay: nothing applied)');
  console.log(`${now.toISOString().slice(0, 16)}  ${who.padEnd(6)} ${what.padEnd(18)} ${parts.join(' | ')}`);
}

async function lesson(who: keyof typeof users, device = 'web', key?: string) {
  try {
    const r = await engine.recordEvent('lessons', { user: users[who], value: 1, attributes: { device } }, key ? { idempotencyKey: key } : {});
    summarise(who, `lesson on ${device}`, r);
  } catch (error) {
    if (isLaurelError(error)) console.log(`${now.toISOString().slice(0, 16)}  ${who.padEnd(6)} lesson on ${device.padEnd(8)} refused: ${error.code} (${error.status}) ${error.message}`);
    else throw error;
  }
}

async function words(who: keyof typeof users, count: number) {
  summarise(who, `${count} words`, await engine.recordEvent('words', { user: users[who], value: count }));
}

const hours = (h: number) => {
  now = new Date(now.getTime() + h * 3_600_000);
};

console.log('Laurel quickstart: one simulated week for three learners\n');
console.log('The full response of a first event:');
console.log(JSON.stringify(await engine.recordEvent('lessons', { user: users.ana, value: 1, attributes: { device: 'ios' } }, { idempotencyKey: 'ana-lesson-1' }), null, 2));
console.log('\nThe week, one line per call:');
await lesson('ana', 'ios', 'ana-lesson-1'); // a retried request: replayed, not counted twice
await lesson('kenji', 'android');
await words('kenji', 25);
await lesson('maya', 'web');
const done = await engine.completeAchievement('onboarded', { user: users.maya });
console.log(`${now.toISOString().slice(0, 16)}  maya   completes "${done.achievement.name}": +${done.points.xp?.added ?? 0} XP`);
hours(1);
await lesson('ana', 'ios');
await lesson('ana', 'ios');
await lesson('ana', 'ios'); // energy spent: refused, nothing recorded
hours(24);
await lesson('ana', 'ios');
await lesson('kenji', 'android');
await lesson('maya', 'web');
hours(24);
await lesson('ana', 'ios');
await lesson('maya', 'web');
await words('maya', 40);
hours(48); // kenji and ana skip a day: ana has a freeze, kenji's streak breaks
await lesson('ana', 'web');
await lesson('kenji', 'android');
await lesson('maya', 'web');
hours(24 * 2 + 2); // the launch-week boost doubles XP
await lesson('maya', 'web');
await lesson('ana', 'ios');

console.log('\nAll-time leaderboard:');
for (const r of (await engine.getLeaderboard('all-time')).rankings) console.log(`  #${r.rank} ${r.userName ?? r.userId}: ${r.value}`);
console.log('\nWeekly XP leaderboard (current run):');
const weekly = await engine.getLeaderboard('weekly-xp');
console.log(`  run ${weekly.run.start} .. ${weekly.run.end} (${weekly.status})`);
for (const r of weekly.rankings) console.log(`  #${r.rank} ${r.userName ?? r.userId}: ${r.value}`);

const streak = await engine.getStreak('ana', { historyPeriods: 7 });
console.log(`\nAna's streak: ${streak.length} (freezes left: ${streak.freezes}), expires ${streak.expires}`);
console.log(streak.streakHistory.map((p) => `  ${p.periodStart}: ${p.length}${p.usedFreeze ? ' (freeze)' : ''}`).join('\n'));

const xp = await engine.getPointsSummary('maya', 'xp', { awards: 3 });
console.log(`\nMaya's XP: ${xp.total} (${xp.level?.name}); latest awards: ${xp.awards.map((a) => `${a.awarded} (${a.trigger.type})`).join(', ')}`);
const chart = await engine.getPointsEventSummary('ana', 'energy', { aggregation: 'daily', startDate: '2026-01-05', endDate: '2026-01-11' });
console.log(`\nAna's energy by day: ${chart.map((d) => `${d.date.slice(5)} ${d.total} (${d.change >= 0 ? '+' : ''}${d.change})`).join(', ')}`);
console.log('\nAchievements:');
for (const a of await engine.listAchievements()) console.log(`  ${a.name.padEnd(20)} ${a.completions} completions, ${a.rarity}% of users`);
