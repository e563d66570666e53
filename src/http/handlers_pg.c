/* SPDX-License-Identifier: Apache-2.0 */
/*
 * handlers_pg.c - the /v1/pg endpoints. Each write finds its table, takes its
 * writer from the headers (fenced_write.c, as the Redis writes do), reads the
 * body into a fenced_op and hands it to fenced_pg; the answer is the row after
 * the write (the key and the listed columns, or to a key that may not read the
 * table the key and the columns it wrote; 204 without it when the client
 * prefers return=minimal), or the refusal fenced_write.c answers for both
 * front ends. Rows go into answers as the JSON text the store made of them,
 * never read again, so their numbers keep every digit. It never builds SQL
 * and never decides a fence itself.
 */
#include "http/handlers_pg.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth/keyset.h"
#include "gateway.h"
#include "http/fenced_write.h"
#include "store/fenced/fenced_pg.h"
#include "util/utf8.h"

/* Room for the answer of a read with a common row (a larger one moves to the heap). */
#define READ_BUF 4096

static enum handler_result fail(struct http_reply *reply, const struct fg_error *err)
{
    reply_problem(reply, err);
    return HANDLER_DONE;
}

/* The writable table named in the path, or -1 with FG_ERR_NOT_FOUND. */
static long path_table(const struct http_request *req, struct fg_error *err)
{
    size_t n;
    const struct table_schema *schemas = fenced_pg_schemas(&n);
    long table = fenced_table_find(schemas, n, req->match.params[0]);
    if (table < 0)
        fg_fail(err, FG_ERR_NOT_FOUND, "no writable table of that name");
    return table;
}

/* True if the caller of req may read table (pg:<table>:read): any caller while auth is off. */
static bool may_read(const struct http_request *req, const char *table)
{
    if (req->principal == NULL)
        return true;
    char needed[ROUTE_SCOPE_MAX];
    snprintf(needed, sizeof needed, "pg:%s:read", table);
    return api_key_permits(req->principal, needed);
}

/* Readies op, parsed, for its write: refuses it unless claims are of the
 * lease its table binds its rows to (the lease named for the row's identity:
 * its key's canonical text, the scale of a numeric dropped, the text that
 * names the row in its resource), and notes whether the caller may read its
 * table, which decides how much of the row the answer shows. */
static int op_ready(const struct http_request *req, const struct table_schema *schema,
                    struct fenced_op *op, const struct token_claims *claims, struct fg_error *err)
{
    char identity[SEGMENT_MAX_LEN + 1], resource[SEGMENT_MAX_LEN * 2];
    op->may_read = may_read(req, schema->cfg->name);
    key_row_identity(&schema->key_shape, op->key, identity, sizeof identity);
    snprintf(resource, sizeof resource, "pg:%s/%s", schema->cfg->name, identity);
    return fenced_write_bound(METRIC_BACKEND_PG, &schema->cfg->guard, identity, claims, resource,
                              err);
}

/* Runs a single write of kind; path_key is NULL for POST (key inside the row). */
static enum handler_result single_write(struct http_request *req, struct http_reply *reply,
                                        enum fenced_kind kind, const char *path_key)
{
    struct fg_error err = {0};
    long table = path_table(req, &err);
    if (table < 0)
        return fail(reply, &err);
    size_t ntables;
    const struct table_schema *schemas = fenced_pg_schemas(&ntables);
    const char *key = path_key ? path_key : "";
    http_request_log_subject(req, "pg:%.*s/%.*s", utf8_cut_len(req->match.params[0], 120),
                             req->match.params[0], utf8_cut_len(key, 120), key);
    struct token_claims claims;
    struct fenced_writer who;
    if (fenced_write_writer(req, METRIC_BACKEND_PG, &claims, &who, &err) != 0)
        return fail(reply, &err);
    json_t *body = kind == FENCED_DELETE ? NULL : http_request_json(req, &err);
    if (kind != FENCED_DELETE && body == NULL)
        return fail(reply, &err);
    struct fenced_op op;
    struct fenced_result res;
    bool want_row = fenced_write_wants_row(req);
    if (fenced_op_parse(schemas, (size_t)table, kind, path_key, body, &op, &err) != 0 ||
        op_ready(req, &schemas[table], &op, &claims, &err) != 0 ||
        fenced_pg_write(&op, &who, want_row, &res, &err) != 0) {
        fenced_op_free(&op);
        return fail(reply, &err);
    }
    fenced_op_free(&op);
    if (res.outcome != FENCED_EXPIRED)
        http_request_log_subject(req, "%s", res.resource);
    if (res.outcome != FENCED_APPLIED)
        fenced_write_refused(reply, METRIC_BACKEND_PG, &who, &res, fenced_kind_method(kind));
    else if (!want_row)
        fenced_write_applied_minimal(reply, METRIC_BACKEND_PG);
    else
        fenced_write_applied(reply, METRIC_BACKEND_PG, kind == FENCED_POST ? 201 : 200,
                             res.resource, res.fence, "row", res.after);
    fenced_result_free(&res);
    return HANDLER_DONE;
}

enum handler_result handle_pg_patch(struct http_request *req, struct http_reply *reply)
{
    return single_write(req, reply, FENCED_PATCH, req->match.params[1]);
}

enum handler_result handle_pg_put(struct http_request *req, struct http_reply *reply)
{
    return single_write(req, reply, FENCED_PUT, req->match.params[1]);
}

enum handler_result handle_pg_post(struct http_request *req, struct http_reply *reply)
{
    return single_write(req, reply, FENCED_POST, NULL);
}

enum handler_result handle_pg_delete(struct http_request *req, struct http_reply *reply)
{
    return single_write(req, reply, FENCED_DELETE, req->match.params[1]);
}

enum handler_result handle_pg_get(struct http_request *req, struct http_reply *reply)
{
    struct fg_error err = {0};
    long table = path_table(req, &err);
    if (table < 0)
        return fail(reply, &err);
    http_request_log_subject(req, "pg:%.*s/%.*s", utf8_cut_len(req->match.params[0], 120),
                             req->match.params[0], utf8_cut_len(req->match.params[1], 120),
                             req->match.params[1]);
    struct fenced_result res;
    if (fenced_pg_read((size_t)table, req->match.params[1], &res, &err) != 0)
        return fail(reply, &err);
    if (res.after == NULL) {
        json_t *fence = res.fence > 0 ? json_integer(res.fence) : json_null();
        fg_fail(&err, FG_ERR_NOT_FOUND, "no row with that key");
        reply_problem_extra(
            reply, &err,
            json_pack("{s:o, s:o}", "resource", fgjson_string(res.resource), "fence", fence));
    } else {
        char buf[READ_BUF];
        struct fgjson_out out;
        fgjson_out_init(&out, buf, sizeof buf);
        fgjson_out_open(&out);
        fgjson_out_json(&out, "row", res.after);
        if (res.fence > 0)
            fgjson_out_int(&out, "fence", res.fence);
        else
            fgjson_out_json(&out, "fence", NULL);
        fgjson_out_str(&out, "resource", res.resource);
        reply_json_out(reply, 200, &out);
    }
    fenced_result_free(&res);
    return HANDLER_DONE;
}

/* The write scope of every table a batch names (its route needs only a key),
 * read from the body before it is parsed: the parse answers which tables exist
 * (404) and which columns they list (400), which a key that may not write a
 * table must not learn of it. refused (ROUTE_SCOPE_MAX bytes): the scope of
 * the first op whose scope the key lacks, "" for none. */
static int batch_permitted(const struct http_request *req, const json_t *body, char *refused,
                           struct fg_error *err)
{
    size_t i;
    const json_t *op;
    refused[0] = '\0';
    json_array_foreach(json_object_get(body, "ops"), i, op)
    {
        const char *table = json_string_value(json_object_get(op, "table"));
        char needed[ROUTE_SCOPE_MAX];
        if (table == NULL)
            continue; /* the parse refuses it, naming no table */
        if (snprintf(needed, sizeof needed, "pg:%s:write", table) >= (int)sizeof needed)
            continue; /* no table has a name that long: the parse answers 404 */
        if (http_request_permit(req, needed, err) != 0) {
            memcpy(refused, needed, strlen(needed) + 1);
            return -1;
        }
    }
    return 0;
}

/* Readies every op of a batch (op_ready): each must be of a row its token's
 * lease guards (if bound), and shows as much of its row as the caller may
 * read of its table. */
static int batch_ready(const struct http_request *req, const struct table_schema *schemas,
                       struct fenced_batch *batch, const struct token_claims *claims,
                       struct fg_error *err)
{
    for (size_t i = 0; i < batch->nops; i++) {
        struct fg_error why = {0};
        if (op_ready(req, &schemas[batch->ops[i].table], &batch->ops[i], claims, &why) != 0)
            return fg_fail(err, why.code, "ops[%zu]: %s", i, why.msg);
    }
    return 0;
}

enum handler_result handle_pg_batch(struct http_request *req, struct http_reply *reply)
{
    struct fg_error err = {0};
    http_request_log_subject(req, "pg:batch");
    json_t *body = http_request_json(req, &err);
    if (body == NULL)
        return fail(reply, &err);
    size_t ntables;
    const struct table_schema *schemas = fenced_pg_schemas(&ntables);
    struct token_claims claims;
    struct fenced_writer who;
    struct fenced_batch batch = {0};
    struct fenced_result res;
    bool want_row = fenced_write_wants_row(req);
    char refused[ROUTE_SCOPE_MAX];
    if (batch_permitted(req, body, refused, &err) != 0) {
        reply_problem_scope(reply, &err, refused);
        return HANDLER_DONE;
    }
    if (fenced_batch_parse(schemas, ntables, body, &batch, &err) != 0 ||
        fenced_write_writer(req, METRIC_BACKEND_PG, &claims, &who, &err) != 0 ||
        batch_ready(req, schemas, &batch, &claims, &err) != 0 ||
        fenced_pg_batch(&batch, &who, want_row, &res, &err) != 0) {
        fenced_batch_free(&batch);
        return fail(reply, &err);
    }
    fenced_batch_free(&batch);
    if (res.outcome != FENCED_APPLIED)
        fenced_write_refused(reply, METRIC_BACKEND_PG, &who, &res, "POST");
    else if (!want_row)
        fenced_write_applied_minimal(reply, METRIC_BACKEND_PG);
    else
        fenced_write_applied(reply, METRIC_BACKEND_PG, 200, NULL, res.fence, "results", res.after);
    fenced_result_free(&res);
    return HANDLER_DONE;
}
