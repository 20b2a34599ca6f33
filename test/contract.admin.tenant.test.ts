/**
 * The admin API contract (contract.admin.test.ts) once more, every request with the spec's own `Tenant-ID`
 * example, answered by that tenant's engine.
 */
import { underTenantExample } from './openapi.js';

await underTenantExample('admin.json', () => import('./contract.admin.test.js'));
