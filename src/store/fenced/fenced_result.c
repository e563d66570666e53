/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fenced_result.c - releasing a fenced write's result. It must not know
 * which store filled it.
 */
#include "store/fenced/fenced_result.h"

#include <stdlib.h>
#include <string.h>

void fenced_result_free(struct fenced_result *res)
{
    free(res->resource);
    free(res->after);
    json_decref(res->stale);
    json_decref(res->resources);
    memset(res, 0, sizeof *res);
}
