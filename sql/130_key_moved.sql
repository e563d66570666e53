-- SPDX-License-Identifier: Apache-2.0
-- 130_key_moved.sql: the refusal of a write whose row is not the one its key
-- names. The fence and the bound lock a write is judged by are those of the
-- key in its path; a BEFORE trigger of the table that changes the key
-- (NEW.id := lower(NEW.id)), or a unique index that takes two keys for one
-- (a user-defined operator class, under which ON CONFLICT (key) updates
-- another row), would move the write onto a row of another resource. Every
-- write statement returns, for each row it wrote, CASE WHEN <the row's key> =
-- <the key asked> THEN true ELSE fencegate.key_moved(...) END: the key
-- column's own equality (a numeric 1.0 and 1.00 are one key), and this
-- function only where they differ, so an accepted write pays one comparison
-- (and the executor's set-up of the call, cheapest with both keys given in
-- their own type: the function is polymorphic, casts to text would be set up
-- on every run too; its SET clause, beside fixing what format() resolves to,
-- lets that set-up skip the lookup of its language until it is called).
-- It fails the statement with SQLSTATE FGM01, which undoes the whole
-- statement (its write and any fence it claimed); the gateway answers
-- 400 invalid_field with this message (store/backend/sqlstate.c).
CREATE OR REPLACE FUNCTION fencegate.key_moved(asked anyelement, stored anyelement) RETURNS boolean
    LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog AS $$
BEGIN
    RAISE EXCEPTION USING ERRCODE = 'FGM01',
        MESSAGE = format('the table changed the key from %L to %L (a BEFORE trigger, or a unique'
                         ' index that takes the two for one key), so the write was not applied',
                         asked, stored);
END
$$;
