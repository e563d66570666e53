/* SPDX-License-Identifier: Apache-2.0 */
/*
 * list_merge.c - the merge of a listing page read from every slot's index
 * (list_merge.h): the names sorted, cut where a slot may hold names not read,
 * then at the page's limit. It must not read Redis or build items.
 */
#include "lease/list_merge.h"

#include <stdlib.h>
#include <string.h>

static int by_slot_then_name(const void *a, const void *b)
{
    const struct list_merge_name *x = a, *y = b;
    if (x->slot != y->slot)
        return x->slot < y->slot ? -1 : 1;
    return strcmp(x->name, y->name);
}

static int by_name(const void *a, const void *b)
{
    const struct list_merge_name *x = a, *y = b;
    return strcmp(x->name, y->name);
}

size_t list_merge_pick(struct list_merge_name *names, size_t n, size_t per_slot, size_t limit,
                       bool *more)
{
    /* The earliest last name of a slot that gave all it was asked for. */
    const char *frontier = NULL;
    *more = false;
    if (n == 0)
        return 0;
    qsort(names, n, sizeof *names, by_slot_then_name);
    for (size_t i = 0, run = 1; i < n; i++, run++) {
        bool ends = i + 1 == n || names[i + 1].slot != names[i].slot;
        if (ends && run >= per_slot && (frontier == NULL || strcmp(names[i].name, frontier) < 0))
            frontier = names[i].name;
        if (ends)
            run = 0;
    }
    qsort(names, n, sizeof *names, by_name);
    size_t certain = n;
    if (frontier != NULL)
        for (certain = 0; certain < n && strcmp(names[certain].name, frontier) <= 0;)
            certain++;
    *more = frontier != NULL || certain > limit;
    return certain < limit ? certain : limit;
}
