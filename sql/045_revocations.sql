-- SPDX-License-Identifier: Apache-2.0
-- 045_revocations.sql: leases revoked by an operator (POST .../revoke). A row
-- names the fence of the revoked lease; from the revoke's answer on, every
-- fenced write presenting that fence is refused, on any resource, and audited
-- with reason 'revoked'. Postgres writes look here in the same statement;
-- Redis writes look at the mirror set "fg:revoked", rebuilt from this table
-- whenever Redis comes back without it. Rows are kept for good: a token never
-- expires by itself, so neither may its revocation (operators revoke rarely;
-- a row is a few dozen bytes).
CREATE TABLE IF NOT EXISTS fencegate.revocations (
    fence      bigint PRIMARY KEY,
    kind       text NOT NULL,
    name       text NOT NULL,
    reason     text NOT NULL DEFAULT '',
    revoked_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
