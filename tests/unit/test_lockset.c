/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_lockset.c - the pure rules of lock sets: names put in the one global
 * order whatever order they are given in (the property that rules out
 * deadlock), where each name was asked, the limits (1 to 32 distinct valid
 * names), the per-lock request ids, and the token lists.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "lease/lockset.h"

static json_t *body_of(const char *text)
{
    json_error_t jerr;
    json_t *body = json_loads(text, 0, &jerr);
    assert_non_null(body);
    return body;
}

/* Checks the names of text's body as its route does (bounds, then items) and
 * reads them into *set when they pass. */
static int parse_names(const char *text, struct lockset *set, struct fg_error *err)
{
    json_t *body = body_of(text);
    const json_t *names = json_object_get(body, "names");
    size_t n = json_array_size(names);
    int rc = !json_is_array(names) || n == 0 || n > LOCKSET_MAX
                 ? fg_fail(err, FG_ERR_INVALID_FIELD, "names refused")
                 : lockset_names_check(names, err);
    if (rc == 0)
        lockset_parse_names(body, set);
    json_decref(body);
    return rc;
}

static void test_global_order_whatever_the_request_order(void **state)
{
    (void)state;
    struct lockset a, b;
    struct fg_error err = {0};
    assert_int_equal(parse_names("{\"names\": [\"c\", \"a\", \"b/x\", \"B\"]}", &a, &err), 0);
    assert_int_equal(parse_names("{\"names\": [\"b/x\", \"B\", \"c\", \"a\"]}", &b, &err), 0);
    assert_int_equal(a.n, 4);
    const char *order[] = {"B", "a", "b/x", "c"}; /* bytewise */
    for (size_t i = 0; i < 4; i++) {
        assert_string_equal(a.names[i], order[i]);
        assert_string_equal(b.names[i], order[i]);
    }
    assert_int_equal(a.asked_at[0], 3); /* "B" was the fourth name asked */
    assert_int_equal(a.asked_at[1], 1);
    assert_int_equal(a.asked_at[2], 2);
    assert_int_equal(a.asked_at[3], 0);
}

static void test_refused_names(void **state)
{
    (void)state;
    struct lockset set;
    struct fg_error err = {0};
    const char *bad[] = {"{}",
                         "{\"names\": []}",
                         "{\"names\": \"a\"}",
                         "{\"names\": [\"a\", \"a\"]}",
                         "{\"names\": [1]}",
                         "{\"names\": [null]}"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err.code = FG_OK;
        assert_int_equal(parse_names(bad[i], &set, &err), -1);
        assert_int_equal(err.code, FG_ERR_INVALID_FIELD);
    }
    assert_int_equal(parse_names("{\"names\": [\"bad name\"]}", &set, &err), -1);
    assert_int_equal(err.code, FG_ERR_INVALID_NAME);
    char text[2048] = "{\"names\": [";
    for (int i = 0; i < 33; i++)
        snprintf(text + strlen(text), sizeof text - strlen(text), "%s\"n%d\"", i ? "," : "", i);
    strcat(text, "]}");
    assert_int_equal(parse_names(text, &set, &err), -1);
    text[strlen(text) - 8] = '\0'; /* drop the 33rd name: 32 pass */
    strcat(text, "]}");
    assert_int_equal(parse_names(text, &set, &err), 0);
    assert_int_equal(set.n, 32);
}

static void test_request_ids(void **state)
{
    (void)state;
    char out[LOCKSET_MAX][LOCKSET_RID_MAX];
    struct lockset set = {.n = 2, .names = {"invoice:42", "invoice:7"}};
    lockset_request_ids("", &set, out);
    assert_string_equal(out[0], "");
    assert_string_equal(out[1], "");
    /* FNV-1a of "invoice:42\0invoice:7\0": 81e776071a259f30 */
    lockset_request_ids("r-1", &set, out);
    assert_string_equal(out[0], "set:r-1:81e776071a259f30#invoice:42");
    assert_string_equal(out[1], "set:r-1:81e776071a259f30#invoice:7");
    /* the same request id with other names is another request: no id in common */
    char other[LOCKSET_MAX][LOCKSET_RID_MAX];
    struct lockset more = {.n = 3, .names = {"invoice:42", "invoice:7", "invoice:8"}};
    lockset_request_ids("r-1", &more, other);
    for (size_t i = 0; i < 2; i++)
        assert_string_not_equal(other[i], out[i]);
}

static void test_tokens(void **state)
{
    (void)state;
    const char *tokens[LOCKSET_MAX];
    struct fg_error err = {0};
    json_t *body = body_of("{\"tokens\": [\"t1\", \"t2\"]}");
    assert_int_equal(lockset_tokens_check(json_object_get(body, "tokens"), &err), 0);
    assert_int_equal(lockset_parse_tokens(body, tokens), 2);
    assert_string_equal(tokens[1], "t2");
    json_decref(body);
    const char *bad[] = {"{\"tokens\": [5]}", "{\"tokens\": [\"t\", null]}"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        body = body_of(bad[i]);
        assert_int_equal(lockset_tokens_check(json_object_get(body, "tokens"), &err), -1);
        assert_int_equal(err.code, FG_ERR_INVALID_FIELD);
        assert_non_null(strstr(err.msg, "tokens["));
        json_decref(body);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_global_order_whatever_the_request_order),
        cmocka_unit_test(test_refused_names),
        cmocka_unit_test(test_request_ids),
        cmocka_unit_test(test_tokens),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
