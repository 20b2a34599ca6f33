/**
 * The hosted service's OpenAPI descriptions (vendored in test/fixtures/openapi, see its README) with an Ajv
 * 2020 instance that holds them: what the contract and change-notification tests validate against.
 */
import { readFileSync } from 'node:fs';
import Ajv2020 from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';

export type Json = Record<string, unknown>;
export type Operation = { parameters?: Json[]; requestBody?: Json; responses: Record<string, Json> };
export type Spec = { paths: Record<string, Record<string, Operation>> } & Json;

const METHODS = ['get', 'put', 'post', 'patch', 'delete'];

/** One of the vendored descriptions, registered in `ajv` under its file name (`application.json`, `admin.json`). */
export function openapi(file: 'application.json' | 'admin.json') {
  const spec = JSON.parse(readFileSync(new URL(`./fixtures/openapi/${file}`, import.meta.url), 'utf8')) as Spec;
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  addFormats(ajv);
  ajv.addSchema(spec, file);
  /** Every operation of the spec, as `METHOD /path/{template}`. */
  const operations = Object.entries(spec.paths).flatMap(([path, item]) => Object.keys(item).filter((m) => METHODS.includes(m)).map((m) => `${m.toUpperCase()} ${path}`));
  /** The operation `METHOD /path/{template}`. */
  const operation = (op: string): Operation => {
    const [method, path] = op.split(' ') as [string, string];
    const found = spec.paths[path]?.[method.toLowerCase()];
    if (!found) throw new Error(`no operation ${op}`);
    return found;
  };
  /** The Ajv reference of an operation's JSON response schema for `status`. */
  const pointer = (op: string, status: number) => {
    const [method, path] = op.split(' ') as [string, string];
    const escaped = encodeURIComponent(path.replace(/~/g, '~0').replace(/\//g, '~1'));
    return `${file}#/paths/${escaped}/${method.toLowerCase()}/responses/${status}/content/application~1json/schema`;
  };
  /** A request body's example(s) in the spec. */
  const bodyExamples = (op: string): unknown[] => {
    const content = (operation(op).requestBody?.content as Json | undefined)?.['application/json'] as Json | undefined;
    if (!content) return [];
    if (content.example !== undefined) return [content.example];
    return Object.values((content.examples ?? {}) as Record<string, { value: unknown }>).map((e) => e.value);
  };
  return { spec, ajv, operations, operation, pointer, bodyExamples };
}

/**
 * Loads a contract test (`load`, a dynamic import) with `LAUREL_CONTRACT_TENANT` set to the spec's own
 * `Tenant-ID` example (`components.parameters.TenantId.example`): the contract file reads it once at import
 * and sends it on every request. Cleared afterwards, so later files of the worker run without it.
 */
export async function underTenantExample(file: 'application.json' | 'admin.json', load: () => Promise<unknown>): Promise<void> {
  const spec = JSON.parse(readFileSync(new URL(`./fixtures/openapi/${file}`, import.meta.url), 'utf8')) as { components: { parameters: { TenantId: { example: string } } } };
  process.env.LAUREL_CONTRACT_TENANT = spec.components.parameters.TenantId.example;
  try {
    await load();
  } finally {
    delete process.env.LAUREL_CONTRACT_TENANT;
  }
}
