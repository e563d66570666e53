/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_client_gone.c - waiter_client_gone (lease/waiter.h), the look the server
 * takes at a client's socket before it writes a grant, on real loopback TCP
 * connections: a client that is there, or only half-closed, is not gone; one
 * that reset, or closed (seen only as a FIN until the probe draws its reset),
 * is. A half-closed client whose probe byte it read and that then closed sends
 * nothing more: only the probe tells.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "gateway.h"
#include "lease/waiter.h"

struct gateway gw;

/* A connected pair over loopback: *client (the peer) and *server (the gateway's side). */
static void connect_pair(int *client, int *server)
{
    int lst = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(lst >= 0);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof addr;
    assert_int_equal(bind(lst, (struct sockaddr *)&addr, sizeof addr), 0);
    assert_int_equal(listen(lst, 1), 0);
    assert_int_equal(getsockname(lst, (struct sockaddr *)&addr, &len), 0);
    *client = socket(AF_INET, SOCK_STREAM, 0);
    assert_int_equal(connect(*client, (struct sockaddr *)&addr, sizeof addr), 0);
    *server = accept(lst, NULL, NULL);
    assert_true(*server >= 0);
    close(lst);
}

/* Waits (blocking) until the server side has seen the client's FIN. */
static void await_fin(int server)
{
    char c;
    assert_int_equal(recv(server, &c, 1, MSG_PEEK), 0);
}

static void present_client_is_not_gone(void **state)
{
    (void)state;
    int client, server;
    connect_pair(&client, &server);
    assert_false(waiter_client_gone(server));
    close(client);
    close(server);
}

static void reset_client_is_gone(void **state)
{
    (void)state;
    int client, server;
    connect_pair(&client, &server);
    struct linger lg = {.l_onoff = 1, .l_linger = 0};
    assert_int_equal(setsockopt(client, SOL_SOCKET, SO_LINGER, &lg, sizeof lg), 0);
    close(client); /* RST */
    assert_true(waiter_client_gone(server));
    close(server);
}

static void half_closed_client_is_not_gone(void **state)
{
    (void)state;
    int client, server;
    connect_pair(&client, &server);
    assert_int_equal(shutdown(client, SHUT_WR), 0);
    await_fin(server);
    assert_false(waiter_client_gone(server)); /* it takes the probe byte and waits on */
    assert_false(waiter_client_gone(server));
    close(client);
    close(server);
}

static void closed_client_is_gone(void **state)
{
    (void)state;
    int client, server;
    connect_pair(&client, &server);
    close(client); /* FIN only: the probe draws the reset */
    await_fin(server);
    assert_true(waiter_client_gone(server));
    close(server);
}

static void closed_after_a_half_close_is_gone(void **state)
{
    (void)state;
    int client, server, on = 1;
    connect_pair(&client, &server);
    assert_int_equal(setsockopt(client, SOL_SOCKET, SO_OOBINLINE, &on, sizeof on), 0);
    assert_int_equal(shutdown(client, SHUT_WR), 0);
    await_fin(server);
    assert_false(waiter_client_gone(server));
    char byte;
    assert_int_equal(recv(client, &byte, 1, 0), 1); /* the probe's byte: nothing left unread */
    close(client);                                   /* sends nothing */
    assert_true(waiter_client_gone(server));
    close(server);
}

static void no_socket_is_not_gone(void **state)
{
    (void)state;
    assert_false(waiter_client_gone(-1));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(present_client_is_not_gone),
        cmocka_unit_test(reset_client_is_gone),
        cmocka_unit_test(half_closed_client_is_not_gone),
        cmocka_unit_test(closed_client_is_gone),
        cmocka_unit_test(closed_after_a_half_close_is_gone),
        cmocka_unit_test(no_socket_is_not_gone),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
