/**
 * The admin API contract (contract.admin.test.ts) once more, every request with the spec's own `Tenant-ID`
 * example (`components.parameters.TenantId.example`), answered by that tenant's engine.
 */
import { readFileSync } from 'node:fs';

const spec = JSON.parse(readFileSync(new URL('./fixtures/openapi/admin.json', import.meta.url), 'utf8')) as { components: { parameters: { TenantId: { example: string } } } };
process.env.LAUREL_CONTRACT_TENANT = spec.components.parameters.TenantId.example;
try {
  await import('./contract.admin.test.js');
} finally {
  // Read once at import: later files of this worker run without it.
  delete process.env.LAUREL_CONTRACT_TENANT;
}
