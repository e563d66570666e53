-- SPDX-License-Identifier: Apache-2.0
-- 120_rejections_lease_kind.sql: the kind of lease the refused write's token
-- was issued for, 'lock' or 'semaphore'. Locks and semaphores name themselves
-- apart (a lock and a semaphore may share a name), and lock_name holds either
-- kind's name, so a record says which one here. NULL for rows older than this
-- column, whose kind was not kept (GET /v1/audit/rejections answers null for
-- them and leaves them out of a lease_kind filter), and for entries of the
-- Redis audit stream written by a gateway from before this column.
ALTER TABLE fencegate.rejections ADD COLUMN IF NOT EXISTS lease_kind text;
