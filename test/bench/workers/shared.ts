/**
 * The bench's PostgreSQL workers: the multi-process test's configuration and users (test/workers/shared.ts),
 * with the number of calls as a parameter.
 */
import { USERS } from '../../workers/shared.js';

export { multiConfig, USERS } from '../../workers/shared.js';

/**
 * The plan of `events` calls: 80% distinct events, and event j + distinct repeats event j (same user, key and
 * value), so 20% of the calls are duplicate keys. With several processes a duplicate goes to the next process.
 */
export function plan(events: number, processes: number) {
  const distinct = Math.max(1, Math.round(events * 0.8));
  const event = (j: number) => {
    const d = j % distinct;
    return { userId: `user-${d % USERS}`, key: `key-${d}`, value: 1 + (d % 3) };
  };
  const processOf = (j: number) => (j + Math.floor(j / distinct)) % processes;
  /** The indexes of the calls worker `w` sends. */
  const mine = (w: number) => Array.from({ length: events }, (_, j) => j).filter((j) => processes === 1 || processOf(j) === w);
  return { event, mine };
}

/** Runs `call` over `items` with `inFlight` calls at a time; returns seconds and the sorted latencies (ms). */
export async function drive<T>(items: readonly T[], inFlight: number, call: (item: T) => Promise<unknown>) {
  let next = 0;
  const latencies: number[] = [];
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (next < items.length) {
        const item = items[next++] as T;
        const s = performance.now();
        await call(item);
        latencies.push(performance.now() - s);
      }
    }),
  );
  const seconds = (performance.now() - t0) / 1000;
  latencies.sort((a, b) => a - b);
  const pct = (p: number) => latencies[Math.min(latencies.length - 1, Math.floor(latencies.length * p))] ?? Number.NaN;
  return { seconds, p50: pct(0.5), p99: pct(0.99) };
}

/** Calls each worker makes before the timed ones (untimed): start-up and the JIT's warm-up stay out of the figures. */
export const WARM_UP_CALLS = 2000;

/** The warm-up events of worker `w`: its own users (`warm-<w>-<n>`), so they never meet the timed calls' users. */
const warmEvent = (w: number, i: number) => ({ userId: `warm-${w}-${i % 8}`, key: `warm-${i}`, value: 1 });

/**
 * Starts a worker's timed calls together with the other workers': makes its warm-up calls (`call` on
 * {@link WARM_UP_CALLS} events of its own users, 8 in flight, untimed), prints `@@ready`, and waits for the
 * parent's `go` line on stdin. So no worker times its calls while another is still loading its modules or
 * warming up: with several processes on a few cores, start-up would otherwise weigh on the figures of the
 * processes that started first.
 */
export async function startTogether(worker: number, call: (e: { userId: string; key: string; value: number }) => Promise<unknown>): Promise<void> {
  await drive(Array.from({ length: WARM_UP_CALLS }, (_, i) => i), 8, (i) => call(warmEvent(worker, i)));
  console.log('@@ready');
  await new Promise<void>((resolve, reject) => {
    let got = '';
    process.stdin.setEncoding('utf8');
    process.stdin.on('data', (chunk: string) => {
      got += chunk;
      if (got.includes('go\n')) {
        // Closed, so that it keeps the process alive no longer.
        process.stdin.destroy();
        resolve();
      }
    });
    process.stdin.on('end', () => reject(new Error('the parent closed stdin before go')));
  });
}
