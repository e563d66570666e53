/* SPDX-License-Identifier: Apache-2.0 */
/*
 * redis_url.c - turns a redis://, redis-sentinel:// or redis-cluster:// URL into a struct
 * redis_url. Pure string work; connecting is the Redis module's business.
 */
#include "store/backend/redis_url.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/redact.h"

#define REDIS_URL_SHOWN_MAX 200 /* bytes of a URL quoted in a message */

/* The schemes, each with its default port. */
static const struct {
    const char *prefix; /* scheme and "://" */
    bool sentinel;      /* addresses sentinels */
    bool cluster;       /* addresses nodes of a cluster */
    int default_port;   /* port of a host that names none */
} schemes[] = {
    {"redis://", false, false, 6379},
    {"redis-sentinel://", true, false, 26379},
    {"redis-cluster://", false, true, 6379},
};

/* Copies len bytes of src into dst (capacity cap); -1 if they do not fit. */
static int copy_part(char *dst, size_t cap, const char *src, size_t len)
{
    if (len >= cap)
        return -1;
    memcpy(dst, src, len);
    dst[len] = '\0';
    return 0;
}

/* Parses a decimal number in [lo, hi] spanning exactly len bytes. */
static int parse_number(const char *s, size_t len, int lo, int hi, int *out)
{
    if (len == 0 || len > 9)
        return -1;
    int v = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    if (v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

/* Splits "user:password", ":password" or "password" (len bytes) into out. */
static int parse_userinfo(const char *s, size_t len, struct redis_url *out)
{
    const char *colon = memchr(s, ':', len);
    if (colon == NULL)
        return copy_part(out->password, sizeof out->password, s, len);
    if (copy_part(out->user, sizeof out->user, s, (size_t)(colon - s)) != 0)
        return -1;
    return copy_part(out->password, sizeof out->password, colon + 1, len - (size_t)(colon - s) - 1);
}

/* Parses one "host[:port]" or "[v6]:port" of len bytes. */
static int parse_endpoint(const char *s, size_t len, int default_port, struct redis_endpoint *ep)
{
    const char *host = s, *rest;
    size_t host_len;
    if (len > 0 && s[0] == '[') {
        const char *close = memchr(s, ']', len);
        if (close == NULL)
            return -1;
        host = s + 1;
        host_len = (size_t)(close - host);
        rest = close + 1;
    } else {
        const char *colon = memchr(s, ':', len);
        host_len = colon ? (size_t)(colon - s) : len;
        rest = s + host_len;
    }
    size_t rest_len = len - (size_t)(rest - s);
    if (host_len == 0 || copy_part(ep->host, sizeof ep->host, host, host_len) != 0)
        return -1;
    ep->port = default_port;
    if (rest_len == 0)
        return 0;
    if (rest[0] != ':')
        return -1;
    return parse_number(rest + 1, rest_len - 1, 1, 65535, &ep->port);
}

/* Parses the comma-separated host list of len bytes. */
static int parse_hosts(const char *s, size_t len, int default_port, struct redis_url *out)
{
    out->nhosts = 0;
    for (size_t at = 0; at <= len;) {
        const char *comma = memchr(s + at, ',', len - at);
        size_t part = comma ? (size_t)(comma - (s + at)) : len - at;
        if (out->nhosts == REDIS_URL_MAX_HOSTS ||
            parse_endpoint(s + at, part, default_port, &out->hosts[out->nhosts]) != 0)
            return -1;
        out->nhosts++;
        at += part + 1;
    }
    return 0;
}

/* Parses what follows the hosts: "" or "/db" for a server or a cluster (whose
 * one database is 0), "/name[/db]" for sentinels. */
static int parse_path(const char *path, struct redis_url *out)
{
    if (*path == '\0')
        return out->sentinel ? -1 : 0;
    path++; /* the '/' */
    if (out->sentinel) {
        size_t len = strcspn(path, "/");
        if (len == 0 || copy_part(out->master, sizeof out->master, path, len) != 0)
            return -1;
        path += len;
        if (*path == '\0')
            return 0;
        path++;
    }
    return *path == '\0'
               ? 0
               : parse_number(path, strlen(path), 0, out->cluster ? 0 : 1000000, &out->db);
}

int redis_url_parse(const char *url, struct redis_url *out, struct fg_error *err)
{
    memset(out, 0, sizeof *out);
    size_t k = 0;
    while (k < sizeof schemes / sizeof schemes[0] &&
           strncmp(url, schemes[k].prefix, strlen(schemes[k].prefix)) != 0)
        k++;
    if (k == sizeof schemes / sizeof schemes[0])
        return fg_fail(err, FG_ERR_CONFIG,
                       "redis_url must start with redis://, redis-sentinel:// or redis-cluster://");
    out->sentinel = schemes[k].sentinel;
    out->cluster = schemes[k].cluster;
    const char *p = url + strlen(schemes[k].prefix);
    const char *slash = strchr(p, '/');
    size_t authority = slash ? (size_t)(slash - p) : strlen(p);
    const char *at = NULL;
    for (size_t i = 0; i < authority; i++)
        at = p[i] == '@' ? p + i : at;
    if (at != NULL && parse_userinfo(p, (size_t)(at - p), out) != 0)
        return fg_fail(err, FG_ERR_CONFIG, "redis_url: user or password too long");
    const char *hosts = at ? at + 1 : p;
    char shown[REDIS_URL_SHOWN_MAX]; /* the URL as messages print it: no password */
    redact_url(url, shown, sizeof shown);
    if (parse_hosts(hosts, authority - (size_t)(hosts - p), schemes[k].default_port, out) != 0 ||
        (!out->sentinel && !out->cluster && out->nhosts != 1))
        return fg_fail(err, FG_ERR_CONFIG, "redis_url: bad host list in '%s'", shown);
    if (parse_path(p + authority, out) != 0)
        return fg_fail(err, FG_ERR_CONFIG, "redis_url: %s in '%s'",
                       out->sentinel  ? "expected /<master name>[/db]"
                       : out->cluster ? "a cluster has database 0 only"
                                      : "expected /<db number>",
                       shown);
    return 0;
}
