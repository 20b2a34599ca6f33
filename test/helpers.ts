import { createEngine, type Award, type LaurelConfig, type Store, type StoredChange } from '../src/index.js';
import { grantInstant } from '../src/core/points.js';
import { createMemoryStore } from '../src/memory.js';
import { sequentialIds } from '../src/testing/index.js';

/** An engine on a memory store with a settable clock and deterministic ids. */
export function setup<C extends LaurelConfig>(config: C, start = '2026-01-05T10:00:00Z') {
  return setupWith(createMemoryStore(), config, start);
}

/** An engine on `store` with a settable clock and deterministic ids. */
export function setupWith<C extends LaurelConfig, S extends Store>(store: S, config: C, start = '2026-01-05T10:00:00Z') {
  let now = new Date(start);
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

/**
 * Awards with every run of time grants spread into its single grants (each dated when it fell due, with the
 * running total after it), as they read when every grant was its own award, in `order` of the list given.
 */
export function eachGrant(awards: readonly Award[], order: 'asc' | 'desc' = 'asc'): Award[] {
  return awards.flatMap((a) => {
    const run = a.grants;
    if (!run) return [a];
    const each = a.awarded / run.count;
    const singles = Array.from({ length: run.count }, (_, j) => {
      const { grants: _run, ...single } = a;
      return { ...single, awarded: each, total: a.total - each * (run.count - 1 - j), date: new Date(grantInstant(a.date, run, j)).toISOString() };
    });
    return order === 'asc' ? singles : singles.reverse();
  });
}

/** Every change event in an engine's outbox, in order (read in pages until an empty one). */
export async function allChanges(engine: { readChanges: (o: { after?: string; limit?: number }) => Promise<{ events: StoredChange[]; next: string }> }): Promise<StoredChange[]> {
  const out: StoredChange[] = [];
  let after: string | undefined;
  for (;;) {
    const page = await engine.readChanges(after === undefined ? { limit: 1000 } : { after, limit: 1000 });
    out.push(...page.events);
    if (page.events.length === 0) return out;
    after = page.next;
  }
}
