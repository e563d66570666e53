/* SPDX-License-Identifier: Apache-2.0 */
/*
 * binding.c - checking a write's token against the lease its resource is bound
 * to. The comparison is of kind and whole name, so a token of "invoice:4"
 * never passes for "invoice:42", and a semaphore's token never passes for a
 * lock of the same name.
 */
#include "lease/binding.h"

#include <stdio.h>
#include <string.h>

#include "util/utf8.h"

#define KEY_PLACEHOLDER "{key}"

int binding_template_check(const char *template, struct fg_error *err)
{
    size_t len = strlen(template);
    if (len == 0 || len > NAME_MAX_LEN)
        return fg_fail(err, FG_ERR_CONFIG, "a lock template is 1 to %d bytes", NAME_MAX_LEN);
    for (size_t i = 0; i < len;) {
        if (strncmp(template + i, KEY_PLACEHOLDER, sizeof KEY_PLACEHOLDER - 1) == 0) {
            i += sizeof KEY_PLACEHOLDER - 1;
            continue;
        }
        if (!name_is_valid_lock(template + i, 1))
            return fg_fail(err, FG_ERR_CONFIG,
                           "lock template '%.*s': only name bytes (A-Z a-z 0-9 . _ : / -) and "
                           "{key}",
                           utf8_cut_len(template, 80), template);
        i++;
    }
    return 0;
}

int binding_expand(const char *template, const char *key, char *out, size_t cap)
{
    size_t n = 0, key_len = strlen(key);
    for (const char *p = template; *p != '\0';) {
        bool placeholder = strncmp(p, KEY_PLACEHOLDER, sizeof KEY_PLACEHOLDER - 1) == 0;
        const char *piece = placeholder ? key : p;
        size_t piece_len = placeholder ? key_len : 1;
        if (n + piece_len + 1 > cap)
            return -1;
        memcpy(out + n, piece, piece_len);
        n += piece_len;
        p += placeholder ? sizeof KEY_PLACEHOLDER - 1 : 1;
    }
    out[n] = '\0';
    return 0;
}

int binding_check(const struct resource_guard *guard, const char *key,
                  const struct token_claims *claims, const char *resource, struct fg_error *err)
{
    if (guard->template == NULL)
        return 0;
    char expected[NAME_MAX_LEN + 1];
    enum lease_kind kind = guard->semaphore ? LEASE_KIND_SEMAPHORE : LEASE_KIND_LOCK;
    const char *noun = guard->semaphore ? "semaphore" : "lock";
    if (binding_expand(guard->template, key, expected, sizeof expected) != 0 ||
        !name_is_valid_lock(expected, strlen(expected)))
        return fg_fail(err, FG_ERR_INVALID_FENCE_TOKEN,
                       "the Fence-Token was issued for another lock: %.*s is guarded by a %s "
                       "whose name its key cannot make",
                       utf8_cut_len(resource, 120), resource, noun);
    if (claims->kind != (char)kind || strcmp(claims->name, expected) != 0)
        return fg_fail(err, FG_ERR_INVALID_FENCE_TOKEN,
                       "the Fence-Token was issued for another lock: %.*s is guarded by the %s "
                       "'%s'",
                       utf8_cut_len(resource, 120), resource, noun, expected);
    return 0;
}
