/**
 * `laurel/testing`: the store conformance suite (for anyone writing a storage adapter) and fast-check
 * arbitraries for property tests of rule logic. It imports no test framework: `runStoreConformance` runs the
 * suite anywhere, `registerStoreConformance` registers it with any framework, and `laurel/testing/vitest`,
 * `laurel/testing/jest` and `laurel/testing/node` (`node:test`) do that for those three;
 * `compareWithMemoryStore` is a differential property test of an adapter against the memory store. Needs
 * `fast-check` (for the arbitraries and `compareWithMemoryStore`) as a dev dependency of the project using it.
 *
 * @module laurel/testing
 */
export { storeConformanceChecks, runStoreConformance, runConformanceCheck, sampleState, ConformanceFaults, InjectedFault, CheckNotApplicable } from './conformance.js';
export type { ConformanceCheck, ConformanceContext, ConformanceReport, CheckOutcome, FaultInjector, StoreFactory, StoreFactoryContext } from './conformance.js';
export { registerStoreConformance } from './register.js';
export type { RegisterOptions, RegisterTest } from './register.js';
export { arbUserId, arbValue, arbTimeZone, arbInstant, arbEventSequence, arbConfig, arbAction, arbScenario, runScenarioStep, sequentialIds, TIME_ZONES } from './arbitraries.js';
export { compareWithMemoryStore } from './compare.js';
export type { CompareOptions } from './compare.js';
export type { ArbEvent, ArbEventSequenceOptions, ArbConfigOptions, ArbScenarioOptions, ArbSize, ScenarioEvent, ScenarioRead, ScenarioStep, TimedStep, ValueRange } from './arbitraries.js';
