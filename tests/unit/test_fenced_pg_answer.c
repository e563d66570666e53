/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_fenced_pg_answer.c - reading the answer rows of fenced Postgres statements:
 * applied writes, the verdicts of the refusal statement (stale, revoked,
 * missing row, row in the way, another try), reads, and the stale resources
 * of a batch's claim.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "store/fenced/fenced_pg_answer.h"

static struct fenced_result res;

static json_t *answer_of(const char *text)
{
    json_t *answer = json_loads(text, 0, NULL);
    assert_non_null(answer);
    return answer;
}

/* The verdict on a write of kind with fence presented, from a refusal answer's text. */
static enum fenced_verdict verdict(const char *text, enum fenced_kind kind, int64_t presented)
{
    json_t *answer = answer_of(text);
    enum fenced_verdict v = fenced_pg_answer_verdict(answer, kind, presented, &res);
    json_decref(answer);
    return v;
}

/* A table (key "id", a text and a numeric column) as the answers below describe it. */
static char *note_columns[] = {"note", "n"};
static struct table_config note_table = {
    .name = "inv", .key = "id", .columns = note_columns, .ncolumns = 2};
static enum row_json_kind note_kinds[] = {ROW_JSON_NUMBER, ROW_JSON_STRING, ROW_JSON_NUMBER};
static const struct table_schema note_schema = {.cfg = &note_table, .row_kinds = note_kinds};

static void applied_writes(void **state)
{
    (void)state;
    json_t *answer = answer_of(
        "{\"resource\": \"pg:inv/1\", \"c0\": \"1\", \"c1\": \"a \\\"b\\\"\", \"c2\": null}");
    fenced_pg_answer_applied(answer, &note_schema, "1", true, 7, &res);
    json_decref(answer);
    assert_int_equal(res.outcome, FENCED_APPLIED);
    assert_string_equal(res.resource, "pg:inv/1");
    assert_int_equal(res.fence, 7);
    assert_string_equal(res.after, "{\"id\":1,\"note\":\"a \\\"b\\\"\",\"n\":null}");
    /* a delete: no row */
    answer = answer_of("{\"resource\": \"pg:inv/1\"}");
    fenced_pg_answer_applied(answer, &note_schema, "1", false, 8, &res);
    json_decref(answer);
    assert_int_equal(res.fence, 8);
    assert_string_equal(res.resource, "pg:inv/1");
    assert_null(res.after);
    /* a key the statement does not return: the key written, and no resource (the caller's);
     * numbers as Postgres printed them, never through a double */
    answer = answer_of("{\"c1\": \"x\", \"c2\": \"99999999.99\"}");
    fenced_pg_answer_applied(answer, &note_schema, "1234567890123456.7891", true, 9, &res);
    json_decref(answer);
    assert_null(res.resource);
    assert_string_equal(res.after,
                        "{\"id\":1234567890123456.7891,\"note\":\"x\",\"n\":99999999.99}");
    /* nothing returned at all: a table of the key alone */
    struct table_config key_only = {.name = "k", .key = "id"};
    const struct table_schema key_schema = {.cfg = &key_only, .row_kinds = note_kinds};
    fenced_pg_answer_applied(NULL, &key_schema, "7", true, 9, &res);
    assert_null(res.resource);
    assert_string_equal(res.after, "{\"id\":7}");
    /* a numeric beyond double: the same, an object row */
    answer = answer_of("{\"resource\": \"r\", \"c0\": \"1\", \"c1\": \"x\", \"c2\": \"1"
                       "000000000000000000000000000000.5\"}");
    fenced_pg_answer_applied(answer, &note_schema, "1", true, 1, &res);
    json_decref(answer);
    assert_string_equal(res.after,
                        "{\"id\":1,\"note\":\"x\",\"n\":1000000000000000000000000000000.5}");
    fenced_result_free(&res);
    assert_null(res.resource);
}

static void refusals(void **state)
{
    (void)state;
    /* a higher fence stored: stale, row or not */
    assert_int_equal(verdict("{\"resource\": \"pg:inv/1\", \"fence\": \"9\", \"revoked\": \"f\","
                             " \"found\": \"f\"}",
                             FENCED_PATCH, 7),
                     FENCED_VERDICT_REFUSED);
    assert_int_equal(res.outcome, FENCED_STALE);
    assert_int_equal(res.fence, 9);
    assert_string_equal(res.resource, "pg:inv/1");
    /* revoked wins over a fence that would do */
    assert_int_equal(verdict("{\"resource\": \"r\", \"fence\": \"7\", \"revoked\": \"t\","
                             " \"found\": \"t\"}",
                             FENCED_PUT, 7),
                     FENCED_VERDICT_REFUSED);
    assert_int_equal(res.outcome, FENCED_REVOKED);
    /* an equal fence is no refusal */
    assert_int_equal(verdict("{\"resource\": \"r\", \"fence\": \"7\", \"revoked\": \"f\","
                             " \"found\": \"t\"}",
                             FENCED_PATCH, 7),
                     FENCED_VERDICT_RETRY);
    fenced_result_free(&res);
}

static void missing_and_existing_rows(void **state)
{
    (void)state;
    const char *absent =
        "{\"resource\": \"r\", \"fence\": null, \"revoked\": \"f\", \"found\": \"f\"}";
    const char *present =
        "{\"resource\": \"r\", \"fence\": \"3\", \"revoked\": \"f\", \"found\": \"t\"}";
    assert_int_equal(verdict(absent, FENCED_PATCH, 5), FENCED_VERDICT_MISSING);
    assert_int_equal(res.fence, 0);
    assert_int_equal(verdict(absent, FENCED_DELETE, 5), FENCED_VERDICT_MISSING);
    /* an insert needs no row: it met one that went away */
    assert_int_equal(verdict(absent, FENCED_PUT, 5), FENCED_VERDICT_RETRY);
    /* a POST onto a row whose fence does not refuse it */
    assert_int_equal(verdict(present, FENCED_POST, 5), FENCED_VERDICT_EXISTS);
    assert_int_equal(verdict(present, FENCED_PUT, 5), FENCED_VERDICT_RETRY);
    assert_int_equal(verdict(present, FENCED_PATCH, 5), FENCED_VERDICT_RETRY);
    fenced_result_free(&res);
}

static void reads_and_claims(void **state)
{
    (void)state;
    json_t *answer = json_pack("{s:s, s:n, s:n}", "resource", "pg:inv/3", "fence", "row");
    fenced_pg_answer_read(answer, &res);
    json_decref(answer);
    assert_int_equal(res.outcome, FENCED_APPLIED);
    assert_int_equal(res.fence, 0);
    assert_null(res.after);
    fenced_result_free(&res);
    /* a row: row_to_json's text as it is */
    answer = json_pack("{s:s, s:s, s:s}", "resource", "pg:inv/3", "fence", "4", "row",
                       "{\"id\":3,\"n\":0.1,\"j\":{\"x\": 1e400}}");
    fenced_pg_answer_read(answer, &res);
    json_decref(answer);
    assert_int_equal(res.fence, 4);
    assert_string_equal(res.after, "{\"id\":3,\"n\":0.1,\"j\":{\"x\": 1e400}}");
    fenced_result_free(&res);
    json_t *claimed = json_loads(
        "[{\"resource\": \"a\", \"fence\": \"4\"}, {\"resource\": \"b\", \"fence\": \"9\"},"
        " {\"resource\": \"c\", \"fence\": \"5\"}]",
        0, NULL);
    json_t *stale = fenced_pg_answer_stale(claimed, 5);
    assert_int_equal(json_array_size(stale), 1);
    assert_string_equal(json_string_value(json_object_get(json_array_get(stale, 0), "resource")),
                        "b");
    assert_int_equal(json_integer_value(json_object_get(json_array_get(stale, 0), "current_fence")),
                     9);
    json_decref(stale);
    json_decref(claimed);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(applied_writes),
        cmocka_unit_test(refusals),
        cmocka_unit_test(missing_and_existing_rows),
        cmocka_unit_test(reads_and_claims),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
