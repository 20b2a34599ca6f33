/**
 * Notifications from change events: achievement pushes and streak reminders. Run with
 * `npm run example:notifications`.
 *
 * Every commit writes what it changed to the store's outbox, in the hosted service's webhook shapes. A
 * subscriber turns them into messages: a push when an achievement unlocks, an e-mail a few hours before a
 * streak expires (only when the learner has not yet practised that day, and only on the channels they keep).
 * Changes that happen by time alone (a reminder falling due, a streak lost at local midnight) become visible
 * when a sweep brings the due users up to date; `createSweeper` runs one every minute in a real app. Here the
 * clock is simulated, so the example sweeps by hand.
 */
import { createEngine, defineConfig, type StoredChange } from 'laurel';
import { createMemoryStore } from 'laurel/memory';

const config = defineConfig({
  metrics: [{ key: 'lessons', name: 'Lessons' }],
  achievements: [
    { key: 'first-lesson', name: 'First lesson', trigger: 'metric', metricKey: 'lessons', metricValue: 1 },
    { key: 'three-day-streak', name: 'Three in a row', trigger: 'streak', streakLength: 3 },
  ],
  streak: { frequency: 'daily' },
  // Reminders 4 hours before a streak expires in the learner's zone; pushes for completed achievements.
  notifications: { streakReminder: { hoursBefore: 4 }, achievement: {} },
});

let now = new Date('2026-03-02T08:00:00Z');
const engine = createEngine({ config, store: createMemoryStore(), clock: () => now });
const hours = (h: number) => (now = new Date(now.getTime() + h * 3_600_000));

/** What the app would hand to its push and e-mail providers. */
const sent: string[] = [];
async function notify(events: StoredChange[]) {
  for (const e of events) {
    const p = e.payload as Record<string, any>;
    if (e.type === 'achievement.completed') sent.push(`push  to ${p.user.id}: you earned "${p.achievement.name}"`);
    if (e.type === 'emails.streak_reminder_due') sent.push(`email to ${p.user.id}: your ${p.streak.length}-day streak ends at midnight (${p.user.tz ?? 'UTC'}), one lesson keeps it`);
    if (e.type === 'streak.lost') sent.push(`(app) ${p.user.id} lost a ${p.length}-day streak at ${e.at}`);
  }
}

// One named consumer: its cursor is stored, so a restart continues where it stopped.
const subscription = engine.subscribe('messages', notify, { pollMs: 10 });

// Ana (Lisbon) practises three days in a row; Ben (New York) practises once and then switches reminders off.
await engine.identifyUser({ id: 'ana', tz: 'Europe/Lisbon' });
await engine.identifyUser({ id: 'ben', tz: 'America/New_York' });
for (let day = 0; day < 3; day++) {
  await engine.recordEvent('lessons', { user: { id: 'ana' }, value: 1 });
  if (day === 0) await engine.recordEvent('lessons', { user: { id: 'ben' }, value: 1 });
  hours(24);
}
await engine.updatePreferences('ben', { notifications: { streak_reminder: [] } });

// Day 4: nobody has practised. At 20:00 in Lisbon Ana's reminder is due; a sweep makes it visible.
now = new Date('2026-03-05T20:30:00Z');
await engine.sweep();
// Next morning: Ana's streak is lost (dated at midnight), and so is Ben's.
now = new Date('2026-03-06T09:00:00Z');
await engine.sweep();

// Let the subscriber catch up, then stop it (it gives up its lease and keeps its cursor).
await new Promise((resolve) => setTimeout(resolve, 100));
await subscription.stop();
for (const line of sent) console.log(line);

const expected = ['push  to ana: you earned "First lesson"', 'push  to ben: you earned "First lesson"', 'push  to ana: you earned "Three in a row"'];
for (const line of expected) if (!sent.includes(line)) throw new Error(`missing: ${line}`);
if (!sent.some((l) => l.startsWith('email to ana'))) throw new Error('missing: the streak reminder for ana');
if (sent.some((l) => l.startsWith('email to ben'))) throw new Error('ben switched streak reminders off');
