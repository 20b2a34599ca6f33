import { describe, it } from 'vitest';
import { storeConformanceChecks, type StoreFactory } from './conformance.js';

/**
 * Registers the store conformance suite with vitest: one test per check, each on a fresh store.
 *
 * @example
 * ```ts
 * import { describeStoreConformance } from 'laurel/testing';
 * describeStoreConformance('my store', () => createMyStore());
 * ```
 */
export function describeStoreConformance(name: string, factory: StoreFactory, options: { timeout?: number } = {}): void {
  describe(`store conformance: ${name}`, () => {
    for (const check of storeConformanceChecks) {
      it(check.name, async () => {
        await check.run(await factory());
      }, options.timeout ?? 30_000);
    }
  });
}
