/** The engine's default id source (engine/uuid.ts): random version 4 UUIDs, as `crypto.randomUUID` makes them. */
import { describe, expect, it } from 'vitest';
import { createEngine, defineConfig } from '../src/index.js';
import { createMemoryStore } from '../src/memory.js';
import { randomUuid } from '../src/engine/uuid.js';

const V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

describe('randomUuid', () => {
  it('makes well-formed, distinct version 4 UUIDs across many refills of its entropy', () => {
    const seen = new Set<string>();
    for (let i = 0; i < 100_000; i++) {
      const id = randomUuid();
      expect(id).toMatch(V4);
      seen.add(id);
    }
    expect(seen.size).toBe(100_000);
  });

  it('spreads every random hex digit evenly (the version and variant bits aside)', () => {
    const n = 20_000;
    // counts[place][digit] over the 30 random places (32 digits less the version digit; the variant digit
    // has 2 random bits and is checked apart).
    const counts = Array.from({ length: 36 }, () => new Array<number>(16).fill(0));
    const variant = new Array<number>(16).fill(0);
    for (let i = 0; i < n; i++) {
      const id = randomUuid();
      for (let p = 0; p < 36; p++) {
        if (p === 8 || p === 13 || p === 18 || p === 23 || p === 14) continue;
        const d = parseInt(id[p] as string, 16);
        if (p === 19) variant[d] = (variant[d] as number) + 1;
        else (counts[p] as number[])[d] = ((counts[p] as number[])[d] as number) + 1;
      }
    }
    // Each digit expected n/16 = 1,250 times per place; 6 standard deviations (about 210) of room.
    const random = Array.from({ length: 36 }, (_, p) => p).filter((p) => ![8, 13, 14, 18, 19, 23].includes(p));
    expect(random).toHaveLength(30);
    for (const p of random) for (const c of counts[p] as number[]) expect(Math.abs(c - n / 16)).toBeLessThan(210);
    // The variant digit: 8, 9, a or b, each about n/4.
    for (let d = 0; d < 16; d++) {
      if (d >= 8 && d <= 11) expect(Math.abs((variant[d] as number) - n / 4)).toBeLessThan(400);
      else expect(variant[d]).toBe(0);
    }
  });

  it('is the engine\'s id source when none is given: events and rows get version 4 UUIDs', async () => {
    const engine = createEngine({ config: defineConfig({ metrics: [{ key: 'lessons', name: 'Lessons' }] }), store: createMemoryStore() });
    const a = await engine.recordEvent('lessons', { user: { id: 'u1' }, value: 1 });
    const b = await engine.recordEvent('lessons', { user: { id: 'u1' }, value: 1 });
    expect(a.eventId).toMatch(V4);
    expect(b.eventId).toMatch(V4);
    expect(a.eventId).not.toBe(b.eventId);
  });
});
