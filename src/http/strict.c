/* SPDX-License-Identifier: Apache-2.0 */
/*
 * strict.c - header rules of strict requests: what keeps a web page that a
 * user happens to visit from driving a gateway on their machine (a JSON
 * Content-Type needs a CORS preflight; a foreign Host means DNS rebinding),
 * and what keeps a proxy in front from reading one request where the gateway
 * reads two (ambiguous body framing). It must not do I/O or build replies.
 */
#include "http/strict.h"

#include <string.h>
#include <strings.h>

bool strict_content_type_is_json(const char *value)
{
    static const char json[] = "application/json";
    if (value == NULL || strncasecmp(value, json, sizeof json - 1) != 0)
        return false;
    const char *rest = value + sizeof json - 1;
    while (*rest == ' ' || *rest == '\t')
        rest++;
    return *rest == '\0' || *rest == ';';
}

bool strict_host_allowed(const char *host, char *const *allowed, size_t n)
{
    if (host == NULL)
        return true;
    for (size_t i = 0; i < n; i++)
        if (strcmp(allowed[i], "*") == 0 || strcasecmp(allowed[i], host) == 0)
            return true;
    return false;
}

bool strict_request_id_valid(const char *id)
{
    size_t len = strlen(id);
    if (len == 0 || len > X_REQUEST_ID_MAX_LEN)
        return false;
    for (const char *p = id; *p != '\0'; p++) {
        bool alnum =
            (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9');
        if (!alnum && strchr("-_.:/+=@", *p) == NULL)
            return false;
    }
    return true;
}

bool strict_framing_ok(int content_lengths, int transfer_encodings)
{
    return content_lengths <= 1 && transfer_encodings <= 1 &&
           (content_lengths == 0 || transfer_encodings == 0);
}

bool strict_host_single(int hosts)
{
    return hosts <= 1;
}
