/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_redis_pipe.c - the bookkeeping of the shared Redis connection: the
 * first call connects and the others wait for it; queued calls go out as one
 * batch, in order, and each reply goes to the oldest call out; one thread
 * writes and one reads at a time; a batch out holds the next one back, and a
 * batch's replies are due from the time it is written; a failure ends every call out (and breaks
 * the connection) or every queued one; a retired connection takes no more batches and is closed
 * once its calls are answered; a call withdrawn is never written if queued, and its reply is
 * dropped if out, while the batch it was in still holds the next back, and a queued call reads
 * it when nobody else waits for a reply.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "store/backend/redis_pipe.h"

static int owner; /* what wakes a call's thread: any address */

static void push(struct pipe *p, struct pipe_entry *e)
{
    pipe_push(p, e, &owner);
}

/* The call that reply answers (NULL: none), as pipe_reply hands it. */
static struct pipe_entry *reply_to(struct pipe *p, void *reply)
{
    struct pipe_entry *e;
    enum pipe_answer to = pipe_reply(p, reply, &e);
    assert_true((to == PIPE_ANSWER_CALL) == (e != NULL));
    return e;
}

/* An open pipe with the calls of e[0..n) queued. */
static void open_with(struct pipe *p, struct pipe_entry *e, size_t n)
{
    *p = (struct pipe){0};
    pipe_opened(p);
    for (size_t i = 0; i < n; i++)
        push(p, &e[i]);
}

static void the_first_call_connects_and_the_others_wait(void **state)
{
    (void)state;
    struct pipe p = {0};
    struct pipe_entry a = {0}, b = {0};
    push(&p, &a);
    push(&p, &b);
    assert_int_equal(pipe_next(&p, &a), PIPE_CONNECT);
    pipe_begin(&p, PIPE_CONNECT);
    assert_int_equal(pipe_next(&p, &b), PIPE_WAIT);
    pipe_opened(&p);
    pipe_end(&p, PIPE_CONNECT);
    assert_int_equal(pipe_next(&p, &b), PIPE_WRITE);
    assert_int_equal(pipe_next(&p, &a), PIPE_WRITE);
}

static void queued_calls_go_out_as_one_batch_and_replies_come_in_order(void **state)
{
    (void)state;
    struct pipe p;
    struct pipe_entry e[3] = {0};
    open_with(&p, e, 3);
    pipe_begin(&p, PIPE_WRITE);
    size_t n = 0;
    struct pipe_entry *first = pipe_take(&p, 1000, &n);
    assert_int_equal(n, 3);
    assert_ptr_equal(first, &e[0]);
    assert_ptr_equal(first->next, &e[1]);
    assert_ptr_equal(first->next->next, &e[2]);
    assert_null(p.queued.head);
    pipe_end(&p, PIPE_WRITE);
    for (int i = 0; i < 3; i++)
        assert_int_equal(e[i].state, PIPE_SENT);
    assert_int_equal(pipe_next(&p, &e[1]), PIPE_READ);
    pipe_begin(&p, PIPE_READ);
    assert_int_equal(pipe_next(&p, &e[0]), PIPE_WAIT); /* one reader at a time */
    int r0, r1, r2;
    assert_ptr_equal(reply_to(&p, &r0), &e[0]);
    assert_ptr_equal(reply_to(&p, &r1), &e[1]);
    assert_ptr_equal(e[0].reply, &r0);
    assert_ptr_equal(e[1].reply, &r1);
    assert_int_equal(pipe_next(&p, &e[0]), PIPE_FINISHED);
    pipe_end(&p, PIPE_READ);
    assert_ptr_equal(pipe_oldest_sent(&p), &e[2]); /* the next reader */
    assert_int_equal(pipe_next(&p, &e[2]), PIPE_READ);
    assert_ptr_equal(reply_to(&p, &r2), &e[2]);
    struct pipe_entry *to;
    assert_int_equal(pipe_reply(&p, &r2, &to), PIPE_ANSWER_UNASKED); /* nobody asked for it */
    assert_null(to);
}

static void a_batch_out_holds_the_next_back_until_it_is_answered(void **state)
{
    (void)state;
    struct pipe p;
    struct pipe_entry e[2] = {0}, late = {0};
    open_with(&p, e, 2);
    size_t n;
    pipe_begin(&p, PIPE_WRITE);
    assert_non_null(pipe_take(&p, 1000, &n));
    assert_true(p.writing);
    push(&p, &late);
    assert_int_equal(pipe_next(&p, &late), PIPE_WAIT); /* one writer at a time */
    pipe_end(&p, PIPE_WRITE);
    assert_int_equal(pipe_next(&p, &late), PIPE_BATCHES_OUT > 1 ? PIPE_WRITE : PIPE_WAIT);
    int r;
    reply_to(&p, &r);
    assert_int_equal(pipe_next(&p, &late), PIPE_BATCHES_OUT > 1 ? PIPE_WRITE : PIPE_WAIT);
    reply_to(&p, &r); /* the batch's last reply */
    assert_int_equal(p.batches_out, 0);
    assert_int_equal(pipe_next(&p, &late), PIPE_WRITE);
    assert_int_equal(late.state, PIPE_QUEUED);
}

static void a_failure_ends_every_call_out_and_breaks_the_connection(void **state)
{
    (void)state;
    struct pipe p;
    struct pipe_entry e[2] = {0}, queued = {0};
    open_with(&p, e, 2);
    size_t n;
    pipe_take(&p, 1000, &n);
    push(&p, &queued);
    pipe_begin(&p, PIPE_READ);
    struct fg_error failure = {.code = FG_ERR_BACKEND_UNAVAILABLE, .msg = "redis: gone"};
    struct pipe_entry *failed = pipe_fail_sent(&p, &failure);
    assert_ptr_equal(failed, &e[0]);
    assert_ptr_equal(failed->next, &e[1]);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(pipe_next(&p, &e[i]), PIPE_FINISHED);
        assert_null(e[i].reply);
        assert_int_equal(e[i].failure.code, FG_ERR_BACKEND_UNAVAILABLE);
        assert_string_equal(e[i].failure.msg, "redis: gone");
        assert_false(e[i].failure.not_run); /* written: Redis may run it */
    }
    assert_int_equal(p.conn, PIPE_BROKEN);
    assert_false(pipe_must_close(&p)); /* not while its reader is on it */
    assert_int_equal(pipe_next(&p, &queued), PIPE_WAIT);
    pipe_end(&p, PIPE_READ);
    assert_true(pipe_must_close(&p));
    pipe_closed(&p);
    assert_int_equal(pipe_next(&p, &queued), PIPE_CONNECT); /* the queued call is not lost */
}

static void a_connection_that_cannot_be_made_fails_every_queued_call(void **state)
{
    (void)state;
    struct pipe p = {0};
    struct pipe_entry a = {0}, b = {0};
    push(&p, &a);
    push(&p, &b);
    pipe_begin(&p, PIPE_CONNECT);
    struct fg_error failure = {.code = FG_ERR_BACKEND_UNAVAILABLE, .msg = "redis: cannot connect"};
    assert_ptr_equal(pipe_fail_queued(&p, &failure), &a);
    pipe_end(&p, PIPE_CONNECT);
    assert_int_equal(pipe_next(&p, &a), PIPE_FINISHED);
    assert_int_equal(pipe_next(&p, &b), PIPE_FINISHED);
    assert_string_equal(b.failure.msg, "redis: cannot connect");
    assert_true(a.failure.not_run); /* never written: Redis cannot run it */
    assert_true(b.failure.not_run);
    assert_null(p.queued.head);
    assert_null(p.queued.tail);
}

static void a_retired_connection_is_closed_once_its_calls_are_answered(void **state)
{
    (void)state;
    struct pipe p;
    struct pipe_entry out = {0}, queued = {0};
    open_with(&p, &out, 1);
    size_t n;
    pipe_take(&p, 1000, &n);
    push(&p, &queued);
    pipe_retire(&p);
    assert_int_equal(p.conn, PIPE_RETIRING);
    assert_int_equal(pipe_next(&p, &out), PIPE_READ); /* its calls out are still read */
    assert_false(pipe_must_close(&p));
    int r;
    reply_to(&p, &r);
    assert_int_equal(pipe_next(&p, &queued), PIPE_WAIT); /* no batch on a retired connection */
    assert_true(pipe_must_close(&p));
    pipe_closed(&p);
    assert_int_equal(pipe_next(&p, &queued), PIPE_CONNECT);
    pipe_retire(&p); /* a closed connection stays closed */
    assert_int_equal(p.conn, PIPE_CLOSED);
}

static void batches_follow_each_other_on_one_connection(void **state)
{
    (void)state;
    struct pipe p;
    struct pipe_entry a = {0}, b = {0};
    open_with(&p, &a, 1);
    size_t n;
    pipe_take(&p, 1000, &n);
    int r;
    reply_to(&p, &r);
    push(&p, &b);
    assert_ptr_equal(pipe_take(&p, 2000, &n), &b);
    assert_int_equal(n, 1);
    assert_int_equal(pipe_due_ms(&p), 2000); /* due from its own sending, not the batch before's */
    assert_ptr_equal(pipe_oldest_sent(&p), &b);
    assert_int_equal(p.batches_out, 1);
}

static void a_queued_call_withdrawn_is_never_written(void **state)
{
    (void)state;
    struct pipe p;
    struct pipe_entry e[3] = {0};
    open_with(&p, e, 3);
    struct fg_error failure = {.code = FG_ERR_BACKEND_UNAVAILABLE, .msg = "redis: late"};
    pipe_withdraw(&p, &e[1], &failure);
    assert_int_equal(pipe_next(&p, &e[1]), PIPE_FINISHED);
    assert_string_equal(e[1].failure.msg, "redis: late");
    assert_true(e[1].failure.not_run);
    pipe_withdraw(&p, &e[2], &failure); /* the tail too */
    size_t n;
    assert_ptr_equal(pipe_take(&p, 1000, &n), &e[0]);
    assert_int_equal(n, 1);
    assert_null(e[0].next);
    int r;
    assert_ptr_equal(reply_to(&p, &r), &e[0]);
    assert_int_equal(p.batches_out, 0);
}

static void the_reply_of_a_call_withdrawn_out_is_dropped(void **state)
{
    (void)state;
    struct pipe p;
    struct pipe_entry e[3] = {0}, next = {0};
    open_with(&p, e, 3);
    size_t n;
    pipe_take(&p, 1000, &n);
    struct fg_error failure = {.code = FG_ERR_BACKEND_UNAVAILABLE, .msg = "redis: late"};
    pipe_withdraw(&p, &e[0], &failure);
    pipe_withdraw(&p, &e[2], &failure);
    assert_int_equal(e[0].state, PIPE_DONE);
    assert_false(e[0].failure.not_run); /* out: its command reached the socket */
    push(&p, &next);
    assert_int_equal(pipe_next(&p, &next), PIPE_WAIT); /* the batch out still holds it back */
    assert_int_equal(pipe_next(&p, &e[1]), PIPE_READ);
    int r0, r1, r2;
    struct pipe_entry *to;
    assert_int_equal(pipe_reply(&p, &r0, &to), PIPE_ANSWER_WITHDRAWN);
    assert_null(to);
    assert_null(e[0].reply);
    assert_ptr_equal(reply_to(&p, &r1), &e[1]); /* each reply still finds its own call */
    assert_ptr_equal(e[1].reply, &r1);
    assert_int_equal(pipe_next(&p, &next), PIPE_READ); /* nobody else waits for the last */
    assert_int_equal(pipe_reply(&p, &r2, &to), PIPE_ANSWER_WITHDRAWN);
    assert_int_equal(p.batches_out, 0);
    assert_int_equal(pipe_next(&p, &next), PIPE_WRITE); /* the batch is answered */
}

static void a_queued_call_reads_the_replies_nobody_waits_for(void **state)
{
    (void)state;
    struct pipe p;
    struct pipe_entry out = {0}, queued = {0};
    open_with(&p, &out, 1);
    size_t n;
    pipe_take(&p, 1000, &n);
    push(&p, &queued);
    assert_int_equal(pipe_next(&p, &queued), PIPE_WAIT); /* out's thread reads */
    assert_false(pipe_reads_on(&p, &queued));
    struct fg_error failure = {.code = FG_ERR_BACKEND_UNAVAILABLE, .msg = "redis: late"};
    pipe_withdraw(&p, &out, &failure);
    assert_int_equal(pipe_next(&p, &queued), PIPE_READ); /* nobody else will */
    pipe_begin(&p, PIPE_READ);
    assert_true(pipe_reads_on(&p, &queued));
    assert_int_equal(pipe_due_ms(&p), 1000); /* the connection's deadline stands */
    int r;
    struct pipe_entry *to;
    assert_int_equal(pipe_reply(&p, &r, &to), PIPE_ANSWER_WITHDRAWN);
    assert_false(pipe_reads_on(&p, &queued));
    pipe_end(&p, PIPE_READ);
    assert_int_equal(pipe_next(&p, &queued), PIPE_WRITE);
}

static void numbers_start_again_on_a_new_connection(void **state)
{
    (void)state;
    struct pipe p;
    struct pipe_entry e[2] = {0}, later = {0};
    open_with(&p, e, 2);
    size_t n;
    pipe_take(&p, 1000, &n);
    struct fg_error failure = {.code = FG_ERR_BACKEND_UNAVAILABLE, .msg = "redis: gone"};
    pipe_withdraw(&p, &e[0], &failure);
    pipe_fail_sent(&p, &failure);
    pipe_closed(&p);
    pipe_opened(&p);
    push(&p, &later);
    pipe_take(&p, 2000, &n);
    int r;
    assert_ptr_equal(reply_to(&p, &r), &later); /* no reply owed from the connection before */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(the_first_call_connects_and_the_others_wait),
        cmocka_unit_test(queued_calls_go_out_as_one_batch_and_replies_come_in_order),
        cmocka_unit_test(a_batch_out_holds_the_next_back_until_it_is_answered),
        cmocka_unit_test(a_failure_ends_every_call_out_and_breaks_the_connection),
        cmocka_unit_test(a_connection_that_cannot_be_made_fails_every_queued_call),
        cmocka_unit_test(a_retired_connection_is_closed_once_its_calls_are_answered),
        cmocka_unit_test(batches_follow_each_other_on_one_connection),
        cmocka_unit_test(a_queued_call_withdrawn_is_never_written),
        cmocka_unit_test(the_reply_of_a_call_withdrawn_out_is_dropped),
        cmocka_unit_test(a_queued_call_reads_the_replies_nobody_waits_for),
        cmocka_unit_test(numbers_start_again_on_a_new_connection),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
