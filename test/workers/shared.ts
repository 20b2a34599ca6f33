/** The configuration and the event plan shared by the multi-process test and its workers. */
import { defineConfig } from '../../src/index.js';

export const multiConfig = defineConfig({
  metrics: [{ key: 'lessons', name: 'Lessons' }],
  achievements: [
    { key: 'fifty', name: 'Fifty', trigger: 'metric', metricKey: 'lessons', metricValue: 50 },
    { key: 'hundred', name: 'Hundred', trigger: 'metric', metricKey: 'lessons', metricValue: 100 },
  ],
  pointsSystems: [{ key: 'xp', name: 'XP', triggers: [{ key: 'per-lesson', type: 'metric', metricKey: 'lessons', metricThreshold: 1, points: 10 }, { key: 'fifty-lessons', type: 'achievement', achievementKey: 'fifty', points: 100 }] }],
  leaderboards: [{ key: 'all', name: 'All', rankBy: 'metric', metricKey: 'lessons', start: '2020-01-01' }],
});

export const EVENTS = 20_000;
export const DISTINCT = 16_000;
export const USERS = 200;
export const PROCESSES = 4;

/** Event j; events j and j + DISTINCT are the same event (same user, key and value). */
export function plannedEvent(j: number) {
  const d = j % DISTINCT;
  return { userId: `user-${d % USERS}`, key: `key-${d}`, value: 1 + (d % 3) };
}

/** The process that sends event j: a duplicate goes to the next process, so duplicates race across processes. */
export const processOf = (j: number) => (j + Math.floor(j / DISTINCT)) % PROCESSES;
