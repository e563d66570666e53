/* SPDX-License-Identifier: Apache-2.0 */
/*
 * list_merge.h - one page of a listing read from many indexes at once: on a
 * Redis Cluster each slot keeps the listing index of its own locks and
 * semaphores (docs/cluster.md), a page reads the first names after the cursor
 * from every slot's index and merges them in name order. Which of those names
 * the page may show, and whether a later page may hold more, is decided here.
 * Pure: no I/O; names are borrowed.
 */
#ifndef FG_LIST_MERGE_H
#define FG_LIST_MERGE_H

#include <stdbool.h>
#include <stddef.h>

/* A name read from the index of one slot. */
struct list_merge_name {
    const char *name; /* borrowed */
    unsigned slot;    /* the slot whose index holds it */
};

/*
 * Picks a page from the n names of names, read from the indexes of every
 * slot: from each, its first (in name order) at most per_slot names after the
 * cursor. A slot that gave per_slot names may hold more after its last one, so
 * only names no later than the earliest such last name are certain to come
 * in order with nothing left out; of those, the page takes the first limit.
 * Sorts names by name (byte order, as ZRANGEBYLEX) and returns how many of
 * the first ones make the page. *more says whether a later page may hold
 * names: the cursor to go on from is then the page's last name (there is
 * one whenever *more is set).
 */
size_t list_merge_pick(struct list_merge_name *names, size_t n, size_t per_slot, size_t limit,
                       bool *more);

#endif
