/**
 * `laurel/redis`: leaderboard ranks on Redis sorted sets (ioredis or any client with `call`).
 *
 * @module laurel/redis
 */
export { createRedisRankIndex } from './redis/index.js';
export type { RedisLike, RedisRankIndexOptions } from './redis/index.js';
export { rebuildRankIndex, withRankIndex } from './store/rank-index.js';
export type { RankIndex, RankIndexSource, VersionedWrite, WithRankIndexOptions } from './store/rank-index.js';
