-- SPDX-License-Identifier: Apache-2.0
-- 001_init.sql: the gateway's own objects, in schema fencegate. Application tables
-- are not the gateway's: the example invoices table of the README walk-through
-- and the tests is in examples/invoices.sql, which a deployment does not run.
-- Every migration is written to be re-runnable (IF NOT EXISTS): the gateway applies
-- any migration of sql/ it does not find recorded, whatever its number.

-- The highest fence accepted so far for each fenced resource ("pg:invoices/42").
-- A write is applied only with a fence >= this one; the row is updated in the
-- same transaction as the write it guards.
CREATE TABLE IF NOT EXISTS fencegate.resource_fences (
    resource   text PRIMARY KEY,
    fence      bigint NOT NULL CHECK (fence > 0),
    updated_at timestamptz NOT NULL DEFAULT clock_timestamp()
);

-- Every rejected write, kept however the rejection came about (stale fence on a
-- Postgres row or a Redis key). Newest last; ids in commit order: see 011.
CREATE TABLE IF NOT EXISTS fencegate.rejections (
    id              bigserial PRIMARY KEY,
    at              timestamptz NOT NULL DEFAULT clock_timestamp(),
    resource        text NOT NULL,
    lock_name       text,
    presented_fence bigint NOT NULL,
    current_fence   bigint NOT NULL,
    owner           text,
    client_addr     text,
    method          text NOT NULL,
    reason          text NOT NULL
);
CREATE INDEX IF NOT EXISTS rejections_resource_id ON fencegate.rejections (resource, id);
CREATE INDEX IF NOT EXISTS rejections_lock_id ON fencegate.rejections (lock_name, id);
CREATE INDEX IF NOT EXISTS rejections_at ON fencegate.rejections (at);

-- Gateway-wide settings, e.g. the generated token-signing secret.
CREATE TABLE IF NOT EXISTS fencegate.settings (
    name  text PRIMARY KEY,
    value text NOT NULL
);
