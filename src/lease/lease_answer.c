/* SPDX-License-Identifier: Apache-2.0 */
/*
 * lease_answer.c - from a lease script's reply (lua/lib_lease.lua lease_reply:
 * words separated by spaces, the outcome, then the facts as code/value pairs,
 * then the grants handed over) to struct lease_result. The outcome table here is the vocabulary of
 * every lua/lock_*.lua and lua/sem_*.lua script, and the fact table the one
 * list of what their replies carry. It must not run scripts nor act on an
 * answer.
 */
#include "lease/lease_answer.h"

#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "util/fgjson.h"
#include "util/integer.h"

static const struct {
    const char *name;
    enum lease_outcome outcome;
} outcome_names[] = {
    {"granted", LEASE_GRANTED},
    {"queued", LEASE_QUEUED},
    {"busy", LEASE_BUSY},
    {"full", LEASE_FULL},
    {"mismatch", LEASE_MISMATCH},
    {"ended", LEASE_ENDED},
    {"released", LEASE_RELEASED},
    {"canceled", LEASE_CANCELED},
    {"gone", LEASE_GONE},
    {"lost", LEASE_LOST},
    {"superseded", LEASE_SUPERSEDED},
    {"max_hold", LEASE_MAX_HOLD},
    {"renewed", LEASE_RENEWED},
    {"revoked", LEASE_REVOKED},
    {"held", LEASE_HELD},
    {"expired", LEASE_EXPIRED},
    {"left", LEASE_LEFT},
};

/* Answers that ask for a retry, by name. */
static const struct {
    const char *name;
    enum lease_retry retry;
} retry_names[] = {
    {"nofence", LEASE_RETRY_NOFENCE},
    {"norevoked", LEASE_RETRY_NOREVOKED},
    {"contended", LEASE_RETRY_CONTENDED},
    {"repeat", LEASE_RETRY_REPEAT},
};

/* How a fact's value is read, and what it fills. */
enum fact_kind {
    FACT_LEASE,  /* a lease id or a connection's attach id (LEASE_ID_LEN hex characters) */
    FACT_TIME,   /* an integer into an int64_t (fences, times) */
    FACT_COUNT,  /* an integer into a long long (places, counts) */
    FACT_FLAG,   /* an integer into a bool (not 0: true) */
    FACT_DIGITS, /* '0' and '1', one per waiter that left (res.left) */
    FACT_GRANT,  /* four values: a grant handed over (res.handoff) */
};

/* The facts a reply may carry, at the code lua/lib_lease.lua's REPLY lines
 * give each (lua_scripts.h): the one list of them. */
static const struct fact {
    const char *name;    /* as the REPLY lines name it; NULL: no fact has this code */
    enum fact_kind kind; /* how its value is read */
    size_t offset;       /* where it goes in struct lease_result */
} facts[] = {
    [LIB_LEASE_REPLY_LEASE] = {"lease", FACT_LEASE, offsetof(struct lease_result, lease_id)},
    [LIB_LEASE_REPLY_FENCE] = {"fence", FACT_TIME, offsetof(struct lease_result, fence)},
    [LIB_LEASE_REPLY_TTL] = {"ttl", FACT_TIME, offsetof(struct lease_result, ttl_ms)},
    [LIB_LEASE_REPLY_EXPIRES_AT] = {"expires_at", FACT_TIME,
                                    offsetof(struct lease_result, expires_at_ms)},
    [LIB_LEASE_REPLY_HOLD_UNTIL] = {"hold_until", FACT_TIME,
                                    offsetof(struct lease_result, hold_until_ms)},
    [LIB_LEASE_REPLY_HELD_MS] = {"held_ms", FACT_TIME, offsetof(struct lease_result, held_ms)},
    [LIB_LEASE_REPLY_AGAIN] = {"again", FACT_FLAG, offsetof(struct lease_result, again)},
    [LIB_LEASE_REPLY_POSITION] = {"position", FACT_COUNT, offsetof(struct lease_result, position)},
    [LIB_LEASE_REPLY_HOLDER_PTTL] = {"holder_pttl", FACT_COUNT,
                                     offsetof(struct lease_result, holder_pttl_ms)},
    [LIB_LEASE_REPLY_WAITING] = {"waiting", FACT_COUNT, offsetof(struct lease_result, waiting)},
    [LIB_LEASE_REPLY_LIMIT] = {"limit", FACT_COUNT, offsetof(struct lease_result, limit)},
    [LIB_LEASE_REPLY_PTTL] = {"pttl", FACT_COUNT, offsetof(struct lease_result, pttl_ms)},
    [LIB_LEASE_REPLY_LEFT] = {"left", FACT_DIGITS, offsetof(struct lease_result, left)},
    [LIB_LEASE_REPLY_GRANT] = {"grant", FACT_GRANT, offsetof(struct lease_result, handoff)},
    [LIB_LEASE_REPLY_GRANTED_AT] = {"granted_at", FACT_TIME,
                                    offsetof(struct lease_result, granted_at_ms)},
    [LIB_LEASE_REPLY_NOW] = {"now", FACT_TIME, offsetof(struct lease_result, now_ms)},
    [LIB_LEASE_REPLY_ATTACH] = {"attach", FACT_LEASE, offsetof(struct lease_result, attach)},
};
_Static_assert(sizeof facts / sizeof facts[0] == LIB_LEASE_NREPLY,
               "every fact of lua/lib_lease.lua's REPLY lines has its entry in facts[]");

/* Sets *retry, or res->outcome, from the reply's outcome r. */
static int read_outcome(const char *script, const char *r, struct lease_result *res,
                        enum lease_retry *retry, struct fg_error *err)
{
    *retry = LEASE_RETRY_NONE;
    for (size_t i = 0; i < sizeof retry_names / sizeof retry_names[0]; i++)
        if (strcmp(r, retry_names[i].name) == 0) {
            memset(res, 0, sizeof *res);
            *retry = retry_names[i].retry;
            return 0;
        }
    for (size_t i = 0; i < sizeof outcome_names / sizeof outcome_names[0]; i++)
        if (strcmp(r, outcome_names[i].name) == 0) {
            res->outcome = outcome_names[i].outcome;
            return 0;
        }
    return fg_fail(err, FG_ERR_INTERNAL, "%s answered '%s'", script, r);
}

/* Reads word, a decimal integer, into *out. */
static bool word_integer(const char *word, long long *out)
{
    return integer_parse(word, LLONG_MIN, LLONG_MAX, out) == INTEGER_OK;
}

/* Copies word, a lease id, into out (LEASE_ID_LEN + 1 bytes). */
static bool word_lease(const char *word, char *out)
{
    if (strlen(word) != LEASE_ID_LEN)
        return false;
    memcpy(out, word, LEASE_ID_LEN + 1);
    return true;
}

/* Reads a grant handed over, its lease, fence, ttl and expiry (v[0..4)). */
static bool read_grant(char *const *v, struct lease_result *res)
{
    if (res->nhandoff == LEASE_MAX_HANDOFF)
        return false;
    struct lease_grant *g = &res->handoff[res->nhandoff++];
    long long fence, ttl, expires_at;
    if (!word_lease(v[0], g->lease_id) || !word_integer(v[1], &fence) ||
        !word_integer(v[2], &ttl) || !word_integer(v[3], &expires_at))
        return false;
    g->fence = fence;
    g->ttl_ms = ttl;
    g->expires_at_ms = expires_at;
    return true;
}

/* Sets fact f of res from its value, v[0] (a grant's: v[0..4)); false for a
 * value that is no such fact. */
static bool read_fact(const struct fact *f, char *const *v, struct lease_result *res)
{
    char *at = (char *)res + f->offset;
    long long n = 0;
    size_t len;
    switch (f->kind) {
    case FACT_LEASE: return word_lease(v[0], at);
    case FACT_DIGITS:
        len = strlen(v[0]);
        if (len > LEASE_LEAVE_MAX || strspn(v[0], "01") != len)
            return false;
        memcpy(at, v[0], len + 1);
        return true;
    case FACT_GRANT: return read_grant(v, res);
    case FACT_TIME:
    case FACT_COUNT:
    case FACT_FLAG: break;
    }
    if (!word_integer(v[0], &n))
        return false;
    if (f->kind == FACT_TIME)
        *(int64_t *)(void *)at = n;
    else if (f->kind == FACT_COUNT)
        *(long long *)(void *)at = n;
    else
        *(bool *)at = n != 0;
    return true;
}

/* The fact whose code word is, or NULL. */
static const struct fact *fact_of(const char *word)
{
    long long code;
    if (integer_parse(word, 0, LIB_LEASE_NREPLY - 1, &code) != INTEGER_OK ||
        facts[code].name == NULL)
        return NULL;
    return &facts[code];
}

/* Cuts text (NUL-terminated, written in place) at each space into words[],
 * of at most max; returns how many, or 0 for more than max. */
static size_t cut_words(char *text, char **words, size_t max)
{
    size_t n = 0;
    for (char *at = text; at != NULL; n++) {
        if (n == max)
            return 0;
        words[n] = at;
        at = strchr(at, ' ');
        if (at != NULL)
            *at++ = '\0';
    }
    return n;
}

/* Zeroes res, but for the facts whose absence reads as -1. */
static void clear_result(struct lease_result *res)
{
    memset(res, 0, sizeof *res);
    res->holder_pttl_ms = -1;
    res->held_ms = -1;
}

int lease_answer_read(const char *script, const char *text, size_t len, struct lease_result *res,
                      enum lease_retry *retry, struct fg_error *err)
{
    clear_result(res);
    *retry = LEASE_RETRY_NONE;
    char copy[LEASE_ANSWER_MAX + 1];
    char *words[LEASE_ANSWER_WORDS];
    size_t n = 0;
    if (len <= LEASE_ANSWER_MAX && memchr(text, '\0', len) == NULL) {
        memcpy(copy, text, len);
        copy[len] = '\0';
        n = cut_words(copy, words, LEASE_ANSWER_WORDS);
    }
    if (n == 0)
        return fg_fail(err, FG_ERR_INTERNAL, "%s answered no lease reply", script);
    if (read_outcome(script, words[0], res, retry, err) != 0)
        return -1;
    if (*retry != LEASE_RETRY_NONE)
        return 0;
    for (size_t i = 1; i < n;) {
        const struct fact *f = fact_of(words[i]);
        size_t width = f != NULL && f->kind == FACT_GRANT ? 4 : 1;
        if (f == NULL || n - i - 1 < width || !read_fact(f, &words[i + 1], res))
            return fg_fail(err, FG_ERR_INTERNAL, "%s answered no fact at word %zu", script, i + 1);
        i += 1 + width;
    }
    return 0;
}

int lease_answer_watch(const char *script, const struct lease_result *res, struct lease_watch *out,
                       struct fg_error *err)
{
    memset(out, 0, sizeof *out);
    switch (res->outcome) {
    case LEASE_HELD:
        out->held = true;
        out->pttl_ms = res->pttl_ms;
        return 0;
    case LEASE_RELEASED:
    case LEASE_EXPIRED:
    case LEASE_REVOKED:
        for (size_t i = 0; i < sizeof outcome_names / sizeof outcome_names[0]; i++)
            if (outcome_names[i].outcome == res->outcome)
                snprintf(out->reason, sizeof out->reason, "%s", outcome_names[i].name);
        return 0;
    default: return fg_fail(err, FG_ERR_INTERNAL, "%s answered no watch outcome", script);
    }
}

void lease_answer_waiters(const json_t *answer, json_t *out)
{
    json_t *list = json_array();
    size_t i;
    const json_t *w;
    json_array_foreach(json_object_get(answer, "first"), i, w)
    {
        const char *owner = json_string_value(json_object_get(w, "owner"));
        json_array_append_new(list,
                              json_pack("{s:o, s:I}", "owner",
                                        owner && owner[0] ? json_string(owner) : json_null(),
                                        "since_ms", (json_int_t)fgjson_answer_int(w, "since", 0)));
    }
    json_object_set_new(out, "waiters", list);
}
