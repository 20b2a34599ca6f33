/**
 * A time grant that is due but not stored yet is materialised by every read (reads commit nothing): its award
 * keeps one id across reads, derived from the grant, and reads draw no ids from `newId`. It used to draw a new
 * id on every read, so the same award showed under a new id each time. The write that stores the grant gives
 * it an id from `newId`, unique among the user's rows even when a schedule is re-timed (a derived id would
 * repeat: a spend restarting a schedule after the clock went back, a shortened interval). Found by fuzzing.
 */
import { expect, it } from 'vitest';
import { createEngine, defineConfig } from '../src/index.js';
import { createHttpHandler } from '../src/http.js';
import { createMemoryStore } from '../src/memory.js';
import { sequentialIds } from '../src/testing/index.js';

const config = defineConfig({
  metrics: [{ key: 'cards', name: 'Cards' }],
  pointsSystems: [
    {
      key: 'energy',
      name: 'Energy',
      maxPoints: 3,
      triggers: [
        { key: 'start', type: 'user_creation', points: 3 },
        { key: 'refill', type: 'time', timeUnit: 'hour', timeInterval: 1, points: 1 },
        { key: 'per-card', type: 'metric', metricKey: 'cards', metricThreshold: 1, points: -1 },
      ],
    },
  ],
});

function setup() {
  let now = Date.parse('2026-01-06T10:00:00Z');
  const engine = createEngine({ config, store: createMemoryStore(), clock: () => new Date(now), newId: sequentialIds('id') });
  return { engine, advance: (ms: number) => (now += ms) };
}

it('a due grant keeps one award id across reads, and when a write stores it', async () => {
  const { engine, advance } = setup();
  await engine.recordEvent('cards', { user: { id: 'u1' }, value: 2 }); // energy 3 -> 1
  advance(3_600_000); // the 11:00 refill is due, not stored
  const read = async () => (await engine.getPointsSummary('u1', 'energy')).awards.filter((a) => a.trigger.type === 'time');
  const first = await read();
  const again = await read();
  expect(first).toHaveLength(1);
  expect(again).toEqual(first);
  // Over HTTP as well (the fuzz's route).
  const handler = createHttpHandler(engine, { apiKeys: ['k'] });
  const wire = (await (await handler(new Request('http://t/v1/users/u1/points/energy', { headers: { 'x-api-key': 'k' } }))).json()) as { awards: { id: string; date: string }[] };
  expect(wire.awards.map((a) => a.id)).toContain(first[0]?.id);
  // The write that stores it gives it its lasting id (from newId); reads then show that one, every time.
  await engine.accrue('u1');
  const stored = await read();
  expect(stored.map(({ id: _, ...rest }) => rest)).toEqual(first.map(({ id: _, ...rest }) => rest));
  expect(stored[0]?.id).toMatch(/^id-/);
  expect(await read()).toEqual(stored);
  // The next hour's grant, due and not stored, is another award with an id of its own.
  advance(3_600_000);
  const later = await read();
  expect(later).toHaveLength(2);
  expect(new Set(later.map((a) => a.id)).size).toBe(2);
  expect(await read()).toEqual(later);
});

const timeAwards = async (engine: ReturnType<typeof createEngine>, user: string, key: string) => (await engine.getPointsSummary(user, key)).awards.filter((a) => a.trigger.type === 'time').map((a) => ({ id: a.id, date: a.date }));

it('stored grants keep distinct ids when a spend restarts the schedule after the clock went back', async () => {
  const cfg = defineConfig({
    metrics: [{ key: 'plays', name: 'Plays' }],
    pointsSystems: [
      {
        key: 'hearts',
        name: 'Hearts',
        maxPoints: 5,
        triggers: [
          { key: 'start', type: 'user_creation', points: 5 },
          { key: 'refill', type: 'time', timeUnit: 'day', timeInterval: 1, points: 1, anchor: 'lastSpend' },
          { key: 'play', type: 'metric', metricKey: 'plays', metricThreshold: 1, points: -1 },
        ],
      },
    ],
  });
  let now = new Date('2026-03-02T09:00:00Z');
  const engine = createEngine({ config: cfg, store: createMemoryStore(), clock: () => now, newId: sequentialIds() });
  await engine.identifyUser({ id: 'u1' });
  now = new Date('2026-03-02T10:00:00Z');
  await engine.recordEvent('plays', { user: { id: 'u1' }, value: 1 });
  now = new Date('2026-03-03T01:00:00Z');
  await engine.accrue('u1'); // the grant of 03-03 00:00
  now = new Date('2026-03-02T20:00:00Z');
  await engine.recordEvent('plays', { user: { id: 'u1' }, value: 1 }); // the clock went back; the spend restarts the schedule
  now = new Date('2026-03-03T02:00:00Z');
  await engine.accrue('u1'); // the grant of 03-03 00:00, again
  const awards = await timeAwards(engine, 'u1', 'hearts');
  expect(awards).toHaveLength(2);
  expect(new Set(awards.map((a) => a.id)).size).toBe(2);
});

it('stored grants keep distinct ids when a shorter interval re-times the schedule, and a retroactive replay settles in one pass', async () => {
  const base = (every: number) => defineConfig({ metrics: [{ key: 'plays', name: 'Plays' }], pointsSystems: [{ key: 'coins', name: 'Coins', triggers: [{ key: 'drip', type: 'time', timeUnit: 'hour', timeInterval: every, points: 1 }] }] });
  const store = createMemoryStore();
  let now = new Date('2026-03-02T09:00:00Z');
  const a = createEngine({ config: base(2), store, clock: () => now, newId: sequentialIds('a') });
  await a.identifyUser({ id: 'u1' });
  now = new Date('2026-03-02T10:30:00Z');
  await a.recordEvent('plays', { user: { id: 'u1' }, value: 1 });
  now = new Date('2026-03-02T11:30:00Z');
  await a.accrue('u1'); // grant 1 of the 2-hour schedule, at 11:00
  const b = createEngine({ config: base(1), store, clock: () => now, newId: sequentialIds('b') });
  await b.accrue('u1'); // grant 2 of the 1-hour schedule, at 11:00 too
  const awards = await timeAwards(b, 'u1', 'coins');
  expect(awards).toHaveLength(2);
  expect(new Set(awards.map((x) => x.id)).size).toBe(2);
  await b.replay({ policy: 'retroactive', users: ['u1'] });
  const again = await b.replay({ policy: 'retroactive', users: ['u1'] });
  expect(again.diffs.filter((d) => d.changed)).toEqual([]);
});

it('grant ids differ between users and instants, and reads draw no ids: later writes get the same ids with or without them', async () => {
  const run = async (reads: boolean) => {
    const { engine, advance } = setup();
    await engine.recordEvent('cards', { user: { id: 'a' }, value: 3 });
    await engine.recordEvent('cards', { user: { id: 'b' }, value: 3 });
    advance(2 * 3_600_000); // two refills due for each (one run of 2)
    const grants: string[][] = [];
    if (reads) {
      for (const id of ['a', 'b', 'a']) grants.push((await engine.getPointsSummary(id, 'energy')).awards.filter((x) => x.trigger.type === 'time').map((x) => x.id));
    }
    const ids = [(await engine.recordEvent('cards', { user: { id: 'a' }, value: 1 })).eventId, (await engine.recordEvent('cards', { user: { id: 'b' }, value: 1 })).eventId];
    return { grants, ids };
  };
  const withReads = await run(true);
  const without = await run(false);
  expect(withReads.ids).toEqual(without.ids);
  const [a, b, aAgain] = withReads.grants;
  expect(a).toHaveLength(1);
  expect(aAgain).toEqual(a);
  expect(b).toHaveLength(1);
  expect(b).not.toEqual(a);
});
