-- SPDX-License-Identifier: Apache-2.0
-- 060_fence_slots.sql: the hash slots of a Redis Cluster whose fence sequence
-- was ever recovered (docs/cluster.md). A slot's first recovery finds no row,
-- adds it, and raises no write floor: no key of that slot was ever written
-- through the gateway (a write needs the floor, which that recovery makes), so
-- nothing there can have gone back. Every later recovery that does not trust
-- the slot (a failover, a restart, a reshard) raises the floor as on one Redis.
-- One Redis never writes here.
CREATE TABLE IF NOT EXISTS fencegate.fence_slots (
    slot       integer PRIMARY KEY CHECK (slot >= 0 AND slot < 16384),
    first_used timestamptz NOT NULL DEFAULT clock_timestamp()
);
