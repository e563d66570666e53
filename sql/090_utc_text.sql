-- SPDX-License-Identifier: Apache-2.0
-- 090_utc_text.sql: the text that names the resource of a timestamptz row key.
-- A timestamptz prints in the session's TimeZone, which the server, the
-- database, the role or a gateway's environment (PGTZ) may set differently, so
-- one row would have a resource, and a fence, per zone. Its resource is its
-- text in UTC (store/fenced/fenced_sql.c, KEY_IDENTITY_UTC); the function's own
-- setting applies while it runs, the caller's session keeps its zone.
CREATE OR REPLACE FUNCTION fencegate.utc_text(t timestamptz) RETURNS text
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE SET TimeZone = 'UTC' AS $$
    SELECT t::text
$$;
