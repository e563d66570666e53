-- 011_audit_order.sql: audit records in commit order, one per refused request.
--
-- Pagination key: GET /v1/audit/rejections pages by id (after_id), which is
-- safe only if ids become visible in id order. A bigserial alone does not do
-- that: two transactions take ids 5 and 6, 6 commits first, a reader tailing
-- with after_id=6 never sees 5. So every insert takes one transaction-level
-- advisory lock before it takes its id and holds it until it commits: ids are
-- handed out and committed one transaction after the other, and a reader that
-- has seen id N will only ever see new records above N. The lock is taken only
-- by refusals (rare by nature), for the few statements of their own commit.
--
-- One record per refused request: a batch refused because several of its
-- resources hold newer fences leaves one record; resource is the one the 409
-- answer names (the first in resource order), resources all that refused it.
-- A single write's resources is just its resource. The filter ?resource=
-- matches any of them.
ALTER TABLE fencegate.rejections ADD COLUMN IF NOT EXISTS resources text[];
UPDATE fencegate.rejections SET resources = ARRAY[resource] WHERE resources IS NULL;
CREATE INDEX IF NOT EXISTS rejections_resources ON fencegate.rejections USING gin (resources);

CREATE OR REPLACE FUNCTION fencegate.rejections_in_commit_order() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(7460518230518);
    NEW.id := nextval(pg_get_serial_sequence('fencegate.rejections', 'id'));
    IF NEW.resources IS NULL THEN
        NEW.resources := ARRAY[NEW.resource];
    END IF;
    RETURN NEW;
END
$$;
DROP TRIGGER IF EXISTS rejections_in_commit_order ON fencegate.rejections;
CREATE TRIGGER rejections_in_commit_order BEFORE INSERT ON fencegate.rejections
    FOR EACH ROW EXECUTE FUNCTION fencegate.rejections_in_commit_order();
