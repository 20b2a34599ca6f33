import { createEngine, type LaurelConfig } from '../src/index.js';
import { createMemoryStore } from '../src/memory.js';
import { sequentialIds } from '../src/testing/index.js';

/** An engine on a memory store with a settable clock and deterministic ids. */
export function setup<C extends LaurelConfig>(config: C, start = '2026-01-05T10:00:00Z') {
  let now = new Date(start);
  const store = createMemoryStore();
  const engine = createEngine({ config, store, clock: () => now, newId: sequentialIds() });
  return {
    engine,
    store,
    set(iso: string) {
      now = new Date(iso);
    },
    advance(ms: number) {
      now = new Date(now.getTime() + ms);
    },
    now: () => now,
  };
}

export const HOUR = 3_600_000;
export const DAY = 86_400_000;
