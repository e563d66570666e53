-- SPDX-License-Identifier: Apache-2.0
-- 030_rejections_principal.sql: the API key (its id) that made a refused
-- write, when auth is on. NULL for rows written with auth off and for rows
-- older than this column.
ALTER TABLE fencegate.rejections ADD COLUMN IF NOT EXISTS principal text;
