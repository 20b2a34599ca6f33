/**
 * Caller input whose reading throws (a getter, a Proxy trap) is bad input: a `ValidationError` with the
 * thrown value as `cause`, nothing recorded, where the raw error used to escape (and, in `recordEvents`, to
 * fail the whole batch instead of that one event). The engine reads a caller's event or user once, into
 * plain data, so a getter that answers differently on a second read cannot make the rules see other input
 * than validation saw.
 */
import { describe, expect, it } from 'vitest';
import { applyEvent, createEngine, defineConfig, isLaurelErrorCode, type EventRequest, type UserInput } from '../src/index.js';
import { sequentialIds } from '../src/testing/index.js';
import { createMemoryStore } from '../src/memory.js';

const config = defineConfig({
  metrics: [{ key: 'm', name: 'M' }],
  attributes: [
    { key: 'device', name: 'Device', type: 'event' },
    { key: 'plan', name: 'Plan', type: 'user' },
  ],
  achievements: [{ key: 'api', name: 'API', trigger: 'api' }],
});

const boom = new Error('boom');
const throwing = <T extends object>(base: T, key: string): T =>
  Object.defineProperty({ ...base }, key, {
    enumerable: true,
    get() {
      throw boom;
    },
  });
const trap = () =>
  new Proxy(
    {},
    {
      get() {
        throw boom;
      },
      ownKeys() {
        throw boom;
      },
    },
  );

function setup() {
  const store = createMemoryStore();
  const engine = createEngine({ config, store, clock: () => new Date('2026-01-06T10:00:00Z'), newId: sequentialIds() });
  return { engine, store };
}

async function refusal(call: () => Promise<unknown>) {
  const error = await call().then(
    () => null,
    (e: unknown) => e,
  );
  expect(isLaurelErrorCode(error, 'VALIDATION')).toBe(true);
  expect((error as Error).cause).toBe(boom);
  return error as Error & { issues: { path: (string | number)[] }[] };
}

describe('unreadable input', () => {
  const requests: [string, () => EventRequest][] = [
    ['the request', () => trap() as EventRequest],
    ['request.user', () => throwing({ value: 1 }, 'user') as EventRequest],
    ['request.value', () => throwing({ user: { id: 'u' } }, 'value') as EventRequest],
    ['request.attributes', () => throwing({ user: { id: 'u' }, value: 1 }, 'attributes') as EventRequest],
    ['an attribute', () => ({ user: { id: 'u' }, value: 1, attributes: throwing({}, 'device') })],
    ['attributes as a Proxy', () => ({ user: { id: 'u' }, value: 1, attributes: trap() as Record<string, string> })],
    ['user.id', () => ({ user: throwing({}, 'id') as UserInput, value: 1 })],
    ['user.tz', () => ({ user: throwing({ id: 'u' }, 'tz') as UserInput, value: 1 })],
    ['user.attributes', () => ({ user: { id: 'u', attributes: trap() as Record<string, string> }, value: 1 })],
  ];

  it.each(requests)('recordEvent and simulateEvent: %s', async (_, request) => {
    const { engine, store } = setup();
    await refusal(() => engine.recordEvent('m', request()));
    await refusal(() => engine.simulateEvent('m', request()));
    expect(await store.listUsers({ limit: 10 })).toEqual([]);
  });

  it('the path names the part that could not be read', async () => {
    const { engine } = setup();
    expect((await refusal(() => engine.recordEvent('m', throwing({ value: 1 }, 'user') as EventRequest))).issues[0]?.path).toEqual(['user']);
    expect((await refusal(() => engine.recordEvent('m', throwing({ user: { id: 'u' } }, 'value') as EventRequest))).issues[0]?.path).toEqual([]);
    expect((await refusal(() => engine.recordEvent('m', { user: throwing({}, 'id') as UserInput, value: 1 }))).issues[0]?.path).toEqual(['user']);
    expect((await refusal(() => engine.recordEvent('m', { user: { id: 'u' }, value: 1, attributes: throwing({}, 'device') }))).issues[0]?.path).toEqual(['attributes']);
  });

  it('recordEvent: the options', async () => {
    const { engine, store } = setup();
    await refusal(() => engine.recordEvent('m', { user: { id: 'u' }, value: 1 }, throwing({}, 'idempotencyKey')));
    expect(await store.loadUser('u')).toBeNull();
  });

  it('recordEvents: the event that cannot be read fails alone', async () => {
    const { engine } = setup();
    const events = [
      { metricKey: 'm', user: { id: 'a' }, value: 1 },
      throwing({ metricKey: 'm', value: 1 }, 'user'),
      throwing({ user: { id: 'b' }, value: 1 }, 'metricKey'),
      trap(),
      { metricKey: 'm', user: { id: 'a' }, value: 2 },
    ] as Parameters<typeof engine.recordEvents>[0];
    const results = await engine.recordEvents(events);
    expect(results.map((r) => r.ok)).toEqual([true, false, false, false, true]);
    for (const r of results) if (!r.ok) {
      expect(isLaurelErrorCode(r.error, 'VALIDATION')).toBe(true);
      expect(r.error.cause).toBe(boom);
    }
    expect((await engine.getUserMetric('a', 'm')).current).toBe(3);
    await expect(engine.getUser('b')).rejects.toMatchObject({ code: 'NOT_FOUND' });
  });

  it('recordEvents: an array that cannot be read', async () => {
    const { engine } = setup();
    const events = new Proxy([], {
      get() {
        throw boom;
      },
    });
    await refusal(() => engine.recordEvents(events));
  });

  it('identifyUser, updateUser and completeAchievement', async () => {
    const { engine } = setup();
    await refusal(() => engine.identifyUser(throwing({ id: 'u' }, 'email') as UserInput));
    await refusal(() => engine.identifyUser(trap() as UserInput));
    await refusal(() => engine.completeAchievement('api', { user: throwing({}, 'id') as UserInput }));
    await refusal(() => engine.completeAchievement('api', throwing({}, 'user') as { user: UserInput }));
    await expect(engine.getUser('u')).rejects.toMatchObject({ code: 'NOT_FOUND' });
    await engine.identifyUser({ id: 'u', name: 'Ann' });
    const error = await refusal(() => engine.updateUser('u', throwing({}, 'name')));
    expect(error.issues[0]?.path).toEqual(['user']);
    await refusal(() => engine.updateUser('u', { attributes: throwing({}, 'plan') }));
    expect((await engine.getUser('u')).name).toBe('Ann');
  });

  it('pure applyEvent refuses it with a ValidationError too', () => {
    const ctx = { now: new Date('2026-01-06T10:00:00Z'), newId: sequentialIds() };
    for (const event of [throwing({ metricKey: 'm', value: 1 }, 'user'), { metricKey: 'm', value: 1, user: { id: 'u' }, attributes: trap() }]) {
      let error: unknown = null;
      try {
        applyEvent(config, null, event as Parameters<typeof applyEvent>[2], ctx);
      } catch (e) {
        error = e;
      }
      expect(isLaurelErrorCode(error, 'VALIDATION')).toBe(true);
      expect((error as Error).cause).toBe(boom);
    }
  });

  it('the engine reads a getter once: what was validated is what is recorded', async () => {
    const { engine } = setup();
    let reads = 0;
    const user = Object.defineProperty({}, 'id', {
      enumerable: true,
      get() {
        reads++;
        // Valid on the first read, something else after.
        return reads === 1 ? 'first' : '';
      },
    }) as UserInput;
    let valueReads = 0;
    const request = Object.defineProperty({ user }, 'value', {
      enumerable: true,
      get() {
        valueReads++;
        return valueReads === 1 ? 2 : Number.NaN;
      },
    }) as EventRequest;
    const res = await engine.recordEvent('m', request);
    expect(res.total).toBe(2);
    expect(reads).toBe(1);
    expect(valueReads).toBe(1);
    expect((await engine.getUser('first')).id).toBe('first');
  });

  it('an undeclared __proto__ attribute key is still refused', async () => {
    const { engine } = setup();
    const attributes = JSON.parse('{"__proto__":"x"}') as Record<string, string>;
    const error = await engine.recordEvent('m', { user: { id: 'u' }, value: 1, attributes }).then(
      () => null,
      (e: unknown) => e,
    );
    expect(isLaurelErrorCode(error, 'INVALID_ATTRIBUTE_KEYS')).toBe(true);
  });
});
