-- SPDX-License-Identifier: Apache-2.0
-- 002_fence_reservation.sql: fences are reserved here, in blocks, before Redis
-- may issue them, so that after Redis loses its data the gateway resumes above
-- every fence ever issued, not only above those that reached storage.
CREATE TABLE IF NOT EXISTS fencegate.fence_reservation (
    only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row),
    reserved bigint NOT NULL CHECK (reserved >= 0)
);
INSERT INTO fencegate.fence_reservation (reserved)
SELECT greatest((SELECT coalesce(max(fence), 0) FROM fencegate.resource_fences),
                (SELECT coalesce(max(presented_fence), 0) FROM fencegate.rejections))
ON CONFLICT (only_row) DO NOTHING;
