/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_redact.c - passwords of URLs and connection strings masked for print,
 * and known secrets scrubbed from messages.
 *
 * Broken variant caught: redact_url copying the URL (every masked assertion
 * failed).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "util/redact.h"

static void shown_as(const char *url, const char *expected)
{
    char out[256];
    redact_url(url, out, sizeof out);
    if (strcmp(out, expected) != 0)
        fail_msg("'%s' shown as '%s', expected '%s'", url, out, expected);
}

static void urls(void **state)
{
    (void)state;
    shown_as("redis://:s3cretpw@127.0.0.1:6379/0", "redis://:***@127.0.0.1:6379/0");
    shown_as("redis://app:s3cretpw@a:1,b:2/0", "redis://app:***@a:1,b:2/0");
    shown_as("redis://s3cretpw@host/0", "redis://***@host/0");
    shown_as("redis-sentinel://u:p@w@s1:26379/mymaster", "redis-sentinel://u:***@s1:26379/mymaster");
    shown_as("redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0");
    shown_as("postgresql://fencegate@127.0.0.1/fg", "postgresql://fencegate@127.0.0.1/fg");
    shown_as("postgresql://fg:s3cret@h/db?sslmode=require", "postgresql://fg:***@h/db?sslmode=require");
    shown_as("postgres://h/db?user=fg&password=s3cret&sslmode=require",
             "postgres://h/db?user=fg&password=***&sslmode=require");
    shown_as("host=h password=s3cret dbname=fg", "host=h password=*** dbname=fg");
    shown_as("host=h password = 's3 cr\\'et' dbname=fg", "host=h password = *** dbname=fg");
    shown_as("host=h passwordless=1", "host=h passwordless=1");
    char small[12];
    redact_url("redis://:s3cretpw@127.0.0.1:6379/0", small, sizeof small);
    assert_string_equal(small, "redis://:**");
}

static void scrub(void **state)
{
    (void)state;
    char text[] = "in URI: \"postgresql://u:s3cretpw@[bad\" (s3cretpw)";
    redact_scrub(text, "s3cretpw");
    assert_string_equal(text, "in URI: \"postgresql://u:***@[bad\" (***)");
    char shortish[] = "ab-ab";
    redact_scrub(shortish, "ab");
    assert_string_equal(shortish, "**-**");
    redact_scrub(shortish, NULL);
    redact_scrub(shortish, "");
    assert_string_equal(shortish, "**-**");
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(urls), cmocka_unit_test(scrub)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
