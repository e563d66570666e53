/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_fenced_sql.c - identifier quoting, the shape of the write, refusal,
 * read and claim statements of both fence modes, the rows they reach (ONLY
 * their table's), the row they answer, and which key types may name a
 * resource.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fenced_fixture.h"
#include "store/fenced/fenced_sql.h"

/* schemas[0] as a table with the fence column "lock_fence", described by *t. */
static struct table_schema with_fence_column(struct table_config *t)
{
    *t = tables[0];
    t->fence_column = "lock_fence";
    struct table_schema s = schemas[0];
    s.cfg = t;
    return s;
}

/* The look of a write of invoices at the key of the row it wrote (put_key_kept),
 * the last member of what every write but a delete returns. */
#define KEY_KEPT                                                                                   \
    "CASE WHEN t.\"id\" = $2::text THEN true ELSE fencegate.key_moved($2::text, t.\"id\") END "    \
    "AS key_kept"

static void quotes_identifiers(void **state)
{
    (void)state;
    char *q = sql_quote_ident("we\"ird; DROP");
    assert_string_equal(q, "\"we\"\"ird; DROP\"");
    free(q);
}

static void statements_quote_and_parameterize(void **state)
{
    (void)state;
    bool written[] = {true};
    int n = 0;
    char *sql = fenced_sql_write(&schemas[1], FENCED_PATCH, written, FENCED_FORM_CLAIM, true, &n);
    assert_int_equal(n, FENCED_PARAM_COUNT + 1);
    assert_non_null(strstr(sql, "UPDATE ONLY \"we\"\"ird; DROP\" AS t SET \"co\"\"l; x\" = $4::"
                                "character varying WHERE"));
    assert_non_null(strstr(sql, "t.\"k\xc3\xa9y\" = $2::integer"));
    /* a column of a kind the gateway does not write as JSON comes as to_json's text */
    assert_non_null(strstr(sql, " AS resource, t.\"k\xc3\xa9y\" AS c0, "
                                "to_json(t.\"co\"\"l; x\")::text AS c1"));
    free(sql);
    bool none[] = {false, false, false, false};
    sql = fenced_sql_write(&schemas[0], FENCED_DELETE, none, FENCED_FORM_CLAIM, true, &n);
    assert_int_equal(n, FENCED_PARAM_COUNT);
    assert_non_null(
        strstr(sql, "DELETE FROM ONLY \"invoices\" AS t WHERE t.\"id\" = $2::text AND NOT"));
    const char *deleted = " RETURNING true AS wrote, $3::text || (t.\"id\")::text AS resource) "
                          "SELECT w.* FROM w WHERE fencegate.fence_claim_used(EXISTS (SELECT 1 "
                          "FROM w) OR NOT EXISTS (SELECT 1 FROM f))";
    assert_true(strstr(sql, deleted) == sql + strlen(sql) - strlen(deleted));
    assert_null(strstr(sql, " AS c0")); /* a delete answers no row */
    free(sql);
    const struct table_schema *both[] = {&schemas[0], &schemas[1]};
    sql = fenced_sql_claim(both, 2);
    assert_non_null(strstr(sql, "$4::text || ($5::integer)::text"));
    assert_non_null(strstr(sql, "ORDER BY v.resource"));
    free(sql);
    struct table_schema numeric = {
        .cfg = &tables[0], .key_type = "numeric(12,2)", .key_identity = KEY_IDENTITY_NUMERIC};
    const struct table_schema *one[] = {&numeric};
    sql = fenced_sql_claim(one, 1);
    assert_non_null(strstr(sql, "$2::text || trim_scale(($3::numeric(12,2))::numeric)::text"));
    free(sql);
}

/* The default mode: the fence row is locked; an equal fence is kept as it is,
 * a lower one raised unless revoked or (PATCH, DELETE) the row is missing; the
 * write goes ahead only on a kept or raised fence; nothing of the refusal
 * path (audit inserts) on the way. */
static void default_mode_writes(void **state)
{
    (void)state;
    int n = 0;
    char *sql = fenced_sql_write(&schemas[0], FENCED_PATCH, (bool[]){true, true, false, false},
                                 FENCED_FORM_CLAIM, true, &n);
    assert_int_equal(n, FENCED_PARAM_COUNT + 2);
    assert_non_null(strstr(
        sql,
        "WITH c AS (SELECT rf.fence FROM fencegate.resource_fences rf WHERE rf.resource = "
        "$3::text || ($2::text)::text FOR UPDATE), f AS (INSERT INTO "
        "fencegate.resource_fences AS rf (resource, fence) SELECT $3::text || "
        "($2::text)::text, $1::bigint WHERE coalesce((SELECT c.fence FROM c), 0) < $1::bigint "
        "AND NOT EXISTS (SELECT 1 FROM fencegate.revocations rv WHERE rv.fence = $1::bigint) "
        "AND EXISTS (SELECT 1 FROM ONLY \"invoices\" AS e WHERE e.\"id\" = $2::text) ON CONFLICT "
        "(resource) DO UPDATE SET fence = excluded.fence, updated_at = clock_timestamp() WHERE "
        "rf.fence <= excluded.fence RETURNING rf.resource), "));
    assert_non_null(strstr(sql, "UPDATE ONLY \"invoices\" AS t SET \"customer\" = $4::text, "
                                "\"amount_cents\" = $5::bigint WHERE t.\"id\" = $2::text AND NOT "
                                "EXISTS (SELECT 1 FROM fencegate.revocations rv WHERE rv.fence = "
                                "$1::bigint) AND ((SELECT c.fence FROM c) = $1::bigint OR EXISTS "
                                "(SELECT 1 FROM f))"));
    assert_null(strstr(sql, "rejections"));
    /* its claim stays only where it wrote: a row deleted since the snapshot undoes it */
    assert_non_null(strstr(sql, "RETURNING rf.resource), w AS (UPDATE ONLY \"invoices\" AS t SET"));
    const char *used = ") SELECT w.* FROM w WHERE fencegate.fence_claim_used(EXISTS (SELECT 1 FROM "
                       "w) OR NOT EXISTS (SELECT 1 FROM f))";
    assert_true(strstr(sql, used) == sql + strlen(sql) - strlen(used));
    assert_non_null(strstr(sql,
                           " RETURNING true AS wrote, $3::text || (t.\"id\")::text AS resource, "
                           "t.\"id\" AS c0, t.\"customer\" AS c1"));
    free(sql);
    bool some[] = {false, true, false, false};
    sql = fenced_sql_write(&schemas[0], FENCED_PUT, some, FENCED_FORM_CLAIM, true, &n);
    assert_int_equal(n, FENCED_PARAM_COUNT + 1);
    assert_null(strstr(sql, "\"invoices\" AS e")); /* an insert needs no row */
    assert_non_null(strstr(sql, "SELECT $2::text, $4::bigint WHERE true AND NOT EXISTS"));
    assert_non_null(strstr(sql, "OR EXISTS (SELECT 1 FROM f)) ON CONFLICT (\"id\") DO UPDATE"
                                " SET \"customer\" = excluded.\"customer\""));
    assert_null(strstr(sql, "fence_claim_used")); /* an insert or upsert always writes */
    free(sql);
    /* an existing key fails the insert, and so does a table without the key's unique index */
    sql = fenced_sql_write(&schemas[0], FENCED_POST, some, FENCED_FORM_CLAIM, true, &n);
    assert_non_null(strstr(sql, "OR EXISTS (SELECT 1 FROM f)) ON CONFLICT (\"id\") DO UPDATE SET "
                                "\"customer\" = t.\"customer\" WHERE fencegate.key_taken($2::text) "
                                "RETURNING "));
    free(sql);
}

/* The held form of the default mode: it writes only where the presented fence
 * is stored, which it locks; no upsert (nor any other ModifyTable of
 * fencegate's), and the revocation still guards it. */
static void default_mode_held_writes(void **state)
{
    (void)state;
    int n = 0;
    const char *held = "WITH c AS (SELECT 1 FROM fencegate.resource_fences rf WHERE rf.resource = "
                       "$3::text || ($2::text)::text AND rf.fence = $1::bigint FOR UPDATE) ";
    const char *guard = " AND EXISTS (SELECT 1 FROM c) AND NOT EXISTS (SELECT 1 FROM "
                        "fencegate.revocations rv WHERE rv.fence = $1::bigint)";
    bool cols[] = {true, true, false, false};
    char *sql = fenced_sql_write(&schemas[0], FENCED_PATCH, cols, FENCED_FORM_HELD, false, &n);
    assert_int_equal(n, FENCED_PARAM_COUNT + 2);
    char *expect = NULL;
    assert_true(asprintf(&expect,
                         "%sUPDATE ONLY \"invoices\" AS t SET \"customer\" = $4::text, "
                         "\"amount_cents\" = $5::bigint WHERE t.\"id\" = $2::text%s "
                         "RETURNING " KEY_KEPT,
                         held, guard) > 0);
    assert_string_equal(sql, expect); /* return=minimal: nothing of the row answered */
    free(expect);
    free(sql);
    sql = fenced_sql_write(&schemas[0], FENCED_PUT, cols, FENCED_FORM_HELD, true, &n);
    assert_true(strncmp(sql, held, strlen(held)) == 0);
    assert_non_null(strstr(sql, "SELECT $2::text, $4::text, $5::bigint WHERE true AND EXISTS "
                                "(SELECT 1 FROM c) AND NOT EXISTS"));
    assert_non_null(strstr(sql, "ON CONFLICT (\"id\") DO UPDATE SET"));
    assert_non_null(strstr(sql, "RETURNING $3::text || (t.\"id\")::text AS resource, "));
    assert_null(strstr(sql, "INSERT INTO fencegate"));
    assert_null(strstr(sql, " f AS"));
    free(sql);
    sql = fenced_sql_write(&schemas[0], FENCED_DELETE, cols, FENCED_FORM_HELD, true, &n);
    assert_int_equal(n, FENCED_PARAM_COUNT);
    assert_non_null(
        strstr(sql, "DELETE FROM ONLY \"invoices\" AS t WHERE t.\"id\" = $2::text AND EXISTS"));
    assert_null(strstr(sql, " AS c0"));
    free(sql);
    /* a table with a fence column has one form */
    struct table_config t;
    struct table_schema s = with_fence_column(&t);
    char *claim = fenced_sql_write(&s, FENCED_PATCH, cols, FENCED_FORM_CLAIM, true, &n);
    sql = fenced_sql_write(&s, FENCED_PATCH, cols, FENCED_FORM_HELD, true, &n);
    assert_string_equal(sql, claim);
    free(claim);
    free(sql);
}

/* A table keeping its fences in a column: the fence is written with the row,
 * and the row's own fence guards the write, the classic statement. */
static void fence_column_statements(void **state)
{
    (void)state;
    struct table_config t;
    struct table_schema s = with_fence_column(&t);
    bool some[] = {true, false, false, false};
    int n = 0;
    char *sql = fenced_sql_write(&s, FENCED_PUT, some, FENCED_FORM_CLAIM, true, &n);
    assert_int_equal(n, FENCED_PARAM_COUNT + 1);
    assert_non_null(strstr(sql,
                           "INSERT INTO \"invoices\" AS t (\"id\", \"customer\", \"lock_fence\")"
                           " SELECT $2::text, $4::text, $1::bigint WHERE "
                           "pg_advisory_xact_lock(hashtextextended($3::text || ($2::text)::text, "
                           "7046)) IS NOT NULL AND NOT EXISTS"));
    assert_non_null(strstr(sql, ", \"lock_fence\" = excluded.\"lock_fence\" WHERE "
                                "coalesce(t.\"lock_fence\", 0) <= $1::bigint RETURNING"));
    /* it creates the row only where no higher fence was kept when it was deleted */
    const char *kept = " AND NOT EXISTS (SELECT 1 FROM fencegate.resource_fences rf WHERE "
                       "rf.resource = $3::text || ($2::text)::text AND rf.fence > $1::bigint)";
    assert_non_null(strstr(sql, kept));
    /* and a row it created is looked at once more, with a snapshot of its own */
    assert_true(strncmp(sql, "WITH w AS (INSERT INTO \"invoices\"", 32) == 0);
    const char *last_look = " RETURNING t.xmax = 0 AS created, $3::text || (t.\"id\")::text AS "
                            "resource";
    assert_non_null(strstr(sql, last_look));
    const char *check = ") SELECT * FROM w WHERE NOT w.created OR fencegate.fence_kept_check("
                        "$3::text || ($2::text)::text, $1::bigint)";
    assert_true(strstr(sql, check) == sql + strlen(sql) - strlen(check));
    free(sql);
    /* before it may create the row it takes the row's lock, as a batch does before the row */
    sql = fenced_sql_row_lock(&s);
    assert_string_equal(sql, "SELECT 1 WHERE pg_advisory_xact_lock(hashtextextended($1::text || "
                             "($2::text)::text, 7046)) IS NULL");
    free(sql);
    sql = fenced_sql_column_claim(&s);
    assert_string_equal(sql, "SELECT $1::text || (t.\"id\")::text AS resource, "
                             "coalesce(t.\"lock_fence\", 0) AS fence FROM ONLY \"invoices\" AS t "
                             "WHERE t.\"id\" = $2::text FOR UPDATE");
    free(sql);
    /* a PATCH answering nothing takes no prefix: the columns' parameters follow the key */
    assert_false(fenced_sql_takes_prefix(&s, FENCED_PATCH, false));
    assert_true(fenced_sql_takes_prefix(&s, FENCED_PATCH, true));
    assert_true(fenced_sql_takes_prefix(&s, FENCED_PUT, false));
    assert_true(fenced_sql_takes_prefix(&s, FENCED_DELETE, false));
    assert_true(fenced_sql_takes_prefix(&schemas[0], FENCED_PATCH, false));
    sql = fenced_sql_write(&s, FENCED_PATCH, some, FENCED_FORM_CLAIM, false, &n);
    assert_int_equal(n, FENCED_PARAM_PREFIX + 1);
    assert_string_equal(sql, "UPDATE ONLY \"invoices\" AS t SET \"customer\" = $3::text, "
                             "\"lock_fence\" = $1::bigint WHERE t.\"id\" = $2::text AND "
                             "coalesce(t.\"lock_fence\", 0) <= $1::bigint AND NOT EXISTS (SELECT "
                             "1 FROM fencegate.revocations rv WHERE rv.fence = $1::bigint) "
                             "RETURNING " KEY_KEPT);
    free(sql);
    sql = fenced_sql_write(&s, FENCED_POST, some, FENCED_FORM_CLAIM, false, &n);
    assert_non_null(strstr(sql, kept));
    assert_non_null(strstr(sql, "ON CONFLICT (\"id\") DO NOTHING"));
    assert_int_equal(n, FENCED_PARAM_COUNT + 1);
    free(sql);
    /* a delete keeps the deleted row's fence for its resource */
    sql = fenced_sql_write(&s, FENCED_DELETE, some, FENCED_FORM_CLAIM, true, &n);
    assert_string_equal(
        sql, "WITH d AS (DELETE FROM ONLY \"invoices\" AS t WHERE t.\"id\" = $2::text AND "
             "coalesce(t.\"lock_fence\", 0) <= $1::bigint AND NOT EXISTS (SELECT 1 FROM "
             "fencegate.revocations rv WHERE rv.fence = $1::bigint) RETURNING t.\"id\"), k AS "
             "(INSERT INTO fencegate.resource_fences AS rf (resource, fence) SELECT $3::text || "
             "(d.\"id\")::text, $1::bigint FROM d ON CONFLICT (resource) DO UPDATE SET fence = "
             "greatest(rf.fence, excluded.fence), updated_at = clock_timestamp()) SELECT $3::text "
             "|| (d.\"id\")::text AS resource FROM d");
    assert_int_equal(n, FENCED_PARAM_COUNT);
    free(sql);
}

/* The row of an answer: the key and the listed columns as Postgres prints
 * them, never the fence column or another column of the table, nor row_to_json
 * (the gateway writes the JSON); none when not asked for. Reads answer
 * row_to_json's text. */
static void answered_rows(void **state)
{
    (void)state;
    struct table_config t;
    struct table_schema s = with_fence_column(&t);
    const char *members = " RETURNING $3::text || (t.\"id\")::text AS resource, t.\"id\" AS c0, "
                          "t.\"customer\" AS c1, t.\"amount_cents\" AS c2, t.\"note\" AS c3, "
                          "t.\"meta\" AS c4, " KEY_KEPT;
    int n = 0;
    char *sql = fenced_sql_write(&s, FENCED_PATCH, (bool[]){true, false, false, false},
                                 FENCED_FORM_CLAIM, true, &n);
    assert_true(strstr(sql, members) == sql + strlen(sql) - strlen(members));
    assert_null(strstr(sql, "row_to_json"));
    assert_null(strstr(sql, "lock_fence\" AS"));
    free(sql);
    sql = fenced_sql_write(&schemas[0], FENCED_PUT, (bool[]){true, false, false, false},
                           FENCED_FORM_CLAIM, false, &n);
    assert_null(strstr(sql, " AS resource")); /* return=minimal */
    assert_null(strstr(sql, " AS c0"));
    free(sql);
    /* r.*, not r: a column named r (listed or not) would be taken for the row */
    const char *row = "(SELECT row_to_json(r.*) FROM (SELECT t.\"id\", t.\"customer\", "
                      "t.\"amount_cents\", t.\"note\", t.\"meta\") AS r)";
    /* a key Postgres prints as the gateway does is not returned, nor its resource */
    s.key_shape.form = KEY_FORM_INT32;
    assert_false(fenced_sql_takes_prefix(&s, FENCED_PATCH, true));
    sql = fenced_sql_write(&s, FENCED_PATCH, (bool[]){true, false, false, false}, FENCED_FORM_CLAIM,
                           true, &n);
    const char *columns = " RETURNING t.\"customer\" AS c1, t.\"amount_cents\" AS c2, "
                          "t.\"note\" AS c3, t.\"meta\" AS c4, " KEY_KEPT;
    assert_true(strstr(sql, columns) == sql + strlen(sql) - strlen(columns));
    assert_int_equal(n, FENCED_PARAM_PREFIX + 1);
    free(sql);
    sql = fenced_sql_write(&s, FENCED_DELETE, (bool[]){false, false, false, false},
                           FENCED_FORM_CLAIM, true, &n);
    const char *deleted = " SELECT true AS deleted FROM d"; /* nothing left to return */
    assert_true(strstr(sql, deleted) == sql + strlen(sql) - strlen(deleted));
    free(sql);
    s.key_shape.form = KEY_FORM_OTHER;
    sql = fenced_sql_read(&schemas[0]);
    assert_non_null(strstr(sql, row));
    assert_null(strstr(sql, "row_to_json(t)"));
    free(sql);
    sql = fenced_sql_read(&s);
    assert_non_null(strstr(sql, row));
    assert_null(strstr(sql, "row_to_json(t)"));
    free(sql);
}

/* Not asked for its row (return=minimal), a write answers nothing where the
 * gateway names the row itself (a text key), and its resource alone where it
 * cannot (a key of a type it does not read, such as timestamptz or bytea), in
 * both modes: every answer and log line names the row as Postgres does. */
static void minimal_answers_name_unread_keys(void **state)
{
    (void)state;
    struct table_config t;
    struct table_schema column = with_fence_column(&t), side = schemas[0];
    const bool some[] = {true, false, false, false};
    const char *resource = "$3::text || (t.\"id\")::text AS resource";
    int n = 0;
    for (int unread = 0; unread < 2; unread++) {
        column.key_shape.form = side.key_shape.form = unread ? KEY_FORM_OTHER : KEY_FORM_TEXT;
        for (enum fenced_kind kind = 0; kind < FENCED_KIND_COUNT; kind++) {
            char *sql = fenced_sql_write(&side, kind, some, FENCED_FORM_HELD, false, &n);
            const char *end = strstr(sql, " RETURNING ");
            /* every write but a delete also looks at its key (KEY_KEPT), a delete answers
             * nothing where the gateway names the row */
            char *expect = NULL;
            assert_true(asprintf(&expect, "%s%s%s", unread ? resource : "",
                                 unread && kind != FENCED_DELETE ? ", " : "",
                                 kind != FENCED_DELETE ? KEY_KEPT : "") >= 0);
            if (expect[0] == '\0')
                assert_null(end);
            else
                assert_true(end != NULL && strcmp(end + 11, expect) == 0);
            free(expect);
            free(sql);
        }
        char *sql = fenced_sql_write(&column, FENCED_PATCH, some, FENCED_FORM_CLAIM, false, &n);
        assert_int_equal(fenced_sql_takes_prefix(&column, FENCED_PATCH, false), unread);
        assert_int_equal(n, unread ? FENCED_PARAM_COUNT + 1 : FENCED_PARAM_PREFIX + 1);
        const char *end = strstr(sql, " RETURNING ");
        assert_non_null(end);
        assert_string_equal(end + 11, unread ? "$3::text || (t.\"id\")::text AS resource, " KEY_KEPT
                                             : KEY_KEPT);
        free(sql);
        sql = fenced_sql_write(&column, FENCED_PUT, some, FENCED_FORM_CLAIM, false, &n);
        assert_int_equal(strstr(sql, "RETURNING t.xmax = 0 AS created, $3::text || (t.\"id\")::text"
                                     " AS resource, " KEY_KEPT ") SELECT") != NULL,
                         unread);
        assert_non_null(strstr(sql, "RETURNING t.xmax = 0 AS created"));
        free(sql);
        sql = fenced_sql_write(&column, FENCED_DELETE, some, FENCED_FORM_CLAIM, false, &n);
        const char *answer = unread ? " SELECT $3::text || (d.\"id\")::text AS resource FROM d"
                                    : " SELECT true AS deleted FROM d";
        assert_true(strstr(sql, answer) == sql + strlen(sql) - strlen(answer));
        free(sql);
    }
}

/* The check that a value fits its column: the column's own input, in a row
 * of the table's type that is not stored, the table's name quoted, the
 * column's and the value parameters. */
static void fit_check(void **state)
{
    (void)state;
    char *sql = fenced_sql_fit_check(&schemas[1]);
    assert_string_equal(sql, "SELECT json_populate_record(NULL::\"we\"\"ird; DROP\", "
                             "json_build_object($1::text, $2::text)) IS NULL");
    free(sql);
}

/* The refusal statement: why a write wrote nothing, and its one audit row. */
static void refusal_statements(void **state)
{
    (void)state;
    char *sql = fenced_sql_refusal(&schemas[0]);
    assert_non_null(strstr(sql, "(SELECT rf.fence FROM fencegate.resource_fences rf WHERE "
                                "rf.resource = k.resource) AS fence"));
    assert_non_null(strstr(sql, "CASE WHEN s.revoked THEN 'revoked' ELSE 'stale_fence' END"));
    assert_non_null(strstr(sql, "WHERE $9::boolean AND (s.revoked OR s.fence > $1::bigint))"));
    free(sql);
    struct table_config t;
    struct table_schema s = with_fence_column(&t);
    sql = fenced_sql_refusal(&s);
    assert_non_null(strstr(sql,
                           "SELECT coalesce(t.\"lock_fence\", 0) AS fence FROM ONLY \"invoices\" "
                           "AS t WHERE t.\"id\" = $2::text FOR UPDATE"));
    assert_non_null(strstr(sql, "INSERT INTO fencegate.rejections"));
    /* a create's guard reads the fence kept for the resource too: so does its refusal */
    assert_non_null(strstr(sql, "CASE WHEN e.fence IS NULL OR $7::text IN ('PUT', 'POST') THEN "
                                "greatest(e.fence, (SELECT rf.fence FROM "
                                "fencegate.resource_fences rf WHERE rf.resource = k.resource)) "
                                "ELSE e.fence END AS fence"));
    free(sql);
}

/* The judged form of a write: the write statement as a (its guard and its
 * parameters unchanged), and in g the verdict on what it wrote nothing to,
 * read only where it wrote nothing; one answer row whatever it did. */
static void judged_statements(void **state)
{
    (void)state;
    const char *revoked = "NOT EXISTS (SELECT 1 FROM fencegate.revocations rv WHERE rv.fence = "
                          "$1::bigint)";
    const char *answer = " SELECT a.*, EXISTS (SELECT 1 FROM g) AS skipped FROM (SELECT) AS one "
                         "LEFT JOIN a ON true";
    bool cols[] = {true, false, false, false};
    int n = 0, plain_n = 0;
    char *plain =
        fenced_sql_write(&schemas[0], FENCED_PATCH, cols, FENCED_FORM_HELD, false, &plain_n);
    char *sql = fenced_sql_judged(&schemas[0], FENCED_PATCH, cols, FENCED_FORM_HELD, false, &n);
    char *expected = NULL;
    /* the held form's fence and write, its verdict on the row locked under the same guard */
    const char *held = "WITH c AS (SELECT 1 FROM fencegate.resource_fences rf WHERE rf.resource = "
                       "$3::text || ($2::text)::text AND rf.fence = $1::bigint FOR UPDATE)";
    assert_true(
        asprintf(&expected,
                 "%s, a AS (UPDATE ONLY \"invoices\" AS t SET \"customer\" = $4::text WHERE "
                 "t.\"id\" = $2::text AND EXISTS (SELECT 1 FROM c) AND %s RETURNING true "
                 "AS wrote, " KEY_KEPT
                 "), g AS (SELECT 1 FROM ONLY \"invoices\" AS t WHERE t.\"id\" = "
                 "$2::text AND EXISTS (SELECT 1 FROM c) AND %s AND NOT EXISTS (SELECT 1 "
                 "FROM a) FOR UPDATE)%s",
                 held, revoked, revoked, answer) > 0);
    assert_string_equal(sql, expected);
    assert_int_equal(n, plain_n);
    assert_true(strncmp(plain, held, strlen(held)) == 0);
    free(expected);
    free(sql);
    free(plain);
    /* a delete's verdict only where no row security applies: the table's name, one more parameter
     */
    sql = fenced_sql_judged(&schemas[0], FENCED_DELETE, cols, FENCED_FORM_CLAIM, true, &n);
    assert_int_equal(n, FENCED_PARAM_COUNT + 1);
    assert_non_null(strstr(sql, " AND NOT row_security_active(quote_ident($4::text)) AND NOT "
                                "EXISTS (SELECT 1 FROM a) FOR UPDATE)"));
    assert_non_null(strstr(sql, "RETURNING true AS wrote, $3::text || (t.\"id\")::text AS "
                                "resource), g AS"));
    /* a claim stays where a wrote, or where a trigger skipped it (g), else it is undone */
    const char *used = "LEFT JOIN a ON true WHERE fencegate.fence_claim_used(EXISTS (SELECT 1 FROM "
                       "a) OR EXISTS (SELECT 1 FROM g) OR NOT EXISTS (SELECT 1 FROM f))";
    assert_true(strstr(sql, used) == sql + strlen(sql) - strlen(used));
    free(sql);
    /* an insert's verdict is the fence's guard; a POST's also that no row is there */
    sql = fenced_sql_judged(&schemas[0], FENCED_POST, cols, FENCED_FORM_CLAIM, false, &n);
    assert_non_null(strstr(sql, ", g AS (SELECT 1 WHERE true AND NOT EXISTS (SELECT 1 FROM "
                                "fencegate.revocations rv WHERE rv.fence = $1::bigint) AND "
                                "((SELECT c.fence FROM c) = $1::bigint OR EXISTS (SELECT 1 FROM "
                                "f)) AND NOT EXISTS (SELECT 1 FROM ONLY \"invoices\" AS t WHERE "
                                "t.\"id\" = $2::text) AND NOT EXISTS (SELECT 1 FROM a))"));
    assert_null(strstr(sql, "fence_claim_used"));
    free(sql);
}

/* A key's resource as every statement names it: a timestamptz in UTC. */
/* Every mention of the table in sql is an INSERT's target or, to read, update
 * or delete its rows, "ONLY "invoices"" (an ordinary table: not the rows of a
 * table that inherits it) or, a partitioned table's, without ONLY (its rows are
 * its partitions'). */
static void assert_rows_of_the_table(char *sql, bool partitioned)
{
    const char *name = "\"invoices\"", *insert = "INSERT INTO ", *only = "ONLY ";
    for (const char *p = strstr(sql, name); p != NULL; p = strstr(p + 1, name)) {
        size_t before = (size_t)(p - sql);
        if (before >= strlen(insert) && strncmp(p - strlen(insert), insert, strlen(insert)) == 0)
            continue;
        assert_true(before >= strlen(only));
        assert_int_equal(strncmp(p - strlen(only), only, strlen(only)) == 0, !partitioned);
    }
    if (partitioned)
        assert_null(strstr(sql, "ONLY"));
    free(sql);
}

/* What a statement check is told of the statement it gets (and frees). */
struct statement_of {
    bool column;      /* the table keeps its fence in a fence_column */
    bool partitioned; /* the table is partitioned */
    int kind;         /* a write's enum fenced_kind, or -1 for another statement */
    bool adopt;       /* the fence_column move's statement (fenced_sql_adopt_fences) */
};

/* The schema each_statement's tables are found in (NULL: the name alone, as
 * the fixture's schemas). */
static char *statement_schema;

/* Hands check every statement of either mode, on an ordinary table and on a
 * partitioned one: the writes (and, in the side-table mode, their judged
 * forms), the read, the refusal, and the fence_column mode's own two. */
static void each_statement(void (*check)(char *sql, const struct statement_of *of))
{
    bool all[] = {true, true, true, true};
    int n = 0;
    for (int column = 0; column < 2; column++) {
        for (int partitioned = 0; partitioned < 2; partitioned++) {
            struct table_config t = tables[0];
            struct table_schema s = column ? with_fence_column(&t) : schemas[0];
            s.partitioned = partitioned;
            s.table_schema = statement_schema;
            struct statement_of of = {.column = column, .partitioned = partitioned};
            for (of.kind = 0; of.kind < FENCED_KIND_COUNT; of.kind++) {
                for (int form = 0; form < 2; form++) {
                    for (int want_row = 0; want_row < 2; want_row++) {
                        check(fenced_sql_write(&s, of.kind, all, form, want_row, &n), &of);
                        if (!column)
                            check(fenced_sql_judged(&s, of.kind, all, form, want_row, &n), &of);
                    }
                }
            }
            of.kind = -1;
            check(fenced_sql_read(&s), &of);
            check(fenced_sql_refusal(&s), &of);
            if (column) {
                check(fenced_sql_column_claim(&s), &of);
                of.adopt = true;
                check(fenced_sql_adopt_fences(&s), &of);
                of.adopt = false;
            }
        }
    }
}

/* Every write but a delete, in either mode and form, alone or judged, on an
 * ordinary or a partitioned table, returns its look at the key of the row it
 * wrote (KEY_KEPT); a delete, which returns the row its key matched, and the
 * other statements do not, but for the fence_column move, which looks at the
 * resource of each row it raises. */
static void key_kept_by_every_write(char *sql, const struct statement_of *of)
{
    if (of->kind >= 0)
        assert_int_equal(strstr(sql, KEY_KEPT) != NULL, of->kind != FENCED_DELETE);
    else if (of->adopt)
        assert_non_null(strstr(sql, " = rf.resource THEN true ELSE fencegate.key_moved(rf.resource, "));
    else
        assert_null(strstr(sql, "key_moved"));
    free(sql);
}

static void writes_look_at_their_key(void **state)
{
    (void)state;
    each_statement(key_kept_by_every_write);
    /* the key's own type and its equality; its parameter cast as everywhere else */
    int n = 0;
    char *sql =
        fenced_sql_write(&schemas[1], FENCED_PUT, (bool[]){true}, FENCED_FORM_CLAIM, false, &n);
    assert_non_null(strstr(sql,
                           "CASE WHEN t.\"k\xc3\xa9y\" = $2::integer THEN true ELSE "
                           "fencegate.key_moved($2::integer, t.\"k\xc3\xa9y\") END AS key_kept"));
    free(sql);
}

static void rows_of_the_table(char *sql, const struct statement_of *of)
{
    assert_rows_of_the_table(sql, of->partitioned);
}

/* Each statement of either mode, on an ordinary table and on a partitioned one
 * (assert_rows_of_the_table). */
static void statements_reach_their_table_alone(void **state)
{
    (void)state;
    each_statement(rows_of_the_table);
}

/* Every mention of the table in sql names it in its schema: a WITH query of
 * the statement named as the table (c, k, ...) would stand for it in a FROM. */
static void table_in_its_schema(char *sql, const struct statement_of *of)
{
    (void)of;
    const char *name = "\"invoices\"", *schema = "\"public\".";
    size_t mentions = 0;
    for (const char *p = strstr(sql, name); p != NULL; p = strstr(p + 1, name), mentions++) {
        assert_true((size_t)(p - sql) >= strlen(schema));
        assert_int_equal(strncmp(p - strlen(schema), schema, strlen(schema)), 0);
    }
    assert_true(mentions > 0);
    free(sql);
}

/* Each statement names its table in the schema Postgres found it in. */
static void statements_name_their_table_in_its_schema(void **state)
{
    (void)state;
    static char public_schema[] = "public";
    statement_schema = public_schema;
    each_statement(table_in_its_schema);
    statement_schema = NULL;
    char *sql = fenced_sql_fit_check(&(struct table_schema){.cfg = &tables[0],
                                                            .table_schema = public_schema});
    assert_non_null(strstr(sql, "json_populate_record(NULL::\"public\".\"invoices\", "));
    free(sql);
}

/* Asserts that sql (freed) names no system column where partitioned. */
static void assert_no_system_column(char *sql, bool partitioned)
{
    const char *system[] = {"xmax", "xmin", "cmin", "cmax", "ctid", "tableoid"};
    for (size_t i = 0; partitioned && i < sizeof system / sizeof *system; i++)
        assert_null(strstr(sql, system[i]));
    free(sql);
}

/* A fence_column PUT or POST on a partitioned table takes every row it wrote
 * for one it created and looks at its kept fence once more, where an ordinary
 * table's tells a row it created by its xmax; no statement of a partitioned
 * table names a system column. */
static void no_system_column_where_partitioned(char *sql, const struct statement_of *of)
{
    if (of->column && (of->kind == FENCED_PUT || of->kind == FENCED_POST)) {
        assert_non_null(strstr(sql, of->partitioned ? "RETURNING true AS created"
                                                    : "RETURNING t.xmax = 0 AS created"));
        assert_non_null(
            strstr(sql, ") SELECT * FROM w WHERE NOT w.created OR fencegate.fence_kept_check("));
    }
    assert_no_system_column(sql, of->partitioned);
}

/* No statement of a partitioned table asks for a system column, which
 * Postgres does not return from one ("cannot retrieve a system column in this
 * context"). */
static void partitioned_statements_ask_no_system_column(void **state)
{
    (void)state;
    each_statement(no_system_column_where_partitioned);
}

static void resource_statement(void **state)
{
    (void)state;
    struct table_schema stamps = {.cfg = &tables[0],
                                  .key_type = "timestamp with time zone",
                                  .key_identity = KEY_IDENTITY_UTC};
    char *sql = fenced_sql_resource(&stamps);
    assert_string_equal(sql, "SELECT $1::text || fencegate.utc_text(($2::timestamp with time "
                             "zone)::timestamptz) AS resource");
    free(sql);
}

/* Key types whose text is not one per value are refused; numeric gets its own identity. */
static void key_identity(void **state)
{
    (void)state;
    const char *one_text[] = {"int4", "text", "numeric", "uuid", "date", "timestamptz", "bool"};
    for (size_t i = 0; i < sizeof one_text / sizeof *one_text; i++)
        assert_null(fenced_sql_key_refusal(
            &(struct key_column_type){.base_type = one_text[i], .builtin = true}));
    assert_null(
        fenced_sql_key_refusal(&(struct key_column_type){.base_type = "mood", .is_enum = true}));
    /* a type of the same name outside pg_catalog is not Postgres's own */
    assert_non_null(fenced_sql_key_refusal(&(struct key_column_type){.base_type = "int4"}));
    assert_non_null(fenced_sql_key_refusal(&(struct key_column_type){
        .base_type = "text", .builtin = true, .nondeterministic_collation = true}));
    const char *many_texts[] = {"float8",   "float4",  "citext",   "interval", "money",   "jsonb",
                                "_numeric", "_float8", "numrange", "tsvector", "regclass"};
    for (size_t i = 0; i < sizeof many_texts / sizeof *many_texts; i++)
        assert_non_null(fenced_sql_key_refusal(
            &(struct key_column_type){.base_type = many_texts[i], .builtin = true}));
    assert_non_null(fenced_sql_key_refusal(&(struct key_column_type){.base_type = "point3"}));
    const struct {
        const char *type;
        enum key_identity identity;
    } identities[] = {{"numeric", KEY_IDENTITY_NUMERIC},
                      {"timestamptz", KEY_IDENTITY_UTC},
                      {"bytea", KEY_IDENTITY_HEX},
                      {"int8", KEY_IDENTITY_TEXT}};
    for (size_t i = 0; i < sizeof identities / sizeof *identities; i++)
        assert_int_equal(fenced_sql_key_identity(&(struct key_column_type){
                             .base_type = identities[i].type, .builtin = true}),
                         identities[i].identity);
    /* an enum of the same name as one of Postgres's types is printed as it is */
    assert_int_equal(
        fenced_sql_key_identity(&(struct key_column_type){.base_type = "numeric", .is_enum = true}),
        KEY_IDENTITY_TEXT);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(quotes_identifiers),
        cmocka_unit_test(statements_quote_and_parameterize),
        cmocka_unit_test(default_mode_writes),
        cmocka_unit_test(default_mode_held_writes),
        cmocka_unit_test(fence_column_statements),
        cmocka_unit_test(answered_rows),
        cmocka_unit_test(minimal_answers_name_unread_keys),
        cmocka_unit_test(refusal_statements),
        cmocka_unit_test(judged_statements),
        cmocka_unit_test(statements_reach_their_table_alone),
        cmocka_unit_test(statements_name_their_table_in_its_schema),
        cmocka_unit_test(writes_look_at_their_key),
        cmocka_unit_test(partitioned_statements_ask_no_system_column),
        cmocka_unit_test(resource_statement),
        cmocka_unit_test(fit_check),
        cmocka_unit_test(key_identity),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
