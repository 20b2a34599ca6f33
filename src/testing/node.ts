/**
 * `laurel/testing/node`: the store conformance suite registered with Node's built-in test runner
 * (`node:test`, run with `node --test`).
 *
 * @module laurel/testing/node
 */
import { describe, it, type TestContext } from 'node:test';
import type { StoreFactory } from './conformance.js';
import { registerStoreConformance } from './register.js';

/**
 * Registers the store conformance suite with `node:test`: one test per check, each on a fresh store. A check
 * that does not apply to the store (the fault-injection checks of a store that calls no fault point) is
 * reported skipped, with its reason.
 *
 * @example
 * ```js
 * import { describeStoreConformance } from 'laurel/testing/node';
 * describeStoreConformance('my store', ({ faults }) => createMyStore({ faults }));
 * ```
 */
export function describeStoreConformance(name: string, factory: StoreFactory, options: { timeout?: number } = {}): void {
  registerStoreConformance(name, factory, {
    describe: (title, body) => {
      void describe(title, body);
    },
    it: (title, fn, timeout) => {
      void it(title, { timeout }, (context) => fn(context as never));
    },
    skip: (context: TestContext, reason) => context.skip(reason),
    ...(options.timeout === undefined ? {} : { timeout: options.timeout }),
  });
}
