/* SPDX-License-Identifier: Apache-2.0 */
/*
 * redis_url.h - parsing of the Redis address a gateway is given: one server
 * (redis://), a set of sentinels that name the primary (redis-sentinel://), or
 * nodes of a Redis Cluster to learn the slot map from (redis-cluster://), with
 * an optional ACL user and password and a database number. Pure: no I/O.
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
    bool sentinel;      /* redis-sentinel:// */
    bool cluster;       /* redis-cluster:// */
    char user[128];     /* ACL user, "" for the default user */
    char password[256]; /* "" when none */
    struct redis_endpoint
        hosts[REDIS_URL_MAX_HOSTS]; /* the server, the sentinels or the seed nodes */
    int nhosts;                     /* entries in hosts (1 for redis://) */
    char master[128];               /* sentinel master name ("" for redis://) */
    int db;                         /* database number (0 for a cluster) */
};

/*
 * Parses url into *out:
 *   redis://[[user]:password@]host[:port][/db]
 *   redis-sentinel://[[user]:password@]host[:port][,host[:port]...]/<master name>[/db]
 *   redis-cluster://[[user]:password@]host[:port][,host[:port]...][/0]
 * Ports default to 6379 (server, cluster node) and 26379 (sentinel). A
 * cluster has database 0 only. "user:password@" names an
 * ACL user, ":password@" or "password@" the default user. Fails with
 * FG_ERR_CONFIG naming what is wrong.
 */
int redis_url_parse(const char *url, struct redis_url *out, struct fg_error *err) FG_WUR;

#endif
