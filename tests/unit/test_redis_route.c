/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_redis_route.c - the redirect loop and the shared slot map of
 * store/backend/redis_route.c, driven by a send function that plays a cluster by the
 * specification's rules: the owner of a slot serves it, another node answers
 * MOVED, the owner of a migrating slot answers ASK and the importing node
 * serves the command only after ASKING; CLUSTER SHARDS describes the table as
 * it is. (The cluster lab, tests/cluster/, runs the same loop against real
 * nodes.)
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "resp_fixture.h"
#include "store/backend/redis_route.h"
#include "util/clock.h"

#define NODES 4 /* ports 7001..7004; 7004 starts as a replica of 7001 */

/* The cluster the send function plays. */
static struct {
    int owner[CLUSTER_SLOTS];     /* port serving each slot */
    int importing[CLUSTER_SLOTS]; /* port the slot migrates to, 0 if none */
    bool down[NODES + 1];         /* node (port - 7000) does not answer */
    const char *refusal;          /* an error every command gets instead, or NULL */
    bool loop;                    /* every node answers MOVED to the next node */
    int sends[NODES + 1];         /* commands each node received (CLUSTER SHARDS apart) */
    int asking[NODES + 1];        /* of which after ASKING */
    int shards;                   /* CLUSTER SHARDS asked */
    int split; /* the importing node answers TRYAGAIN to this many more commands after ASKING */
} fake;

/* CLUSTER SHARDS of the table: one shard per primary with its ranges. */
static redisReply *shards_reply(void)
{
    static char buf[1 << 20];
    buf[0] = '\0';
    sprintf(buf, "*%d\r\n", NODES);
    for (int port = 7001; port <= 7000 + NODES; port++) {
        char ranges[1 << 16] = "";
        int nranges = 0;
        for (int s = 0; s < CLUSTER_SLOTS;) {
            if (fake.owner[s] != port) {
                s++;
                continue;
            }
            int e = s;
            while (e + 1 < CLUSTER_SLOTS && fake.owner[e + 1] == port)
                e++;
            sprintf(ranges + strlen(ranges), ":%d\r\n:%d\r\n", s, e);
            nranges++;
            s = e + 1;
        }
        strcat(buf, "*4\r\n");
        resp_bulk(buf, "slots");
        sprintf(buf + strlen(buf), "*%d\r\n%s", 2 * nranges, ranges);
        resp_bulk(buf, "nodes");
        strcat(buf, "*1\r\n*10\r\n");
        char id[41];
        memset(id, '0' + port - 7000, 40);
        id[40] = '\0';
        resp_bulk(buf, "id");
        resp_bulk(buf, id);
        resp_bulk(buf, "port");
        sprintf(buf + strlen(buf), ":%d\r\n", port);
        resp_bulk(buf, "ip");
        resp_bulk(buf, "127.0.0.1");
        resp_bulk(buf, "role");
        resp_bulk(buf, nranges > 0 ? "master" : "replica");
        resp_bulk(buf, "health");
        resp_bulk(buf, "online");
    }
    return resp_parse(buf);
}

/* The send function: one node's answer to a command on the key argv[1]. */
static redisReply *fake_send(void *ctx, const struct redis_endpoint *at, unsigned flags, int argc,
                             const char **argv, const size_t *lens, struct fg_error *err)
{
    (void)ctx;
    (void)lens;
    assert_string_equal(at->host, "127.0.0.1");
    int node = at->port - 7000;
    assert_true(node >= 1 && node <= NODES);
    if (fake.down[node]) {
        fg_fail(err, FG_ERR_BACKEND_UNAVAILABLE, "connection refused");
        return NULL;
    }
    if (strcmp(argv[0], "CLUSTER") == 0) {
        assert_true(flags & ROUTE_ANY_ROLE);
        fake.shards++;
        return shards_reply();
    }
    assert_false(flags & ROUTE_ANY_ROLE);
    assert_int_equal(argc, 2);
    fake.sends[node]++;
    fake.asking[node] += (flags & ROUTE_ASKING) != 0;
    char buf[256];
    unsigned slot = key_slot(argv[1], strlen(argv[1]));
    if (fake.refusal != NULL)
        snprintf(buf, sizeof buf, "-%s\r\n", fake.refusal);
    else if (fake.loop)
        snprintf(buf, sizeof buf, "-MOVED %u 127.0.0.1:%d\r\n", slot, 7001 + node % NODES);
    else if (fake.owner[slot] == at->port && fake.importing[slot] != 0)
        snprintf(buf, sizeof buf, "-ASK %u :%d\r\n", slot, fake.importing[slot]);
    else if ((flags & ROUTE_ASKING) && fake.importing[slot] == at->port && fake.split > 0 &&
             fake.split--)
        snprintf(buf, sizeof buf, "-TRYAGAIN Multiple keys request during rehashing of slot\r\n");
    else if (fake.owner[slot] == at->port ||
             ((flags & ROUTE_ASKING) && fake.importing[slot] == at->port))
        snprintf(buf, sizeof buf, ":%d\r\n", at->port);
    else
        snprintf(buf, sizeof buf, "-MOVED %u 127.0.0.1:%d\r\n", slot, fake.owner[slot]);
    return resp_parse(buf);
}

/* Three primaries in thirds, as redis-cli --cluster create makes them. */
static int setup(void **state)
{
    (void)state;
    memset(&fake, 0, sizeof fake);
    for (int s = 0; s < CLUSTER_SLOTS; s++)
        fake.owner[s] = s <= 5460 ? 7001 : s <= 10922 ? 7002 : 7003;
    return 0;
}

static struct route *new_route(const char *url_text)
{
    struct redis_url url;
    struct fg_error err = {0};
    assert_int_equal(redis_url_parse(url_text, &url, &err), 0);
    struct route *r = route_new(&url);
    assert_non_null(r);
    return r;
}

/* Runs a command on key and returns the port that served it, or -1 (err filled). */
static int run(struct route *r, const char *key, struct fg_error *err)
{
    const char *argv[] = {"GET", key};
    memset(err, 0, sizeof *err);
    redisReply *reply =
        route_command(r, key_slot(key, strlen(key)), fake_send, NULL, 2, argv, NULL, err);
    if (reply == NULL)
        return -1;
    assert_int_equal(reply->type, REDIS_REPLY_INTEGER);
    int port = (int)reply->integer;
    freeReplyObject(reply);
    return port;
}

static void first_map_from_a_seed_that_answers(void **state)
{
    (void)state;
    struct route *r = new_route("redis-cluster://127.0.0.1:7002,127.0.0.1:7003");
    struct fg_error err;
    struct redis_endpoint primaries[8];
    assert_int_equal(route_primaries(r, primaries, 8), 0);
    fake.down[2] = true;
    /* foo: slot 12182 (7003); bar: 5061 (7001); the tag {user1000}: 3443 (7001). */
    assert_int_equal(run(r, "foo", &err), 7003);
    /* the down seed's failure is not the command's: a caller reading err would answer 503 */
    assert_int_equal(err.code, FG_OK);
    assert_int_equal(run(r, "bar", &err), 7001);
    assert_int_equal(run(r, "{user1000}.following", &err), 7001);
    assert_int_equal(fake.shards, 1);
    assert_int_equal(fake.sends[1] + fake.sends[2] + fake.sends[3], 3); /* no redirect */
    assert_int_equal(route_primaries(r, primaries, 8), 3);
    assert_int_equal(route_primaries(r, primaries, 1), 3);
    assert_int_equal(primaries[0].port, 7001);
    route_free(r);
}

static void no_seed_answers(void **state)
{
    (void)state;
    struct route *r = new_route("redis-cluster://127.0.0.1:7001,127.0.0.1:7002");
    fake.down[1] = fake.down[2] = true;
    struct fg_error err;
    assert_int_equal(run(r, "foo", &err), -1);
    assert_int_equal(err.code, FG_ERR_BACKEND_UNAVAILABLE);
    /* Once one answers, the next command goes through. */
    fake.down[2] = false;
    assert_int_equal(run(r, "foo", &err), 7003);
    route_free(r);
}

static void moved_is_followed_and_remembered(void **state)
{
    (void)state;
    struct route *r = new_route("redis-cluster://127.0.0.1:7001");
    struct fg_error err;
    assert_int_equal(run(r, "foo", &err), 7003);
    /* Slot 12182 moves to 7002 behind the gateway's back. */
    fake.owner[12182] = 7002;
    assert_int_equal(run(r, "foo", &err), 7002);
    assert_int_equal(fake.sends[3], 2);
    /* The slot is noted at once: the next command goes straight there. */
    assert_int_equal(run(r, "foo", &err), 7002);
    assert_int_equal(fake.sends[3], 2);
    assert_int_equal(fake.sends[2], 2);
    /* And a new map is fetched once due. */
    int before = fake.shards;
    clock_sleep_ms(ROUTE_REFRESH_MIN_MS + 20);
    assert_int_equal(run(r, "bar", &err), 7001);
    assert_int_equal(fake.shards, before + 1);
    assert_int_equal(run(r, "bar", &err), 7001);
    assert_int_equal(fake.shards, before + 1);
    route_free(r);
}

static void ask_is_asked_once_and_not_remembered(void **state)
{
    (void)state;
    struct route *r = new_route("redis-cluster://127.0.0.1:7001");
    struct fg_error err;
    fake.importing[12182] = 7001; /* foo's slot migrates from 7003 to 7001 */
    assert_int_equal(run(r, "foo", &err), 7001);
    assert_int_equal(fake.asking[1], 1);
    assert_int_equal(fake.sends[3], 1);
    /* The map is unchanged: the owner is asked first again. */
    assert_int_equal(run(r, "foo", &err), 7001);
    assert_int_equal(fake.sends[3], 2);
    assert_int_equal(fake.asking[1], 2);
    /* The migration ends: the old owner answers MOVED, the map follows. */
    fake.importing[12182] = 0;
    fake.owner[12182] = 7001;
    assert_int_equal(run(r, "foo", &err), 7001);
    assert_int_equal(run(r, "foo", &err), 7001);
    assert_int_equal(fake.sends[3], 3);
    assert_int_equal(fake.asking[1], 2);
    route_free(r);
}

static void down_and_tryagain_answer_503(void **state)
{
    (void)state;
    struct route *r = new_route("redis-cluster://127.0.0.1:7001");
    struct fg_error err;
    assert_int_equal(run(r, "foo", &err), 7003);
    const char *refusals[] = {"CLUSTERDOWN The cluster is down",
                              "TRYAGAIN Multiple keys request during rehashing of slot"};
    const int sends[] = {1, CLUSTER_SPLIT_WAITS + 1}; /* TRYAGAIN is waited out first */
    for (int i = 0; i < 2; i++) {
        fake.refusal = refusals[i];
        int before = fake.sends[3];
        assert_int_equal(run(r, "foo", &err), -1);
        assert_int_equal(err.code, FG_ERR_BACKEND_UNAVAILABLE);
        assert_true(err.not_run); /* Redis gives them before running a command */
        assert_non_null(strstr(err.msg, refusals[i]));
        assert_int_equal(fake.sends[3] - before, sends[i]);
    }
    fake.refusal = "CROSSSLOT Keys in request don't hash to the same slot";
    assert_int_equal(run(r, "foo", &err), -1);
    assert_int_equal(err.code, FG_ERR_INTERNAL);
    /* Other errors are the command's own: handed back as replies. */
    fake.refusal = "ERR Function not found";
    const char *argv[] = {"GET", "foo"};
    redisReply *reply = route_command(r, 12182, fake_send, NULL, 2, argv, NULL, &err);
    assert_non_null(reply);
    assert_int_equal(reply->type, REDIS_REPLY_ERROR);
    freeReplyObject(reply);
    route_free(r);
}

/* Keys split by a migration (the importing node answers TRYAGAIN after ASKING): each wait starts
 * from the owner again, whose ASK counts anew, so a split that ends within the waits is served,
 * and one that outlasts them answers 503 for TRYAGAIN. */
static void a_split_is_waited_out(void **state)
{
    (void)state;
    struct route *r = new_route("redis-cluster://127.0.0.1:7001");
    struct fg_error err;
    fake.importing[12182] = 7001; /* foo's slot migrates from 7003 to 7001 */
    fake.split = CLUSTER_SPLIT_WAITS;
    assert_int_equal(run(r, "foo", &err), 7001);
    assert_int_equal(fake.sends[3], CLUSTER_SPLIT_WAITS + 1);
    assert_int_equal(fake.asking[1], CLUSTER_SPLIT_WAITS + 1);
    fake.split = CLUSTER_SPLIT_WAITS + 1;
    assert_int_equal(run(r, "foo", &err), -1);
    assert_int_equal(err.code, FG_ERR_BACKEND_UNAVAILABLE);
    assert_non_null(strstr(err.msg, "TRYAGAIN"));
    route_free(r);
}

static void redirect_loop_ends(void **state)
{
    (void)state;
    struct route *r = new_route("redis-cluster://127.0.0.1:7001");
    struct fg_error err;
    assert_int_equal(run(r, "foo", &err), 7003);
    int before = fake.sends[1] + fake.sends[2] + fake.sends[3] + fake.sends[4];
    fake.loop = true;
    assert_int_equal(run(r, "foo", &err), -1);
    assert_int_equal(err.code, FG_ERR_BACKEND_UNAVAILABLE);
    assert_true(err.not_run); /* every answer was a redirect */
    assert_int_equal(fake.sends[1] + fake.sends[2] + fake.sends[3] + fake.sends[4] - before,
                     CLUSTER_MAX_REDIRECTS + 1);
    route_free(r);
}

static void failover_found_through_a_new_map(void **state)
{
    (void)state;
    struct route *r = new_route("redis-cluster://127.0.0.1:7001");
    struct fg_error err;
    assert_int_equal(run(r, "bar", &err), 7001);
    /* 7001 dies; its replica 7004 is promoted. */
    fake.down[1] = true;
    for (int s = 0; s < CLUSTER_SLOTS; s++)
        if (fake.owner[s] == 7001)
            fake.owner[s] = 7004;
    assert_int_equal(run(r, "bar", &err), -1);
    assert_int_equal(err.code, FG_ERR_BACKEND_UNAVAILABLE);
    assert_false(err.not_run); /* no reply: it may have run */
    clock_sleep_ms(ROUTE_REFRESH_MIN_MS + 20);
    /* The seed is down; the map's other nodes are asked. */
    assert_int_equal(run(r, "bar", &err), 7004);
    assert_int_equal(run(r, "foo", &err), 7003);
    struct redis_endpoint primaries[8];
    assert_int_equal(route_primaries(r, primaries, 8), 3);
    for (int i = 0; i < 3; i++)
        assert_int_not_equal(primaries[i].port, 7001);
    route_free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(first_map_from_a_seed_that_answers, setup),
        cmocka_unit_test_setup(no_seed_answers, setup),
        cmocka_unit_test_setup(moved_is_followed_and_remembered, setup),
        cmocka_unit_test_setup(ask_is_asked_once_and_not_remembered, setup),
        cmocka_unit_test_setup(down_and_tryagain_answer_503, setup),
        cmocka_unit_test_setup(a_split_is_waited_out, setup),
        cmocka_unit_test_setup(redirect_loop_ends, setup),
        cmocka_unit_test_setup(failover_found_through_a_new_map, setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
