-- SPDX-License-Identifier: Apache-2.0
-- 020_audit_retention.sql: what keeps the stores cheap as they grow.
-- The start-up raise of the fence sequence reads max(fence) of every stored
-- resource fence: with this index that is one step down a b-tree instead of a
-- scan of the whole table. (The audit retention prune, in the background,
-- deletes old rejections in small batches through the existing index on "at".)
CREATE INDEX IF NOT EXISTS resource_fences_fence ON fencegate.resource_fences (fence);
