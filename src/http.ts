/**
 * `laurel/http`: the wire API as a fetch-standard handler, and a `node:http` adapter.
 *
 * @module laurel/http
 */
export { createHttpHandler } from './http/handler.js';
export type { FetchHandler, HttpHandlerOptions } from './http/handler.js';
export { toNodeListener } from './http/node.js';
export { createApplicationKey, isApplicationKey } from './http/keys.js';
export type { ApplicationKeyRecord, ApplicationKeysOptions, ApplicationKeySecret, CreatedApplicationKey } from './http/keys.js';
