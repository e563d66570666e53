/* SPDX-License-Identifier: Apache-2.0 */
/*
 * resp_fixture.h - Redis replies for the routing unit tests (test_redis_cluster.c,
 * test_redis_route.c), written as RESP text and read with hiredis's own
 * parser, as a connection would read them. Included by one test file each,
 * after cmocka.h.
 */
#ifndef FG_TEST_RESP_FIXTURE_H
#define FG_TEST_RESP_FIXTURE_H

#include <hiredis/hiredis.h>
#include <stdio.h>
#include <string.h>

/* The reply RESP text encodes (the caller's to free). */
static redisReply *resp_parse(const char *text)
{
    redisReader *reader = redisReaderCreate();
    assert_non_null(reader);
    assert_int_equal(redisReaderFeed(reader, text, strlen(text)), REDIS_OK);
    void *reply = NULL;
    assert_int_equal(redisReaderGetReply(reader, &reply), REDIS_OK);
    assert_non_null(reply);
    redisReaderFree(reader);
    return reply;
}

/* Appends s to buf as a bulk string. */
static void resp_bulk(char *buf, const char *s)
{
    sprintf(buf + strlen(buf), "$%zu\r\n%s\r\n", strlen(s), s);
}

#endif
