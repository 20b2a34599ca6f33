/**
 * `laurel/testing/jest`: the store conformance suite registered with jest, through jest's global `describe`
 * and `it` (a test file run by jest has them; nothing is imported from jest).
 *
 * @module laurel/testing/jest
 */
import type { StoreFactory } from './conformance.js';
import { registerStoreConformance } from './register.js';

interface JestGlobals {
  describe: (name: string, body: () => void) => void;
  it: (name: string, fn: () => Promise<void>, timeout?: number) => void;
}

/**
 * Registers the store conformance suite with jest: one test per check, each on a fresh store. Jest has no
 * run-time skip: a check that does not apply to the store (the fault-injection checks of a store that calls
 * no fault point) passes, and `onSkip` (default: a `console.info` line) is told why.
 *
 * @example
 * ```js
 * const { describeStoreConformance } = require('laurel/testing/jest');
 * describeStoreConformance('my store', ({ faults }) => createMyStore({ faults }));
 * ```
 */
export function describeStoreConformance(name: string, factory: StoreFactory, options: { timeout?: number; onSkip?: (check: string, reason: string) => void } = {}): void {
  const jest = globalThis as unknown as Partial<JestGlobals>;
  if (typeof jest.describe !== 'function' || typeof jest.it !== 'function') {
    throw new Error('laurel/testing/jest: no global describe/it; run this file with jest');
  }
  const { describe, it } = jest as JestGlobals;
  registerStoreConformance(name, factory, {
    describe: (title, body) => describe(title, body),
    it: (title, fn, timeout) => it(title, () => fn(undefined as never), timeout),
    onSkip: options.onSkip ?? ((check, reason) => console.info(`store conformance: ${name}: not applicable: ${check}: ${reason}`)),
    ...(options.timeout === undefined ? {} : { timeout: options.timeout }),
  });
}
