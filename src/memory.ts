/**
 * `laurel/memory`: the in-memory store, for tests, demos and single-process apps.
 *
 * @module laurel/memory
 */
export { createMemoryStore } from './store/memory.js';
export type { MemoryStore, MemoryStoreOptions } from './store/memory.js';
