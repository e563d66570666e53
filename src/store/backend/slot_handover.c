/* SPDX-License-Identifier: Apache-2.0 */
/*
 * slot_handover.c - judging whether a Redis Cluster slot's keys came whole to
 * their new owner by a live reshard (slot_handover.h), from the answers of
 * INFO and CLUSTER NODES. It must not connect to anything or decide what a
 * recovery then does (lease/fence.c).
 */
#include "store/backend/slot_handover.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Copies the value of "<field>:" at the start of a line of info into out
 * (HANDOVER_ID_SIZE bytes, cut there); "" when info has no such line. */
static void info_field(const char *info, const char *field, char *out, size_t cap)
{
    out[0] = '\0';
    size_t flen = strlen(field);
    for (const char *at = info; at != NULL && *at != '\0';) {
        if (strncmp(at, field, flen) == 0 && at[flen] == ':') {
            const char *v = at + flen + 1;
            size_t n = strcspn(v, "\r\n");
            if (n >= cap)
                n = cap - 1;
            memcpy(out, v, n);
            out[n] = '\0';
            return;
        }
        at = strchr(at, '\n');
        if (at != NULL)
            at++;
    }
}

bool handover_node_parse(const char *info, struct handover_node *out)
{
    char role[16];
    memset(out, 0, sizeof *out);
    info_field(info, "run_id", out->run_id, sizeof out->run_id);
    info_field(info, "role", role, sizeof role);
    info_field(info, "master_replid", out->replid, sizeof out->replid);
    info_field(info, "master_replid2", out->replid2, sizeof out->replid2);
    out->primary = strcmp(role, "master") == 0;
    return out->run_id[0] != '\0';
}

/* Fields of a CLUSTER NODES line before its slots (id, address, flags, ...). */
#define NODE_FIELDS 8

/* The slot text tok (len bytes) of one CLUSTER NODES entry (a slot, a range
 * "a-b", or a migration "[s->-id]" / "[s-<-id]"): whether it serves slot; a
 * migration away of slot copies the node it goes to into to_id. */
static bool token_serves(const char *tok, size_t len, unsigned slot, char to_id[HANDOVER_ID_SIZE])
{
    char text[128];
    if (len == 0 || len >= sizeof text)
        return false;
    memcpy(text, tok, len);
    text[len] = '\0';
    if (text[0] == '[') {
        const char *arrow = strstr(text, "->-");
        if (arrow != NULL && strtoul(text + 1, NULL, 10) == slot)
            snprintf(to_id, HANDOVER_ID_SIZE, "%.*s", (int)strcspn(arrow + 3, "]"), arrow + 3);
        return false;
    }
    char *end = NULL;
    unsigned long lo = strtoul(text, &end, 10), hi = lo;
    if (end != NULL && *end == '-')
        hi = strtoul(end + 1, NULL, 10);
    return lo <= slot && slot <= hi;
}

enum handover_view handover_view_parse(const char *nodes, unsigned slot, const char *to)
{
    enum handover_view view = HANDOVER_VIEW_NONE;
    char migrating_to[HANDOVER_ID_SIZE] = "", elsewhere[HANDOVER_ID_SIZE];
    bool claimed = false;
    for (const char *line = nodes; line != NULL && *line != '\0';) {
        size_t len = strcspn(line, "\n");
        const char *id = line, *flags = "";
        size_t idlen = 0, flagslen = 0;
        int nf = 0;
        for (const char *at = line, *end = line + len; at < end;) {
            size_t n = strcspn(at, " \r\n");
            if (n > (size_t)(end - at))
                n = (size_t)(end - at);
            if (nf == 0)
                idlen = n;
            else if (nf == 2)
                flags = at, flagslen = n;
            else if (nf >= NODE_FIELDS) {
                bool mine = memmem(flags, flagslen, "myself", 6) != NULL;
                bool serves = token_serves(at, n, slot, mine ? migrating_to : elsewhere);
                if (serves && mine)
                    claimed = true;
                else if (serves)
                    view = idlen == strlen(to) && memcmp(id, to, idlen) == 0 ? HANDOVER_VIEW_MOVED
                                                                             : HANDOVER_VIEW_OTHER;
            }
            nf += n > 0;
            at += n;
            while (at < end && (*at == ' ' || *at == '\r'))
                at++;
        }
        line = line[len] == '\n' ? line + len + 1 : NULL;
    }
    if (claimed)
        return migrating_to[0] != '\0' && strcmp(migrating_to, to) == 0 ? HANDOVER_VIEW_MIGRATING
                                                                        : HANDOVER_VIEW_CLAIMED;
    return view;
}

/* True for a replication id that names a history: not empty, not all zeros
 * (a process that was never promoted has no second history). */
static bool real_id(const char *id)
{
    return id[0] != '\0' && strspn(id, "0") != strlen(id);
}

/* True if the data of a and b may come from one replication history: one was
 * (or is) a replica of the other, or both of a third, since either's last
 * promotion or the one before it. */
static bool related(const struct handover_node *a, const struct handover_node *b)
{
    const char *ia[] = {a->replid, a->replid2}, *ib[] = {b->replid, b->replid2};
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++)
            if (real_id(ia[i]) && strcmp(ia[i], ib[j]) == 0)
                return true;
    return false;
}

enum handover_verdict handover_judge(const struct handover_node *old, enum handover_view view,
                                     const struct handover_node *now, const char **why)
{
    static const struct {
        enum handover_view view;
        enum handover_verdict verdict;
        const char *why;
    } by_view[] = {
        {HANDOVER_VIEW_MIGRATING, HANDOVER_MIGRATING, "the old owner still migrates the slot"},
        {HANDOVER_VIEW_OTHER, HANDOVER_MIGRATING, "the old owner names another owner"},
        {HANDOVER_VIEW_CLAIMED, HANDOVER_LOST, "the old owner still claims the slot"},
        {HANDOVER_VIEW_NONE, HANDOVER_LOST, "the old owner names no owner"},
    };
    if (old == NULL) {
        *why = "no node runs the old owner's process";
        return HANDOVER_LOST;
    }
    if (!old->primary) {
        *why = "the old owner is a replica now";
        return HANDOVER_LOST;
    }
    for (size_t i = 0; i < sizeof by_view / sizeof by_view[0]; i++)
        if (by_view[i].view == view) {
            *why = by_view[i].why;
            return by_view[i].verdict;
        }
    if (!now->primary) {
        *why = "the new owner is not a primary";
        return HANDOVER_LOST;
    }
    if (related(old, now)) {
        *why = "the new owner shares the old owner's replication history";
        return HANDOVER_LOST;
    }
    *why = "moved live from the old owner";
    return HANDOVER_TRUSTED;
}
