-- SPDX-License-Identifier: Apache-2.0
-- 140_key_taken.sql: the refusal of a default-mode POST whose key a row
-- already has. Such an insert names the key's unique index as its arbiter
-- (ON CONFLICT (<key>) DO UPDATE ... WHERE fencegate.key_taken(...)), for two
-- reasons: where the index was dropped since the gateway read the table,
-- Postgres refuses the statement (42P10, answered 503 until the table is put
-- back) instead of inserting a second row with the key; and where a row has
-- the key, this function fails the statement as the unique violation of a
-- plain INSERT would (SQLSTATE 23505, answered 409 conflict), undoing the
-- statement and any fence it claimed. It runs in the conflict's WHERE, before
-- Postgres checks the row against the table's UPDATE policies, so the update
-- the clause names is never made and row security answers as for an insert.
CREATE OR REPLACE FUNCTION fencegate.key_taken(asked anyelement) RETURNS boolean
    LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog AS $$
BEGIN
    RAISE EXCEPTION USING ERRCODE = 'unique_violation',
        MESSAGE = format('duplicate key value: a row with key %L already exists', asked);
END
$$;
