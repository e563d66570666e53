/* SPDX-License-Identifier: Apache-2.0 */
/*
 * keygen.c - the `fencegate keys new` command. The key is "fgk_" and 256
 * random bits in hex; the gateway never stores it, only the hash printed in
 * the entry, so the key shown here is the only copy.
 */
#include "auth/keygen.h"

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "auth/keyset.h"
#include "auth/scope.h"
#include "auth/token.h"

static const char keygen_usage[] =
    "usage: fencegate keys new --id ID --scope SCOPE [--scope SCOPE ...]\n"
    "       fencegate keys [new] (-h | --help)\n"
    "Prints a fresh API key once, and the entry to add to auth.keys (or to the\n"
    "auth.keys_file) holding only its SHA-256. Scopes: lock:<pattern>,\n"
    "semaphore:<pattern>, pg:<table>:read|write, redis:<pattern>:read|write,\n"
    "audit:read, metrics, admin ('*' matches any run of characters); each scope\n"
    "once, one --id.\n";

/* Prints a complaint about the command line; returns -1. */
static int complain(FILE *errs, const char *what, const char *why)
{
    fprintf(errs, "fencegate keys: %s: %s\n%s", what, why, keygen_usage);
    return -1;
}

/* True if scopes already holds scope. */
static bool scope_listed(const json_t *scopes, const char *scope)
{
    for (size_t i = 0; i < json_array_size(scopes); i++)
        if (strcmp(json_string_value(json_array_get(scopes, i)), scope) == 0)
            return true;
    return false;
}

/* Reads --id and --scope options from argv[2..]; returns 0 or prints why not.
 * A second --id, or a scope given twice, is refused: the entry would not say
 * what the operator meant (which id), or would list a scope twice. */
static int keygen_args(int argc, char **argv, const char **id, json_t *scopes, FILE *errs)
{
    struct fg_error err = {0};
    for (int i = 2; i < argc; i++) {
        bool option = strcmp(argv[i], "--id") == 0 || strcmp(argv[i], "--scope") == 0;
        if (!option)
            return complain(errs, argv[i], "unexpected argument");
        if (i + 1 == argc)
            return complain(errs, argv[i], "needs a value");
        const char *value = argv[++i];
        if (strcmp(argv[i - 1], "--id") == 0) {
            if (*id != NULL)
                return complain(errs, "--id", "given twice (one key has one id)");
            if (api_key_id_check(value, &err) != 0)
                return complain(errs, "--id", err.msg);
            *id = value;
        } else {
            if (scope_check(value, &err) != 0)
                return complain(errs, "--scope", err.msg);
            if (scope_listed(scopes, value)) {
                fprintf(errs, "fencegate keys: --scope: '%s' given twice\n%s", value, keygen_usage);
                return -1;
            }
            json_array_append_new(scopes, json_string(value));
        }
    }
    if (*id == NULL || json_array_size(scopes) == 0)
        return complain(errs, "new", "--id and at least one --scope are required");
    return 0;
}

int keygen_main(int argc, char **argv, FILE *out, FILE *errs)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs(keygen_usage, out);
            return 0;
        }
    if (argc < 2 || strcmp(argv[1], "new") != 0) {
        if (argc >= 2)
            fprintf(errs, "fencegate keys: %s: unknown command (only 'new')\n", argv[1]);
        fputs(keygen_usage, errs);
        return 2;
    }
    const char *id = NULL;
    json_t *scopes = json_array();
    struct fg_error err = {0};
    char key[4 + 2 * LEASE_ID_LEN + 1] = "fgk_";
    int status = 2;
    if (keygen_args(argc, argv, &id, scopes, errs) != 0)
        goto out;
    status = 1;
    if (token_new_lease_id(key + 4, &err) != 0 ||
        token_new_lease_id(key + 4 + LEASE_ID_LEN, &err) != 0) {
        fprintf(errs, "fencegate keys: %s\n", err.msg);
        goto out;
    }
    char hash[2 * API_KEY_DIGEST + 1];
    api_key_hash_hex(key, strlen(key), hash);
    json_t *entry = json_pack("{s:s, s:s, s:O}", "id", id, "sha256", hash, "scopes", scopes);
    char *text = json_dumps(entry, JSON_COMPACT | JSON_PRESERVE_ORDER);
    fprintf(out,
            "key: %s\n"
            "(shown once; clients send it as 'Authorization: Bearer <key>')\n"
            "entry for auth.keys:\n%s\n",
            key, text);
    free(text);
    json_decref(entry);
    if (fflush(out) != 0 || ferror(out)) { /* the one copy of the key is lost: no success */
        fprintf(errs, "fencegate keys: cannot write the key to standard output: %s\n",
                strerror(errno));
        goto out;
    }
    status = 0;
out:
    json_decref(scopes);
    return status;
}
