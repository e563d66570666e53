-- SPDX-License-Identifier: Apache-2.0
-- 111_fence_revoked_dropped.sql: fencegate.fence_revoked (110) is no longer
-- called. Writes read the revocations in their own statement again; a revoke
-- waits, before it answers, for every transaction of a gateway connection
-- that began before its revocation was committed (store/fenced/revocations.c
-- revocation_drain), so that no write which read the revocations before that
-- commit can commit after the answer.
DROP FUNCTION IF EXISTS fencegate.fence_revoked(bigint);
