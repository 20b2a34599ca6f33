/**
 * A preferences patch, its `notifications` and its `streak` must be objects: an array (`{ "streak": [] }`,
 * `{ "notifications": [] }`) is refused with a ValidationError (400 or 422 over HTTP) and changes nothing,
 * where it used to pass as an empty object. Found by a fuzz of the HTTP handler.
 */
import { expect, it } from 'vitest';
import { createEngine, defineConfig, isLaurelErrorCode, type PreferencesPatch } from '../src/index.js';
import { createHttpHandler } from '../src/http.js';
import { createMemoryStore } from '../src/memory.js';

const config = defineConfig({ metrics: [{ key: 'cards', name: 'Cards' }], streak: { frequency: 'daily' } });

it('arrays are not preferences', async () => {
  const engine = createEngine({ config, store: createMemoryStore(), clock: () => new Date('2026-01-06T10:00:00Z') });
  await engine.identifyUser({ id: 'u' });
  const before = await engine.getPreferences('u');
  for (const patch of [[], { streak: [] }, { notifications: [] }, { streak: [true] }] as unknown as PreferencesPatch[]) {
    const error = await engine.updatePreferences('u', patch).then(
      () => null,
      (e: unknown) => e,
    );
    expect(isLaurelErrorCode(error, 'VALIDATION'), JSON.stringify(patch)).toBe(true);
  }
  expect(await engine.getPreferences('u')).toEqual(before);
  const handler = createHttpHandler(engine, { apiKeys: ['k'] });
  const res = await handler(new Request('http://t/v1/users/u/preferences', { method: 'PATCH', headers: { 'x-api-key': 'k', 'content-type': 'application/json' }, body: JSON.stringify({ streak: [] }) }));
  expect(res.status).toBe(422);
  // Objects still work.
  await engine.updatePreferences('u', { streak: { enabled: false } });
  expect((await engine.getPreferences('u')).streak?.enabled).toBe(false);
});
