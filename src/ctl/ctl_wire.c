/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ctl_wire.c - HTTP/1.1 framing for fencectl. One request per connection
 * (Connection: close), so a response ends where the stream ends; the body is
 * still checked against Content-Length or decoded from chunks, so that a reply
 * cut short is an error and not a truncated JSON text.
 */
#include "ctl/ctl_wire.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define NO_ANSWER FG_ERR_BACKEND_UNAVAILABLE

int ctl_escape_append(char *out, size_t cap, const char *text, const char *also_plain)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t n = strlen(out);
    for (const unsigned char *p = (const unsigned char *)text; *p != '\0'; p++) {
        bool plain = (*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
                     (*p >= '0' && *p <= '9') || strchr("-._~", *p) != NULL ||
                     strchr(also_plain, *p) != NULL;
        if (n + (plain ? 1 : 3) >= cap)
            return -1;
        if (plain) {
            out[n++] = (char)*p;
        } else {
            out[n++] = '%';
            out[n++] = hex[*p >> 4];
            out[n++] = hex[*p & 15];
        }
    }
    out[n] = '\0';
    return 0;
}

char *ctl_request_format(const struct ctl_url *gateway, const char *method, const char *path,
                         const char *body, size_t *len)
{
    bool v6 = strchr(gateway->host, ':') != NULL;
    size_t body_len = body ? strlen(body) : 0;
    const char *fmt = "%s %s%s HTTP/1.1\r\n"
                      "Host: %s%s%s:%d\r\n"
                      "User-Agent: fencectl/" FG_VERSION "\r\n"
                      "Accept: application/json\r\n"
                      "Connection: close\r\n"
                      "%s%s%s%s"
                      "Content-Length: %zu\r\n"
                      "\r\n";
    const char *ctype = body ? "Content-Type: application/json\r\n" : "";
    const char *bearer = gateway->key ? "Authorization: Bearer " : "";
    const char *key = gateway->key ? gateway->key : "", *eol = gateway->key ? "\r\n" : "";
    int head = snprintf(NULL, 0, fmt, method, gateway->base, path, v6 ? "[" : "", gateway->host,
                        v6 ? "]" : "", gateway->port, ctype, bearer, key, eol, body_len);
    FG_ASSERT(head > 0);
    char *text = malloc((size_t)head + body_len + 1);
    FG_ASSERT(text != NULL);
    snprintf(text, (size_t)head + 1, fmt, method, gateway->base, path, v6 ? "[" : "", gateway->host,
             v6 ? "]" : "", gateway->port, ctype, bearer, key, eol, body_len);
    if (body_len > 0)
        memcpy(text + head, body, body_len);
    text[(size_t)head + body_len] = '\0';
    *len = (size_t)head + body_len;
    return text;
}

/* The value of header name in the header block [head, end), copied into out; false if absent. */
static bool header_value(const char *head, const char *end, const char *name, char *out, size_t cap)
{
    size_t name_len = strlen(name);
    for (const char *line = head; line < end;) {
        const char *eol = memchr(line, '\n', (size_t)(end - line));
        if (eol == NULL)
            eol = end;
        if ((size_t)(eol - line) > name_len && strncasecmp(line, name, name_len) == 0 &&
            line[name_len] == ':') {
            const char *v = line + name_len + 1;
            while (v < eol && (*v == ' ' || *v == '\t'))
                v++;
            const char *v_end = eol;
            while (v_end > v && (v_end[-1] == '\r' || v_end[-1] == ' ' || v_end[-1] == '\t'))
                v_end--;
            snprintf(out, cap, "%.*s", (int)(v_end - v), v);
            return true;
        }
        line = eol + 1;
    }
    return false;
}

/* Decodes a chunked body [p, end) into out->body. */
static int dechunk(const char *p, const char *end, struct ctl_response *out, struct fg_error *err)
{
    out->body = malloc((size_t)(end - p) + 1);
    FG_ASSERT(out->body != NULL);
    out->body_len = 0;
    for (;;) {
        size_t size = 0;
        const char *digit = p;
        for (; digit < end && strchr("0123456789abcdefABCDEF", *digit) != NULL && *digit != '\0';
             digit++)
            size = size * 16 + (size_t)(*digit <= '9' ? *digit - '0' : (*digit | 0x20) - 'a' + 10);
        const char *crlf = memchr(p, '\n', (size_t)(end - p));
        if (digit == p || digit - p > 8 || crlf == NULL)
            return fg_fail(err, NO_ANSWER, "gateway reply: malformed chunk");
        p = crlf + 1;
        if (size == 0)
            break;
        if ((size_t)(end - p) < size)
            return fg_fail(err, NO_ANSWER, "gateway reply: cut short");
        memcpy(out->body + out->body_len, p, size);
        out->body_len += size;
        p += size;
        if (end - p >= 2 && p[0] == '\r' && p[1] == '\n')
            p += 2;
    }
    out->body[out->body_len] = '\0';
    return 0;
}

int ctl_response_parse(const char *raw, size_t len, struct ctl_response *out, struct fg_error *err)
{
    memset(out, 0, sizeof *out);
    const char *end = raw + len;
    if (len < 12 || strncmp(raw, "HTTP/1.", 7) != 0 || raw[8] != ' ')
        return fg_fail(err, NO_ANSWER, "gateway reply is not HTTP/1.x");
    int status = 0;
    for (int i = 9; i < 12; i++) {
        if (raw[i] < '0' || raw[i] > '9')
            return fg_fail(err, NO_ANSWER, "gateway reply has no status code");
        status = status * 10 + (raw[i] - '0');
    }
    const char *blank = NULL;
    for (const char *p = raw; p + 4 <= end; p++)
        if (memcmp(p, "\r\n\r\n", 4) == 0) {
            blank = p;
            break;
        }
    if (blank == NULL)
        return fg_fail(err, NO_ANSWER, "gateway reply: headers cut short");
    const char *head = memchr(raw, '\n', (size_t)(blank - raw));
    head = head ? head + 1 : blank;
    const char *body = blank + 4;
    char value[128];
    out->status = status;
    header_value(head, blank, "Content-Type", out->content_type, sizeof out->content_type);
    if (header_value(head, blank, "Transfer-Encoding", value, sizeof value) &&
        strcasecmp(value, "chunked") == 0) {
        if (dechunk(body, end, out, err) != 0) {
            ctl_response_free(out);
            return -1;
        }
        return 0;
    }
    size_t body_len = (size_t)(end - body);
    if (header_value(head, blank, "Content-Length", value, sizeof value)) {
        char *num_end;
        unsigned long long n = strtoull(value, &num_end, 10);
        if (value[0] < '0' || value[0] > '9' || *num_end != '\0' || n > body_len)
            return fg_fail(err, NO_ANSWER, "gateway reply: body cut short (%zu of %s bytes)",
                           body_len, value);
        body_len = (size_t)n;
    }
    out->body = malloc(body_len + 1);
    FG_ASSERT(out->body != NULL);
    memcpy(out->body, body, body_len);
    out->body[body_len] = '\0';
    out->body_len = body_len;
    return 0;
}

void ctl_response_free(struct ctl_response *r)
{
    free(r->body);
    memset(r, 0, sizeof *r);
}
