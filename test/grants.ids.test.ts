/**
 * A time grant that is due but not stored yet is materialised by every read (reads commit nothing): its award
 * keeps one id across reads, and the same id when a write stores it at the same clock. It used to draw a new
 * id from `newId` on every read (and the write a further one, an id no reader had seen), so a client that
 * deduplicates awards by id saw the same award again and again. Found by a fuzz of the HTTP handler.
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
  // A write at the same clock stores the grant under that id.
  await engine.accrue('u1');
  expect(await read()).toEqual(first);
  // The next hour's grant is another award, with an id of its own.
  advance(3_600_000);
  const later = await read();
  expect(later).toHaveLength(2);
  expect(later.map((a) => a.id)).toContain(first[0]?.id);
  expect(new Set(later.map((a) => a.id)).size).toBe(2);
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
