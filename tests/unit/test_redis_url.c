/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_redis_url.c - redis://, redis-sentinel:// and redis-cluster:// URLs:
 * hosts, default ports, ACL users, master names, databases, and the URLs that
 * must be refused.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "store/backend/redis_url.h"

static int parse(const char *text, struct redis_url *url)
{
    struct fg_error err = {0};
    int rc = redis_url_parse(text, url, &err);
    assert_true(rc == 0 || err.code == FG_ERR_CONFIG);
    return rc;
}

static void plain_server(void **state)
{
    (void)state;
    struct redis_url u;
    assert_int_equal(parse("redis://127.0.0.1:6380/2", &u), 0);
    assert_false(u.sentinel);
    assert_int_equal(u.nhosts, 1);
    assert_string_equal(u.hosts[0].host, "127.0.0.1");
    assert_int_equal(u.hosts[0].port, 6380);
    assert_int_equal(u.db, 2);
    assert_string_equal(u.user, "");
    assert_string_equal(u.password, "");
    assert_int_equal(parse("redis://cache", &u), 0);
    assert_int_equal(u.hosts[0].port, 6379);
    assert_int_equal(u.db, 0);
}

static void passwords_and_acl_users(void **state)
{
    (void)state;
    struct redis_url u;
    assert_int_equal(parse("redis://:s3cret@h:1/0", &u), 0);
    assert_string_equal(u.user, "");
    assert_string_equal(u.password, "s3cret");
    assert_int_equal(parse("redis://gateway:pa:ss@h:1/0", &u), 0);
    assert_string_equal(u.user, "gateway");
    assert_string_equal(u.password, "pa:ss");
    assert_int_equal(parse("redis://onlypassword@h", &u), 0);
    assert_string_equal(u.password, "onlypassword");
    assert_string_equal(u.hosts[0].host, "h");
}

static void sentinels(void **state)
{
    (void)state;
    struct redis_url u;
    assert_int_equal(parse("redis-sentinel://gw:pw@a:26380,b,[::1]:26382/mymaster/3", &u), 0);
    assert_true(u.sentinel);
    assert_int_equal(u.nhosts, 3);
    assert_string_equal(u.hosts[0].host, "a");
    assert_int_equal(u.hosts[0].port, 26380);
    assert_string_equal(u.hosts[1].host, "b");
    assert_int_equal(u.hosts[1].port, 26379);
    assert_string_equal(u.hosts[2].host, "::1");
    assert_int_equal(u.hosts[2].port, 26382);
    assert_string_equal(u.master, "mymaster");
    assert_int_equal(u.db, 3);
    assert_string_equal(u.user, "gw");
    assert_int_equal(parse("redis-sentinel://s1:1/m", &u), 0);
    assert_int_equal(u.db, 0);
    assert_string_equal(u.master, "m");
}

static void clusters(void **state)
{
    (void)state;
    struct redis_url u;
    assert_int_equal(parse("redis-cluster://gw:pw@10.0.0.1:7000,10.0.0.2,[::1]:7002", &u), 0);
    assert_true(u.cluster);
    assert_false(u.sentinel);
    assert_int_equal(u.nhosts, 3);
    assert_string_equal(u.hosts[0].host, "10.0.0.1");
    assert_int_equal(u.hosts[0].port, 7000);
    assert_string_equal(u.hosts[1].host, "10.0.0.2");
    assert_int_equal(u.hosts[1].port, 6379);
    assert_string_equal(u.hosts[2].host, "::1");
    assert_int_equal(u.hosts[2].port, 7002);
    assert_string_equal(u.user, "gw");
    assert_string_equal(u.password, "pw");
    assert_string_equal(u.master, "");
    assert_int_equal(u.db, 0);
    assert_int_equal(parse("redis-cluster://:secret@node:7000/0", &u), 0);
    assert_int_equal(u.nhosts, 1);
    assert_string_equal(u.password, "secret");
    assert_int_equal(parse("redis://h:1/0", &u), 0);
    assert_false(u.cluster);
    assert_int_equal(parse("redis-sentinel://h:1/m", &u), 0);
    assert_false(u.cluster);
}

static void refusals(void **state)
{
    (void)state;
    struct redis_url u;
    const char *bad[] = {
        "http://h:1/0",
        "redis://",
        "redis://h:0/0",
        "redis://h:70000",
        "redis://h:1/x",
        "redis://h:1/-1",
        "redis://a,b/0",
        "redis://h:1x/0",
        "redis-sentinel://h",
        "redis-sentinel://h/",
        "redis-sentinel://h,/m",
        "redis-sentinel://h/m/x",
        "redis://[::1/0",
        "redis-cluster://",
        "redis-cluster://h:1/1",
        "redis-cluster://h:1/m",
        "redis-cluster://h,,g",
        "redis-cluster://h:1/0/0",
        "rediscluster://h:1",
        "redis-cluster://h1,h2,h3,h4,h5,h6,h7,h8,h9,h10,h11,h12,h13,h14,h15,h16,h17",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(parse(bad[i], &u), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(plain_server), cmocka_unit_test(passwords_and_acl_users),
        cmocka_unit_test(sentinels),    cmocka_unit_test(clusters),
        cmocka_unit_test(refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
