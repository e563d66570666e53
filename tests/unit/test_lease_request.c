/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_lease_request.c - the reading of acquire, renew and release bodies:
 * defaults from the configuration, the max_hold rule and the semaphore limit.
 * Each member's own rules are its route's (unit.strict, route_bounds).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "lease/lease_request.h"

static struct config cfg;
static json_t *last_body; /* the parsed body whose strings the last parse borrowed */

static int setup(void **state)
{
    (void)state;
    memset(&cfg, 0, sizeof cfg);
    cfg.default_ttl_ms = 30000;
    cfg.default_wait_ms = 250;
    cfg.default_max_hold_ms = 1800000;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    json_decref(last_body);
    last_body = NULL;
    return 0;
}

static int parse(const char *text, bool with_limit, struct acquire_params *p, struct fg_error *err)
{
    json_error_t jerr;
    json_decref(last_body);
    last_body = json_loads(text, JSON_ALLOW_NUL, &jerr);
    assert_non_null(last_body);
    memset(err, 0, sizeof *err);
    return acquire_params_parse(last_body, &cfg, with_limit, p, err);
}

/* Expects text to be refused as invalid_field with a message naming field. */
static void refused(const char *text, bool with_limit, const char *field)
{
    struct acquire_params p;
    struct fg_error err;
    if (parse(text, with_limit, &p, &err) == 0)
        fail_msg("accepted: %s", text);
    assert_int_equal(err.code, FG_ERR_INVALID_FIELD);
    if (strstr(err.msg, field) == NULL)
        fail_msg("message '%s' does not name '%s'", err.msg, field);
}

static void defaults(void **state)
{
    (void)state;
    struct acquire_params p;
    struct fg_error err;
    assert_int_equal(parse("{}", false, &p, &err), 0);
    assert_int_equal(p.ttl_ms, 30000);
    assert_int_equal(p.wait_ms, 250);
    assert_int_equal(p.max_hold_ms, 1800000);
    assert_string_equal(p.owner, "");
    assert_string_equal(p.request_id, "");
    assert_int_equal(parse("{\"ttl_ms\": null, \"owner\": null}", false, &p, &err), 0);
    assert_int_equal(p.ttl_ms, 30000);
}

static void values_are_read(void **state)
{
    (void)state;
    struct acquire_params p;
    struct fg_error err;
    assert_int_equal(parse("{\"ttl_ms\": 100, \"wait_ms\": 0, \"max_hold_ms\": 5000,"
                           " \"owner\": \"billing-7\", \"request_id\": \"r-123\", \"x\": 1}",
                           false, &p, &err),
                     0);
    assert_int_equal(p.ttl_ms, 100);
    assert_int_equal(p.wait_ms, 0);
    assert_int_equal(p.max_hold_ms, 5000);
    assert_string_equal(p.owner, "billing-7");
    assert_string_equal(p.request_id, "r-123");
    assert_int_equal(parse("{\"ttl_ms\": 86400000, \"wait_ms\": 3600000}", false, &p, &err), 0);
    assert_int_equal(p.ttl_ms, 86400000);
    assert_int_equal(p.wait_ms, 3600000);
}

static void ttl_and_max_hold(void **state)
{
    (void)state;
    struct acquire_params p;
    struct fg_error err;
    /* max_hold not given: the cap rises to the ttl */
    cfg.default_max_hold_ms = 1000;
    assert_int_equal(parse("{\"ttl_ms\": 5000}", false, &p, &err), 0);
    assert_int_equal(p.max_hold_ms, 5000);
    cfg.default_max_hold_ms = 1800000;
    /* both given, ttl above the cap: refused */
    refused("{\"ttl_ms\": 5000, \"max_hold_ms\": 4000}", false, "max_hold_ms");
    assert_int_equal(parse("{\"ttl_ms\": 5000, \"max_hold_ms\": 5000}", false, &p, &err), 0);
    assert_int_equal(p.max_hold_ms, 5000);
    /* max_hold alone, below the default ttl: the refusal says the ttl is the default's */
    refused("{\"max_hold_ms\": 5000}", false, "default ttl_ms (30000) exceeds");
}

static void semaphore_limit(void **state)
{
    (void)state;
    struct acquire_params p;
    struct fg_error err;
    assert_int_equal(parse("{\"limit\": 5}", true, &p, &err), 0);
    assert_int_equal(p.limit, 5);
    assert_int_equal(parse("{\"limit\": 100000}", true, &p, &err), 0);
    assert_int_equal(p.limit, 100000);
    assert_int_equal(parse("{\"limit\": 5}", false, &p, &err), 0); /* ignored for locks */
    assert_int_equal(p.limit, 0);
}

static void renew_and_release(void **state)
{
    (void)state;
    json_error_t jerr;
    struct renew_params rp;
    json_t *ok = json_loads("{\"token\": \"t\", \"ttl_ms\": 500}", 0, &jerr);
    renew_params_read(ok, &rp);
    assert_string_equal(rp.token, "t");
    assert_int_equal(rp.ttl_ms, 500);
    assert_string_equal(lease_request_token(ok), "t");
    json_decref(ok);
    json_t *no_ttl = json_loads("{\"token\": \"t\", \"ttl_ms\": null}", 0, &jerr);
    renew_params_read(no_ttl, &rp);
    assert_int_equal(rp.ttl_ms, 0);
    json_decref(no_ttl);
}

/* A request id belongs to the API key that sent it (docs/api.md). */
static void request_ids_per_key(void **state)
{
    (void)state;
    char a[SCOPED_REQUEST_ID_MAX], b[SCOPED_REQUEST_ID_MAX];
    const char *ra = acquire_request_id_scoped("r-123", "alice", a);
    const char *rb = acquire_request_id_scoped("r-123", "bob", b);
    assert_string_equal(ra, "key:alice:r-123");
    assert_string_not_equal(ra, rb);
    assert_string_equal(acquire_request_id_scoped("r-123", NULL, a), "r-123"); /* auth off */
    assert_string_equal(acquire_request_id_scoped("", "alice", a), "");        /* no id */
    char longest[REQUEST_ID_MAX_LEN + 1], id[API_KEY_ID_MAX + 1];
    memset(longest, 'r', REQUEST_ID_MAX_LEN);
    longest[REQUEST_ID_MAX_LEN] = '\0';
    memset(id, 'k', API_KEY_ID_MAX);
    id[API_KEY_ID_MAX] = '\0';
    ra = acquire_request_id_scoped(longest, id, a);
    assert_int_equal(strlen(ra), strlen("key::") + API_KEY_ID_MAX + REQUEST_ID_MAX_LEN);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(defaults, setup, teardown),
        cmocka_unit_test_setup_teardown(values_are_read, setup, teardown),
        cmocka_unit_test_setup_teardown(ttl_and_max_hold, setup, teardown),
        cmocka_unit_test_setup_teardown(semaphore_limit, setup, teardown),
        cmocka_unit_test_setup_teardown(renew_and_release, setup, teardown),
        cmocka_unit_test(request_ids_per_key),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
