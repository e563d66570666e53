/* SPDX-License-Identifier: Apache-2.0 */
/*
 * lockset.h - the pure rules of lock sets (POST /v1/locksets/...): the names of
 * a set (1 to LOCKSET_MAX distinct lock names) put in the one global order in
 * which every set takes its locks, the request id each lock of a set is
 * acquired under, and the token lists of renew and release. No I/O: strings
 * are borrowed from the parsed body unless copied into the struct.
 */
#ifndef FG_LOCKSET_H
#define FG_LOCKSET_H

#include <jansson.h>
#include <stddef.h>

#include "fglimits.h"
#include "lease/lease_request.h"
#include "util/error.h"
#include "util/names.h"

/* bytes of a derived request id */
#define LOCKSET_RID_MAX LEASE_REQUEST_ID_MAX

struct lockset {
    size_t n;                                  /* locks in the set */
    char names[LOCKSET_MAX][NAME_MAX_LEN + 1]; /* in the global order (bytewise ascending) */
    size_t asked_at[LOCKSET_MAX];              /* position of names[i] in the request */
};

/*
 * The rule of the items of a lock set's "names" (an array of 1 to LOCKSET_MAX,
 * checked from the route's description before; http/strict.h calls this one
 * in the description's order): distinct valid lock names. Fails with
 * FG_ERR_INVALID_FIELD (or FG_ERR_INVALID_NAME for a malformed name) naming
 * the entry.
 */
int lockset_names_check(const json_t *names, struct fg_error *err) FG_WUR;

/* Reads member "names" of body, checked as above, into *out in the global order. */
void lockset_parse_names(const json_t *body, struct lockset *out);

/* The index in set->names of the name at position k (< set->n) of the request. */
size_t lockset_asked(const struct lockset *set, size_t k);

/* The request ids under which the locks of set, acquired with request id rid,
 * are taken, into out[i] for set->names[i] ("" when rid is ""): "set:<rid>:<digest
 * of the set's names, 16 hex digits>#<name>", so that a retried set finds each
 * lease again, and a set of other names sent with the same rid is another
 * request, which never takes the first set's leases or places. */
void lockset_request_ids(const char *rid, const struct lockset *set, char out[][LOCKSET_RID_MAX]);

/* The rule of the items of a renew's or release's "tokens": strings of at
 * most TOKEN_MAX_LEN bytes (as lockset_names_check). */
int lockset_tokens_check(const json_t *tokens, struct fg_error *err) FG_WUR;

/* Reads member "tokens" of body, checked as above, into out (borrowing from
 * body); returns their number. */
size_t lockset_parse_tokens(const json_t *body, const char *out[LOCKSET_MAX]);

#endif
