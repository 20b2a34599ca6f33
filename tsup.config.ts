import { defineConfig } from 'tsup';

export default defineConfig({
  entry: {
    index: 'src/index.ts',
    memory: 'src/memory.ts',
    testing: 'src/testing/index.ts',
    http: 'src/http.ts',
    postgres: 'src/postgres.ts',
    redis: 'src/redis.ts',
  },
  format: ['esm', 'cjs'],
  dts: true,
  sourcemap: true,
  clean: true,
  target: 'node20',
  splitting: true,
  treeshake: true,
  external: ['vitest', 'fast-check', 'pg', '@electric-sql/pglite', 'ioredis'],
});
