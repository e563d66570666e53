-- SPDX-License-Identifier: Apache-2.0
-- 080_fence_kept_check.sql: the last look of a write that created a row of a
-- fence_column table. Such a write goes ahead only where no higher fence is
-- kept for the row's resource, the fence of a deleted row; but it reads that as
-- its statement began, and a create that met the row of a delete then being
-- committed waits for that delete and creates the row after it. This function,
-- called by the write for a row it created, looks again with a snapshot of its
-- own (a volatile function's query takes a new one under READ COMMITTED) and
-- refuses the write with SQLSTATE FGK01 when a higher fence is kept by then;
-- the gateway then answers the write as stale (store/fenced/fenced_pg.c).
CREATE OR REPLACE FUNCTION fencegate.fence_kept_check(res text, presented bigint) RETURNS boolean
    LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM fencegate.resource_fences rf
               WHERE rf.resource = res AND rf.fence > presented) THEN
        RAISE EXCEPTION USING ERRCODE = 'FGK01',
            MESSAGE = format('a fence above %s is kept for %s', presented, res);
    END IF;
    RETURN true;
END
$$;
