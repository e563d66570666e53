/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_sock.c - the idle-connection check of the backend pools on a socket
 * pair: a quiet open peer passes, a closed peer or one that spoke unasked is
 * found after a pause, and a connection that answered a moment ago is used
 * without a look (so a busy connection costs no system call).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "util/clock.h"
#include "util/sock.h"

/* A connected pair: fds[0] plays the pooled connection, fds[1] the server. */
static void open_pair(int fds[2])
{
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
}

static int64_t rested(void)
{
    return clock_mono_ms() - SOCK_CHECK_IDLE_MS;
}

static void quiet_open_peer_is_usable(void **state)
{
    (void)state;
    int fds[2];
    open_pair(fds);
    assert_false(sock_idle_broken(fds[0]));
    assert_false(sock_broken_after_idle(fds[0], rested()));
    close(fds[0]);
    close(fds[1]);
}

static void closed_peer_is_found_after_a_pause(void **state)
{
    (void)state;
    int fds[2];
    open_pair(fds);
    close(fds[1]);
    assert_true(sock_idle_broken(fds[0]));
    assert_true(sock_broken_after_idle(fds[0], rested()));
    close(fds[0]);
}

static void peer_that_spoke_unasked_is_found_after_a_pause(void **state)
{
    (void)state;
    int fds[2];
    open_pair(fds);
    assert_int_equal(write(fds[1], "!", 1), 1);
    assert_true(sock_broken_after_idle(fds[0], rested()));
    char byte;
    assert_int_equal(read(fds[0], &byte, 1), 1); /* the look consumed nothing */
    close(fds[0]);
    close(fds[1]);
}

static void just_used_connection_is_not_looked_at(void **state)
{
    (void)state;
    int fds[2];
    open_pair(fds);
    close(fds[1]);
    assert_false(sock_broken_after_idle(fds[0], clock_mono_ms()));
    close(fds[0]);
}

static void closed_descriptor_is_broken(void **state)
{
    (void)state;
    assert_true(sock_idle_broken(-1));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(quiet_open_peer_is_usable),
        cmocka_unit_test(closed_peer_is_found_after_a_pause),
        cmocka_unit_test(peer_that_spoke_unasked_is_found_after_a_pause),
        cmocka_unit_test(just_used_connection_is_not_looked_at),
        cmocka_unit_test(closed_descriptor_is_broken),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
