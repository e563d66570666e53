/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fenced_refusal.c - a refused fenced write's audit record, built from its
 * writer and its result and inserted through audit.c.
 */
#include "store/fenced/fenced_refusal.h"

#include <jansson.h>
#include <stddef.h>

#include "store/audit/audit.h"

int fenced_refusal_audit(struct pg_conn *conn, const struct fenced_writer *who,
                         const struct fenced_result *refused, const char *method,
                         struct fg_error *err)
{
    const char *reason = fenced_outcome_reason(refused->outcome);
    FG_ASSERT(reason != NULL);
    struct audit_record rec = {
        .resource = refused->resource,
        .lock_name = who->claims->name,
        .lease_kind = token_kind_noun(who->claims->kind),
        .presented_fence = who->claims->fence,
        .current_fence = refused->fence,
        .owner = who->owner,
        .client_addr = who->client_addr,
        .method = method,
        .reason = reason,
        .principal = who->principal,
        .resources = refused->resources,
        .trace_id = who->trace_id,
    };
    return audit_insert(conn, &rec, err);
}
