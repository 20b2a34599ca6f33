/**
 * The conformance suite's mutation score (`npm run test:mutation`, a CI step): runs `runStoreConformance`
 * against the reference SQLite adapter (test/sqlite/store.ts), which must pass every check (skipping only
 * the optional part it leaves out: the outbox, the tenancy checks' outbox one included), then against each
 * of its injected bugs ({@link MUTANTS}), each of which must fail at least one check. Prints one line per mutant with the first
 * check that caught it and ends with `conformance mutation score: C/N caught (P%)`; exits non-zero when the
 * clean adapter fails a check or any mutant survives. `--only <mutant>` runs one mutant (and the clean run).
 */
import { runStoreConformance, type ConformanceReport } from '../../src/testing/index.js';
import { createSqliteStore, MUTANTS, type Mutant } from './store.js';

/** Checks the clean adapter may skip: the optional part it does not implement (the outbox, per tenant too). */
const OPTIONAL = /^(outbox \(OutboxStore\)|tenants: outbox events)/;

/** Runs the suite against the adapter with `mutant` (none: the clean adapter), closing every store it made. */
async function run(mutant?: Mutant): Promise<ConformanceReport> {
  const opened: { close(): void }[] = [];
  try {
    return await runStoreConformance(({ faults }) => {
      const store = createSqliteStore({ faults, ...(mutant === undefined ? {} : { mutant }) });
      opened.push(store);
      return store;
    });
  } finally {
    for (const store of opened) store.close();
  }
}

const firstLine = (error: unknown) => (error instanceof Error ? error.message : String(error)).split('\n')[0]?.slice(0, 120) ?? '';

async function main(): Promise<number> {
  const only = process.argv.indexOf('--only');
  const names = (only >= 0 ? [process.argv[only + 1]] : Object.keys(MUTANTS)) as Mutant[];
  for (const name of names) if (!(name in MUTANTS)) throw new Error(`unknown mutant ${JSON.stringify(name)}; known: ${Object.keys(MUTANTS).join(', ')}`);

  const clean = await run();
  const unexpected = clean.skipped.filter((s) => !OPTIONAL.test(s.name));
  console.log(`clean adapter: ${clean.passed.length} passed, ${clean.failed.length} failed, ${clean.skipped.length} not applicable (the outbox)`);
  for (const f of clean.failed) console.log(`  FAILED ${f.name}\n    ${firstLine(f.error)}`);
  for (const s of unexpected) console.log(`  SKIPPED ${s.name}: ${s.reason}`);

  let caught = 0;
  for (const name of names) {
    const report = await run(name);
    const first = report.failed[0];
    if (first) {
      caught++;
      console.log(`caught   ${name} by "${first.name}" (${firstLine(first.error)}; ${report.failed.length} check(s) failed)`);
    } else console.log(`SURVIVED ${name}: ${MUTANTS[name]}`);
  }
  const percent = names.length === 0 ? 100 : Math.floor((caught / names.length) * 1000) / 10;
  console.log(`conformance mutation score: ${caught}/${names.length} caught (${percent}%)`);
  return clean.failed.length === 0 && unexpected.length === 0 && caught === names.length ? 0 : 1;
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
