/* SPDX-License-Identifier: Apache-2.0 */
/*
 * budget.c - what the request a thread serves has left for Redis
 * (budget.h): a number per thread. Must not read a clock: callers say when.
 */
#include "util/budget.h"

static _Thread_local struct {
    bool on;         /* the thread serves a request */
    int64_t left_ms; /* what it has left; 0 or less: spent */
} budget;

void budget_start(int64_t ms)
{
    budget.on = true;
    budget.left_ms = ms;
}

void budget_end(void)
{
    budget.on = false;
}

int64_t budget_until_ms(int64_t now_ms, int64_t call_ms)
{
    if (!budget.on)
        return now_ms + call_ms;
    return now_ms + (budget.left_ms > 0 ? budget.left_ms : 0);
}

bool budget_set_aside(void)
{
    bool was = budget.on;
    budget.on = false;
    return was;
}

void budget_restore(bool was)
{
    budget.on = was;
}

void budget_spend(int64_t spent_ms)
{
    if (budget.on)
        budget.left_ms -= spent_ms;
}

struct budget_capped budget_cap(int64_t ms)
{
    struct budget_capped capped = {.on = budget.on, .left_ms = budget.left_ms};
    if (budget.on && budget.left_ms < ms)
        ms = budget.left_ms;
    budget.on = true;
    budget.left_ms = ms;
    capped.given_ms = ms;
    return capped;
}

void budget_uncap(struct budget_capped capped)
{
    int64_t spent_ms = capped.given_ms - budget.left_ms;
    budget.on = capped.on;
    budget.left_ms = capped.left_ms - (capped.on ? spent_ms : 0);
}
