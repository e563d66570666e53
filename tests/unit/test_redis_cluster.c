/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_redis_cluster.c - the routing rules of Redis Cluster against its
 * specification: slot maps read from CLUSTER SHARDS replies written in RESP
 * as Redis sends them, the MOVED, ASK,
 * CLUSTERDOWN, TRYAGAIN and CROSSSLOT answers, and the step each one leads to.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "resp_fixture.h"
#include "store/backend/redis_cluster.h"

static const struct redis_endpoint asked = {"10.0.0.9", 7000};

/* Appends one node of a shard, as Redis 7.0 writes it (RESP2: a flat map). An
 * endpoint of NULL leaves the field out. */
static void node(char *buf, const char *id, int port, const char *ip, const char *endpoint,
                 const char *role, const char *health)
{
    strcat(buf, endpoint ? "*14\r\n" : "*12\r\n");
    resp_bulk(buf, "id");
    resp_bulk(buf, id);
    resp_bulk(buf, "port");
    sprintf(buf + strlen(buf), ":%d\r\n", port);
    resp_bulk(buf, "ip");
    resp_bulk(buf, ip);
    if (endpoint) {
        resp_bulk(buf, "endpoint");
        resp_bulk(buf, endpoint);
    }
    resp_bulk(buf, "role");
    resp_bulk(buf, role);
    resp_bulk(buf, "replication-offset");
    strcat(buf, ":72156\r\n");
    resp_bulk(buf, "health");
    resp_bulk(buf, health);
}

/* Appends the head of a shard with nranges slot ranges (lo, hi pairs), then
 * the head of its list of nnodes nodes. */
static void shard(char *buf, const int *ranges, int nranges, int nnodes)
{
    strcat(buf, "*4\r\n");
    resp_bulk(buf, "slots");
    sprintf(buf + strlen(buf), "*%d\r\n", 2 * nranges);
    for (int i = 0; i < 2 * nranges; i++)
        sprintf(buf + strlen(buf), ":%d\r\n", ranges[i]);
    resp_bulk(buf, "nodes");
    sprintf(buf + strlen(buf), "*%d\r\n", nnodes);
}

#define ID(c) c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c

/* The three primaries and three replicas of redis-cli --cluster create
 * --cluster-replicas 1, the replica of the second shard listed first, and a
 * fourth "shard": a failed former primary that serves nothing. */
static char *six_nodes(char *buf)
{
    buf[0] = '\0';
    strcat(buf, "*4\r\n");
    shard(buf, (const int[]){0, 5460}, 1, 2);
    node(buf, ID("a"), 30001, "127.0.0.1", "127.0.0.1", "master", "online");
    node(buf, ID("d"), 30004, "127.0.0.1", "127.0.0.1", "replica", "online");
    shard(buf, (const int[]){5461, 10000, 10002, 10922}, 2, 2);
    node(buf, ID("e"), 30005, "127.0.0.1", "127.0.0.1", "replica", "online");
    node(buf, ID("b"), 30002, "127.0.0.1", "127.0.0.1", "master", "online");
    shard(buf, (const int[]){10001, 10001, 10923, 16383}, 2, 2);
    node(buf, ID("c"), 30003, "127.0.0.1", "127.0.0.1", "master", "online");
    node(buf, ID("f"), 30006, "127.0.0.1", "127.0.0.1", "replica", "loading");
    shard(buf, NULL, 0, 1);
    node(buf, ID("g"), 30007, "127.0.0.1", "127.0.0.1", "master", "failed");
    return buf;
}

static char big[16384];

/* Reads the map of CLUSTER SHARDS text into *map, which must succeed. */
static void read_map(const char *text, struct cluster_map *map)
{
    redisReply *r = resp_parse(text);
    struct fg_error err = {0};
    assert_int_equal(cluster_map_from_shards(r, &asked, map, &err), 0);
    freeReplyObject(r);
}

static void map_of_six_nodes(void **state)
{
    (void)state;
    static struct cluster_map map;
    read_map(six_nodes(big), &map);
    assert_int_equal(map.nnodes, 7);
    assert_int_equal(map.covered, CLUSTER_SLOTS);
    static const struct {
        unsigned slot;
        int port;
    } owners[] = {{0, 30001},     {5460, 30001},  {5461, 30002},  {10000, 30002}, {10001, 30003},
                  {10002, 30002}, {10922, 30002}, {10923, 30003}, {16383, 30003}};
    for (size_t i = 0; i < sizeof owners / sizeof owners[0]; i++) {
        const struct cluster_node *n = cluster_map_owner(&map, owners[i].slot);
        assert_non_null(n);
        assert_int_equal(n->at.port, owners[i].port);
        assert_string_equal(n->at.host, "127.0.0.1");
        assert_true(n->primary);
    }
    assert_string_equal(cluster_map_owner(&map, 0)->id, ID("a"));
    assert_null(cluster_map_owner(&map, CLUSTER_SLOTS));
    int primaries = 0;
    for (int i = 0; i < map.nnodes; i++)
        primaries += map.nodes[i].primary;
    assert_int_equal(primaries, 3); /* the failed former primary serves nothing */
}

static void endpoints_unknown_and_partial_maps(void **state)
{
    (void)state;
    char *buf = big;
    buf[0] = '\0';
    strcat(buf, "*2\r\n");
    shard(buf, (const int[]){0, 99}, 1, 2);
    node(buf, ID("a"), 7001, "192.168.1.1", "?", "master", "online"); /* endpoint "?": the ip */
    node(buf, ID("b"), 7002, "", NULL, "replica", "online");          /* nothing: where we asked */
    shard(buf, (const int[]){100, 100}, 1, 2);
    node(buf, ID("c"), 7003, "192.168.1.3", "db3.example", "master", "failed");
    node(buf, ID("d"), 7004, "192.168.1.4", "db4.example", "master", "online");
    static struct cluster_map map;
    read_map(buf, &map);
    assert_string_equal(cluster_map_owner(&map, 5)->at.host, "192.168.1.1");
    assert_string_equal(map.nodes[1].at.host, "10.0.0.9");
    assert_int_equal(map.nodes[1].at.port, 7002);
    /* Of two primaries in one shard (a failover seen half-way) the online one. */
    assert_string_equal(cluster_map_owner(&map, 100)->at.host, "db4.example");
    assert_int_equal(map.covered, 101);
    assert_null(cluster_map_owner(&map, 101));
}

static void maps_refused(void **state)
{
    (void)state;
    char *buf = big;
    static struct cluster_map map;
    struct fg_error err = {0};
    /* Two shards claim slot 50. */
    buf[0] = '\0';
    strcat(buf, "*2\r\n");
    shard(buf, (const int[]){0, 50}, 1, 1);
    node(buf, ID("a"), 7001, "h", "h", "master", "online");
    shard(buf, (const int[]){50, 60}, 1, 1);
    node(buf, ID("b"), 7002, "h", "h", "master", "online");
    /* A shard that serves slots without a primary; a slot past the last; a
     * node without a port; not a list at all. */
    char *others[4];
    static char b1[2048], b2[2048], b3[2048];
    b1[0] = b2[0] = b3[0] = '\0';
    strcat(b1, "*1\r\n");
    shard(b1, (const int[]){0, 5}, 1, 1);
    node(b1, ID("a"), 7001, "h", "h", "replica", "online");
    strcat(b2, "*1\r\n");
    shard(b2, (const int[]){0, 16384}, 1, 1);
    node(b2, ID("a"), 7001, "h", "h", "master", "online");
    strcat(b3,
           "*1\r\n*4\r\n$5\r\nslots\r\n*0\r\n$5\r\nnodes\r\n*1\r\n*2\r\n$2\r\nid\r\n$1\r\nx\r\n");
    others[0] = b1;
    others[1] = b2;
    others[2] = b3;
    others[3] = "-ERR This instance has cluster support disabled\r\n";
    redisReply *r = resp_parse(buf);
    assert_int_equal(cluster_map_from_shards(r, &asked, &map, &err), -1);
    assert_int_equal(err.code, FG_ERR_BACKEND_UNAVAILABLE);
    freeReplyObject(r);
    for (int i = 0; i < 4; i++) {
        r = resp_parse(others[i]);
        err.code = FG_OK;
        assert_int_equal(cluster_map_from_shards(r, &asked, &map, &err), -1);
        assert_int_equal(err.code, FG_ERR_BACKEND_UNAVAILABLE);
        freeReplyObject(r);
    }
}

/* The answer of one error text, with *redirect filled for MOVED and ASK. */
static enum cluster_answer answer(const char *text, struct cluster_redirect *redirect)
{
    char buf[512];
    snprintf(buf, sizeof buf, "-%s\r\n", text);
    redisReply *r = resp_parse(buf);
    enum cluster_answer a = cluster_answer_of(r, &asked, redirect);
    freeReplyObject(r);
    return a;
}

static void answers(void **state)
{
    (void)state;
    struct cluster_redirect rd;
    assert_int_equal(answer("MOVED 3999 127.0.0.1:6381", &rd), CLUSTER_ANSWER_MOVED);
    assert_int_equal(rd.slot, 3999);
    assert_string_equal(rd.to.host, "127.0.0.1");
    assert_int_equal(rd.to.port, 6381);
    assert_int_equal(answer("ASK 16383 redis-3.example:7000", &rd), CLUSTER_ANSWER_ASK);
    assert_int_equal(rd.slot, 16383);
    assert_string_equal(rd.to.host, "redis-3.example");
    /* An unknown endpoint: the host of the node asked, with the port given. */
    assert_int_equal(answer("MOVED 3999 :6380", &rd), CLUSTER_ANSWER_MOVED);
    assert_string_equal(rd.to.host, "10.0.0.9");
    assert_int_equal(rd.to.port, 6380);
    assert_int_equal(answer("MOVED 12 ::1:6380", &rd), CLUSTER_ANSWER_MOVED);
    assert_string_equal(rd.to.host, "::1");
    assert_int_equal(answer("CLUSTERDOWN The cluster is down", &rd), CLUSTER_ANSWER_DOWN);
    assert_int_equal(answer("CLUSTERDOWN Hash slot not served", &rd), CLUSTER_ANSWER_DOWN);
    assert_int_equal(answer("TRYAGAIN Multiple keys request during rehashing of slot", &rd),
                     CLUSTER_ANSWER_TRYAGAIN);
    assert_int_equal(answer("CROSSSLOT Keys in request don't hash to the same slot", &rd),
                     CLUSTER_ANSWER_CROSSSLOT);
    /* Not about routing, or not readable as a redirect. */
    const char *final[] = {
        "ERR Function not found",
        "MOVEDX 1 h:1",
        "MOVED 16384 h:1",
        "MOVED x h:1",
        "MOVED 1 h",
        "MOVED 1 h:0",
        "ASK 1 h:99999",
        "MOVED 1 h:1x",
        "READONLY You can't write against a read only replica.",
    };
    for (size_t i = 0; i < sizeof final / sizeof final[0]; i++)
        assert_int_equal(answer(final[i], &rd), CLUSTER_ANSWER_FINAL);
    redisReply *ok = resp_parse("$2\r\nok\r\n");
    assert_int_equal(cluster_answer_of(ok, &asked, &rd), CLUSTER_ANSWER_FINAL);
    freeReplyObject(ok);
    /* A status that looks like a redirect is a value, not an error. */
    ok = resp_parse("+MOVED 1 h:1\r\n");
    assert_int_equal(cluster_answer_of(ok, &asked, &rd), CLUSTER_ANSWER_FINAL);
    freeReplyObject(ok);
}

static void steps(void **state)
{
    (void)state;
    assert_int_equal(cluster_step_of(CLUSTER_ANSWER_FINAL, 0, 0), CLUSTER_STEP_DONE);
    assert_int_equal(cluster_step_of(CLUSTER_ANSWER_FINAL, CLUSTER_MAX_REDIRECTS, 0),
                     CLUSTER_STEP_DONE);
    assert_int_equal(cluster_step_of(CLUSTER_ANSWER_MOVED, 0, 0), CLUSTER_STEP_FOLLOW);
    assert_int_equal(cluster_step_of(CLUSTER_ANSWER_ASK, CLUSTER_MAX_REDIRECTS - 1, 0),
                     CLUSTER_STEP_ASKING);
    assert_int_equal(cluster_step_of(CLUSTER_ANSWER_DOWN, 0, 0), CLUSTER_STEP_UNAVAILABLE);
    /* Keys split by a migration are waited out a few times, then 503; redirects do not count. */
    assert_int_equal(cluster_step_of(CLUSTER_ANSWER_TRYAGAIN, 0, 0), CLUSTER_STEP_WAIT);
    assert_int_equal(cluster_step_of(CLUSTER_ANSWER_TRYAGAIN, CLUSTER_MAX_REDIRECTS, 0),
                     CLUSTER_STEP_WAIT);
    assert_int_equal(cluster_step_of(CLUSTER_ANSWER_TRYAGAIN, 0, CLUSTER_SPLIT_WAITS - 1),
                     CLUSTER_STEP_WAIT);
    assert_int_equal(cluster_step_of(CLUSTER_ANSWER_TRYAGAIN, 0, CLUSTER_SPLIT_WAITS),
                     CLUSTER_STEP_UNAVAILABLE);
    assert_int_equal(cluster_step_of(CLUSTER_ANSWER_MOVED, 0, CLUSTER_SPLIT_WAITS),
                     CLUSTER_STEP_FOLLOW);
    assert_int_equal(cluster_step_of(CLUSTER_ANSWER_CROSSSLOT, 0, 0), CLUSTER_STEP_BUG);
    /* A slot that keeps moving answers 503 instead of looping. */
    assert_int_equal(cluster_step_of(CLUSTER_ANSWER_MOVED, CLUSTER_MAX_REDIRECTS, 0),
                     CLUSTER_STEP_UNAVAILABLE);
    assert_int_equal(cluster_step_of(CLUSTER_ANSWER_ASK, CLUSTER_MAX_REDIRECTS, 0),
                     CLUSTER_STEP_UNAVAILABLE);
    /* The 503 carries a Retry-After. */
    assert_int_equal(fg_code_status(FG_ERR_BACKEND_UNAVAILABLE), 503);
    assert_true(fg_code_retry_after(FG_ERR_BACKEND_UNAVAILABLE) > 0);
}

static void moved_updates_one_slot(void **state)
{
    (void)state;
    static struct cluster_map map;
    read_map(six_nodes(big), &map);
    /* To a node the map knows: a replica that was promoted. */
    struct cluster_redirect rd = {.slot = 7, .to = {"127.0.0.1", 30004}};
    assert_true(cluster_map_moved(&map, &rd));
    assert_int_equal(cluster_map_owner(&map, 7)->at.port, 30004);
    assert_true(cluster_map_owner(&map, 7)->primary);
    assert_int_equal(cluster_map_owner(&map, 8)->at.port, 30001);
    assert_int_equal(map.nnodes, 7);
    /* To a node it does not know: added. */
    rd = (struct cluster_redirect){.slot = 9, .to = {"127.0.0.1", 30010}};
    assert_true(cluster_map_moved(&map, &rd));
    assert_int_equal(map.nnodes, 8);
    assert_int_equal(cluster_map_owner(&map, 9)->at.port, 30010);
    assert_string_equal(cluster_map_owner(&map, 9)->id, "");
    assert_int_equal(map.covered, CLUSTER_SLOTS);
    /* A full map refuses a new node and stays as it was. */
    map.nnodes = CLUSTER_MAX_NODES;
    rd = (struct cluster_redirect){.slot = 10, .to = {"127.0.0.1", 30011}};
    assert_false(cluster_map_moved(&map, &rd));
    assert_int_equal(cluster_map_owner(&map, 10)->at.port, 30001);
}

/* The home slot of a primary: its highest slot, the same for each of its slots. */
static void home_slots(void **state)
{
    (void)state;
    static struct cluster_map map;
    read_map(six_nodes(big), &map);
    static const unsigned homes[][2] = {{0, 5460},      {5460, 5460},   {5461, 10922},
                                        {10000, 10922}, {10001, 16383}, {10002, 10922},
                                        {10923, 16383}, {16383, 16383}};
    for (size_t i = 0; i < sizeof homes / sizeof homes[0]; i++)
        assert_int_equal(cluster_map_home_slot(&map, homes[i][0]), homes[i][1]);
    /* A slot moved to a node of its own is its home; the others keep theirs. */
    struct cluster_redirect rd = {.slot = 7, .to = {"127.0.0.1", 30010}};
    assert_true(cluster_map_moved(&map, &rd));
    assert_int_equal(cluster_map_home_slot(&map, 7), 7);
    assert_int_equal(cluster_map_home_slot(&map, 8), 5460);
    /* A slot nobody serves names itself. */
    map.owner[100] = -1;
    assert_int_equal(cluster_map_home_slot(&map, 100), 100);
    assert_int_equal(cluster_map_home_slot(&map, CLUSTER_SLOTS), CLUSTER_SLOTS);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(map_of_six_nodes),
        cmocka_unit_test(endpoints_unknown_and_partial_maps),
        cmocka_unit_test(maps_refused),
        cmocka_unit_test(answers),
        cmocka_unit_test(steps),
        cmocka_unit_test(moved_updates_one_slot),
        cmocka_unit_test(home_slots),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
