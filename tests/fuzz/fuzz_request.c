/*
 * fuzz_request.c - libFuzzer harness over the pure request path: route matching
 * and strict name decoding, the Fence-Token check, JSON bodies and the field
 * rules of lease calls, and the configuration reader. The input is split at the
 * first two newlines into path, Fence-Token header and body. Nothing here may
 * crash, leak, or trip a sanitizer, whatever the bytes.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "http/router.h"
#include "lease/lease_request.h"
#include "lease/token.h"
#include "util/fgjson.h"

static enum handler_result stub(struct http_request *req, struct http_reply *reply)
{
    (void)req;
    (void)reply;
    return HANDLER_DONE;
}

/* The shapes of the public routes (API.md). */
static const struct route fuzz_routes[] = {
    {HTTP_GET, "/healthz", stub, "healthz"},
    {HTTP_POST, "/v1/locks/{name*}/acquire", stub, "lock_acquire"},
    {HTTP_POST, "/v1/locks/{name*}/renew", stub, "lock_renew"},
    {HTTP_GET, "/v1/locks/{name*}", stub, "lock_status"},
    {HTTP_POST, "/v1/semaphores/{name*}/acquire", stub, "sem_acquire"},
    {HTTP_POST, "/v1/pg/batch", stub, "pg_batch"},
    {HTTP_PATCH, "/v1/pg/{table}/{key}", stub, "pg_patch"},
    {HTTP_POST, "/v1/pg/{table}", stub, "pg_insert"},
    {HTTP_PUT, "/v1/redis/{key*}", stub, "redis_put"},
    {HTTP_GET, "/v1/audit/rejections", stub, "audit"},
    {HTTP_GET, NULL, NULL, NULL},
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
    if (token_verify(token, secret, sizeof secret - 1, &claims, &err) == 0) {
        char again[TOKEN_MAX_LEN];
        FG_ASSERT(token_sign(&claims, secret, sizeof secret - 1, again, sizeof again, &err) == 0);
        FG_ASSERT(strcmp(again, token) == 0); /* one token, one spelling */
    }
}

static void fuzz_body(const char *body, size_t len)
{
    struct fg_error err = {0};
    json_t *obj = fgjson_parse_object(body, len, &err);
    if (obj == NULL)
        return;
    struct config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.default_ttl_ms = 30000;
    cfg.default_max_hold_ms = 1800000;
    struct acquire_params acquire;
    struct renew_params renew;
    const char *token;
    if (acquire_params_parse(obj, &cfg, false, &acquire, &err) == 0)
        FG_ASSERT(acquire.ttl_ms <= acquire.max_hold_ms);
    if (acquire_params_parse(obj, &cfg, true, &acquire, &err) == 0)
        FG_ASSERT(acquire.limit >= 1);
    (void)renew_params_parse(obj, &renew, &err);
    (void)release_params_parse(obj, &token, &err);
    struct config file_cfg;
    memset(&file_cfg, 0, sizeof file_cfg);
    (void)config_apply_json(&file_cfg, obj, &err);
    config_free(&file_cfg);
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
    if (header != NULL)
        fuzz_token(header);
    if (body != NULL)
        fuzz_body(body, size - (size_t)(body - text));
    free(text);
    return 0;
}
