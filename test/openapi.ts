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
  return { spec, ajv, operations };
}
