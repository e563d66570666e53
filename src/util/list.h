/* SPDX-License-Identifier: Apache-2.0 */
/*
 * list.h - an intrusive doubly linked list: the element embeds a struct
 * list_link, the list is a head link that points to itself when empty
 * (circular, so unlinking needs neither the head nor a branch). Owns no
 * memory. LIST_ENTRY finds the element of a link.
 */
#ifndef FG_LIST_H
#define FG_LIST_H

#include <stdbool.h>
#include <stddef.h>

struct list_link {
    struct list_link *next, *prev; /* neighbours (the head's: first and last element) */
};

/* The element of type `type` whose member `member` is link. */
#define LIST_ENTRY(link, type, member) ((type *)(void *)((char *)(link)-offsetof(type, member)))

/* Makes head an empty list (or link an unlinked element). */
static inline void list_init(struct list_link *head)
{
    head->next = head->prev = head;
}

static inline bool list_empty(const struct list_link *head)
{
    return head->next == head;
}

/* Puts link first on head's list. */
static inline void list_push(struct list_link *head, struct list_link *link)
{
    link->next = head->next;
    link->prev = head;
    head->next->prev = link;
    head->next = link;
}

/* Takes link off its list (it must be on one) and leaves it unlinked (list_init). */
static inline void list_unlink(struct list_link *link)
{
    link->prev->next = link->next;
    link->next->prev = link->prev;
    list_init(link);
}

#endif
