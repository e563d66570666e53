-- SPDX-License-Identifier: Apache-2.0
-- 110_fence_revoked.sql: whether a write presenting fence may not go ahead
-- because that fence is revoked, asked by every fenced write to Postgres (and
-- a batch's opening) in its own statement. A revoke answers only once no write
-- of the fence can commit after it: it records the revocation, then takes the
-- fence's advisory lock (class 70460, the fence's low 31 bits) exclusively,
-- which waits for every write holding it shared, and lets it go
-- (store/fenced/revocations.c). A write takes that lock shared here, held to
-- its commit, and then reads the revocations with a snapshot of its own
-- (VOLATILE: each statement of this function sees what was committed when it
-- ran), not the write statement's, which may be older than a wait for a row
-- lock: so it either holds the lock before the revoke drains, and the revoke
-- answers after it, or reads the revocation. While a revoke drains, the lock
-- cannot be had: the revocation is recorded by then, and the answer is true.
-- (Another fence with the same low 31 bits, 2^31 fences apart, may be told
-- revoked during that drain.)
CREATE OR REPLACE FUNCTION fencegate.fence_revoked(fence bigint) RETURNS boolean
    LANGUAGE plpgsql VOLATILE COST 1 AS $$
BEGIN
    IF NOT pg_try_advisory_xact_lock_shared(70460, (fence % 2147483648)::int4) THEN
        RETURN true;
    END IF;
    RETURN EXISTS (SELECT 1 FROM fencegate.revocations rv WHERE rv.fence = fence_revoked.fence);
END
$$;
