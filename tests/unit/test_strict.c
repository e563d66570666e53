/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_strict.c - the header rules of strict requests (http/strict.c) and the
 * member check of bodies (fgjson_only): media type, Host, request ids, body
 * framing, unknown members named.
 */
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
    assert_true(strict_host_single(0));
    assert_true(strict_host_single(1));
    assert_false(strict_host_single(2));
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(content_type),
        cmocka_unit_test(host),
        cmocka_unit_test(request_id),
        cmocka_unit_test(framing),
        cmocka_unit_test(unknown_members_are_named),
        cmocka_unit_test(owners),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
