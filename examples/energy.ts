/**
 * Energy: metering how often a user may act. Run with `npm run example:energy`.
 *
 * A flashcard app gives each learner 5 energy. Every flashcard costs 1, and an empty tank blocks the
 * request; one energy comes back every hour (lazily: no scheduler runs, the engine works it out from the
 * clock whenever the user is read or written). The clock is simulated so the story is the same every time.
 */
import { createEngine, defineConfig, isLaurelErrorCode } from 'laurel';
import { createMemoryStore } from 'laurel/memory';

const config = defineConfig({
  metrics: [{ key: 'flashcards', name: 'Flashcards reviewed' }],
  pointsSystems: [
    {
      key: 'energy',
      name: 'Energy',
      maxPoints: 5,
      triggers: [
        { key: 'starting-balance', type: 'user_creation', points: 5 }, // the starting balance
        { key: 'hourly-refill', type: 'time', timeUnit: 'hour', timeInterval: 1, points: 1 }, // refill: +1 every hour after sign-up
        { key: 'per-flashcard', type: 'metric', metricKey: 'flashcards', metricThreshold: 1, points: -1, blockIfOutOfPoints: true }, // cost
      ],
    },
  ],
});

let now = new Date('2026-03-02T09:00:00Z');
const engine = createEngine({ config, store: createMemoryStore(), clock: () => now });
const user = { id: 'lea', tz: 'Europe/Paris' };
const clock = () => now.toISOString().slice(11, 16);

async function review(cards: number) {
  // A UI can ask first: simulateEvent answers exactly as recordEvent would, and commits nothing.
  try {
    await engine.simulateEvent('flashcards', { user, value: cards });
  } catch (error) {
    if (isLaurelErrorCode(error, 'INSUFFICIENT_POINTS')) {
      const { total } = await engine.getPointsSummary(user.id, 'energy');
      console.log(`${clock()}  wants ${cards} card(s): blocked, only ${total} energy left (the button would be greyed out)`);
      return;
    }
    throw error;
  }
  const res = await engine.recordEvent('flashcards', { user, value: cards });
  const energy = res.points.energy;
  const refills = energy?.awards.filter((a) => a.trigger.type === 'time').length ?? 0;
  console.log(`${clock()}  reviews ${cards} card(s): energy ${energy?.total}${refills ? ` (after ${refills} hourly refill${refills > 1 ? 's' : ''} since last time)` : ''}`);
}

async function forceReview(cards: number) {
  // Without asking first, the engine refuses the whole event: nothing is recorded.
  try {
    await engine.recordEvent('flashcards', { user, value: cards });
  } catch (error) {
    if (!isLaurelErrorCode(error, 'INSUFFICIENT_POINTS')) throw error;
    const total = (await engine.getUserMetric(user.id, 'flashcards')).current;
    console.log(`${clock()}  sends ${cards} card(s) anyway: ${error.status} ${error.message} Cards recorded so far: ${total}`);
  }
}

const wait = (minutes: number) => {
  now = new Date(now.getTime() + minutes * 60_000);
  console.log(`        ... ${minutes} minutes pass`);
};

console.log('Lea signs up at 09:00 UTC with 5 energy.');
await review(2);
await review(2);
await review(1);
await review(1);
await forceReview(1);
wait(150);
const summary = await engine.getPointsSummary(user.id, 'energy', { awards: 3 });
console.log(`${clock()}  reads her energy: ${summary.total} (latest changes: ${summary.awards.map((a) => `${a.awarded > 0 ? '+' : ''}${a.awarded} at ${a.date.slice(11, 16)}`).join(', ')})`);
await review(3);
await review(2);
wait(600);
await engine.accrue(user.id);
console.log(`${clock()}  after a long break the tank is full again: ${(await engine.getPointsSummary(user.id, 'energy')).total} (never above maxPoints)`);
const chart = await engine.getPointsEventSummary(user.id, 'energy', { aggregation: 'daily', startDate: '2026-03-01', endDate: '2026-03-03' });
console.log('Energy by day (chart data):', chart);
