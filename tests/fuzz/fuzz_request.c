/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_request.c - libFuzzer harness over the pure request path: route matching
 * and strict name decoding, the Fence-Token check, JSON bodies and the field
 * rules of lease calls, the configuration reader, the bodies of fenced Postgres
 * writes and batches (and the SQL built for those accepted), and the audit
 * query, the header rules of strict requests (media type, Host, request id,
 * owners), the unknown-member check of bodies, fencectl's escaping of what it
 * prints, the reading of row keys into their canonical text, listing cursors,
 * the redaction of URLs, the decoding of queries, fgjson's own JSON reader and
 * writer against jansson's, and the reading of a lease script's reply. The
 * input is split at the first two newlines into path, a header value (the
 * Fence-Token, the audit query's arguments, a whole query, Content-Type, Host,
 * X-Request-Id, Fence-Owner, text for fencectl) and body. Nothing here may
 * crash, leak, or trip a sanitizer, whatever the bytes.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "auth/cursor.h"
#include "auth/token.h"
#include "config.h"
#include "ctl/ctl_table.h"
#include "http/query_args.h"
#include "http/router.h"
#include "http/strict.h"
#include "lease/lease_answer.h"
#include "lease/lease_request.h"
#include "store/audit/audit_filter.h"
#include "store/fenced/fenced_op.h"
#include "util/fgjson.h"
#include "util/names.h"
#include "util/redact.h"

static enum handler_result stub(struct http_request *req, struct http_reply *reply)
{
    (void)req;
    (void)reply;
    return HANDLER_DONE;
}

/* The shapes of the public routes (docs/api.md). */
static const struct route fuzz_routes[] = {
    {HTTP_GET, "/healthz", stub, "healthz", SCOPE_OPEN, NULL, NULL},
    {HTTP_POST, "/v1/locks/{name*}/acquire", stub, "lock_acquire", SCOPE_OPEN, NULL, NULL},
    {HTTP_POST, "/v1/locks/{name*}/renew", stub, "lock_renew", SCOPE_OPEN, NULL, NULL},
    {HTTP_GET, "/v1/locks/{name*}", stub, "lock_status", SCOPE_OPEN, NULL, NULL},
    {HTTP_POST, "/v1/semaphores/{name*}/acquire", stub, "sem_acquire", SCOPE_OPEN, NULL, NULL},
    {HTTP_POST, "/v1/pg/batch", stub, "pg_batch", SCOPE_OPEN, NULL, NULL},
    {HTTP_PATCH, "/v1/pg/{table}/{key}", stub, "pg_patch", SCOPE_OPEN, NULL, NULL},
    {HTTP_POST, "/v1/pg/{table}", stub, "pg_insert", SCOPE_OPEN, NULL, NULL},
    {HTTP_PUT, "/v1/redis/{key*}", stub, "redis_put", SCOPE_OPEN, NULL, NULL},
    {HTTP_GET, "/v1/audit/rejections", stub, "audit", SCOPE_OPEN, NULL, NULL},
    {HTTP_GET, NULL, NULL, NULL, SCOPE_OPEN, NULL, NULL},
};

static const unsigned char secret[] = "fuzzing-secret-0123456789";

static void fuzz_path(const char *path)
{
    static const enum http_method methods[] = {HTTP_GET,   HTTP_POST,   HTTP_PUT,
                                               HTTP_PATCH, HTTP_DELETE, HTTP_OTHER};
    for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++) {
        struct route_match match;
        struct fg_error err = {0};
        if (router_match(fuzz_routes, methods[i], path, &match, &err) == 0)
            FG_ASSERT(match.route != NULL);
        else
            FG_ASSERT(err.code != FG_OK);
    }
}

static void fuzz_token(const char *token)
{
    struct token_claims claims;
    struct fg_error err = {0};
    struct token_keyring ring = {0};
    FG_ASSERT(token_keyring_add(&ring, "k1", (const char *)secret, &err) == 0);
    if (token_verify(token, &ring, &claims, &err) == 0) {
        char again[TOKEN_MAX_LEN];
        FG_ASSERT(token_sign(&claims, &ring, again, sizeof again, &err) == 0);
        FG_ASSERT(strcmp(again, token) == 0); /* one token, one spelling */
    }
}

/* Two writable tables as start-up would read them from the catalog: the
 * example invoices (with a jsonb column) and one whose names need quoting. */
static char *invoice_columns[] = {"customer", "amount_cents", "status", "note", "meta"};
static char *odd_columns[] = {"we\"ird col", "n"};
static const struct table_config table_configs[] = {
    {"invoices", "id", invoice_columns, 5},
    {"Odd \"table\"", "k\"ey", odd_columns, 2},
};
static char *invoice_types[] = {"text", "bigint", "text", "text", "jsonb"};
static bool invoice_json[] = {false, false, false, false, true};
static enum row_json_kind invoice_kinds[] = {ROW_JSON_STRING, ROW_JSON_STRING, ROW_JSON_NUMBER,
                                             ROW_JSON_STRING, ROW_JSON_STRING, ROW_JSON_JSON};
static char *odd_types[] = {"text", "integer"};
static bool odd_json[] = {false, false};
static enum row_json_kind odd_kinds[] = {ROW_JSON_NUMBER, ROW_JSON_OTHER, ROW_JSON_NUMBER};
static const struct table_schema schemas[] = {
    {.cfg = &table_configs[0],
     .key_type = "text",
     .column_types = invoice_types,
     .column_json = invoice_json,
     .row_kinds = invoice_kinds,
     .key_shape = {KEY_FORM_TEXT, false, 0}},
    {.cfg = &table_configs[1],
     .key_type = "bigint",
     .column_types = odd_types,
     .column_json = odd_json,
     .row_kinds = odd_kinds,
     .key_shape = {KEY_FORM_INT64, false, 0}},
};
#define NSCHEMAS (sizeof schemas / sizeof schemas[0])

/* Builds the statement of an accepted operation, as the store would. */
static void fuzz_op_sql(const struct fenced_op *op)
{
    FG_ASSERT(op->table < NSCHEMAS && op->key != NULL);
    FG_ASSERT(op->ncolumns == schemas[op->table].cfg->ncolumns);
    int written = 0, nparams = 0;
    for (size_t i = 0; i < op->ncolumns; i++)
        written += op->written[i];
    for (int want_row = 0; want_row < 4; want_row++) {
        enum fenced_form form = want_row < 2 ? FENCED_FORM_HELD : FENCED_FORM_CLAIM;
        char *sql = fenced_sql_write(&schemas[op->table], op->kind, op->written, form,
                                     want_row % 2 == 1, &nparams);
        FG_ASSERT(sql != NULL);
        int common = fenced_sql_takes_prefix(&schemas[op->table], op->kind, want_row % 2 == 1)
                         ? FENCED_PARAM_COUNT
                         : FENCED_PARAM_PREFIX;
        FG_ASSERT(op->kind == FENCED_DELETE || nparams == common + written);
        free(sql);
    }
}

static void fuzz_pg_body(const json_t *obj)
{
    for (int kind = 0; kind < FENCED_KIND_COUNT; kind++) {
        for (size_t table = 0; table < NSCHEMAS; table++) {
            struct fenced_op op;
            struct fg_error err = {0};
            const char *path_key = kind == FENCED_POST ? NULL : "42";
            if (fenced_op_parse(schemas, table, (enum fenced_kind)kind, path_key, obj, &op, &err) ==
                0)
                fuzz_op_sql(&op);
            else
                FG_ASSERT(err.code != FG_OK);
            fenced_op_free(&op);
        }
    }
    struct fenced_batch batch;
    struct fg_error err = {0};
    static const char *const batch_members[] = {"ops", NULL};
    size_t nops = json_array_size(json_object_get(obj, "ops"));
    if (nops == 0 || nops > FENCED_BATCH_MAX_OPS || fgjson_only(obj, batch_members, "", &err) != 0)
        return; /* refused by the batch route's check before its handler */
    if (fenced_batch_parse(schemas, NSCHEMAS, obj, &batch, &err) == 0) {
        FG_ASSERT(batch.nops >= 1 && batch.nops <= FENCED_BATCH_MAX_OPS);
        for (size_t i = 0; i < batch.nops; i++)
            fuzz_op_sql(&batch.ops[i]);
    } else {
        FG_ASSERT(err.code != FG_OK);
    }
    fenced_batch_free(&batch);
}

/* The audit query: the same text as every argument, and as one at a time;
 * since_ms and limit as read once the route's bounds let them through. */
static void fuzz_audit(const char *arg)
{
    static const struct member_bound limit = {"limit", CHECK_QUERY_INTEGER, 1,     AUDIT_LIMIT_MAX,
                                              false,   "limit refused",     false, NULL,
                                              NULL};
    static const struct member_bound since = {
        "since_ms", CHECK_QUERY_INTEGER, 0, AUDIT_TIME_MAX_MS, false, "since refused", false, NULL,
        NULL};
    struct audit_filter f;
    struct fg_error err = {0};
    bool limit_ok = strict_query_check(&limit, arg, &err) == 0;
    bool since_ok = strict_query_check(&since, arg, &err) == 0;
    if (audit_filter_parse(arg, arg, NULL, arg, arg, arg, &f, &err) == 0)
        FG_ASSERT(f.after_id >= 0);
    if (audit_filter_parse(NULL, NULL, arg, NULL, NULL, NULL, &f, &err) == 0)
        FG_ASSERT(strcmp(f.lease_kind, "lock") == 0 || strcmp(f.lease_kind, "semaphore") == 0);
    if (limit_ok && audit_filter_parse(NULL, NULL, NULL, NULL, arg, NULL, &f, &err) == 0)
        FG_ASSERT(f.limit >= 1 && f.limit <= AUDIT_LIMIT_MAX);
    if (since_ok && audit_filter_parse(NULL, NULL, NULL, arg, NULL, arg, &f, &err) == 0)
        FG_ASSERT(f.since_ms >= 0 && f.after_id >= 0);
}

/* True if text (NUL-terminated) is UTF-8. */
static bool is_utf8(const char *text)
{
    size_t len = strlen(text);
    for (size_t at = 0, n; at < len; at += n)
        if ((n = utf8_sequence_len((const unsigned char *)text + at, len - at)) == 0)
            return false;
    return true;
}

/* A query as the server reads it: split as the HTTP library splits one (at
 * each '&', then at the first '='), each argument decoded into a table sized
 * as the server sizes it. What decodes is UTF-8 text, and a query the check
 * lets through names each listed parameter once, found as its first. */
static void fuzz_query(const char *text)
{
    static const char *const listed[] = {"watch", "fence", "wait_ms", "waiters", NULL};
    char *copy = strdup(text);
    FG_ASSERT(copy != NULL);
    size_t n = 1;
    for (const char *p = copy; (p = strchr(p, '&')) != NULL; p++)
        n++;
    struct query_args *q = query_args_new(n, strlen(copy) + n);
    struct fg_error err = {0};
    bool decoded = true;
    for (char *arg = copy, *next; decoded && arg != NULL && *arg != '\0'; arg = next) {
        next = strchr(arg, '&');
        if (next != NULL)
            *next++ = '\0';
        char *value = strchr(arg, '=');
        if (value != NULL)
            *value++ = '\0';
        decoded = query_args_add(q, arg, value, &err) == 0;
    }
    FG_ASSERT(decoded || err.code == FG_ERR_INVALID_FIELD);
    for (size_t i = 0; i < q->n; i++) {
        FG_ASSERT(is_utf8(q->args[i].name));
        FG_ASSERT(q->args[i].value == NULL || is_utf8(q->args[i].value));
    }
    if (decoded && query_args_check(q, listed, &err) == 0)
        for (size_t i = 0; i < q->n; i++)
            FG_ASSERT(query_args_find(q, q->args[i].name) == &q->args[i]);
    query_args_free(q);
    free(copy);
}

/* A header value through every strict-request rule, and through fencectl's
 * escaping, whose output must hold no control character at all. */
static void fuzz_header(const char *value)
{
    char *allowed[] = {"127.0.0.1:8480", "localhost"};
    (void)strict_content_type_is_json(value);
    (void)strict_host_allowed(value, allowed, 2);
    if (strict_request_id_valid(value))
        FG_ASSERT(strlen(value) <= X_REQUEST_ID_MAX_LEN && strpbrk(value, " \r\n") == NULL);
    if (name_is_valid_owner(value, strlen(value)))
        FG_ASSERT(strlen(value) <= OWNER_NAME_MAX_LEN && strpbrk(value, "\r\n\t\x1b") == NULL);
    char *shown = ctl_escape(value);
    for (const unsigned char *p = (const unsigned char *)shown; *p != '\0'; p++)
        FG_ASSERT(*p >= 0x20 && *p != 0x7F && !(p[0] == 0xC2 && p[1] >= 0x80 && p[1] < 0xA0));
    free(shown);
}

/* A row key through every form the gateway reads: an accepted key's canonical
 * text reads as itself (one spelling per value), orders equal to itself, and
 * has an identity no longer than it. A listing cursor made of the same bytes
 * never opens, and the redaction of the text as a URL always ends. */
static void fuzz_key(const char *value)
{
    static const struct key_shape shapes[] = {
        {KEY_FORM_INT16, false, 0},   {KEY_FORM_INT32, false, 0},  {KEY_FORM_INT64, false, 0},
        {KEY_FORM_NUMERIC, false, 0}, {KEY_FORM_NUMERIC, true, 2}, {KEY_FORM_NUMERIC, true, -2},
        {KEY_FORM_TEXT, false, 0},    {KEY_FORM_BPCHAR, false, 0}, {KEY_FORM_UUID, false, 0},
        {KEY_FORM_DATE, false, 0},    {KEY_FORM_OTHER, false, 0},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        char *canonical = NULL, *again = NULL;
        struct fg_error err = {0};
        if (key_canonical(&shapes[i], value, "key", &canonical, &err) != 0) {
            FG_ASSERT(canonical == NULL && err.code == FG_ERR_INVALID_FIELD);
            continue;
        }
        FG_ASSERT(key_canonical(&shapes[i], canonical, "key", &again, &err) == 0);
        FG_ASSERT(strcmp(canonical, again) == 0);
        FG_ASSERT(key_compare(&shapes[i], canonical, again) == 0);
        char identity[SEGMENT_MAX_LEN * 2 + 8];
        if (strlen(canonical) < sizeof identity) {
            key_row_identity(&shapes[i], canonical, identity, sizeof identity);
            FG_ASSERT(strlen(identity) <= strlen(canonical));
        }
        free(canonical);
        free(again);
    }
    struct token_keyring ring = {0};
    struct fg_error err = {0};
    char name[NAME_MAX_LEN + 1], shown[64];
    FG_ASSERT(token_keyring_add(&ring, "k", (const char *)secret, &err) == 0);
    FG_ASSERT(cursor_open(value, "lock:", &ring, name, &err) != 0);
    redact_url(value, shown, sizeof shown);
    FG_ASSERT(strlen(shown) < sizeof shown);
}

/* True if value is or holds a real. */
static bool holds_real(const json_t *value)
{
    const char *key;
    const json_t *item;
    size_t i;
    if (json_is_real(value))
        return true;
    json_object_foreach((json_t *)value, key, item)
    {
        if (holds_real(item))
            return true;
    }
    json_array_foreach(value, i, item)
    {
        if (holds_real(item))
            return true;
    }
    return false;
}

/* fgjson's own reader and writer against jansson's, whatever the bytes: the
 * flat reader reads only texts that jansson reads, to the same value, and the
 * writer prints every value that jansson reads so that jansson reads it back
 * as that value, as json_dumps prints it but for reals (their shortest text). */
static void fuzz_json_twins(const char *body, size_t len)
{
    json_error_t jerr;
    json_t *flat = fgjson_parse_flat(body, len);
    json_t *strict = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr);
    FG_ASSERT(flat == NULL || (strict != NULL && json_equal(flat, strict)));
    json_decref(flat);
    json_decref(strict);
    json_t *any = json_loadb(body, len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &jerr);
    if (any == NULL)
        return;
    char small[64];
    struct fgjson_out out;
    fgjson_out_init(&out, small, sizeof small);
    fgjson_out_value(&out, any);
    json_t *back = json_loadb(out.buf, out.len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &jerr);
    FG_ASSERT(back != NULL && json_equal(back, any));
    json_decref(back);
    char *want = json_dumps(any, JSON_COMPACT | JSON_ENCODE_ANY);
    FG_ASSERT(want != NULL && (holds_real(any) ||
                               (strlen(want) == out.len && memcmp(want, out.buf, out.len) == 0)));
    free(want);
    fgjson_out_free(&out);
    json_decref(any);
}

/* The body as a lease script's reply: read or refused, and what is read
 * stays in its bounds. */
static void fuzz_lease_reply(const char *body, size_t len)
{
    struct lease_result res;
    enum lease_retry retry;
    struct fg_error err;
    if (lease_answer_read("fuzz.lua", body, len, &res, &retry, &err) != 0 ||
        retry != LEASE_RETRY_NONE)
        return;
    if (res.nhandoff > LEASE_MAX_HANDOFF || strlen(res.lease_id) > LEASE_ID_LEN ||
        strlen(res.left) > LEASE_LEAVE_MAX)
        abort();
    for (size_t i = 0; i < res.nhandoff; i++)
        if (strlen(res.handoff[i].lease_id) != LEASE_ID_LEN)
            abort();
}

static void fuzz_body(const char *body, size_t len)
{
    fuzz_lease_reply(body, len);
    fuzz_json_twins(body, len);
    struct fg_error err = {0};
    char too_big[FGJSON_MEMBER_MAX];
    json_t *obj = fgjson_parse_object(body, len, too_big, &err);
    if (obj == NULL)
        return;
    struct config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.default_ttl_ms = 30000;
    cfg.default_max_hold_ms = 1800000;
    struct acquire_params acquire;
    struct renew_params renew;
    const char *token;
    static const char *const acquire_fields[] = {"ttl_ms",     "wait_ms",     "owner",
                                                 "request_id", "max_hold_ms", NULL};
    if (fgjson_only(obj, acquire_fields, "", &err) != 0)
        FG_ASSERT(err.code == FG_ERR_INVALID_FIELD && strlen(err.msg) < sizeof err.msg);
    if (acquire_params_parse(obj, &cfg, false, &acquire, &err) == 0)
        FG_ASSERT(acquire.ttl_ms <= acquire.max_hold_ms);
    if (acquire_params_parse(obj, &cfg, true, &acquire, &err) == 0)
        FG_ASSERT(acquire.owner != NULL && acquire.request_id != NULL);
    renew_params_read(obj, &renew);
    token = lease_request_token(obj);
    FG_ASSERT(renew.token != NULL && token != NULL);
    struct config file_cfg;
    memset(&file_cfg, 0, sizeof file_cfg);
    (void)config_apply_json(&file_cfg, obj, &err);
    config_free(&file_cfg);
    fuzz_pg_body(obj);
    json_decref(obj);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (text == NULL)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    char *header = memchr(text, '\n', size);
    char *body = NULL;
    if (header != NULL) {
        *header++ = '\0';
        body = memchr(header, '\n', size - (size_t)(header - text));
        if (body != NULL)
            *body++ = '\0';
    }
    fuzz_path(text);
    if (header != NULL) {
        fuzz_token(header);
        fuzz_audit(header);
        fuzz_query(header);
        fuzz_header(header);
        fuzz_key(header);
    }
    if (body != NULL)
        fuzz_body(body, size - (size_t)(body - text));
    free(text);
    return 0;
}
