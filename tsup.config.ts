import { defineConfig } from 'tsup';

const external = ['vitest', 'fast-check', 'pg', '@electric-sql/pglite', 'ioredis', '@opentelemetry/api'];

export default defineConfig([
  // The library: unchanged by the CLI (its own build below shares no chunk with it).
  {
    entry: {
      index: 'src/index.ts',
      memory: 'src/memory.ts',
      testing: 'src/testing/index.ts',
      'testing-vitest': 'src/testing/vitest.ts',
      'testing-jest': 'src/testing/jest.ts',
      'testing-node': 'src/testing/node.ts',
      http: 'src/http.ts',
      postgres: 'src/postgres.ts',
      redis: 'src/redis.ts',
      otel: 'src/otel.ts',
    },
    format: ['esm', 'cjs'],
    dts: true,
    sourcemap: true,
    // Both builds run at once: the library's clean leaves the CLI's files alone.
    clean: ['!cli.js', '!cli.js.map'],
    target: 'node20',
    splitting: true,
    treeshake: true,
    external,
    // Keep `node:` on built-in imports: `node:test` (laurel/testing/node) has no unprefixed name.
    removeNodeProtocol: false,
  },
  // The `laurel` command (package.json "bin"): ESM only, executable. It imports the library by the package's
  // own name (`laurel`, `laurel/postgres`, `laurel/redis`, resolved through "exports" at run time), so it
  // bundles none of it and a config module that imports `laurel` shares the CLI's copy. tsx (loading .ts
  // config modules) and the drivers are optional and imported only when needed.
  {
    entry: { cli: 'src/cli.ts' },
    format: ['esm'],
    dts: false,
    sourcemap: true,
    clean: false,
    target: 'node20',
    splitting: false,
    treeshake: true,
    banner: { js: '#!/usr/bin/env node' },
    external: [...external, /^laurel(?:\/.*)?$/, 'tsx', 'tsx/esm/api'],
  },
]);
