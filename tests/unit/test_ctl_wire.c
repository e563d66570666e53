/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_ctl_wire.c - fencectl's HTTP framing and exit statuses: escaping, the
 * request text, responses with Content-Length, chunked or cut short, and the
 * table from answers to exit codes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <cmocka.h>

#include "ctl/ctl_exit.h"
#include "ctl/ctl_wire.h"

static void escapes(void **state)
{
    (void)state;
    char out[64] = "/v1/locks/";
    assert_int_equal(ctl_escape_append(out, sizeof out, "a/b:c d%", "/:"), 0);
    assert_string_equal(out, "/v1/locks/a/b:c%20d%25");
    char q[16] = "";
    assert_int_equal(ctl_escape_append(q, sizeof q, "x&y=\xc3\xa9", ""), 0);
    assert_string_equal(q, "x%26y%3D%C3%A9");
    char small[8] = "";
    assert_int_equal(ctl_escape_append(small, sizeof small, "a b c", ""), -1);
}

static void request_text(void **state)
{
    (void)state;
    struct ctl_url u = {.host = "::1", .port = 8480, .base = "/gw"};
    size_t len;
    char *text = ctl_request_format(&u, "POST", "/v1/locks/a/acquire", "{}", &len);
    assert_int_equal(len, strlen(text));
    assert_non_null(strstr(text, "POST /gw/v1/locks/a/acquire HTTP/1.1\r\n"));
    assert_non_null(strstr(text, "Host: [::1]:8480\r\n"));
    assert_non_null(strstr(text, "Connection: close\r\n"));
    assert_non_null(strstr(text, "Content-Type: application/json\r\n"));
    assert_non_null(strstr(text, "Content-Length: 2\r\n\r\n{}"));
    free(text);
    text = ctl_request_format(&u, "GET", "/healthz", NULL, &len);
    assert_null(strstr(text, "Content-Type"));
    assert_null(strstr(text, "Authorization"));
    assert_non_null(strstr(text, "Content-Length: 0\r\n\r\n"));
    free(text);
    u.key = "fgk_0123";
    text = ctl_request_format(&u, "GET", "/healthz", NULL, &len);
    assert_non_null(
        strstr(text, "\r\nAuthorization: Bearer fgk_0123\r\nContent-Length: 0\r\n\r\n"));
    free(text);
}

static int parse(const char *raw, struct ctl_response *r)
{
    struct fg_error err = {0};
    return ctl_response_parse(raw, strlen(raw), r, &err);
}

static void responses(void **state)
{
    (void)state;
    struct ctl_response r;
    assert_int_equal(parse("HTTP/1.1 409 Conflict\r\ncontent-type: application/problem+json\r\n"
                           "Content-Length: 4\r\n\r\n{}{}trailing",
                           &r),
                     0);
    assert_int_equal(r.status, 409);
    assert_string_equal(r.content_type, "application/problem+json");
    assert_int_equal(r.body_len, 4);
    assert_string_equal(r.body, "{}{}");
    ctl_response_free(&r);

    assert_int_equal(parse("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                           "3\r\nabc\r\nA\r\n0123456789\r\n0\r\n\r\n",
                           &r),
                     0);
    assert_string_equal(r.body, "abc0123456789");
    ctl_response_free(&r);

    assert_int_equal(parse("HTTP/1.0 204 No Content\r\n\r\n", &r), 0);
    assert_int_equal(r.status, 204);
    assert_int_equal(r.body_len, 0);
    ctl_response_free(&r);
}

static void broken_responses(void **state)
{
    (void)state;
    struct ctl_response r;
    assert_int_equal(parse("", &r), -1);
    assert_int_equal(parse("SSH-2.0-OpenSSH_9\r\n", &r), -1);
    assert_int_equal(parse("HTTP/1.1 2x0 OK\r\n\r\n", &r), -1);
    assert_int_equal(parse("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n", &r), -1);
    assert_int_equal(parse("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nabc", &r), -1);
    assert_int_equal(parse("HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\nabc", &r), -1);
    assert_int_equal(parse("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nff\r\nab", &r),
                     -1);
    assert_int_equal(parse("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", &r), -1);
}

static void exit_statuses(void **state)
{
    (void)state;
    assert_int_equal(ctl_exit_for(200, NULL), CTL_EXIT_OK);
    assert_int_equal(ctl_exit_for(409, "lock_busy"), CTL_EXIT_BUSY);
    assert_int_equal(ctl_exit_for(429, "too_many_waiters"), CTL_EXIT_BUSY);
    assert_int_equal(ctl_exit_for(410, "lease_lost"), CTL_EXIT_LEASE_LOST);
    assert_int_equal(ctl_exit_for(409, "max_hold_exceeded"), CTL_EXIT_LEASE_LOST);
    assert_int_equal(ctl_exit_for(503, "backend_unavailable"), CTL_EXIT_UNREACHABLE);
    assert_int_equal(ctl_exit_for(0, NULL), CTL_EXIT_UNREACHABLE);
    assert_int_equal(ctl_exit_for(502, NULL), CTL_EXIT_UNREACHABLE);
    assert_int_equal(ctl_exit_for(409, "limit_mismatch"), CTL_EXIT_ERROR);
    assert_int_equal(ctl_exit_for(400, "invalid_field"), CTL_EXIT_ERROR);
    assert_int_equal(ctl_exit_for(500, NULL), CTL_EXIT_ERROR);
}

static void child_statuses(void **state)
{
    (void)state;
    assert_int_equal(ctl_exit_of_child(7 << 8), 7);         /* exited 7 */
    assert_int_equal(ctl_exit_of_child(0), 0);              /* exited 0 */
    assert_int_equal(ctl_exit_of_child(15), 128 + 15);      /* killed by SIGTERM */
    assert_int_equal(ctl_exit_of_child(9 | 0x80), 128 + 9); /* SIGKILL, core dumped */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(escapes),       cmocka_unit_test(request_text),
        cmocka_unit_test(responses),     cmocka_unit_test(broken_responses),
        cmocka_unit_test(exit_statuses), cmocka_unit_test(child_statuses),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
