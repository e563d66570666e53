/* SPDX-License-Identifier: Apache-2.0 */
/*
 * redis_cluster.c - the routing rules of Redis Cluster (its specification's
 * "Redirection and resharding" and the CLUSTER SHARDS reply): the slot map, and the answers that
 * move a command to another node. Plain functions over hiredis replies and the map; connections,
 * retries and the map's sharing between threads belong to the Redis client (redis.c).
 */
#include "store/backend/redis_cluster.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool cluster_endpoint_equal(const struct redis_endpoint *a, const struct redis_endpoint *b)
{
    return a->port == b->port && strcmp(a->host, b->host) == 0;
}

/* True if r is a string (bulk or status) equal to text. */
static bool is_text(const redisReply *r, const char *text)
{
    return (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS) &&
           r->len == strlen(text) && memcmp(r->str, text, r->len) == 0;
}

/* The value named name in a RESP2 map (an array of name, value, ...), or NULL. */
static const redisReply *field(const redisReply *map, const char *name)
{
    if (map->type != REDIS_REPLY_ARRAY)
        return NULL;
    for (size_t i = 0; i + 1 < map->elements; i += 2)
        if (is_text(map->element[i], name))
            return map->element[i + 1];
    return NULL;
}

/* Reads a number (an integer, or a string of digits) of r into *out. */
static bool number_of(const redisReply *r, long long *out)
{
    if (r == NULL)
        return false;
    if (r->type == REDIS_REPLY_INTEGER) {
        *out = r->integer;
        return true;
    }
    if (r->type != REDIS_REPLY_STRING || r->len == 0 || r->len > 18)
        return false;
    char *end;
    *out = strtoll(r->str, &end, 10);
    return end == r->str + r->len;
}

/* Copies the string r into dst (cap bytes); false if r is no usable host. */
static bool host_of(const redisReply *r, char *dst, size_t cap)
{
    if (r == NULL || r->type != REDIS_REPLY_STRING || r->len == 0 || r->len >= cap ||
        is_text(r, "?"))
        return false;
    memcpy(dst, r->str, r->len);
    dst[r->len] = '\0';
    return true;
}

/* Reads one node of a shard into *node: its id and where to reach it. */
static int read_node(const redisReply *r, const struct redis_endpoint *asked,
                     struct cluster_node *node)
{
    const redisReply *id = field(r, "id");
    long long port;
    if (id == NULL || id->type != REDIS_REPLY_STRING || id->len >= sizeof node->id ||
        !number_of(field(r, "port"), &port) || port < 1 || port > 65535)
        return -1;
    memcpy(node->id, id->str, id->len);
    node->id[id->len] = '\0';
    node->at.port = (int)port;
    if (!host_of(field(r, "endpoint"), node->at.host, sizeof node->at.host) &&
        !host_of(field(r, "ip"), node->at.host, sizeof node->at.host))
        snprintf(node->at.host, sizeof node->at.host, "%s", asked->host);
    node->primary = false;
    return 0;
}

/* Rank of a node as the primary of its shard: an online primary first, a
 * primary in another state next, a replica never (-1). */
static int primary_rank(const redisReply *r)
{
    const redisReply *role = field(r, "role"), *health = field(r, "health");
    if (role == NULL || !is_text(role, "master"))
        return -1;
    return health != NULL && is_text(health, "online") ? 2 : 1;
}

/* Gives the slot ranges of a shard (a flat array of inclusive start, end) to
 * the node at index owner. */
static int take_slots(const redisReply *slots, int16_t owner, struct cluster_map *map)
{
    if (slots->type != REDIS_REPLY_ARRAY || slots->elements % 2 != 0)
        return -1;
    for (size_t i = 0; i < slots->elements; i += 2) {
        long long lo, hi;
        if (!number_of(slots->element[i], &lo) || !number_of(slots->element[i + 1], &hi) ||
            lo < 0 || hi < lo || hi >= CLUSTER_SLOTS)
            return -1;
        for (long long s = lo; s <= hi; s++) {
            if (map->owner[s] != -1)
                return -1;
            map->owner[s] = owner;
            map->covered++;
        }
    }
    return 0;
}

/* Reads one shard: its nodes into map, and its slots to its primary. */
static int read_shard(const redisReply *shard, const struct redis_endpoint *asked,
                      struct cluster_map *map)
{
    const redisReply *slots = field(shard, "slots"), *nodes = field(shard, "nodes");
    if (slots == NULL || nodes == NULL || nodes->type != REDIS_REPLY_ARRAY)
        return -1;
    int primary = -1, best = 0;
    for (size_t i = 0; i < nodes->elements; i++) {
        if (map->nnodes == CLUSTER_MAX_NODES ||
            read_node(nodes->element[i], asked, &map->nodes[map->nnodes]) != 0)
            return -1;
        int rank = primary_rank(nodes->element[i]);
        if (rank > best) {
            best = rank;
            primary = map->nnodes;
        }
        map->nnodes++;
    }
    if (slots->elements == 0)
        return 0;
    if (primary < 0)
        return -1;
    map->nodes[primary].primary = true;
    return take_slots(slots, (int16_t)primary, map);
}

int cluster_map_from_shards(const redisReply *shards, const struct redis_endpoint *asked,
                            struct cluster_map *map, struct fg_error *err)
{
    map->nnodes = 0;
    map->covered = 0;
    for (size_t s = 0; s < CLUSTER_SLOTS; s++)
        map->owner[s] = -1;
    if (shards->type != REDIS_REPLY_ARRAY)
        return fg_fail(err, FG_ERR_BACKEND_UNAVAILABLE, "redis: %s:%d: CLUSTER SHARDS is no list",
                       asked->host, asked->port);
    for (size_t i = 0; i < shards->elements; i++)
        if (read_shard(shards->element[i], asked, map) != 0)
            return fg_fail(err, FG_ERR_BACKEND_UNAVAILABLE,
                           "redis: %s:%d: cannot read shard %zu of CLUSTER SHARDS", asked->host,
                           asked->port, i);
    return 0;
}

const struct cluster_node *cluster_map_owner(const struct cluster_map *map, unsigned slot)
{
    if (slot >= CLUSTER_SLOTS || map->owner[slot] < 0)
        return NULL;
    return &map->nodes[map->owner[slot]];
}

unsigned cluster_map_home_slot(const struct cluster_map *map, unsigned slot)
{
    if (slot >= CLUSTER_SLOTS || map->owner[slot] < 0)
        return slot;
    unsigned home = CLUSTER_SLOTS - 1;
    while (map->owner[home] != map->owner[slot])
        home--;
    return home;
}

/* Reads "<slot> <host>:<port>" (after "MOVED " or "ASK ") into *out; the host
 * is what precedes the last ':' (an IPv6 address has colons of its own), and
 * an empty one is asked's. */
static bool read_redirect(const char *text, const struct redis_endpoint *asked,
                          struct cluster_redirect *out)
{
    char *end;
    long slot = strtol(text, &end, 10);
    if (end == text || *end != ' ' || slot < 0 || slot >= CLUSTER_SLOTS)
        return false;
    const char *addr = end + 1, *colon = strrchr(addr, ':');
    if (colon == NULL)
        return false;
    size_t host_len = (size_t)(colon - addr);
    long port = strtol(colon + 1, &end, 10);
    if (end == colon + 1 || *end != '\0' || port < 1 || port > 65535 ||
        host_len >= sizeof out->to.host)
        return false;
    if (host_len == 0)
        snprintf(out->to.host, sizeof out->to.host, "%s", asked->host);
    else
        snprintf(out->to.host, sizeof out->to.host, "%.*s", (int)host_len, addr);
    out->to.port = (int)port;
    out->slot = (unsigned)slot;
    return true;
}

/* The error prefixes of the specification, each with its answer. */
static const struct {
    const char *prefix;         /* the error's first word and the space after it */
    enum cluster_answer answer; /* what it means */
} answers[] = {
    {"MOVED ", CLUSTER_ANSWER_MOVED},         {"ASK ", CLUSTER_ANSWER_ASK},
    {"CLUSTERDOWN ", CLUSTER_ANSWER_DOWN},    {"TRYAGAIN ", CLUSTER_ANSWER_TRYAGAIN},
    {"CROSSSLOT ", CLUSTER_ANSWER_CROSSSLOT},
};

enum cluster_answer cluster_answer_of(const redisReply *reply, const struct redis_endpoint *asked,
                                      struct cluster_redirect *redirect)
{
    if (reply->type != REDIS_REPLY_ERROR)
        return CLUSTER_ANSWER_FINAL;
    for (size_t i = 0; i < sizeof answers / sizeof answers[0]; i++) {
        size_t n = strlen(answers[i].prefix);
        if (strncmp(reply->str, answers[i].prefix, n) != 0)
            continue;
        bool redirects =
            answers[i].answer == CLUSTER_ANSWER_MOVED || answers[i].answer == CLUSTER_ANSWER_ASK;
        if (redirects && !read_redirect(reply->str + n, asked, redirect))
            return CLUSTER_ANSWER_FINAL;
        return answers[i].answer;
    }
    return CLUSTER_ANSWER_FINAL;
}

/* The step of each answer while the command may still follow redirects and wait. */
static const enum cluster_step steps[] = {
    [CLUSTER_ANSWER_FINAL] = CLUSTER_STEP_DONE,
    [CLUSTER_ANSWER_MOVED] = CLUSTER_STEP_FOLLOW,
    [CLUSTER_ANSWER_ASK] = CLUSTER_STEP_ASKING,
    [CLUSTER_ANSWER_DOWN] = CLUSTER_STEP_UNAVAILABLE,
    [CLUSTER_ANSWER_CROSSSLOT] = CLUSTER_STEP_BUG,
    [CLUSTER_ANSWER_TRYAGAIN] = CLUSTER_STEP_WAIT, /* CLUSTER_SPLIT_WAITS times, then 503 */
};

enum cluster_step cluster_step_of(enum cluster_answer answer, int redirects, int waits)
{
    enum cluster_step step = steps[answer];
    bool redirect = step == CLUSTER_STEP_FOLLOW || step == CLUSTER_STEP_ASKING;
    if (redirect && redirects >= CLUSTER_MAX_REDIRECTS)
        return CLUSTER_STEP_UNAVAILABLE;
    return step == CLUSTER_STEP_WAIT && waits >= CLUSTER_SPLIT_WAITS ? CLUSTER_STEP_UNAVAILABLE
                                                                     : step;
}

bool cluster_map_moved(struct cluster_map *map, const struct cluster_redirect *redirect)
{
    int k = 0;
    while (k < map->nnodes && !cluster_endpoint_equal(&map->nodes[k].at, &redirect->to))
        k++;
    if (k == CLUSTER_MAX_NODES)
        return false;
    if (k == map->nnodes) {
        memset(&map->nodes[k], 0, sizeof map->nodes[k]);
        map->nodes[k].at = redirect->to;
        map->nnodes++;
    }
    map->nodes[k].primary = true;
    if (map->owner[redirect->slot] < 0)
        map->covered++;
    map->owner[redirect->slot] = (int16_t)k;
    return true;
}
