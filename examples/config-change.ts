/**
 * A configuration change, previewed and applied: `npm run example:config-change`.
 *
 * Version 1 of a language app pays 5 XP per lesson. Version 2 pays 10, adds a "Ten lessons" achievement
 * with a 100 XP bonus, and caps coins at 50. The example records a week under version 1, then shows what
 * version 2 does on its own (the forward rules: the achievement is backdated on the next read, the cap is
 * applied), previews a retroactive replay (the dry-run diff: every past lesson re-priced), and commits it.
 */
import { createEngine, defineConfig, type ConfigInput } from 'laurel';
import { createMemoryStore } from 'laurel/memory';

const coins = { key: 'coins', name: 'Coins', triggers: [{ key: 'per-lesson', type: 'metric', metricKey: 'lessons', metricThreshold: 1, points: 10 }] } satisfies NonNullable<ConfigInput['pointsSystems']>[number];

const v1 = {
  timeZone: 'Europe/Berlin',
  metrics: [{ key: 'lessons', name: 'Lessons completed' }],
  streak: { frequency: 'daily' },
  pointsSystems: [
    { key: 'xp', name: 'XP', triggers: [{ key: 'per-lesson', type: 'metric', metricKey: 'lessons', metricThreshold: 1, points: 5 }] },
    coins,
  ],
  leaderboards: [{ key: 'xp-all-time', name: 'XP', rankBy: 'points', pointsSystemKey: 'xp', start: '2026-01-01' }],
} satisfies ConfigInput;

const v2 = {
  ...v1,
  achievements: [{ key: 'ten-lessons', name: 'Ten lessons', trigger: 'metric', metricKey: 'lessons', metricValue: 10 }],
  pointsSystems: [
    {
      key: 'xp',
      name: 'XP',
      triggers: [
        { key: 'per-lesson', type: 'metric', metricKey: 'lessons', metricThreshold: 1, points: 10 },
        { key: 'ten-bonus', type: 'achievement', achievementKey: 'ten-lessons', points: 100 },
      ],
    },
    { ...coins, maxPoints: 50 },
  ],
} satisfies ConfigInput;

let now = Date.parse('2026-05-04T08:00:00Z');
const clock = () => new Date(now);
const store = createMemoryStore();
let n = 0;
const newId = () => `id-${++n}`;

const before = createEngine({ config: defineConfig(v1), store, clock, newId });
for (let day = 0; day < 6; day++) {
  for (const [user, lessons] of [['ana', 2], ['ben', 1]] as const) {
    for (let i = 0; i < lessons; i++) await before.recordEvent('lessons', { user: { id: user }, value: 1 });
  }
  now += 86_400_000;
}
console.log('Version 1 after six days:');
for (const user of ['ana', 'ben']) console.log(`  ${user}: ${(await before.getPointsSummary(user, 'xp')).total} XP, ${(await before.getPointsSummary(user, 'coins')).total} coins`);

// Deploy version 2. Nothing runs yet: each user is brought in line on their next read or write.
const after = createEngine({ config: defineConfig(v2), store, clock, newId });
const ana = await after.getUserAchievements('ana');
console.log('\nVersion 2, first read of ana (forward rules):');
console.log(`  achievements: ${ana.map((a) => `${a.key} (achieved ${a.achievedAt}, backdated to her 10th lesson)`).join(', ')}`);
const anaXp = await after.getPointsSummary('ana', 'xp', { awards: 1 });
console.log(`  XP ${anaXp.total}: the bonus is paid, dated ${anaXp.awards[0]?.date}; past lessons keep their 5 XP`);
console.log(`  coins ${(await after.getPointsSummary('ana', 'coins')).total}: clamped to the new cap of 50`);

// Preview what re-pricing every past lesson would do, then do it.
const preview = await after.replay({ policy: 'retroactive', dryRun: true, users: ['ana', 'ben'] });
console.log('\nDry run, retroactive policy:');
for (const d of preview.diffs) {
  const points = Object.entries(d.points).map(([k, p]) => `${k} ${p.before} -> ${p.after}`).join(', ');
  const boards = Object.entries(d.leaderboards).map(([k, b]) => `${k} ${b.before} -> ${b.after}`).join(', ');
  console.log(`  ${d.userId}: ${points}; boards: ${boards}; awards reversed ${d.awards.reversed}, added ${d.awards.added}; achievements gained ${d.achievements.gained.join(', ') || 'none'}`);
}
console.log(`  still ${(await after.getPointsSummary('ana', 'xp')).total} XP for ana: a dry run commits nothing`);

const applied = await after.replay({ policy: 'retroactive', users: ['ana', 'ben'] });
console.log(`\nCommitted: ${applied.changed} users changed, the same diffs as the preview: ${JSON.stringify(applied.diffs) === JSON.stringify(preview.diffs)}`);
for (const user of ['ana', 'ben']) console.log(`  ${user}: ${(await after.getPointsSummary(user, 'xp')).total} XP, rank ${(await after.getUserLeaderboard(user, 'xp-all-time')).rank}`);
const again = await after.replay({ policy: 'retroactive' });
console.log(`A second replay changes nothing: ${again.changed} users changed.`);
