/**
 * The test-framework-neutral registration of the store conformance suite: `registerStoreConformance` takes
 * the framework's own `describe` and `it`. `laurel/testing/vitest`, `laurel/testing/jest` and
 * `laurel/testing/node` wrap it for vitest, jest and `node:test`; this module imports none of them.
 */
import { runConformanceCheck, storeConformanceChecks, type ConformanceCheck, type StoreFactory } from './conformance.js';

/**
 * A framework's test registration as {@link registerStoreConformance} calls it: `fn` receives the
 * framework's per-test context (vitest's and `node:test`'s test context; nothing under jest), passed on to
 * {@link RegisterOptions.skip}; `timeout` is in milliseconds.
 */
export type RegisterTest = (name: string, fn: (context: never) => Promise<void>, timeout: number) => void;

/** The frameworks' hooks for {@link registerStoreConformance}. */
export interface RegisterOptions {
  /** The framework's `describe(name, body)`. */
  describe: (name: string, body: () => void) => void;
  /** The framework's `it`, adapted to {@link RegisterTest} (the adapters do it for vitest, jest and node:test). */
  it: RegisterTest;
  /** Per-check timeout in milliseconds (default 30,000). */
  timeout?: number;
  /**
   * Marks the running test skipped (a check that does not apply to the store, e.g. the fault-injection checks
   * of a store that calls no fault point), given the per-test context `it` passed to `fn`. Without it (jest has
   * no run-time skip) such a check passes, and `onSkip` (default: none) is told.
   */
  skip?: (context: never, reason: string) => void;
  /** Told of every check skipped as not applicable (when `skip` is absent, or in addition to it). */
  onSkip?: (check: string, reason: string) => void;
  /** The checks to register (default: {@link storeConformanceChecks}). */
  checks?: readonly ConformanceCheck[];
}

/**
 * Registers the store conformance suite with any test framework: one `describe` named
 * `store conformance: <name>`, one test per check, each on a fresh store from `factory` (which receives the
 * check's fault injector; see {@link StoreFactory}). A failed check fails its test with the check's message;
 * a check that does not apply to the store is reported through `skip` / `onSkip`.
 *
 * @example
 * ```ts
 * import { describe, it } from 'my-test-framework';
 * import { registerStoreConformance } from 'laurel/testing';
 * registerStoreConformance('my store', ({ faults }) => createMyStore({ faults }), {
 *   describe,
 *   it: (name, fn, timeout) => it(name, fn, timeout),
 * });
 * ```
 */
export function registerStoreConformance(name: string, factory: StoreFactory, options: RegisterOptions): void {
  const timeout = options.timeout ?? 30_000;
  const checks = options.checks ?? storeConformanceChecks;
  options.describe(`store conformance: ${name}`, () => {
    for (const check of checks) {
      options.it(
        check.name,
        async (context: never) => {
          const outcome = await runConformanceCheck(check, factory);
          if (outcome.status === 'failed') throw outcome.error;
          if (outcome.status === 'skipped') {
            options.onSkip?.(check.name, outcome.reason);
            options.skip?.(context, outcome.reason);
          }
        },
        timeout,
      );
    }
  });
}
