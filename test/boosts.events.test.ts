/**
 * `points.boost_started` / `points.boost_finished` of a user's own boost: when its first day begins / its
 * last day ends in the user's zone (docs/rules.md, section 15), each announced once. They went missing when
 * the user's next commit after the start or end was the boost's deletion (its pending events were skipped
 * with it), and a boost made with both dates already past was announced as started and never as finished.
 * Found by a fuzz of pauses, reminders and boosts.
 */
import { expect, it } from 'vitest';
import { createEngine, defineConfig } from '../src/index.js';
import { createMemoryStore } from '../src/memory.js';
import { sequentialIds } from '../src/testing/index.js';

it('a deleted boost keeps the events that fell due before its deletion and finishes with it; a boost made in the past is started and finished', async () => {
  const config = defineConfig({ metrics: [{ key: 'm', name: 'M' }], pointsSystems: [{ key: 'xp', name: 'XP', triggers: [{ key: 't', type: 'metric', metricKey: 'm', metricThreshold: 1, points: 10 }] }] });
  let now = Date.parse('2026-03-05T12:00:00Z');
  const engine = createEngine({ config, store: createMemoryStore(), clock: () => new Date(now), newId: sequentialIds() });
  const eventsOf = async (id: string) => (await engine.readChanges({ limit: 1000 })).events.filter((e) => e.type.startsWith('points.boost') && (e.payload as { boost: { id: string } }).boost.id === id).map((e) => `${e.type}@${e.at}`);
  for (const id of ['a', 'b', 'c']) await engine.identifyUser({ id, tz: 'UTC' });
  const boost = (userId: string, start: string, end: string) => engine.createBoost({ pointsSystemKey: 'xp', userId, name: userId, start, end, multiplier: 2 }).then((r) => r.boost.id);
  const deletedWhileOn = await boost('a', '2026-03-10', '2026-03-12');
  const deletedAfter = await boost('b', '2026-03-10', '2026-03-12');
  now = Date.parse('2026-03-10T12:00:00Z');
  await engine.recordEvent('m', { user: { id: 'b' }, value: 1 });
  now = Date.parse('2026-03-11T12:00:00Z');
  await engine.deleteBoost(deletedWhileOn);
  now = Date.parse('2026-03-20T12:00:00Z');
  await engine.deleteBoost(deletedAfter);
  const past = await boost('c', '2026-03-01', '2026-03-02');
  now = Date.parse('2026-03-25T12:00:00Z');
  await engine.recordEvent('m', { user: { id: 'c' }, value: 1 });
  await engine.sweep();
  // Deleted while it ran: it finishes with its deletion.
  expect(await eventsOf(deletedWhileOn)).toEqual(['points.boost_started@2026-03-10T00:00:00.000Z', 'points.boost_finished@2026-03-11T12:00:00.000Z']);
  expect(await eventsOf(deletedAfter)).toEqual(['points.boost_started@2026-03-10T00:00:00.000Z', 'points.boost_finished@2026-03-13T00:00:00.000Z']);
  expect(await eventsOf(past)).toEqual(['points.boost_started@2026-03-01T00:00:00.000Z', 'points.boost_finished@2026-03-03T00:00:00.000Z']);
});

it('a zone change neither repeats nor skips a boost announcement', async () => {
  const config = defineConfig({ metrics: [{ key: 'm', name: 'M' }], pointsSystems: [{ key: 'xp', name: 'XP', triggers: [{ key: 't', type: 'metric', metricKey: 'm', metricThreshold: 1, points: 10 }] }] });
  let now = Date.parse('2026-03-05T12:00:00Z');
  const engine = createEngine({ config, store: createMemoryStore(), clock: () => new Date(now), newId: sequentialIds() });
  const typesOf = async (id: string) => (await engine.readChanges({ limit: 1000 })).events.filter((e) => e.type.startsWith('points.boost') && (e.payload as { boost: { id: string } }).boost.id === id).map((e) => e.type);
  const boost = (userId: string) => engine.createBoost({ pointsSystemKey: 'xp', userId, name: userId, start: '2026-03-10', end: '2026-03-10', multiplier: 2 }).then((r) => r.boost.id);
  await engine.identifyUser({ id: 'west', tz: 'Pacific/Kiritimati' }); // UTC+14, flies to UTC-11
  await engine.identifyUser({ id: 'east', tz: 'Pacific/Pago_Pago' }); // UTC-11, flies to UTC+14
  const west = await boost('west');
  const east = await boost('east');
  now = Date.parse('2026-03-09T10:30:00Z'); // 03-10 00:30 in Kiritimati, 03-08 23:30 in Pago Pago
  await engine.recordEvent('m', { user: { id: 'west' }, value: 1 });
  await engine.recordEvent('m', { user: { id: 'east' }, value: 1 });
  now = Date.parse('2026-03-09T10:40:00Z');
  await engine.identifyUser({ id: 'west', tz: 'Pacific/Pago_Pago' });
  const boosted = await engine.recordEvent('m', { user: { id: 'east', tz: 'Pacific/Kiritimati' }, value: 1 });
  expect(boosted.points.xp?.awards[0]?.awarded).toBe(20);
  now = Date.parse('2026-03-12T12:00:00Z');
  await engine.recordEvent('m', { user: { id: 'west' }, value: 1 });
  await engine.recordEvent('m', { user: { id: 'east' }, value: 1 });
  expect(await typesOf(west)).toEqual(['points.boost_started', 'points.boost_finished']);
  expect(await typesOf(east)).toEqual(['points.boost_started', 'points.boost_finished']);
});
