/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_strict.c - the header rules of strict requests (http/strict.c) and the
 * member check of bodies (fgjson_only): media type, Host, request ids, body
 * framing and transfer codings, Connection tokens, pages of another origin,
 * unknown members named; and the bound checks of the generated route
 * table, which must answer exactly as the handlers' readers (fgjson_int,
 * fgjson_string) would, only earlier.
 */
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "http/strict.h"
#include "util/fgjson.h"
#include "util/names.h"

static void content_type(void **state)
{
    (void)state;
    assert_true(strict_content_type_is_json("application/json"));
    assert_true(strict_content_type_is_json("Application/JSON"));
    assert_true(strict_content_type_is_json("application/json; charset=utf-8"));
    assert_true(strict_content_type_is_json("application/json ;charset=utf-8"));
    assert_false(strict_content_type_is_json(NULL));
    assert_false(strict_content_type_is_json(""));
    assert_false(strict_content_type_is_json("text/plain"));
    assert_false(strict_content_type_is_json("application/x-www-form-urlencoded"));
    assert_false(strict_content_type_is_json("multipart/form-data; boundary=x"));
    assert_false(strict_content_type_is_json("application/jsonp"));
    assert_false(strict_content_type_is_json("application/json-patch+json"));
}

static void host(void **state)
{
    (void)state;
    char *allowed[] = {"127.0.0.1:8480", "localhost:8480", "localhost"};
    assert_true(strict_host_allowed("127.0.0.1:8480", allowed, 3));
    assert_true(strict_host_allowed("LOCALHOST", allowed, 3));
    assert_true(strict_host_allowed(NULL, allowed, 3));
    assert_false(strict_host_allowed("evil.example", allowed, 3));
    assert_false(strict_host_allowed("127.0.0.1:8481", allowed, 3));
    assert_false(strict_host_allowed("localhost.evil.example", allowed, 3));
    assert_false(strict_host_allowed("", allowed, 3));
    char *any[] = {"*"};
    assert_true(strict_host_allowed("anything", any, 1));
}

static void request_id(void **state)
{
    (void)state;
    assert_true(strict_request_id_valid("abc-123_x.y:z/w+v=u@t"));
    assert_false(strict_request_id_valid(""));
    assert_false(strict_request_id_valid("a b"));
    assert_false(strict_request_id_valid("a\r\nX-Evil: 1"));
    assert_false(strict_request_id_valid("caf\xc3\xa9"));
    char long_id[X_REQUEST_ID_MAX_LEN + 2];
    memset(long_id, 'a', sizeof long_id - 1);
    long_id[sizeof long_id - 1] = '\0';
    assert_false(strict_request_id_valid(long_id));
    long_id[X_REQUEST_ID_MAX_LEN] = '\0';
    assert_true(strict_request_id_valid(long_id));
}

static void framing(void **state)
{
    (void)state;
    assert_true(strict_framing_ok(0, 0));
    assert_true(strict_framing_ok(1, 0));
    assert_true(strict_framing_ok(0, 1));
    assert_false(strict_framing_ok(2, 0));
    assert_false(strict_framing_ok(1, 1));
    assert_false(strict_framing_ok(2, 1));
    assert_false(strict_framing_ok(0, 2)); /* two Transfer-Encodings: the first won */
    assert_true(strict_header_name_ok("Content-Length"));
    assert_true(strict_header_name_ok("x-a!#$%&'*+-.^_`|~9"));
    assert_false(strict_header_name_ok("Content-Length "));
    assert_false(strict_header_name_ok("Content-Length\t"));
    assert_false(strict_header_name_ok(" Host"));
    assert_false(strict_header_name_ok("Trans fer-Encoding"));
    assert_false(strict_header_name_ok("a\"b"));
    assert_false(strict_header_name_ok("a(b)"));
    assert_false(strict_header_name_ok("a\x80"));
    assert_false(strict_header_name_ok(""));
}

static void transfer_codings(void **state)
{
    (void)state;
    assert_true(strict_transfer_coding_ok(NULL));
    assert_true(strict_transfer_coding_ok("chunked"));
    assert_true(strict_transfer_coding_ok("Chunked"));
    assert_false(strict_transfer_coding_ok("gzip, chunked"));
    assert_false(strict_transfer_coding_ok("chunked, chunked"));
    assert_false(strict_transfer_coding_ok("xchunked"));
    assert_false(strict_transfer_coding_ok("identity"));
    assert_false(strict_transfer_coding_ok(""));
}

static void header_tokens(void **state)
{
    (void)state;
    assert_true(strict_header_has_token("close", "close"));
    assert_true(strict_header_has_token("Close", "close"));
    assert_true(strict_header_has_token("TE, close", "close"));
    assert_true(strict_header_has_token(" keep-alive ,Upgrade", "keep-alive"));
    assert_true(strict_header_has_token("a,\tclose\t", "close"));
    assert_false(strict_header_has_token(NULL, "close"));
    assert_false(strict_header_has_token("", "close"));
    assert_false(strict_header_has_token("closed", "close"));
    assert_false(strict_header_has_token("unclose, x", "close"));
    assert_false(strict_header_has_token("keep-alive", "close"));
}

static void cross_origin(void **state)
{
    (void)state;
    const char *host = "127.0.0.1:8480";
    assert_null(strict_cross_origin(NULL, NULL, host)); /* not a page: curl, the clients */
    assert_null(strict_cross_origin("http://127.0.0.1:8480", NULL, host));
    assert_null(strict_cross_origin("http://127.0.0.1:8480", "same-origin", host));
    assert_null(strict_cross_origin("HTTP://LOCALHOST:8480", "same-origin", "localhost:8480"));
    assert_null(strict_cross_origin(NULL, "none", host)); /* typed by the user */
    assert_non_null(strict_cross_origin("https://evil.example", NULL, host));
    assert_non_null(strict_cross_origin("http://127.0.0.1:3000", NULL, host));
    assert_non_null(strict_cross_origin("http://127.0.0.1", NULL, host));
    assert_non_null(strict_cross_origin("http://127.0.0.1:8480", NULL, NULL));
    assert_non_null(strict_cross_origin("http://127.0.0.1:8480/", NULL, host));
    assert_non_null(strict_cross_origin("127.0.0.1:8480", NULL, host));
    assert_non_null(strict_cross_origin("null", NULL, host));
    assert_non_null(strict_cross_origin(NULL, "cross-site", host));
    assert_non_null(strict_cross_origin(NULL, "same-site", host));
    assert_non_null(strict_cross_origin("http://127.0.0.1:8480", "cross-site", host));
}

static void unknown_members_are_named(void **state)
{
    (void)state;
    static const char *const allowed[] = {"ttl_ms", "owner", NULL};
    struct fg_error err = {0};
    json_t *ok = json_pack("{s:i, s:s}", "ttl_ms", 1, "owner", "o");
    assert_int_equal(fgjson_only(ok, allowed, "", &err), 0);
    json_t *bad = json_pack("{s:i, s:i, s:i}", "ttl", 1, "ttl_ms", 2, "wiat_ms", 3);
    assert_int_equal(fgjson_only(bad, allowed, "", &err), -1);
    assert_int_equal(err.code, FG_ERR_INVALID_FIELD);
    assert_non_null(strstr(err.msg, "'ttl'"));
    assert_non_null(strstr(err.msg, "'wiat_ms'"));
    assert_int_equal(fgjson_only(ok, NULL, "ops[1].", &err), -1);
    assert_non_null(strstr(err.msg, "'ops[1].ttl_ms'"));
    json_t *many = json_object();
    for (int i = 0; i < 50; i++) {
        char name[32];
        snprintf(name, sizeof name, "field_number_%d", i);
        json_object_set_new(many, name, json_true());
    }
    assert_int_equal(fgjson_only(many, allowed, "", &err), -1);
    assert_true(strlen(err.msg) < sizeof err.msg);
    json_decref(ok);
    json_decref(bad);
    json_decref(many);
}

static void owners(void **state)
{
    (void)state;
    assert_true(name_is_valid_owner("billing-7", 9));
    assert_true(name_is_valid_owner("caf\xc3\xa9 \xe2\x98\x83", 9));
    assert_false(name_is_valid_owner("", 0));
    assert_false(name_is_valid_owner("bad\xff\xfe", 5));
    assert_false(name_is_valid_owner("tab\there", 8));
    assert_false(name_is_valid_owner("esc\x1b[31m", 8));
    assert_false(name_is_valid_owner("del\x7f", 4));
    assert_false(name_is_valid_owner("c1\xc2\x85", 4));
    char long_owner[OWNER_NAME_MAX_LEN + 1];
    memset(long_owner, 'o', sizeof long_owner);
    assert_false(name_is_valid_owner(long_owner, sizeof long_owner));
    assert_true(name_is_valid_owner(long_owner, sizeof long_owner - 1));
}

/* The answer of check for value (NULL: member absent): 0, or the detail. */
static const char *member_answer(const struct member_bound *b, json_t *value, struct fg_error *err)
{
    json_t *body = json_object();
    if (value != NULL)
        json_object_set_new(body, b->name, value);
    memset(err, 0, sizeof *err);
    int rc = strict_member_check(b, body, err);
    json_decref(body);
    assert_true(rc == 0 || err->code == FG_ERR_INVALID_FIELD);
    return rc == 0 ? NULL : err->msg;
}

static void integers_answer_as_fgjson_int(void **state)
{
    (void)state;
    const struct member_bound b = {
        "ttl_ms", CHECK_INTEGER, 100, 5000, false, "field 'ttl_ms' must be between 100 and 5000",
        false,    NULL,          NULL};
    const long long values[] = {LLONG_MIN, -1, 0, 99, 100, 101, 4999, 5000, 5001, LLONG_MAX};
    struct fg_error a, f;
    for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) {
        json_t *body = json_pack("{s:I}", "ttl_ms", (json_int_t)values[i]);
        long long out = 0;
        memset(&f, 0, sizeof f);
        int rc = fgjson_int(body, "ttl_ms", b.min, b.max, &out, NULL, &f);
        const char *mine = member_answer(&b, json_integer(values[i]), &a);
        assert_int_equal(mine == NULL, rc == 0);
        if (mine != NULL)
            assert_string_equal(mine, f.msg);
        json_decref(body);
    }
    assert_string_equal(member_answer(&b, json_string("7"), &a),
                        "field 'ttl_ms' must be an integer");
    assert_string_equal(member_answer(&b, json_real(100.0), &a),
                        "field 'ttl_ms' must be an integer");
    assert_string_equal(member_answer(&b, json_null(), &a),
                        "field 'ttl_ms' must not be null: leave it out for its default");
    assert_null(member_answer(&b, NULL, &a));
    json_t *null_body = json_pack("{s:n}", "ttl_ms");
    long long out = 0;
    memset(&f, 0, sizeof f);
    assert_int_equal(fgjson_int(null_body, "ttl_ms", b.min, b.max, &out, NULL, &f), -1);
    assert_string_equal(f.msg, member_answer(&b, json_null(), &a));
    json_decref(null_body);
    const struct member_bound need = {"limit", CHECK_INTEGER, 1, 9, true, "x", false, NULL, NULL};
    assert_string_equal(member_answer(&need, NULL, &a), "field 'limit' is required");
    assert_string_equal(member_answer(&need, json_null(), &a), "field 'limit' is required");
}

/* A body string's answers, word for word those its handlers gave when they
 * read it themselves; and the printable rule of an owner. */
static void strings_answer_their_refusals(void **state)
{
    (void)state;
    const struct member_bound b = {"owner", CHECK_STRING, 1,
                                   4,       false,        "field 'owner' must be 1 to 4 bytes long",
                                   false,   NULL,         NULL};
    struct fg_error a;
    assert_null(member_answer(&b, json_string("a"), &a));
    assert_null(member_answer(&b, json_string("abcd"), &a));
    assert_null(member_answer(&b, json_string("a\tb"), &a)); /* any bytes */
    assert_string_equal(member_answer(&b, json_string(""), &a), b.refusal);
    assert_string_equal(member_answer(&b, json_string("abcde"), &a), b.refusal);
    assert_string_equal(member_answer(&b, json_stringn("a\0b", 3), &a),
                        "field 'owner' must not contain NUL");
    assert_string_equal(member_answer(&b, json_integer(1), &a), "field 'owner' must be a string");
    assert_string_equal(member_answer(&b, json_null(), &a),
                        "field 'owner' must not be null: leave it out for its default");
    const struct member_bound printable = {"owner", CHECK_STRING,          1,   4, false, b.refusal,
                                           false,   "owner not printable", NULL};
    assert_null(member_answer(&printable, json_string("a-\xc3\xa9"), &a));
    assert_string_equal(member_answer(&printable, json_string("a\tb"), &a), "owner not printable");
    assert_string_equal(member_answer(&printable, json_string("a\x7f"), &a), "owner not printable");
    assert_string_equal(member_answer(&printable, json_string("abcde"), &a), b.refusal);
    const struct member_bound token = {
        "token", CHECK_STRING, 1,   9, true, "field 'token' must be 1 to 9 bytes long",
        false,   NULL,         NULL};
    assert_string_equal(member_answer(&token, NULL, &a), "field 'token' is required");
    assert_string_equal(member_answer(&token, json_integer(5), &a),
                        "field 'token' must be a string");
}

/* An items rule: refuses an item "b". */
static int no_b_items(const json_t *array, struct fg_error *err)
{
    for (size_t i = 0; i < json_array_size(array); i++)
        if (strcmp(json_string_value(json_array_get(array, i)), "b") == 0)
            return fg_fail(err, FG_ERR_INVALID_FIELD, "item %zu is b", i);
    return 0;
}

/* A request without a body has every member absent: a required one is
 * refused as in {}, an optional one passes. */
static void no_body_is_every_member_absent(void **state)
{
    (void)state;
    struct fg_error err = {0};
    const struct member_bound limit = {"limit",         CHECK_INTEGER, 1,    5,   true,
                                       "limit refused", false,         NULL, NULL};
    assert_int_equal(strict_member_check(&limit, NULL, &err), -1);
    assert_string_equal(err.msg, "field 'limit' is required");
    const struct member_bound names = {"names",         CHECK_ARRAY, 1,    2,   true,
                                       "names refused", false,       NULL, NULL};
    memset(&err, 0, sizeof err);
    assert_int_equal(strict_member_check(&names, NULL, &err), -1);
    assert_string_equal(err.msg, "names refused");
    const struct member_bound reason = {"reason",         CHECK_TEXT, 0,    3,   false,
                                        "reason refused", false,      NULL, NULL};
    assert_int_equal(strict_member_check(&reason, NULL, &err), 0);
    const struct member_bound ttl = {"ttl_ms",      CHECK_INTEGER, 1,    5,   false,
                                     "ttl refused", false,         NULL, NULL};
    assert_int_equal(strict_member_check(&ttl, NULL, &err), 0);
}

static void texts_and_arrays_answer_their_refusal(void **state)
{
    (void)state;
    const struct member_bound text = {"reason",         CHECK_TEXT, 0,    3,   false,
                                      "reason refused", false,      NULL, NULL};
    struct fg_error a;
    assert_null(member_answer(&text, NULL, &a));
    assert_null(member_answer(&text, json_string(""), &a));
    assert_null(member_answer(&text, json_string("abc"), &a));
    assert_string_equal(member_answer(&text, json_string("abcd"), &a), "reason refused");
    assert_string_equal(member_answer(&text, json_stringn("a\0", 2), &a), "reason refused");
    assert_string_equal(member_answer(&text, json_null(), &a), "reason refused");
    assert_string_equal(member_answer(&text, json_integer(1), &a), "reason refused");
    const struct member_bound list = {"names",         CHECK_ARRAY, 1,    2,   true,
                                      "names refused", false,       NULL, NULL};
    assert_string_equal(member_answer(&list, NULL, &a), "names refused");
    assert_string_equal(member_answer(&list, json_pack("[]"), &a), "names refused");
    assert_null(member_answer(&list, json_pack("[s]", "a"), &a));
    assert_null(member_answer(&list, json_pack("[s,s]", "a", "b"), &a));
    assert_string_equal(member_answer(&list, json_pack("[s,s,s]", "a", "b", "c"), &a),
                        "names refused");
    assert_string_equal(member_answer(&list, json_string("a"), &a), "names refused");
    const struct member_bound ruled = {"names",         CHECK_ARRAY, 1,    2,         true,
                                       "names refused", false,       NULL, no_b_items};
    assert_null(member_answer(&ruled, json_pack("[s,s]", "a", "c"), &a));
    assert_string_equal(member_answer(&ruled, json_pack("[s,s]", "a", "b"), &a), "item 1 is b");
    assert_string_equal(member_answer(&ruled, json_pack("[s,s,s]", "b", "b", "b"), &a),
                        "names refused"); /* the bounds first */
}

static void queries_refuse_all_but_decimals_in_bounds(void **state)
{
    (void)state;
    const struct member_bound b = {
        "limit", CHECK_QUERY_INTEGER, 1, 1000, false, "limit refused", false, NULL, NULL};
    struct fg_error err = {0};
    assert_int_equal(strict_query_check(&b, NULL, &err), 0); /* absent, as ?limit= is */
    assert_int_equal(strict_query_check(&b, "1", &err), 0);
    assert_int_equal(strict_query_check(&b, "1000", &err), 0);
    assert_int_equal(strict_query_check(&b, "007", &err), 0);
    const char *bad[] = {"",   "0",  "1001", "-5",  "%31",
                         "+5", " 5", "5x",   "abc", "99999999999999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        memset(&err, 0, sizeof err);
        assert_int_equal(strict_query_check(&b, bad[i], &err), -1);
        assert_string_equal(err.msg, "limit refused");
    }
}

static void bounds_are_found_by_name(void **state)
{
    (void)state;
    const struct member_bound list[] = {
        {"a", CHECK_INTEGER, 0, 1, false, "a", false, NULL, NULL},
        {"b", CHECK_QUERY_INTEGER, 2, 3, false, "b", true, NULL, NULL},
        {NULL, CHECK_INTEGER, 0, 0, false, NULL, false, NULL, NULL},
    };
    assert_ptr_equal(strict_bound(list, "b"), &list[1]);
    assert_ptr_equal(strict_bound(list, "a"), &list[0]);
}

/* An integer beyond 64 bits in a body is refused as its member's check
 * refuses an integer past its bound, word for word (a string's: as any
 * integer); a member the route does not check (a nested one, one named as a
 * query parameter) keeps the parser's refusal naming it. */
static void integers_beyond_64_bits_answer_their_bound(void **state)
{
    (void)state;
    const struct member_bound list[] = {
        {"ttl_ms", CHECK_INTEGER, 100, 5000, false, "field 'ttl_ms' must be between 100 and 5000",
         false, NULL, NULL},
        {"wait_ms", CHECK_QUERY_INTEGER, 0, 9, false, "query parameter 'wait_ms' ...", true, NULL,
         NULL},
        {"owner", CHECK_STRING, 1, 9, false, "field 'owner' must be 1 to 9 bytes long", false, NULL,
         NULL},
        {NULL, CHECK_INTEGER, 0, 0, false, NULL, false, NULL, NULL},
    };
    static const char *const bodies[] = {
        "{\"ttl_ms\": 9223372036854775808}", "{\"ttl_ms\": -99999999999999999999}",
        "{\"wait_ms\": 9223372036854775808}", "{\"owner\": 9223372036854775808}",
        "{\"set\": {\"ttl_ms\": 9223372036854775808}}"};
    static const char *const answers[] = {
        "field 'ttl_ms' must be between 100 and 5000",
        "field 'ttl_ms' must be between 100 and 5000",
        "field 'wait_ms' is an integer beyond 64 bits (-9223372036854775808 to "
        "9223372036854775807)",
        "field 'owner' must be a string",
        "field 'set.ttl_ms' is an integer beyond 64 bits (-9223372036854775808 to "
        "9223372036854775807)"};
    for (size_t i = 0; i < sizeof bodies / sizeof bodies[0]; i++) {
        struct fg_error err = {0};
        char too_big[FGJSON_MEMBER_MAX];
        assert_null(fgjson_parse_object(bodies[i], strlen(bodies[i]), too_big, &err));
        strict_too_big(list, too_big, &err);
        assert_int_equal(err.code, FG_ERR_INVALID_FIELD);
        assert_string_equal(err.msg, answers[i]);
    }
    struct fg_error past = {0};
    assert_string_equal(member_answer(&list[0], json_integer(5001), &past), answers[0]);
    assert_string_equal(member_answer(&list[2], json_integer(1), &past), answers[3]);
}

/* A target in absolute form names its host, which stands for the Host; one in
 * origin form is its own path. */
static void targets_name_their_host(void **state)
{
    (void)state;
    char host[16];
    assert_string_equal(strict_target_path("/v1/locks/a", host, sizeof host), "/v1/locks/a");
    assert_string_equal(host, "");
    assert_string_equal(strict_target_path("http://evil.example/v1/locks/a?x=1", host, sizeof host),
                        "/v1/locks/a?x=1");
    assert_string_equal(host, "evil.example");
    assert_string_equal(strict_target_path("HTTPS://127.0.0.1:8480/healthz", host, sizeof host),
                        "/healthz");
    assert_string_equal(host, "127.0.0.1:8480");
    assert_string_equal(strict_target_path("http://localhost", host, sizeof host), "/");
    assert_string_equal(host, "localhost");
    assert_string_equal(strict_target_path("http://localhost?a", host, sizeof host), "/");
    assert_string_equal(strict_target_path("http://a-very-long-host-name/x", host, sizeof host),
                        "/x");
    assert_int_equal(strlen(host), sizeof host - 1);
    char *const allowed[] = {"a-very-long-ho"};
    assert_false(strict_host_allowed(host, allowed, 1)); /* cut: no host's name */
}

/* A target in absolute form whose authority names no host is malformed, not
 * one to read the Host header for. */
static void targets_name_a_host(void **state)
{
    (void)state;
    const char *faulty[] = {"http:///v1/locks/a", "HTTP://", "http://?x", "http://#x",
                            "https://:8480/healthz"};
    for (size_t i = 0; i < sizeof faulty / sizeof faulty[0]; i++)
        assert_non_null(strict_target_fault(faulty[i]));
    const char *fine[] = {"/v1/locks/a", "http://localhost", "http://127.0.0.1:8480/healthz", "*",
                          "//x"};
    for (size_t i = 0; i < sizeof fine / sizeof fine[0]; i++)
        assert_null(strict_target_fault(fine[i]));
}

/* A target in absolute form names the scheme its port serves: https on an
 * HTTPS port, http on a plain one. */
static void targets_name_the_port_scheme(void **state)
{
    (void)state;
    assert_true(strict_target_scheme_ok("http://localhost/healthz", false));
    assert_true(strict_target_scheme_ok("HTTPS://localhost/healthz", true));
    assert_false(strict_target_scheme_ok("https://localhost/healthz", false));
    assert_false(strict_target_scheme_ok("Http://localhost/healthz", true));
    assert_true(strict_target_scheme_ok("/healthz", true));
    assert_true(strict_target_scheme_ok("/healthz", false));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(targets_name_their_host),
        cmocka_unit_test(integers_beyond_64_bits_answer_their_bound),
        cmocka_unit_test(targets_name_a_host),
        cmocka_unit_test(targets_name_the_port_scheme),
        cmocka_unit_test(content_type),
        cmocka_unit_test(host),
        cmocka_unit_test(request_id),
        cmocka_unit_test(framing),
        cmocka_unit_test(transfer_codings),
        cmocka_unit_test(header_tokens),
        cmocka_unit_test(cross_origin),
        cmocka_unit_test(unknown_members_are_named),
        cmocka_unit_test(owners),
        cmocka_unit_test(integers_answer_as_fgjson_int),
        cmocka_unit_test(strings_answer_their_refusals),
        cmocka_unit_test(texts_and_arrays_answer_their_refusal),
        cmocka_unit_test(no_body_is_every_member_absent),
        cmocka_unit_test(queries_refuse_all_but_decimals_in_bounds),
        cmocka_unit_test(bounds_are_found_by_name),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
