/**
 * Whether Laurel runs outside production (`NODE_ENV` is not `production`): then states and the whole compiled
 * configuration are frozen, so that a mutation anywhere fails loudly. Production keeps only what costs nothing
 * to keep frozen (see config/define.ts).
 */
export const DEVELOPMENT = (globalThis as { process?: { env?: Record<string, string | undefined> } }).process?.env?.NODE_ENV !== 'production';
