/* SPDX-License-Identifier: Apache-2.0 */
/*
 * slot_handover.h - whether the keys of a Redis Cluster slot on its current
 * owner came whole from the process that last recovered the slot's fence
 * sequence (a live reshard), judged from what the nodes say of themselves:
 * INFO (run_id, role, replication ids) and CLUSTER NODES (who serves the
 * slot, in the old owner's own view). The rules and why each is needed are in
 * docs/cluster.md ("A moved slot"). Pure: it reads the nodes' answer texts and
 * makes no connection (the Redis module asks, store/backend/redis.h).
 */
#ifndef FG_SLOT_HANDOVER_H
#define FG_SLOT_HANDOVER_H

#include <stdbool.h>

/* Bytes of a run_id, a replication id or a node id (40 hex digits) and its NUL. */
#define HANDOVER_ID_SIZE 41

/* What one Redis process says of itself in INFO. */
struct handover_node {
    char run_id[HANDOVER_ID_SIZE];  /* the process (changes at every start) */
    bool primary;                   /* role:master */
    char replid[HANDOVER_ID_SIZE];  /* master_replid: the history its data follows */
    char replid2[HANDOVER_ID_SIZE]; /* master_replid2: the one before its last promotion */
};

/* Reads the INFO text info (borrowed: the server and replication sections)
 * into *out; false when it names no run_id. */
bool handover_node_parse(const char *info, struct handover_node *out);

/* Who serves a slot in one node's CLUSTER NODES. */
enum handover_view {
    HANDOVER_VIEW_MOVED,     /* the node named to */
    HANDOVER_VIEW_MIGRATING, /* the node asked, while it migrates the slot to the node named to */
    HANDOVER_VIEW_CLAIMED,   /* the node asked, and it migrates nothing: it still claims the slot */
    HANDOVER_VIEW_OTHER,     /* another node (the views have not met yet) */
    HANDOVER_VIEW_NONE,      /* no node, or a text it cannot read */
};

/* Who serves slot in the CLUSTER NODES text nodes (borrowed), as seen by the
 * node that answered it (the "myself" line), to being the node id of the
 * slot's owner by the gateway's map. */
enum handover_view handover_view_parse(const char *nodes, unsigned slot, const char *to);

/* The verdict on a moved slot. */
enum handover_verdict {
    HANDOVER_TRUSTED,   /* the keys came whole from the old owner: adopt them, no loss */
    HANDOVER_MIGRATING, /* the move is not over (or the views not yet met): try again later */
    HANDOVER_LOST,      /* maybe not: recover as after a loss */
};

/* Judges a slot whose sequence was last recovered on the process old (NULL
 * when no node of the map runs it any more), seen by old as view, and served
 * now by the process now. *why receives a static text naming the rule that
 * decided. */
enum handover_verdict handover_judge(const struct handover_node *old, enum handover_view view,
                                     const struct handover_node *now, const char **why);

#endif
