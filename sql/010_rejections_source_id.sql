-- SPDX-License-Identifier: Apache-2.0
-- 010_rejections_source_id.sql: an idempotency key for audit rows that arrive
-- through a queue. A stale write to a Redis key is recorded first in the Redis
-- stream "fg:audit" (in the same script that refuses it) and then copied here,
-- at least once, by whichever gateway drains the stream; source_id is the
-- stream entry ("fg:audit/<entry id>"), so a copy made twice is stored once.
-- Rows written directly (Postgres writes) leave it NULL.
ALTER TABLE fencegate.rejections ADD COLUMN IF NOT EXISTS source_id text;
CREATE UNIQUE INDEX IF NOT EXISTS rejections_source_id ON fencegate.rejections (source_id);
