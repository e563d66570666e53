"""One resource, one identity (issue 16, item 2): every path that names one row names one resource, so
one fence guards it.

- numeric keys: /v1/pg/ledger/1796028067 and /v1/pg/ledger/1796028067.0 (and 1.796028067e9) are one row
  and one resource; an older token is refused on every spelling. (Broken variant caught: fenced_sql.c
  building the identity from key::numeric::text, which keeps the scale, as before the fix — the older
  token was accepted on "...067.0".)
- keys whose column has a modifier: a varchar(5) key of six characters ("ABCDE " is stored as "ABCDE")
  is refused, and a timestamp(0) key's text names the second Postgres stores ("...00.4" is the row
  "...00"), so an older token is refused on every spelling of the row. (Broken variants caught: the
  length check left out of key_text.c, and the cast without its modifier in fenced_schema.c — in both,
  the older token's write was applied to the row under a fence of its own.)
- key types where equal values print differently (float8, citext, interval, money, a text key under a
  non-deterministic collation or with a unique index under one; jsonb, arrays, ranges, records and domains
  over them, which compare the numbers inside them by value: {"a": 1} and {"a": 1.0} are one jsonb) stop
  start-up with a message naming the table, the column and why. (Broken variants caught:
  fenced_sql_key_refusal answering NULL — the gateway started; refusing only the float, citext and interval
  types — the jsonb, array, range and record tables started; the key's unique indexes left out of the
  collation check — the text key with a unique index under a case-insensitive collation started, and a PUT
  of /v1/pg/<table>/ABC by the token of a lock bound to "...:ABC" overwrote the row "abc", guarded by
  another lock: ON CONFLICT (id) takes that index as its arbiter.)
- timestamptz and bytea keys print as the session's TimeZone and bytea_output say, which a gateway's
  environment sets (PGTZ, PGOPTIONS): one row must have one resource through gateways of different
  settings. (Broken variant caught: the key's plain text as its identity — the older token's write through
  a gateway in another zone, or with bytea_output escape, was applied to the row under a fence of its own.)
  A write answered 204 (Prefer: return=minimal), which returns no row, names its resource in the request log
  as the answers with a row and the audit records do, in both table modes, a write its table's trigger
  skipped too. (Caught: the log named the key as sent, "pg:ident_tstz/2024-01-01T09:00:00+09".)
- one row, one table: a partition listed beside its partitioned table (one row, two resources), or a table
  that other tables inherit (a key that does not single out a row), stops start-up naming the entry. A table
  made to inherit a served one after start-up, holding rows of the same keys, is neither read nor written
  through it: every statement names ONLY the served table, in both table modes, single writes and batches.
  (Caught: a PATCH or DELETE of key 6 wrote the heir's row 6 too, under the one fence, a key only the heir
  held was patched and deleted through the parent, and a GET answered 500, "more than one row returned by a
  subquery".) A partitioned table, one partition alone and a table that inherits another are written by
  every op, alone and in a batch, in both table modes, a create answered as one (201 for a POST), a stale
  token refused and audited once. (Caught: a PUT or POST of a partitioned fence_column table, and a batch
  with one, answered 400 invalid_field, "cannot retrieve a system column in this context".)

Owns: these properties. Must not: leave its tables behind (dropped in tearDownClass).
"""

from __future__ import annotations

import json
import os
import sys
import unittest
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import Gateway, HarnessError, psql, wait_for  # noqa: E402
from pg_helpers import records_listing, stored_fence, unique  # noqa: E402

SETUP = """
CREATE EXTENSION IF NOT EXISTS citext;
DROP COLLATION IF EXISTS public.fg_ci;
CREATE COLLATION public.fg_ci (provider = icu, locale = 'und-u-ks-level2', deterministic = false);
CREATE TABLE IF NOT EXISTS public.ident_ledger (id numeric(20, 4) PRIMARY KEY, note text);
CREATE TABLE IF NOT EXISTS public.ident_float (id float8 PRIMARY KEY, note text);
CREATE TABLE IF NOT EXISTS public.ident_citext (id citext PRIMARY KEY, note text);
CREATE TABLE IF NOT EXISTS public.ident_interval (id interval PRIMARY KEY, note text);
CREATE TABLE IF NOT EXISTS public.ident_ci (id text COLLATE public.fg_ci PRIMARY KEY, note text);
CREATE TABLE IF NOT EXISTS public.ident_ci_index (id text PRIMARY KEY, note text);
CREATE UNIQUE INDEX IF NOT EXISTS ident_ci_index_ci ON public.ident_ci_index (id COLLATE public.fg_ci);
CREATE TABLE IF NOT EXISTS public.ident_code (id varchar(5) PRIMARY KEY, note text);
CREATE TABLE IF NOT EXISTS public.ident_at (id timestamp(0) PRIMARY KEY, note text);
CREATE TABLE IF NOT EXISTS public.ident_money (id money PRIMARY KEY, note text);
CREATE TABLE IF NOT EXISTS public.ident_json (id jsonb PRIMARY KEY, note text);
CREATE TABLE IF NOT EXISTS public.ident_array (id numeric[] PRIMARY KEY, note text);
CREATE TABLE IF NOT EXISTS public.ident_range (id numrange PRIMARY KEY, note text);
DROP TYPE IF EXISTS public.ident_pair CASCADE;
CREATE TYPE public.ident_pair AS (n numeric, t text);
CREATE TABLE IF NOT EXISTS public.ident_record (id public.ident_pair PRIMARY KEY, note text);
DROP DOMAIN IF EXISTS public.ident_doc CASCADE;
CREATE DOMAIN public.ident_doc AS jsonb;
CREATE TABLE IF NOT EXISTS public.ident_doc_key (id public.ident_doc PRIMARY KEY, note text);
CREATE TABLE IF NOT EXISTS public.ident_tstz (id timestamptz PRIMARY KEY, note text);
CREATE TABLE IF NOT EXISTS public.ident_bytes (id bytea PRIMARY KEY, note text);
CREATE TABLE IF NOT EXISTS public.ident_tstz_col (id timestamptz PRIMARY KEY, note text, lock_fence bigint);
CREATE TABLE IF NOT EXISTS public.ident_bytes_col (id bytea PRIMARY KEY, note text, lock_fence bigint);
CREATE TABLE IF NOT EXISTS public.ident_part (id integer PRIMARY KEY, note text) PARTITION BY RANGE (id);
CREATE TABLE IF NOT EXISTS public.ident_part_low PARTITION OF public.ident_part FOR VALUES FROM (0) TO (1000);
CREATE TABLE IF NOT EXISTS public.ident_part_col (id integer PRIMARY KEY, note text, lock_fence bigint)
    PARTITION BY RANGE (id);
CREATE TABLE IF NOT EXISTS public.ident_part_col_low PARTITION OF public.ident_part_col FOR VALUES FROM (0) TO (1000);
CREATE TABLE IF NOT EXISTS public.ident_heirloom (id integer PRIMARY KEY, note text);
CREATE TABLE IF NOT EXISTS public.ident_heir (id integer PRIMARY KEY, note text) INHERITS (public.ident_heirloom);
CREATE TABLE IF NOT EXISTS public.ident_ip (id integer PRIMARY KEY, note text);
CREATE TABLE IF NOT EXISTS public.ident_ip_col (id integer PRIMARY KEY, note text, lock_fence bigint);
"""
TEARDOWN = """
DROP TABLE IF EXISTS public.ident_ledger, public.ident_float, public.ident_citext, public.ident_interval,
    public.ident_ci, public.ident_code, public.ident_at, public.ident_money, public.ident_json,
    public.ident_array, public.ident_range, public.ident_record, public.ident_doc_key, public.ident_tstz,
    public.ident_bytes, public.ident_tstz_col, public.ident_bytes_col, public.ident_part, public.ident_part_col,
    public.ident_heir, public.ident_heirloom, public.ident_ic, public.ident_ip, public.ident_ic_col,
    public.ident_ip_col, public.ident_ci_index;
DROP TYPE IF EXISTS public.ident_pair;
DROP DOMAIN IF EXISTS public.ident_doc;
DROP COLLATION IF EXISTS public.fg_ci;
DELETE FROM fencegate.resource_fences WHERE resource LIKE 'pg:ident\_%';
"""


class IdentityCase(unittest.TestCase):
    """A gateway writing the tables named in `tables` (key id, column note), made for the class."""
    tables: list = []

    @classmethod
    def setUpClass(cls):
        psql(SETUP)
        cls.gw = Gateway(config={"tables": {t: {"key": "id", "columns": ["note"]} for t in cls.tables}})
        cls.c = cls.gw.client()

    @classmethod
    def tearDownClass(cls):
        cls.c.close()
        cls.gw.stop()
        psql(TEARDOWN)

    def token(self):
        r = self.c.post(f"/v1/locks/{unique('ident')}/acquire", {"ttl_ms": 30000})
        self.assertEqual(r.status, 200, r)
        return r.body

    def put(self, key: str, token: str, note: str, table: str = ""):
        """PUT of row key (of the first of `tables` unless table names another)."""
        return self.c.request("PUT", f"/v1/pg/{table or self.tables[0]}/{key}", {"row": {"note": note}},
                              {"Fence-Token": token})


class NumericIdentity(IdentityCase):
    tables = ["ident_ledger"]

    def test_every_spelling_of_a_numeric_key_is_one_resource(self):
        old, new = self.token(), self.token()
        self.assertEqual(self.put("1796028067", new["token"], "new").status, 200)
        for spelling in ("1796028067", "1796028067.0", "1796028067.0000", "1.796028067e9", "01796028067"):
            r = self.put(spelling, old["token"], "old")
            self.assertEqual(r.status, 409, (spelling, r))
            self.assertEqual(r.body["resource"], "pg:ident_ledger/1796028067", r)
        got = self.c.get("/v1/pg/ident_ledger/1796028067.00")
        self.assertEqual((got.status, got.body["fence"], got.body["row"]["note"]), (200, new["fence"], "new"), got)
        self.assertEqual(psql("SELECT count(*) FROM fencegate.resource_fences"
                              " WHERE resource LIKE 'pg:ident_ledger/1796028067%'"), ["1"])
        frac = self.put("12.50", new["token"], "frac")
        self.assertEqual((frac.status, frac.body["resource"]), (200, "pg:ident_ledger/12.5"), frac)
        self.assertEqual(self.put("12.5000", old["token"], "old").status, 409)


class ModifiedKeys(IdentityCase):
    tables = ["ident_code", "ident_at"]

    def test_a_key_longer_than_its_varchar_is_refused(self):
        old, new = self.token(), self.token()
        self.assertEqual(self.put("ABCDE", new["token"], "new").status, 200)
        for spelling in ("ABCDE%20", "ABCDE%20%20", "ABCDEF"):
            r = self.put(spelling, old["token"], "old")
            self.assertEqual((r.status, r.body.get("type")), (400, "/problems/invalid_field"), (spelling, r))
            self.assertIn("at most 5 characters", r.body["detail"], r)
        self.assertEqual(psql("SELECT note FROM public.ident_code WHERE id = 'ABCDE'"), ["new"])
        self.assertEqual(self.put("%C3%A9t%C3%A9s", new["token"], "accents").status, 200)

    def test_a_timestamp_key_names_the_second_its_column_keeps(self):
        old, new = self.token(), self.token()
        self.assertEqual(self.put("2024-01-01%2000:00:00", new["token"], "new", table="ident_at").status, 200)
        for spelling in ("2024-01-01%2000:00:00.4", "2024-01-01T00:00:00", "2023-12-31%2023:59:59.6"):
            r = self.put(spelling, old["token"], "old", table="ident_at")
            self.assertEqual((r.status, r.body.get("resource")), (409, "pg:ident_at/2024-01-01 00:00:00"),
                             (spelling, r))
        self.assertEqual(psql("SELECT note FROM public.ident_at"), ["new"])
        self.assertEqual(psql("SELECT count(*) FROM fencegate.resource_fences WHERE resource LIKE 'pg:ident_at/%'"),
                         ["1"])


class SessionSettingKeys(IdentityCase):
    """A second gateway on the same tables whose sessions print timestamptz in Tokyo time and bytea in the
    escape format."""
    tables = ["ident_tstz", "ident_bytes"]

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.tokyo = Gateway(config={"tables": {t: {"key": "id", "columns": ["note"]} for t in cls.tables}},
                            env_overrides={"PGTZ": "Asia/Tokyo", "PGOPTIONS": "-c bytea_output=escape"})
        cls.tc = cls.tokyo.client()

    @classmethod
    def tearDownClass(cls):
        cls.tc.close()
        cls.tokyo.stop()
        super().tearDownClass()

    def check_one_resource(self, table: str, key: str, resource: str):
        old, new = self.token(), self.token()
        r = self.put(key, new["token"], "new", table=table)
        self.assertEqual((r.status, r.body.get("resource")), (200, resource), r)
        r = self.tc.request("PUT", f"/v1/pg/{table}/{key}", {"row": {"note": "old"}}, {"Fence-Token": old["token"]})
        self.assertEqual((r.status, r.body.get("resource")), (409, resource), r)
        self.assertEqual(psql(f"SELECT note FROM public.{table}"), ["new"])
        self.assertEqual(psql(f"SELECT resource FROM fencegate.resource_fences WHERE resource LIKE 'pg:{table}/%'"),
                         [resource])

    def test_a_timestamptz_key_is_one_resource_in_every_time_zone(self):
        self.check_one_resource("ident_tstz", "2024-01-01%2000:00:00%2B00", "pg:ident_tstz/2024-01-01 00:00:00+00")

    def test_a_bytea_key_is_one_resource_whatever_its_output_format(self):
        self.check_one_resource("ident_bytes", "%5Cx41ff", "pg:ident_bytes/\\x41ff")

    def test_a_revoked_batch_audits_the_resources_it_writes(self):
        """The audit record of a batch refused for a revoked lease lists every resource of the batch as its
        writes would name them (a timestamptz key in UTC, a bytea key in hex), whatever the spelling of the
        keys and the session's settings (the Tokyo gateway here). Caught: the resources were built from the
        keys' text as the batch spelled them ('pg:ident_tstz/2026-01-01 10:MM:SS+05')."""
        lock, n = unique("ident-revoked"), uuid.uuid4().int
        minute, second, byte = n % 60, n // 60 % 60, n // 3600 % 256
        stamp, hexed = f"2026-01-01 10:{minute:02}:{second:02}+05", f"41{byte:02X}"
        lease = self.c.post(f"/v1/locks/{lock}/acquire", {"ttl_ms": 30000}).body
        self.assertEqual(self.c.post(f"/v1/locks/{lock}/revoke", {"reason": "test"}).status, 200)
        ops = {"ops": [{"op": "put", "table": "ident_tstz", "key": stamp, "row": {"note": "late"}},
                       {"op": "patch", "table": "ident_bytes", "key": f"\\x{hexed}", "set": {"note": "late"}}]}
        r = self.tc.request("POST", "/v1/pg/batch", ops, {"Fence-Token": lease["token"]})
        self.assertEqual((r.status, r.body.get("reason")), (410, "revoked"), r)
        utc = f"pg:ident_tstz/2026-01-01 05:{minute:02}:{second:02}+00"
        records = records_listing(utc, f"pg:ident_bytes/\\x{hexed.lower()}")
        self.assertEqual([(x["resource"], x["resources"], x["reason"]) for x in records],
                         [(utc, [utc, f"pg:ident_bytes/\\x{hexed.lower()}"], "revoked")])


class UnreadKeyNames(IdentityCase):
    """timestamptz and bytea keys in both table modes, spelled otherwise than Postgres prints them."""
    tables = ["ident_tstz", "ident_bytes", "ident_tstz_col", "ident_bytes_col"]

    @classmethod
    def setUpClass(cls):
        psql(SETUP)
        for t in cls.tables:  # an update that changes nothing is skipped (applied in the default mode, 404 on
            # a fence_column table, which never answers a write that wrote nothing as applied)
            psql(f"CREATE TRIGGER {t}_same BEFORE UPDATE ON public.{t} FOR EACH ROW"
                 " EXECUTE FUNCTION suppress_redundant_updates_trigger()")
        cls.gw = Gateway(config={"tables": {t: {"key": "id", "columns": ["note"],
                                                **({"fence_column": "lock_fence"} if t.endswith("_col") else {})}
                                            for t in cls.tables}})
        cls.c = cls.gw.client()

    def logged_subject(self, r):
        """The subject of r's line in the request log."""
        rid = r.headers["x-request-id"]

        def line():
            for text in self.gw.log_text().splitlines():
                if rid in text and '"event":"request"' in text:
                    return json.loads(text)
            return None
        return wait_for(line, what=f"the request line of {rid}")["subject"]

    def test_a_minimal_write_logs_its_resource_as_the_answers_name_it(self):
        for table, spelling, text, identity in (("ident_tstz", "2024-01-01T09:00:00%2B09", "2024-01-01T09:00:00+09",
                                                 "2024-01-01 00:00:00+00"),
                                                ("ident_bytes", "A%5C377", "A\\377", "\\x41ff")):
            for mode in ("", "_col"):
                with self.subTest(table=table + mode):
                    t, token = table + mode, self.token()["token"]
                    resource = f"pg:{t}/{identity}"
                    minimal = {"Fence-Token": token, "Prefer": "return=minimal"}
                    answers = [self.c.request("POST", f"/v1/pg/{t}", {"row": {"id": text, "note": "a"}}, minimal)]
                    for method, body in (("PUT", {"row": {"note": "b"}}), ("PATCH", {"set": {"note": "c"}}),
                                         ("PATCH", {"set": {"note": "c"}}), ("DELETE", None)):
                        answers.append(self.c.request(method, f"/v1/pg/{t}/{spelling}", body, minimal))
                    skipped = 404 if mode else 204
                    self.assertEqual([r.status for r in answers], [204, 204, 204, skipped, 204], answers)
                    r = self.c.request("PUT", f"/v1/pg/{t}/{spelling}", {"row": {"note": "d"}},
                                       {"Fence-Token": token})
                    self.assertEqual((r.status, r.body.get("resource")), (200, resource), r)
                    for r in [r for r in answers if r.status == 204] + [r]:
                        self.assertEqual(self.logged_subject(r), resource, r)


class RefusedKeyTypes(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        psql(SETUP)

    @classmethod
    def tearDownClass(cls):
        psql(TEARDOWN)

    def test_key_types_without_one_text_per_value_stop_startup(self):
        for table, words in (("ident_float", "float8"), ("ident_citext", "citext"),
                             ("ident_interval", "interval"), ("ident_ci", "collation"),
                             ("ident_ci_index", "unique index"),
                             ("ident_money", "lc_monetary"), ("ident_json", "json"),
                             ("ident_array", "_numeric"), ("ident_range", "numrange"),
                             ("ident_record", "ident_pair"), ("ident_doc_key", "jsonb")):
            gw = Gateway(config={"tables": {table: {"key": "id", "columns": ["note"]}}}, start=False)
            with self.assertRaises(HarnessError, msg=table):
                gw.start()
            log = gw.log_text()
            self.assertIn(f"tables.{table}.key", log, log)
            self.assertIn(words, log, log)
            self.assertEqual(gw.returncode, 2, log)


class OneRowOneTable(unittest.TestCase):
    """A row reached under two configured table names would be two resources; one whose table others inherit
    is not singled out by its key."""

    @classmethod
    def setUpClass(cls):
        psql(SETUP)

    @classmethod
    def tearDownClass(cls):
        psql(TEARDOWN)

    def refused(self, tables: dict, entry: str, words: str):
        gw = Gateway(config={"tables": {t: {"key": "id", "columns": ["note"], **extra}
                                        for t, extra in tables.items()}}, start=False)
        with self.assertRaises(HarnessError, msg=tables):
            gw.start()
        log = gw.log_text()
        self.assertIn(f"config key 'tables.{entry}'", log, log)
        self.assertIn(words, log, log)
        self.assertEqual(gw.returncode, 2, log)

    def test_a_partition_beside_its_parent_stops_startup(self):
        # Before: both served; a token older than the fence stored for pg:ident_part/5 wrote the row as
        # pg:ident_part_low/5 (a fence of its own), and so did any token where only the parent was bound.
        self.refused({"ident_part": {"lock": "part:{key}"}, "ident_part_low": {}}, "ident_part_low",
                     'is a partition of \\"ident_part\\"')

    def test_a_table_that_others_inherit_stops_startup(self):
        # Before: served; a PATCH or DELETE of key 5 wrote the row of each table holding key 5 under one
        # fence, and a GET answered 500 (more than one row returned by a subquery).
        self.refused({"ident_heirloom": {}}, "ident_heirloom", "(ident_heir)")

    def test_a_partitioned_table_one_partition_and_an_heir_alone_are_served(self):
        # A partitioned table's rows are its partitions': its statements name it without ONLY (with it, a
        # GET, PATCH or DELETE found no row), in both table modes, and every write reaches them, alone and in
        # a batch. Before: every PUT and POST of the partitioned fence_column table, and every batch with a
        # put or post op of it, answered 400 invalid_field "cannot retrieve a system column in this context"
        # (its create was told from its replace by the row's xmax, which Postgres does not return from a
        # partitioned table).
        tables = (("ident_part", {}), ("ident_part_col", {"fence_column": "lock_fence"}), ("ident_part_low", {}),
                  ("ident_heir", {}))
        for key, (table, extra) in enumerate(tables):
            with self.subTest(table=table), \
                    Gateway(config={"tables": {table: {"key": "id", "columns": ["note"], **extra}}}) as gw, \
                    gw.client() as c:
                old = c.post(f"/v1/locks/{unique('one-table')}/acquire", {"ttl_ms": 30000}).body
                lease = c.post(f"/v1/locks/{unique('one-table')}/acquire", {"ttl_ms": 30000}).body
                fenced = {"Fence-Token": lease["token"]}
                psql(f"INSERT INTO public.{table} (id, note) VALUES ({key}, :'note')", {"note": table})
                self.assertEqual(c.get(f"/v1/pg/{table}/{key}").body["row"]["note"], table)
                r = c.request("PATCH", f"/v1/pg/{table}/{key}", {"set": {"note": "patched"}}, fenced)
                self.assertEqual((r.status, r.body["resource"], r.body["row"]["note"]),
                                 (200, f"pg:{table}/{key}", "patched"), r)
                self.assertEqual(c.request("DELETE", f"/v1/pg/{table}/{key}", None, fenced).status, 200)
                self.assertEqual(c.get(f"/v1/pg/{table}/{key}").status, 404)
                self.check_creates_and_replaces(c, table, key, lease, old["token"])

    def check_creates_and_replaces(self, c, table: str, key: int, lease: dict, old: str):
        """PUT, POST and a batch of every op kind on table's row key (missing) and keys key + 10, + 20, + 30
        (never written) with lease; then the older token old refused as stale on existing rows, alone and in
        a batch, each refusal audited once and nothing written."""
        fenced = {"Fence-Token": lease["token"]}
        posted, batch_put, batch_post = key + 10, key + 20, key + 30

        def call(method: str, path: str, body, token: dict = fenced) -> tuple:
            r = c.request(method, f"/v1/pg/{path}", body, token)
            row = r.body.get("row") if isinstance(r.body, dict) else None
            return r.status, r.body.get("type") if r.status >= 400 else (r.body["resource"], row and row["note"])

        def rows() -> list:  # of these keys (a partition holds its partitioned table's rows too)
            return psql(f"SELECT id || ':' || note FROM public.{table}"
                        f" WHERE id IN ({key}, {posted}, {batch_put}, {batch_post}) ORDER BY id")

        for request, answer in (
                (("PUT", f"{table}/{key}", {"row": {"note": "created"}}), (200, (f"pg:{table}/{key}", "created"))),
                (("PUT", f"{table}/{key}", {"row": {"note": "replaced"}}), (200, (f"pg:{table}/{key}", "replaced"))),
                (("POST", table, {"row": {"id": posted, "note": "posted"}}), (201, (f"pg:{table}/{posted}", "posted"))),
                (("POST", table, {"row": {"id": posted, "note": "again"}}), (409, "/problems/conflict"))):
            self.assertEqual(call(*request), answer, request)
        self.assertEqual(rows(), [f"{key}:replaced", f"{posted}:posted"])
        ops = [{"op": "put", "table": table, "key": str(key), "row": {"note": "b-replaced"}},
               {"op": "put", "table": table, "key": str(batch_put), "row": {"note": "b-created"}},
               {"op": "post", "table": table, "row": {"id": batch_post, "note": "b-posted"}},
               {"op": "patch", "table": table, "key": str(posted), "set": {"note": "b-patched"}},
               {"op": "delete", "table": table, "key": str(posted)}]
        r = c.request("POST", "/v1/pg/batch", {"ops": ops}, fenced)
        self.assertEqual((r.status, [(x["op"], x["resource"], x["row"] and x["row"]["note"])
                                     for x in r.body.get("results", [])]),
                         (200, [("PUT", f"pg:{table}/{key}", "b-replaced"),
                                ("PUT", f"pg:{table}/{batch_put}", "b-created"),
                                ("POST", f"pg:{table}/{batch_post}", "b-posted"),
                                ("PATCH", f"pg:{table}/{posted}", "b-patched"),
                                ("DELETE", f"pg:{table}/{posted}", None)]), r)
        kept = [f"{key}:b-replaced", f"{batch_put}:b-created", f"{batch_post}:b-posted"]
        self.assertEqual(rows(), kept)
        stale = {"Fence-Token": old}
        for request, resource in (
                (("PUT", f"{table}/{key}", {"row": {"note": "stale"}}, stale), f"pg:{table}/{key}"),
                (("POST", table, {"row": {"id": batch_put, "note": "stale"}}, stale), f"pg:{table}/{batch_put}"),
                (("POST", "batch", {"ops": [{"op": "put", "table": table, "key": str(batch_post),
                                             "row": {"note": "stale"}}]}, stale), f"pg:{table}/{batch_post}")):
            self.assertEqual(call(*request), (409, "/problems/stale_fence"), request)
            self.assertEqual([(x["reason"], x["current_fence"]) for x in records_listing(resource, resource)],
                             [("stale_fence", lease["fence"])], request)
        self.assertEqual(rows(), kept)

    def test_a_table_made_to_inherit_a_served_one_after_startup_is_left_alone(self):
        # Before: a GET of key 6 answered 500 (more than one row returned by a subquery), a PATCH or DELETE
        # of key 6 wrote ident_ic's row 6 too, under the one fence, and key 8, ident_ic's alone, was patched
        # and deleted through ident_ip.
        for parent, heir, extra in (("ident_ip", "ident_ic", {}),
                                    ("ident_ip_col", "ident_ic_col", {"fence_column": "lock_fence"})):
            with self.subTest(table=parent), \
                    Gateway(config={"tables": {parent: {"key": "id", "columns": ["note"], **extra}}}) as gw:
                psql(f"CREATE TABLE public.{heir} (id integer PRIMARY KEY, note text) INHERITS (public.{parent});"
                     f" INSERT INTO public.{parent} (id, note) VALUES (6, 'parent');"
                     f" INSERT INTO public.{heir} (id, note) VALUES (6, 'heir'), (8, 'heir alone')")
                with gw.client() as c:
                    self.check_the_parent_alone(c, parent, heir)

    def check_the_parent_alone(self, c, parent: str, heir: str):
        """Every call on parent's key 6 (a row of parent's and one of heir's) and key 8 (heir's alone) reads
        and writes parent's row alone."""
        lease = c.post(f"/v1/locks/{unique('one-table')}/acquire", {"ttl_ms": 30000}).body

        def rows(table: str) -> list:
            return psql(f"SELECT id || ':' || note FROM ONLY public.{table} ORDER BY id")

        def call(method: str, path: str, body) -> tuple:
            r = c.request(method, f"/v1/pg/{path}", body, {"Fence-Token": lease["token"]})
            answer = r.body if isinstance(r.body, dict) else {}
            row, results = answer.get("row"), answer.get("results")
            return ((r.status, row and row["note"], results and [item["row"] for item in results]),
                    rows(parent), rows(heir))

        def batch(op: dict) -> tuple:
            return "POST", "batch", {"ops": [{"table": parent, **op}]}

        for request, answer, kept in (
                (("GET", f"{parent}/6", None), (200, "parent", None), ["6:parent"]),
                (("PATCH", f"{parent}/6", {"set": {"note": "patched"}}), (200, "patched", None), ["6:patched"]),
                (("PUT", f"{parent}/6", {"row": {"note": "put"}}), (200, "put", None), ["6:put"]),
                (batch({"op": "patch", "key": "6", "set": {"note": "b"}}), (200, None, [{"id": 6, "note": "b"}]),
                 ["6:b"]),
                (("GET", f"{parent}/8", None), (404, None, None), ["6:b"]),
                (("PATCH", f"{parent}/8", {"set": {"note": "patched"}}), (404, None, None), ["6:b"]),
                (("DELETE", f"{parent}/8", None), (404, None, None), ["6:b"]),
                (batch({"op": "patch", "key": "8", "set": {"note": "b"}}), (404, None, None), ["6:b"]),
                (batch({"op": "delete", "key": "8"}), (404, None, None), ["6:b"]),
                (("DELETE", f"{parent}/6", None), (200, None, None), []),
                (("GET", f"{parent}/6", None), (404, None, None), []),
                (("POST", parent, {"row": {"id": 6, "note": "posted"}}), (201, "posted", None), ["6:posted"]),
                (batch({"op": "delete", "key": "6"}), (200, None, [None]), [])):
            self.assertEqual(call(*request), (answer, kept, ["6:heir", "8:heir alone"]), request)
        self.assertIsNone(stored_fence(f"pg:{parent}/8"))


if __name__ == "__main__":
    unittest.main()
