/** Real servers for the suites that can use them: set LAUREL_PG_URL and LAUREL_REDIS_URL (see README). */
export const PG_URL = process.env.LAUREL_PG_URL;
export const REDIS_URL = process.env.LAUREL_REDIS_URL;
export const uniq = (label: string) => `${label}_${process.pid}_${Date.now().toString(36)}_${Math.random().toString(36).slice(2, 8)}`;
