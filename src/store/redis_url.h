/* SPDX-License-Identifier: Apache-2.0 */
/*
 * redis_url.h - parsing of the Redis address a gateway is given: one server
 * (redis://) or a set of sentinels that name the primary (redis-sentinel://),
 * with an optional ACL user and password and a database number. Pure: no I/O.
 */
#ifndef FG_REDIS_URL_H
#define FG_REDIS_URL_H

#include <stdbool.h>

#include "fglimits.h"
#include "util/error.h"

/* One host:port of a URL. */
struct redis_endpoint {
    char host[256]; /* name or address, without brackets */
    int port;       /* 1..65535 */
};

/* A parsed URL. */
struct redis_url {
    bool sentinel;                                    /* redis-sentinel:// */
    char user[128];                                   /* ACL user, "" for the default user */
    char password[256];                               /* "" when none */
    struct redis_endpoint hosts[REDIS_URL_MAX_HOSTS]; /* the server, or the sentinels */
    int nhosts;                                       /* entries in hosts (1 for redis://) */
    char master[128];                                 /* sentinel master name ("" for redis://) */
    int db;                                           /* database number */
};

/*
 * Parses url into *out:
 *   redis://[[user]:password@]host[:port][/db]
 *   redis-sentinel://[[user]:password@]host[:port][,host[:port]...]/<master name>[/db]
 * Ports default to 6379 (server) and 26379 (sentinel). "user:password@" names an
 * ACL user, ":password@" or "password@" the default user. Fails with
 * FG_ERR_CONFIG naming what is wrong.
 */
int redis_url_parse(const char *url, struct redis_url *out, struct fg_error *err) FG_WUR;

#endif
