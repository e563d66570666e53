-- SPDX-License-Identifier: Apache-2.0
-- 100_fence_claim_used.sql: the last look of a default-mode PATCH or DELETE
-- that claimed its fence. Such a write claims the fence (raises the resource's
-- row of fencegate.resource_fences) where its row is in the statement's
-- snapshot, and then writes the row; a concurrent DELETE that took the row
-- after that snapshot leaves the write nothing to write, and the write answers
-- 404, which must store no fence. The write calls this function with whether it
-- wrote or claimed nothing (used), and it fails the statement with SQLSTATE
-- FGC01 otherwise, undoing the claim with it; the gateway then answers the
-- write as one that wrote nothing (store/fenced/fenced_pg.c). It is STABLE, not
-- VOLATILE: the write's "WHERE fence_claim_used(...)" names no column of the
-- rows it filters, so the planner runs it once, before them, also when there
-- are none; a VOLATILE function there is run per row, never for no row.
CREATE OR REPLACE FUNCTION fencegate.fence_claim_used(used boolean) RETURNS boolean
    LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF NOT used THEN
        RAISE EXCEPTION USING ERRCODE = 'FGC01',
            MESSAGE = 'a fence was claimed for a write that wrote nothing';
    END IF;
    RETURN true;
END
$$;
