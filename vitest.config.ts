import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

const src = (p: string) => fileURLToPath(new URL(`./src/${p}`, import.meta.url));

export default defineConfig({
  resolve: {
    alias: [
      { find: /^laurel\/memory$/, replacement: src('memory.ts') },
      { find: /^laurel\/testing$/, replacement: src('testing/index.ts') },
      { find: /^laurel\/http$/, replacement: src('http.ts') },
      { find: /^laurel\/postgres$/, replacement: src('postgres.ts') },
      { find: /^laurel\/redis$/, replacement: src('redis.ts') },
      { find: /^laurel\/otel$/, replacement: src('otel.ts') },
      { find: /^laurel$/, replacement: src('index.ts') },
    ],
  },
  test: {
    include: ['test/**/*.test.ts'],
    typecheck: { enabled: true, include: ['test/**/*.test-d.ts'], tsconfig: './tsconfig.json' },
    testTimeout: 60_000,
  },
});
