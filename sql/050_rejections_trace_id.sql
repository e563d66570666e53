-- SPDX-License-Identifier: Apache-2.0
-- 050_rejections_trace_id.sql: the W3C trace id of the refused write's request
-- (its traceparent header), so that a refusal can be followed from the calling
-- service's trace. NULL for a request without a valid traceparent and for rows
-- older than this column.
ALTER TABLE fencegate.rejections ADD COLUMN IF NOT EXISTS trace_id text;
