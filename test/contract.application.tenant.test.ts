/**
 * The application API contract (contract.application.test.ts) once more, every request with the spec's own `Tenant-ID`
 * example (`components.parameters.TenantId.example`), answered by that tenant's engine.
 */
import { readFileSync } from 'node:fs';

const spec = JSON.parse(readFileSync(new URL('./fixtures/openapi/application.json', import.meta.url), 'utf8')) as { components: { parameters: { TenantId: { example: string } } } };
process.env.LAUREL_CONTRACT_TENANT = spec.components.parameters.TenantId.example;
try {
  await import('./contract.application.test.js');
} finally {
  // Read once at import: later files of this worker run without it.
  delete process.env.LAUREL_CONTRACT_TENANT;
}
