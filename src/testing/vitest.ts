/**
 * `laurel/testing/vitest`: the store conformance suite registered with vitest (needs `vitest` as a dev
 * dependency of the project using it). `laurel/testing` itself imports no test framework.
 *
 * @module laurel/testing/vitest
 */
import { describe, it, type TestContext } from 'vitest';
import type { StoreFactory } from './conformance.js';
import { registerStoreConformance } from './register.js';

/**
 * Registers the store conformance suite with vitest: one test per check, each on a fresh store. A check that
 * does not apply to the store (the fault-injection checks of a store that calls no fault point) is marked
 * skipped, with its reason.
 *
 * @example
 * ```ts
 * import { describeStoreConformance } from 'laurel/testing/vitest';
 * describeStoreConformance('my store', ({ faults }) => createMyStore({ faults }));
 * ```
 */
export function describeStoreConformance(name: string, factory: StoreFactory, options: { timeout?: number } = {}): void {
  registerStoreConformance(name, factory, {
    describe: (title, body) => describe(title, body),
    it: (title, fn, timeout) => it(title, (context) => fn(context as never), timeout),
    skip: (context: TestContext, reason) => context.skip(reason),
    ...(options.timeout === undefined ? {} : { timeout: options.timeout }),
  });
}
