/**
 * A shop: buy a streak freeze with coins, atomically and idempotently. Run with `npm run example:shop`.
 *
 * Learners earn 10 coins a lesson. A streak freeze costs 30 coins. Buying one spends the coins and grants
 * the freeze in one call (`runOperations`): both happen or neither does. The checkout's order id is the
 * idempotency key, so a retried request (a double tap, a timeout and a retry) charges once.
 */
import { createEngine, defineConfig, isLaurelErrorCode } from 'laurel';
import { createMemoryStore } from 'laurel/memory';

const config = defineConfig({
  metrics: [{ key: 'lessons', name: 'Lessons' }],
  streak: { frequency: 'daily', freezes: { initial: 0, max: 2 } },
  pointsSystems: [{ key: 'coins', name: 'Coins', triggers: [{ key: 'per-lesson', type: 'metric', metricKey: 'lessons', metricThreshold: 1, points: 10 }] }],
});

const PRICE = 30;
let now = new Date('2026-03-02T09:00:00Z');
const engine = createEngine({ config, store: createMemoryStore(), clock: () => now });

/** Spends PRICE coins and grants one freeze, or does neither; `orderId` makes a retry charge once. */
async function buyFreeze(userId: string, orderId: string) {
  try {
    const [spent, granted] = await engine.runOperations(
      userId,
      [
        { op: 'adjustPoints', system: 'coins', amount: -PRICE, reason: `freeze (order ${orderId})` },
        // requireRoom: refuse (and so spend nothing) rather than charge for a freeze over the maximum.
        { op: 'grantFreezes', count: 1, requireRoom: true },
      ],
      { idempotencyKey: orderId },
    );
    const coins = spent && 'total' in spent ? spent.total : null;
    console.log(`${orderId}: ${granted?.idempotentReplayed ? 'already paid' : 'paid'}; coins ${coins}, freezes ${granted?.streak.freezes}`);
  } catch (error) {
    if (isLaurelErrorCode(error, 'INSUFFICIENT_POINTS')) console.log(`${orderId}: not enough coins (${error.message})`);
    else if (isLaurelErrorCode(error, 'VALIDATION')) console.log(`${orderId}: refused (${error.message})`);
    else throw error;
  }
}

await engine.recordEvent('lessons', { user: { id: 'ana' }, value: 2 }); // 20 coins
await buyFreeze('ana', 'order-1'); // not enough coins: nothing spent
now = new Date('2026-03-02T10:00:00Z');
await engine.recordEvent('lessons', { user: { id: 'ana' }, value: 5 }); // 70 coins
await buyFreeze('ana', 'order-2'); // paid: 40 coins, 1 freeze
await buyFreeze('ana', 'order-2'); // the same order retried: charged once
await buyFreeze('ana', 'order-3'); // paid: 10 coins, 2 freezes
await engine.adjustPoints('ana', 'coins', 100, { reason: 'birthday gift' });
await buyFreeze('ana', 'order-4'); // refused: already at the maximum of 2, nothing spent
const summary = await engine.getPointsSummary('ana', 'coins', { awards: 10 });
console.log(`coins ${summary.total}; awards:`, summary.awards.map((a) => `${a.awarded > 0 ? '+' : ''}${a.awarded} ${a.trigger.type}${a.trigger.reason ? ` (${a.trigger.reason})` : ''}`).join(', '));
