/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_query_args.c - the query as every route reads it: the form decoding
 * of names and values (once), the refusal of malformed escapes, NUL and text
 * that is not UTF-8 naming the parameter, and of names unknown or given
 * twice; an empty value held as none, as a bare name is.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "http/query_args.h"

/* A raw argument as the HTTP library hands it over (value NULL: bare). */
struct raw_arg {
    const char *name, *value;
};

/* The table of args[0..n), or NULL with err set when one does not decode. */
static struct query_args *table_of(const struct raw_arg *args, size_t n, struct fg_error *err)
{
    size_t bytes = 0;
    for (size_t i = 0; i < n; i++)
        bytes += strlen(args[i].name) + 1 + (args[i].value ? strlen(args[i].value) + 1 : 0);
    struct query_args *q = query_args_new(n, bytes);
    for (size_t i = 0; i < n; i++)
        if (query_args_add(q, args[i].name, args[i].value, err) != 0) {
            query_args_free(q);
            return NULL;
        }
    return q;
}

static void decoding_is_the_form_encoding(void **state)
{
    (void)state;
    static const struct {
        const char *raw, *decoded;
    } cases[] = {
        {"", ""},
        {"1", "1"},
        {"%31", "1"},
        {"a+b", "a b"},
        {"a%2Bb", "a+b"},
        {"%2531", "%31"}, /* once: an escaped '%' stays a '%' */
        {"caf%c3%a9", "caf\xc3\xa9"},
        {"caf\xc3\xa9", "caf\xc3\xa9"},
        {"%7e%7E", "~~"},
        {"pg%3Ainvoices%2F42", "pg:invoices/42"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char out[32];
        size_t len = 99;
        assert_int_equal(query_args_decode(cases[i].raw, out, &len), QUERY_TEXT_OK);
        assert_string_equal(out, cases[i].decoded);
        assert_int_equal(len, strlen(cases[i].decoded));
    }
}

static void bad_texts_are_told_apart(void **state)
{
    (void)state;
    static const struct {
        const char *raw;
        enum query_text got;
    } cases[] = {
        {"%", QUERY_TEXT_BAD_ESCAPE},       /* alone */
        {"1%", QUERY_TEXT_BAD_ESCAPE},      /* at the end */
        {"%3", QUERY_TEXT_BAD_ESCAPE},      /* one digit */
        {"%zz", QUERY_TEXT_BAD_ESCAPE},     /* no digits */
        {"%3g", QUERY_TEXT_BAD_ESCAPE},     /* one digit and a letter */
        {"%%31", QUERY_TEXT_BAD_ESCAPE},    /* an escape of an escape */
        {"%00", QUERY_TEXT_NUL},            /* NUL */
        {"a%00b", QUERY_TEXT_NUL},          /* NUL inside */
        {"%ff", QUERY_TEXT_NOT_UTF8},       /* a stray byte */
        {"a%c3", QUERY_TEXT_NOT_UTF8},      /* a cut sequence */
        {"%ed%a0%80", QUERY_TEXT_NOT_UTF8}, /* a surrogate */
        {"%c0%af", QUERY_TEXT_NOT_UTF8},    /* overlong */
        {"\xff", QUERY_TEXT_NOT_UTF8},      /* a raw byte, sent unescaped */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char out[32];
        size_t len;
        assert_int_equal(query_args_decode(cases[i].raw, out, &len), cases[i].got);
    }
}

static void arguments_are_found_decoded(void **state)
{
    (void)state;
    static const struct raw_arg args[] = {{"wait%5Fms", "%33%30"}, {"watch", NULL}, {"a+b", "c+d"}};
    struct fg_error err = {0};
    struct query_args *q = table_of(args, 3, &err);
    assert_non_null(q);
    assert_string_equal(query_args_find(q, "wait_ms")->value, "30");
    assert_non_null(query_args_find(q, "watch"));
    assert_null(query_args_find(q, "watch")->value);
    assert_string_equal(query_args_find(q, "a b")->value, "c d");
    assert_null(query_args_find(q, "wait%5Fms"));
    assert_null(query_args_find(q, "fence"));
    assert_null(query_args_find(NULL, "fence"));
    static const char *const listed[] = {"wait_ms", "watch", "a b", NULL};
    assert_int_equal(query_args_check(q, listed, &err), 0);
    assert_int_equal(query_args_check(NULL, listed, &err), 0);
    query_args_free(q);
}

static void an_empty_value_is_none(void **state)
{
    (void)state;
    static const struct raw_arg args[] = {{"limit", ""}, {"watch", NULL}, {"cursor", "+"}};
    struct fg_error err = {0};
    struct query_args *q = table_of(args, 3, &err);
    assert_non_null(q);
    assert_int_equal(q->n, 3);
    assert_non_null(query_args_find(q, "limit"));
    assert_null(query_args_find(q, "limit")->value); /* ?limit= as ?limit: absent to its reader */
    assert_null(query_args_find(q, "watch")->value);
    assert_string_equal(query_args_find(q, "cursor")->value, " "); /* a space is a value */
    query_args_free(q);
    /* An empty segment (?&&&, a trailing '&') is no parameter at all. */
    static const struct raw_arg empty[] = {{"", NULL}, {"limit", "5"}, {"", ""}};
    q = table_of(empty, 3, &err);
    assert_non_null(q);
    assert_int_equal(query_args_check(q, (const char *const[]){"limit", NULL}, &err), 0);
    assert_string_equal(query_args_find(q, "limit")->value, "5");
    assert_null(query_args_find(q, ""));
    query_args_free(q);
    /* Named twice is refused whatever the values, empty ones too. */
    static const struct raw_arg twice[] = {{"limit", ""}, {"limit", "5"}};
    static const char *const listed[] = {"limit", NULL};
    q = table_of(twice, 2, &err);
    assert_int_equal(query_args_check(q, listed, &err), -1);
    assert_string_equal(err.msg, "query parameter 'limit' given twice");
    query_args_free(q);
}

static void a_bad_text_names_its_parameter(void **state)
{
    (void)state;
    static const struct {
        struct raw_arg arg;
        const char *detail;
    } cases[] = {
        {{"waiters", "%zz"}, "query parameter 'waiters' has a malformed percent-escape"},
        {{"wait%5Fms", "1%"}, "query parameter 'wait_ms' has a malformed percent-escape"},
        {{"owner", "%ff"}, "query parameter 'owner' must be UTF-8 text"},
        {{"owner", "a%00"}, "query parameter 'owner' must not contain NUL"},
        {{"x%ff", "1"}, "query parameter 'x%ff' must be UTF-8 text"},
        {{"x%", NULL}, "query parameter 'x%' has a malformed percent-escape"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const struct raw_arg args[] = {{"limit", "5"}, cases[i].arg};
        struct fg_error err = {0};
        assert_null(table_of(args, 2, &err));
        assert_int_equal(err.code, FG_ERR_INVALID_FIELD);
        assert_string_equal(err.msg, cases[i].detail);
    }
}

static void unknown_and_repeated_names_are_refused(void **state)
{
    (void)state;
    static const char *const listed[] = {"waiters", "watch", "wait_ms", NULL};
    static const struct {
        struct raw_arg args[3];
        const char *detail;
    } cases[] = {
        {{{"waiters", "1"}, {"waiters", "abc"}, {"watch", "true"}},
         "query parameter 'waiters' given twice"},
        {{{"watch", NULL}, {"wait_ms", "1"}, {"watch", "true"}},
         "query parameter 'watch' given twice"},
        {{{"waiters", "1"}, {"wait%5fms", "1"}, {"wait_ms", "1"}},
         "query parameter 'wait_ms' given twice"}, /* the same name, spelled two ways */
        {{{"waiters", "1"}, {"verbose", "1"}, {"verbose", "1"}},
         "query parameter 'verbose' is unknown"},
        {{{"", "1"}, {"waiters", "1"}, {"waiters", "1"}}, "query parameter '' is unknown"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct fg_error err = {0};
        struct query_args *q = table_of(cases[i].args, 3, &err);
        assert_non_null(q);
        assert_int_equal(query_args_check(q, listed, &err), -1);
        assert_int_equal(err.code, FG_ERR_INVALID_FIELD);
        assert_string_equal(err.msg, cases[i].detail);
        query_args_free(q);
    }
    const struct raw_arg any[] = {{"waiters", "1"}};
    struct fg_error err = {0};
    struct query_args *q = table_of(any, 1, &err);
    assert_int_equal(query_args_check(q, NULL, &err), -1); /* a route without parameters */
    assert_string_equal(err.msg, "query parameter 'waiters' is unknown");
    query_args_free(q);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(decoding_is_the_form_encoding),
        cmocka_unit_test(bad_texts_are_told_apart),
        cmocka_unit_test(arguments_are_found_decoded),
        cmocka_unit_test(an_empty_value_is_none),
        cmocka_unit_test(a_bad_text_names_its_parameter),
        cmocka_unit_test(unknown_and_repeated_names_are_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
