/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_fenced_answer.c - reading the answer rows of fenced Postgres statements:
 * applied, stale and revoked writes in both fence modes, missing rows, reads,
 * and the stale resources of a batch's claim.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "store/fenced_answer.h"

static struct fenced_result res;

/* Takes the answer text (NULL: no answer row) of a write of kind with fence presented. */
static bool take(const char *text, enum fenced_kind kind, int64_t presented)
{
    json_t *answer = text != NULL ? json_loads(text, 0, NULL) : NULL;
    assert_true(text == NULL || answer != NULL);
    bool found = fenced_answer_take(answer, kind, presented, &res);
    json_decref(answer);
    return found;
}

static void writes(void **state)
{
    (void)state;
    assert_true(
        take("{\"resource\": \"pg:inv/1\", \"fence\": \"7\", \"row\": \"{\\\"id\\\": \\\"1\\\"}\"}",
             FENCED_PATCH, 7));
    assert_int_equal(res.outcome, FENCED_APPLIED);
    assert_string_equal(res.resource, "pg:inv/1");
    assert_int_equal(res.fence, 7);
    assert_string_equal(json_string_value(json_object_get(res.row, "id")), "1");
    /* a higher fence stored: stale, whatever the row */
    assert_true(
        take("{\"resource\": \"pg:inv/1\", \"fence\": \"9\", \"row\": null}", FENCED_PATCH, 7));
    assert_int_equal(res.outcome, FENCED_STALE);
    assert_int_equal(res.fence, 9);
    /* revoked wins over a fence that matches */
    assert_true(
        take("{\"resource\": \"pg:inv/1\", \"fence\": \"7\", \"revoked\": \"t\"}", FENCED_PUT, 7));
    assert_int_equal(res.outcome, FENCED_REVOKED);
    /* a fence column answers applied itself */
    assert_true(
        take("{\"resource\": \"pg:inv/1\", \"fence\": \"9\", \"applied\": \"f\"}", FENCED_POST, 9));
    assert_int_equal(res.outcome, FENCED_STALE);
    assert_true(
        take("{\"resource\": \"pg:inv/1\", \"fence\": \"5\", \"applied\": \"t\", \"row\": \"{}\"}",
             FENCED_PUT, 9));
    assert_int_equal(res.outcome, FENCED_APPLIED);
    /* a numeric beyond double stays its JSON text */
    assert_true(take("{\"resource\": \"r\", \"fence\": \"1\", \"row\": \"{\\\"n\\\": 1e999}\"}",
                     FENCED_PUT, 1));
    assert_true(json_is_string(res.row));
    fenced_result_free(&res);
    assert_null(res.resource);
}

static void missing_rows(void **state)
{
    (void)state;
    assert_false(take(NULL, FENCED_PATCH, 3));
    /* applied, but the row to change was not there */
    assert_false(
        take("{\"resource\": \"pg:inv/2\", \"fence\": \"3\", \"row\": null}", FENCED_PATCH, 3));
    assert_int_equal(res.outcome, FENCED_APPLIED);
    /* a delete answers the deleted row, but its result has none */
    assert_true(
        take("{\"resource\": \"pg:inv/2\", \"fence\": \"3\", \"row\": \"{}\"}", FENCED_DELETE, 3));
    assert_true(json_is_null(res.row));
    /* an insert needs no existing row */
    assert_true(
        take("{\"resource\": \"pg:inv/2\", \"fence\": \"3\", \"row\": null}", FENCED_PUT, 3));
    fenced_result_free(&res);
}

static void reads_and_claims(void **state)
{
    (void)state;
    json_t *answer = json_pack("{s:s, s:n, s:n}", "resource", "pg:inv/3", "fence", "row");
    fenced_answer_read(answer, &res);
    json_decref(answer);
    assert_int_equal(res.outcome, FENCED_APPLIED);
    assert_int_equal(res.fence, 0);
    assert_true(json_is_null(res.row));
    fenced_result_free(&res);
    json_t *claimed = json_loads(
        "[{\"resource\": \"a\", \"fence\": \"4\"}, {\"resource\": \"b\", \"fence\": \"9\"},"
        " {\"resource\": \"c\", \"fence\": \"5\"}]",
        0, NULL);
    json_t *stale = fenced_answer_stale(claimed, 5);
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
        cmocka_unit_test(writes),
        cmocka_unit_test(missing_rows),
        cmocka_unit_test(reads_and_claims),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
