/**
 * The application API contract (contract.application.test.ts) once more, every request with the spec's own `Tenant-ID`
 * example, answered by that tenant's engine.
 */
import { underTenantExample } from './openapi.js';

await underTenantExample('application.json', () => import('./contract.application.test.js'));
