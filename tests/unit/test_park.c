/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_park.c - the park engine (lease/park.h) over the real waiter registry,
 * with a fake kind of wait and a settable clock, without Redis: a wait that
 * is superseded by a retry, drained, hung up on (taken out of its queue by
 * the janitor with others, or leaving on its own), past its deadline, handed
 * a grant in-process (and one for a lease it no longer waits for), meeting an outage, rung and
 * answered, woken before it parked, ended while parked; and the per-key quota of the registry;
 * a reload of the API keys that removed a waiting key (401), took a scope away (403) or only
 * rotated its text (nothing).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "auth/keyset.h"
#include "config.h"
#include "fglimits.h"
#include "gateway.h"
#include "lease/park.h"
#include "util/alarm.h"
#include "util/budget.h"

struct gateway gw;

static struct config cfg = {.max_waiters = 100, .max_waiters_per_key = 2, .poll_ms = 1000};

/* The deadline of a Redis call made for no request (util/budget.h). */
#define CALL_MS 777

/* The settable clock. */
static int64_t now_ms = 1000000;

static int64_t fake_clock(void)
{
    return now_ms;
}

/* A fake kind of wait: it records what the engine asks of it. */
struct fake {
    struct park park;
    struct fg_error problem; /* the engine's answer of its last run */
    enum park_try next_try;  /* what the next attempt answers */
    int64_t wait_ms;         /* how far ahead an attempt that waits asks to look again */
    int attempts;            /* attempts made */
    int give_ups;            /* give-ups asked */
    enum park_why why;       /* the last give-up's reason */
    bool left;               /* its left flag */
    int64_t grant_fence;     /* the fence of the grant taken, 0: none */
    bool released;           /* the release hook ran */
    bool held_place;         /* its holds_place */
    int resumes;             /* times the registry resumed its request */
    bool take_out;           /* leave_many takes it out of its queue */
    int left_together;       /* how many waits the leave_many call that took it had */
    const char *move_to;     /* the next attempt: a grant for its lease arrives, then it rekeys */
    int64_t give_up_due_ms;  /* when a Redis call made by its last give-up would be due (at 0) */
    int64_t release_due_ms;  /* the same, by its release */
};

/* When a Redis call made now by the calling thread would be due, now being 0. */
static int64_t call_due_ms(void)
{
    return budget_until_ms(0, CALL_MS);
}

static void resume(void *request)
{
    ((struct fake *)request)->resumes++;
}

static struct fake *fake_of(struct park *p)
{
    return PARK_OWNER(p, struct fake, park);
}

static enum park_try attempt(struct park *p, int64_t now, int64_t *next_check_ms)
{
    struct fake *f = fake_of(p);
    f->attempts++;
    if (f->move_to != NULL) { /* a release hands over what the attempt found granted already */
        struct lease_grant g = {.fence = 7, .ttl_ms = 1000};
        assert_true(waiter_deliver(p->waiter.lease_id, &g));
        waiter_rekey(&p->waiter, f->move_to);
        f->move_to = NULL;
    }
    *next_check_ms = now + f->wait_ms;
    return f->next_try;
}

static int give_up(struct park *p, enum park_why why, bool left, struct fg_error *err)
{
    (void)err;
    struct fake *f = fake_of(p);
    f->give_ups++;
    f->give_up_due_ms = call_due_ms();
    f->why = why;
    f->left = left;
    return 0;
}

static bool take_grant(struct park *p)
{
    fake_of(p)->grant_fence = p->grant.fence;
    return true;
}

static void leave_many(struct park *const *ps, size_t n, bool *left)
{
    for (size_t i = 0; i < n; i++) {
        left[i] = fake_of(ps[i])->take_out;
        fake_of(ps[i])->left_together = (int)n;
    }
}

static void release(struct park *p, bool holds_place)
{
    fake_of(p)->released = true;
    fake_of(p)->held_place = holds_place;
    fake_of(p)->release_due_ms = call_due_ms();
}

static const struct park_kind fake_kind = {
    .attempt = attempt,
    .give_up = give_up,
    .take_grant = take_grant,
    .leave_many = leave_many,
    .release = release,
};

/* A leave-many hook that takes none of its waits out and says nothing of them (lease_wait.c's for
 * waits that keep their place). */
static void leave_none(struct park *const *ps, size_t n, bool *left)
{
    (void)left;
    for (size_t i = 0; i < n; i++)
        fake_of(ps[i])->left_together = (int)n;
}

static const struct park_kind keep_kind = {
    .attempt = attempt,
    .give_up = give_up,
    .take_grant = take_grant,
    .leave_many = leave_none,
    .release = release,
};

/* The kind without hooks for grants and batches (a watch's shape). */
static const struct park_kind plain_kind = {
    .attempt = attempt,
    .give_up = give_up,
    .release = release,
};

static int setup(void **state)
{
    (void)state;
    struct fg_error err = {0};
    gw.cfg = &cfg;
    park_clock = fake_clock;
    assert_int_equal(alarm_init(&err), 0);
    assert_int_equal(waiter_registry_init(resume, &err), 0);
    return 0;
}

/* Registers f under lease (a watch-like wait: "" and plain) for key, with socket fd, for wait_ms,
 * and parks it after a first attempt that waits. */
static void park_fake(struct fake *f, const struct park_kind *kind, const char *lease, int fd,
                      const struct api_key *key)
{
    memset(f, 0, sizeof *f);
    f->next_try = PARK_TRY_WAIT;
    f->wait_ms = 500;
    snprintf(f->park.waiter.lease_id, sizeof f->park.waiter.lease_id, "%s", lease);
    if (lease[0] == '\0') {
        f->park.waiter.watch_kind = 'l';
        f->park.waiter.watch_name = "w";
    }
    struct waiter_client client = {f, fd, key};
    struct fg_error err = {0};
    assert_int_equal(park_register(&f->park, kind, &client, now_ms + 5000, &err), 0);
    assert_int_equal(f->park.waiter.state, WAIT_REGISTERING);
    assert_int_equal(park_run(&f->park, &f->problem), PARK_STEP_PARK);
    assert_int_equal(f->park.waiter.state, WAIT_PARKED);
    assert_null(f->park.problem); /* a parked wait carries no answer of its own */
    assert_int_equal(f->attempts, 1);
}

/* Ends f and checks the release hook ran with holds_place. */
static void end_fake(struct fake *f, bool holds_place)
{
    park_end(&f->park);
    assert_true(f->released);
    assert_int_equal(f->held_place, holds_place);
    assert_int_equal(f->park.waiter.state, WAIT_GONE);
}

static void superseded(void **state)
{
    (void)state;
    struct fake a, b;
    park_fake(&a, &fake_kind, "lease-s", -1, NULL);
    park_fake(&b, &fake_kind, "lease-s", -1, NULL); /* a retry under the same lease id */
    assert_int_equal(a.resumes, 1);
    assert_int_equal(a.park.waiter.state, WAIT_AWAKE);
    assert_int_equal(park_run(&a.park, &a.problem), PARK_STEP_ANSWER);
    assert_int_equal(a.problem.code, FG_ERR_CONFLICT);
    assert_int_equal(a.give_ups, 1);
    assert_int_equal(a.why, PARK_WHY_SUPERSEDED);
    assert_int_equal(a.attempts, 1);
    end_fake(&a, false);
    assert_int_equal(b.resumes, 0); /* the retry waits on */
    assert_true(waiter_ring("lease-s"));
    assert_int_equal(b.park.waiter.state, WAIT_AWAKE);
    end_fake(&b, true); /* woken, its client went before it ran: it still held its place */
}

static void drain(void **state)
{
    (void)state;
    struct fake f;
    park_fake(&f, &fake_kind, "lease-d", -1, NULL);
    waiter_wake_all(WAKE_DRAIN);
    assert_int_equal(f.resumes, 1);
    assert_int_equal(park_run(&f.park, &f.problem), PARK_STEP_ANSWER);
    assert_int_equal(f.problem.code, FG_ERR_BACKEND_UNAVAILABLE);
    assert_string_equal(f.problem.msg, "the gateway is stopping");
    assert_int_equal(f.why, PARK_WHY_DRAIN);
    assert_false(f.left);
    end_fake(&f, false);
}

/* A run whose look spent the request's time for Redis still gives up and releases with calls of
 * their own deadline: given none, a cancel of the wait's place would never be written. */
static void clean_up_after_a_spent_run(void **state)
{
    (void)state;
    struct fake f;
    park_fake(&f, &fake_kind, "lease-b", -1, NULL);
    waiter_wake_all(WAKE_DRAIN);
    budget_start(100);
    budget_spend(100);
    assert_int_equal(park_run(&f.park, &f.problem), PARK_STEP_ANSWER);
    assert_int_equal(f.why, PARK_WHY_DRAIN);
    assert_int_equal(f.give_up_due_ms, CALL_MS);
    park_end(&f.park);
    assert_int_equal(f.release_due_ms, CALL_MS);
    assert_int_equal(call_due_ms(), 0); /* the run's own calls are still out of time */
    budget_end();
}

/* Hangs up on the parked waits of kind, one taken out of its queue by leave_many (if the kind
 * has it) and one not, and checks both answer the same. */
static void hang_up_on(const struct park_kind *kind)
{
    int a_fds[2], b_fds[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, a_fds), 0);
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, b_fds), 0);
    struct fake a, b;
    park_fake(&a, kind, "lease-ha", a_fds[0], NULL);
    park_fake(&b, kind, "lease-hb", b_fds[0], NULL);
    a.take_out = true;
    close(a_fds[1]);
    close(b_fds[1]);
    for (int i = 0; i < 50 && (a.resumes == 0 || b.resumes == 0); i++)
        waiter_watch_hangups(100);
    assert_int_equal(a.resumes, 1);
    assert_int_equal(b.resumes, 1);
    bool batched = kind->leave_many != NULL;
    assert_int_equal(a.park.waiter.state, batched ? WAIT_LEFT : WAIT_AWAKE);
    assert_int_equal(b.park.waiter.state, WAIT_AWAKE);
    for (struct fake *f = &a; f != NULL; f = f == &a ? &b : NULL) {
        assert_int_equal(park_run(&f->park, &f->problem), PARK_STEP_HANGUP);
        assert_int_equal(f->problem.code, FG_ERR_LOCK_BUSY);
        assert_string_equal(f->problem.msg, "the client closed the connection while waiting");
        assert_int_equal(f->why, PARK_WHY_HANGUP);
        assert_int_equal(f->attempts, 1);
    }
    assert_int_equal(a.left, batched);
    assert_false(b.left);
    assert_int_equal(a.left_together > 0, batched); /* b stayed: the hook could not take it out */
    assert_int_equal(b.left_together > 0, batched);
    end_fake(&a, false);
    end_fake(&b, false);
    close(a_fds[0]);
    close(b_fds[0]);
}

static void hang_up(void **state)
{
    (void)state;
    hang_up_on(&fake_kind);
    hang_up_on(&plain_kind);
}

/* Waits of two kinds hang up in one batch: the first kind's hook takes its wait out, the second's
 * takes none and says nothing; the second's wait did not leave. (Caught: the batch's answers of the
 * first kind read as the second's.) */
static void hang_up_beside_another_kind(void **state)
{
    (void)state;
    int a_fds[2], b_fds[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, a_fds), 0);
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, b_fds), 0);
    struct fake a, b;
    park_fake(&a, &fake_kind, "lease-ka", a_fds[0], NULL);
    park_fake(&b, &keep_kind, "lease-kb", b_fds[0], NULL);
    a.take_out = true;
    close(a_fds[1]);
    close(b_fds[1]);
    for (int i = 0; i < 50 && (a.resumes == 0 || b.resumes == 0); i++)
        waiter_watch_hangups(100);
    assert_int_equal(a.left_together, 1);
    assert_int_equal(b.left_together, 1); /* one batch, a group per kind */
    assert_int_equal(a.park.waiter.state, WAIT_LEFT);
    assert_int_equal(b.park.waiter.state, WAIT_AWAKE);
    for (struct fake *f = &a; f != NULL; f = f == &a ? &b : NULL)
        assert_int_equal(park_run(&f->park, &f->problem), PARK_STEP_HANGUP);
    assert_true(a.left);
    assert_false(b.left);
    end_fake(&a, false);
    end_fake(&b, false);
    close(a_fds[0]);
    close(b_fds[0]);
}

static void deadline(void **state)
{
    (void)state;
    struct fake f;
    park_fake(&f, &fake_kind, "lease-t", -1, NULL);
    f.wait_ms = 10000; /* past the deadline: the registry caps the re-check there */
    now_ms += 500;
    assert_int_equal(waiter_tick(now_ms), INT64_MAX); /* its first re-check woke it */
    assert_int_equal(f.resumes, 1);
    assert_int_equal(park_run(&f.park, &f.problem), PARK_STEP_PARK);
    assert_int_equal(f.attempts, 2);
    int64_t deadline_ms = f.park.waiter.deadline_ms;
    assert_int_equal(waiter_tick(now_ms), deadline_ms); /* capped at the deadline */
    now_ms = deadline_ms;
    waiter_tick(now_ms);
    assert_int_equal(f.resumes, 2);
    assert_int_equal(park_run(&f.park, &f.problem), PARK_STEP_ANSWER);
    assert_int_equal(f.problem.code, FG_OK); /* the kind answers its deadline */
    assert_int_equal(f.why, PARK_WHY_DEADLINE);
    assert_int_equal(f.attempts, 2);
    end_fake(&f, false);
}

static void delivered(void **state)
{
    (void)state;
    struct fake f, plain;
    park_fake(&f, &fake_kind, "lease-g", -1, NULL);
    park_fake(&plain, &plain_kind, "lease-p", -1, NULL);
    struct lease_grant grant = {.lease_id = "lease-g", .fence = 42, .ttl_ms = 1000};
    assert_true(waiter_deliver("lease-g", &grant));
    assert_int_equal(park_run(&f.park, &f.problem), PARK_STEP_ANSWER);
    assert_int_equal(f.grant_fence, 42);
    assert_int_equal(f.attempts, 1); /* no other attempt */
    assert_int_equal(f.give_ups, 0);
    assert_int_equal(f.problem.code, FG_OK);
    end_fake(&f, false);
    /* a kind that takes no grants is only rung, and tries again */
    grant.fence = 43;
    assert_true(waiter_deliver("lease-p", &grant));
    plain.next_try = PARK_TRY_ANSWERED;
    assert_int_equal(park_run(&plain.park, &plain.problem), PARK_STEP_ANSWER);
    assert_int_equal(plain.attempts, 2);
    assert_int_equal(plain.grant_fence, 0);
    end_fake(&plain, false);
    assert_false(waiter_deliver("lease-g", &grant)); /* nobody waits under it any more */
}

/* A lock set whose attempt took lock k as granted and moved on to lock k+1
 * while the release of k handed the same grant over in-process: that grant is
 * not taken as the grant of lock k+1, and the set parks for it. */
static void grant_for_the_old_lease_is_dropped(void **state)
{
    (void)state;
    struct fake f;
    park_fake(&f, &fake_kind, "lease-k", -1, NULL);
    f.move_to = "lease-k1";
    assert_true(waiter_ring("lease-k"));
    assert_int_equal(park_run(&f.park, &f.problem), PARK_STEP_PARK);
    assert_int_equal(f.grant_fence, 0);
    assert_int_equal(f.attempts, 2);
    assert_false(waiter_ring("lease-k")); /* it waits under its new lease only */
    struct lease_grant grant = {.fence = 9, .ttl_ms = 1000};
    assert_true(waiter_deliver("lease-k1", &grant));
    assert_int_equal(park_run(&f.park, &f.problem), PARK_STEP_ANSWER);
    assert_int_equal(f.grant_fence, 9);
    end_fake(&f, false);
}

static void outage(void **state)
{
    (void)state;
    struct fake f;
    park_fake(&f, &fake_kind, "lease-o", -1, NULL);
    f.next_try = PARK_TRY_OUTAGE;
    assert_true(waiter_ring("lease-o"));
    assert_int_equal(park_run(&f.park, &f.problem), PARK_STEP_PARK);
    assert_int_equal(f.attempts, 2);
    assert_int_equal(waiter_tick(now_ms), now_ms + RECHECK_AFTER_OUTAGE_MS);
    f.next_try = PARK_TRY_ANSWERED;
    now_ms += RECHECK_AFTER_OUTAGE_MS;
    waiter_tick(now_ms);
    assert_int_equal(park_run(&f.park, &f.problem), PARK_STEP_ANSWER);
    assert_int_equal(f.attempts, 3);
    assert_int_equal(f.give_ups, 0);
    end_fake(&f, false);
}

static void woken_before_parking(void **state)
{
    (void)state;
    struct fake f;
    memset(&f, 0, sizeof f);
    snprintf(f.park.waiter.lease_id, sizeof f.park.waiter.lease_id, "%s", "lease-early");
    f.next_try = PARK_TRY_ANSWERED;
    struct waiter_client client = {&f, -1, NULL};
    struct fg_error err = {0};
    assert_int_equal(park_register(&f.park, &fake_kind, &client, now_ms + 5000, &err), 0);
    assert_true(waiter_ring("lease-early")); /* before it parks */
    assert_int_equal(park_wait(&f.park, now_ms + 100, &f.problem), PARK_STEP_ANSWER);
    assert_int_equal(f.attempts, 1);
    assert_int_equal(f.resumes, 0); /* it never parked */
    end_fake(&f, false);
}

static void ended_while_parked(void **state)
{
    (void)state;
    struct fake f;
    park_fake(&f, &fake_kind, "lease-e", -1, NULL);
    end_fake(&f, true); /* it still held its place: the kind gives it up */
    assert_int_equal(f.give_ups, 0);
    assert_false(waiter_ring("lease-e"));
    assert_int_equal(waiter_count(), 0);
}

/* Keys of no key set: the quota counts by id. */
static const struct api_key key_k = {.id = "k"}, key_other = {.id = "other"};

static void quota_per_key(void **state)
{
    (void)state;
    struct fake a, b, c, other;
    park_fake(&a, &fake_kind, "lease-q1", -1, &key_k);
    park_fake(&b, &plain_kind, "", -1, &key_k); /* a watch counts too */
    memset(&c, 0, sizeof c);
    snprintf(c.park.waiter.lease_id, sizeof c.park.waiter.lease_id, "%s", "lease-q3");
    struct waiter_client client = {&c, -1, &key_k};
    struct fg_error err = {0};
    assert_int_equal(park_register(&c.park, &fake_kind, &client, now_ms + 5000, &err), -1);
    assert_int_equal(err.code, FG_ERR_TOO_MANY_WAITERS);
    assert_non_null(strstr(err.msg, "limits.max_waiters_per_key"));
    assert_non_null(strstr(err.msg, "'k'"));
    end_fake(&c, true);
    park_fake(&other, &fake_kind, "lease-q4", -1, &key_other); /* another key still parks */
    end_fake(&a, true);
    park_fake(&c, &fake_kind, "lease-q3", -1, &key_k); /* a place of the key's is free again */
    end_fake(&b, true);
    end_fake(&c, true);
    end_fake(&other, true);
    assert_int_equal(waiter_count(), 0);
}

/* The permit hook of a wait on lock "w". */
static int permit_w(struct park *p, const struct api_key *key, struct fg_error *err)
{
    (void)p;
    return api_key_permit_lease(key, "lock", "w", err);
}

static const struct park_kind permit_kind = {
    .attempt = attempt,
    .give_up = give_up,
    .release = release,
    .permit = permit_w,
};

/* Puts in force the key set of one key "k" of text hash digit d (64 of them) and scope. */
static const struct keyset *publish_k(char d, const char *scope)
{
    char text[256], hash[65];
    memset(hash, d, 64);
    hash[64] = '\0';
    snprintf(
        text, sizeof text,
        "{\"mode\": \"required\", \"keys\": [{\"id\": \"k\", \"sha256\": \"%s\", "
        "\"scopes\": [\"%s\"]}, {\"id\": \"x\", \"sha256\": \"%s\", \"scopes\": [\"admin\"]}]}",
        hash, scope,
        d == 'e' ? "ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff"
                 : "eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee");
    json_t *auth = json_loads(text, 0, NULL);
    struct keyset *ks;
    struct fg_error err = {0};
    assert_int_equal(keyset_from_config(auth, NULL, NULL, true, &ks, &err), 0);
    json_decref(auth);
    auth_publish(ks);
    waiter_wake_keys(ks);
    return ks;
}

/* Runs the woken f to its answer: the key's refusal, after giving up (PARK_WHY_KEY) with no
 * attempt of its own (it made attempts before). */
static void refused(struct fake *f, enum fg_code code, int attempts)
{
    assert_int_equal(park_run(&f->park, &f->problem), PARK_STEP_ANSWER);
    assert_int_equal(f->problem.code, code);
    assert_int_equal(f->give_ups, 1);
    assert_int_equal(f->why, PARK_WHY_KEY);
    assert_int_equal(f->attempts, attempts);
    end_fake(f, false);
}

static void reloaded_keys(void **state)
{
    (void)state;
    struct fake f;
    const struct keyset *ks = publish_k('a', "lock:*");
    park_fake(&f, &permit_kind, "lease-k1", -1, &ks->keys[0]);
    publish_k('b', "lock:*"); /* rotated: another text, the same id and scopes */
    assert_int_equal(f.resumes, 0);
    publish_k('b', "lock:x"); /* "lock:w" taken away */
    assert_int_equal(f.resumes, 1);
    refused(&f, FG_ERR_FORBIDDEN, 1);
    assert_non_null(strstr(f.problem.msg, "'lock:w'"));
    ks = publish_k('c', "lock:w");
    park_fake(&f, &permit_kind, "lease-k2", -1, &ks->keys[0]);
    publish_k('e', "admin"); /* the key's id now holds another scope that grants it */
    assert_int_equal(f.resumes, 1);
    assert_int_equal(park_run(&f.park, &f.problem), PARK_STEP_PARK); /* it tries again, parks */
    assert_int_equal(f.attempts, 2);
    struct keyset *none = NULL;
    struct fg_error err = {0};
    json_t *auth =
        json_loads("{\"mode\": \"required\", \"keys\": [{\"id\": \"x\", \"sha256\": "
                   "\"eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee\", "
                   "\"scopes\": [\"admin\"]}]}",
                   0, NULL);
    assert_int_equal(keyset_from_config(auth, NULL, NULL, true, &none, &err), 0);
    json_decref(auth);
    auth_publish(none);
    waiter_wake_keys(none); /* "k" removed */
    assert_int_equal(f.resumes, 2);
    refused(&f, FG_ERR_UNAUTHORIZED, 2);
    auth_shutdown();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(superseded),
        cmocka_unit_test(drain),
        cmocka_unit_test(clean_up_after_a_spent_run),
        cmocka_unit_test(hang_up),
        cmocka_unit_test(hang_up_beside_another_kind),
        cmocka_unit_test(deadline),
        cmocka_unit_test(delivered),
        cmocka_unit_test(grant_for_the_old_lease_is_dropped),
        cmocka_unit_test(outage),
        cmocka_unit_test(woken_before_parking),
        cmocka_unit_test(ended_while_parked),
        cmocka_unit_test(quota_per_key),
        cmocka_unit_test(reloaded_keys),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
