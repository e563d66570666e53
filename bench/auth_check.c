/* SPDX-License-Identifier: Apache-2.0 */
/*
 * auth_check.c - the CPU cost of the API key check alone, without a network:
 * what the server does per request with auth required (read the bearer
 * header, find the key, match the route's scope against the key's scopes),
 * repeated. The key is found two ways: hashed and compared with every known
 * hash (the first request of a connection), and through the connection's memo
 * (its later requests presenting the same key). Prints nanoseconds per check
 * of each, for bench/auth.sh to set beside the cost of a whole request.
 *
 * usage: auth_check KEYS ITERATIONS
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "auth/keyset.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Nanoseconds per check over iterations checks of header against ks, through
 * memo if it is not NULL; exits if a check is refused. */
static double time_checks(const struct keyset *ks, const char *header, long iterations,
                          struct auth_memo *memo)
{
    struct fg_error err = {0};
    double start = now_s();
    for (long i = 0; i < iterations; i++) {
        const char *key;
        size_t len;
        if (auth_bearer(header, &key, &len, &err) != 0)
            exit(1);
        const struct api_key *k =
            memo != NULL ? keyset_find_memo(ks, key, len, memo) : keyset_find(ks, key, len);
        if (k == NULL || !api_key_permits(k, "lock:bench-16-3-7")) {
            fprintf(stderr, "auth_check: a check was refused\n");
            exit(1);
        }
    }
    return (now_s() - start) * 1e9 / (double)iterations;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: auth_check KEYS ITERATIONS\n");
        return 1;
    }
    int nkeys = atoi(argv[1]);
    long iterations = atol(argv[2]);
    json_t *keys = json_array();
    char text[64], hash[2 * API_KEY_DIGEST + 1], id[32];
    for (int i = 0; i < nkeys; i++) {
        snprintf(text, sizeof text, "fgk_bench_key_%d", i);
        snprintf(id, sizeof id, "k%d", i);
        api_key_hash_hex(text, strlen(text), hash);
        json_array_append_new(keys, json_pack("{s:s, s:s, s:[s, s, s]}", "id", id, "sha256", hash,
                                              "scopes", "pg:invoices:read", "redis:app:*:write",
                                              "lock:bench-*"));
    }
    json_t *auth = json_pack("{s:s, s:o}", "mode", "required", "keys", keys);
    struct keyset *ks;
    struct fg_error err = {0};
    if (keyset_from_config(auth, NULL, NULL, true, &ks, &err) != 0) {
        fprintf(stderr, "auth_check: %s\n", err.msg);
        return 1;
    }
    char header[96];
    snprintf(header, sizeof header, "Bearer fgk_bench_key_%d", nkeys - 1);
    struct auth_memo memo = {0};
    double hashed = time_checks(ks, header, iterations, NULL);
    double memoized = time_checks(ks, header, iterations, &memo);
    printf("%d keys: %.0f ns per check hashing the key, %.0f ns through the connection's memo "
           "(%ld checks each)\n",
           nkeys, hashed, memoized, iterations);
    auth_memo_clear(&memo);
    keyset_free(ks);
    json_decref(auth);
    return 0;
}
