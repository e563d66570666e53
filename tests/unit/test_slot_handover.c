/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_slot_handover.c - the judgement on a moved Redis Cluster slot
 * (store/backend/slot_handover.h) over INFO and CLUSTER NODES texts written
 * as Redis 7.0 writes them: each rule of docs/cluster.md ("A moved slot")
 * decides the case it is there for.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "store/backend/slot_handover.h"

#define ZERO  "0000000000000000000000000000000000000000"
#define OLD   "1111111111111111111111111111111111111111" /* old owner's node id */
#define NEW   "2222222222222222222222222222222222222222" /* new owner's node id */
#define THIRD "3333333333333333333333333333333333333333"

static const char *info_of(char *buf, size_t cap, const char *run_id, const char *role,
                           const char *replid, const char *replid2)
{
    snprintf(
        buf, cap,
        "# Server\r\nredis_version:7.0.15\r\nrun_id:%s\r\ntcp_port:7000\r\n\r\n"
        "# Replication\r\nrole:%s\r\nconnected_slaves:1\r\nmaster_failover_state:no-failover\r\n"
        "master_replid:%s\r\nmaster_replid2:%s\r\nmaster_repl_offset:100\r\n"
        "second_repl_offset:-1\r\n",
        run_id, role, replid, replid2);
    return buf;
}

static void parses_info(void **state)
{
    (void)state;
    char buf[1024];
    struct handover_node n;
    assert_true(handover_node_parse(info_of(buf, sizeof buf, "r0", "master", "aa", ZERO), &n));
    assert_string_equal(n.run_id, "r0");
    assert_true(n.primary);
    assert_string_equal(n.replid, "aa");
    assert_string_equal(n.replid2, ZERO);
    assert_true(handover_node_parse(info_of(buf, sizeof buf, "r1", "slave", "x", "y"), &n));
    assert_false(n.primary);
    assert_false(handover_node_parse("# Server\r\nredis_version:7.0.15\r\n", &n));
}

/* A CLUSTER NODES text of three primaries seen by the old owner, which held
 * 0-99 and serves slot 50 as slots says ("50": still its own; "": given away). */
static const char *nodes_of(char *buf, size_t cap, const char *mine, const char *theirs)
{
    snprintf(buf, cap,
             OLD " 127.0.0.1:7000@17000 myself,master - 0 0 1 connected 0-49 51-99 %s\n" NEW
                 " 127.0.0.1:7001@17001 master - 0 1700000000000 2 connected 100-199 %s\n" THIRD
                 " 127.0.0.1:7002@17002 master - 0 1700000000000 3 connected 200-16383\n",
             mine, theirs);
    return buf;
}

static void parses_views(void **state)
{
    (void)state;
    char buf[1024];
    assert_int_equal(handover_view_parse(nodes_of(buf, sizeof buf, "", "50"), 50, NEW),
                     HANDOVER_VIEW_MOVED);
    assert_int_equal(handover_view_parse(nodes_of(buf, sizeof buf, "", "50"), 50, THIRD),
                     HANDOVER_VIEW_OTHER);
    assert_int_equal(
        handover_view_parse(nodes_of(buf, sizeof buf, "50 [50->-" NEW "]", ""), 50, NEW),
        HANDOVER_VIEW_MIGRATING);
    assert_int_equal(
        handover_view_parse(nodes_of(buf, sizeof buf, "50 [51->-" NEW "]", ""), 50, NEW),
        HANDOVER_VIEW_CLAIMED); /* another slot migrates, not this one */
    assert_int_equal(handover_view_parse(nodes_of(buf, sizeof buf, "50", ""), 50, NEW),
                     HANDOVER_VIEW_CLAIMED);
    assert_int_equal(handover_view_parse(nodes_of(buf, sizeof buf, "", ""), 50, NEW),
                     HANDOVER_VIEW_NONE);
    assert_int_equal(handover_view_parse(nodes_of(buf, sizeof buf, "", ""), 150, NEW),
                     HANDOVER_VIEW_MOVED); /* inside a range */
    assert_int_equal(handover_view_parse("", 50, NEW), HANDOVER_VIEW_NONE);
}

static void judges(void **state)
{
    (void)state;
    const char *why = NULL;
    struct handover_node old = {.run_id = "ro", .primary = true, .replid = "A", .replid2 = ZERO};
    struct handover_node now = {.run_id = "rn", .primary = true, .replid = "B", .replid2 = ZERO};
    assert_int_equal(handover_judge(&old, HANDOVER_VIEW_MOVED, &now, &why), HANDOVER_TRUSTED);
    /* the old process is gone, or demoted after a failover */
    assert_int_equal(handover_judge(NULL, HANDOVER_VIEW_MOVED, &now, &why), HANDOVER_LOST);
    old.primary = false;
    assert_int_equal(handover_judge(&old, HANDOVER_VIEW_MOVED, &now, &why), HANDOVER_LOST);
    assert_string_equal(why, "the old owner is a replica now");
    old.primary = true;
    /* a partitioned old owner that still claims the slot; a move not over yet */
    assert_int_equal(handover_judge(&old, HANDOVER_VIEW_CLAIMED, &now, &why), HANDOVER_LOST);
    assert_int_equal(handover_judge(&old, HANDOVER_VIEW_NONE, &now, &why), HANDOVER_LOST);
    assert_int_equal(handover_judge(&old, HANDOVER_VIEW_MIGRATING, &now, &why), HANDOVER_MIGRATING);
    assert_int_equal(handover_judge(&old, HANDOVER_VIEW_OTHER, &now, &why), HANDOVER_MIGRATING);
    /* the new owner is a replica promoted from the old one: its history goes on the old one's */
    strcpy(now.replid2, "A");
    assert_int_equal(handover_judge(&old, HANDOVER_VIEW_MOVED, &now, &why), HANDOVER_LOST);
    assert_string_equal(why, "the new owner shares the old owner's replication history");
    strcpy(now.replid2, ZERO);
    strcpy(now.replid, "A"); /* still a replica's history */
    assert_int_equal(handover_judge(&old, HANDOVER_VIEW_MOVED, &now, &why), HANDOVER_LOST);
    strcpy(now.replid, "B");
    strcpy(old.replid2, "B"); /* the old owner was promoted from the new one */
    assert_int_equal(handover_judge(&old, HANDOVER_VIEW_MOVED, &now, &why), HANDOVER_LOST);
    strcpy(old.replid2, ZERO);
    now.primary = false;
    assert_int_equal(handover_judge(&old, HANDOVER_VIEW_MOVED, &now, &why), HANDOVER_LOST);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(parses_info),
        cmocka_unit_test(parses_views),
        cmocka_unit_test(judges),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
