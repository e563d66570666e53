/* SPDX-License-Identifier: Apache-2.0 */
/*
 * handlers_ui.c - serves the operator console's files from the table that
 * cmake/embed.cmake built from ui/, each with the content type of its
 * extension and the console's strict Content-Security-Policy (server.c). It
 * must not serve anything but those files, nor build pages from request data.
 * /v1/whoami answers who the caller's key is (the page's first call); with
 * auth off it answers that everything is allowed (scope "admin").
 */
#include "http/handlers_ui.h"

#include <string.h>

#include "auth/keyset.h"
#include "embedded.h"
#include "gateway.h"

#define UI_PAGE "index.html"

static const struct {
    const char *extension;
    const char *content_type;
} content_types[] = {
    {".html", "text/html; charset=utf-8"},
    {".js", "text/javascript; charset=utf-8"},
    {".css", "text/css; charset=utf-8"},
    {".svg", "image/svg+xml"},
};

/* The content type of file name, or NULL when the console serves no such kind. */
static const char *content_type_of(const char *name)
{
    const char *dot = strrchr(name, '.');
    for (size_t i = 0; dot != NULL && i < sizeof content_types / sizeof content_types[0]; i++)
        if (strcmp(dot, content_types[i].extension) == 0)
            return content_types[i].content_type;
    return NULL;
}

/* Answers the embedded file called name, or 404 (also while the console is off). */
static enum handler_result serve(const char *name, struct http_reply *reply)
{
    const char *type = content_type_of(name);
    for (const struct embedded_file *f = embedded_ui; gw.cfg->ui && type && f->name; f++) {
        if (strcmp(f->name, name) != 0)
            continue;
        char *text = strdup(f->source);
        FG_ASSERT(text != NULL);
        reply_text(reply, 200, type, text);
        reply->console = true;
        return HANDLER_DONE;
    }
    struct fg_error err = {0};
    fg_fail(&err, FG_ERR_NOT_FOUND, gw.cfg->ui ? "no such file in the console" : "no such route");
    reply_problem(reply, &err);
    return HANDLER_DONE;
}

enum handler_result handle_ui_page(struct http_request *req, struct http_reply *reply)
{
    (void)req;
    return serve(UI_PAGE, reply);
}

enum handler_result handle_ui_file(struct http_request *req, struct http_reply *reply)
{
    return serve(req->match.params[0], reply);
}

/* The caller's key when auth is required and the request presents a known one, else NULL. */
static const struct api_key *presented_key(const struct keyset *ks, struct http_request *req)
{
    const char *key;
    size_t len;
    struct fg_error err = {0};
    if (auth_bearer(http_request_header(req, "Authorization"), &key, &len, &err) != 0)
        return NULL;
    return keyset_find(ks, key, len);
}

enum handler_result handle_whoami(struct http_request *req, struct http_reply *reply)
{
    const struct keyset *ks = auth_current();
    if (ks == NULL || !ks->required) {
        reply_json(reply, 200,
                   json_pack("{s:s, s:n, s:[s]}", "auth", "off", "principal", "scopes", "admin"));
        return HANDLER_DONE;
    }
    const struct api_key *caller = presented_key(ks, req);
    json_t *scopes = json_array();
    for (size_t i = 0; caller != NULL && i < caller->nscopes; i++)
        json_array_append_new(scopes, json_string(caller->scopes[i]));
    reply_json(reply, 200,
               json_pack("{s:s, s:o, s:o}", "auth", "required", "principal",
                         caller ? json_string(caller->id) : json_null(), "scopes", scopes));
    return HANDLER_DONE;
}
