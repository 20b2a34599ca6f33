/**
 * `laurel/testing`: the store conformance suite (for anyone writing a storage adapter) and fast-check
 * arbitraries for property tests of rule logic. Needs `vitest` (for `describeStoreConformance`) and
 * `fast-check` (for the arbitraries) as dev dependencies of the project using it.
 */
export { describeStoreConformance } from './describe.js';
export { storeConformanceChecks, runStoreConformance, sampleState } from './conformance.js';
export type { ConformanceCheck, StoreFactory } from './conformance.js';
export { arbUserId, arbValue, arbTimeZone, arbInstant, arbEventSequence, sequentialIds, TIME_ZONES } from './arbitraries.js';
export type { ArbEvent } from './arbitraries.js';
