-- SPDX-License-Identifier: Apache-2.0
-- 070_fence_slot_owner.sql: which Redis process a Redis Cluster slot's fence
-- sequence was last recovered on (its run_id), so that a slot moved by a live
-- reshard can be adopted by its new owner without a loss (docs/cluster.md,
-- "A moved slot"). Every recovery of a slot sets it; an adoption changes it only
-- from the process the slot's keys name as their last owner (or from the
-- adopter itself), so a new owner that restarted from data older than an
-- adoption made since finds another owner here and counts a loss. NULL: a slot
-- recovered before this column existed (its next move is a loss, once).
ALTER TABLE fencegate.fence_slots ADD COLUMN IF NOT EXISTS owner text;
