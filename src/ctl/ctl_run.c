/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ctl_run.c - the supervisor of `fencectl lock|sem`. After the grant, one loop
 * waits on a self-pipe fed by the signal handlers (SIGCHLD, and the signals
 * passed on to the command) with the time of the next renewal as its timeout.
 * The command runs in its own process group so that all of it can be stopped
 * when the lease is lost: SIGTERM to the group, SIGKILL after the grace period.
 * When fencectl runs in the foreground of a terminal, that group gets the
 * terminal (as a shell would do), and gives it back when the command ends.
 *
 * A renewal the gateway refuses (4xx: lease_lost, max_hold_exceeded, a token it
 * no longer accepts) ends the lease at once. A renewal that gets no answer, or
 * a 5xx, is retried until the lease would have expired, counted from the moment
 * the last successful renewal was sent; then the lease counts as lost too.
 *
 * Besides renewing, one watcher thread per lease long-polls the gateway's watch
 * (GET ...?watch=true&fence=N): when the lease ends (revoked, or expired and
 * taken over) the watcher writes WATCH_BYTE into the self-pipe and the loop
 * stops the command at once, instead of at the next renewal. `lock --set`
 * holds every lock of a set the same way (lock set acquire, renew, release).
 * Must not: print anything on success, or touch the command's stdio.
 */
#include "ctl/ctl_run.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ctl/ctl_api.h"
#include "util/clock.h"

#define RETRY_MIN_MS   50    /* shortest pause between renewals that got no answer */
#define WATCH_BYTE     0xFF  /* a watcher's news in the self-pipe (no signal has this number) */
#define WATCH_WAIT_MS  30000 /* one watch long poll */
#define WATCH_RETRY_MS 200   /* pause after a watch that got no answer */

/* Signals passed on to the command's process group (SIGCHLD only wakes the loop). */
static const int forwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};

static int signal_pipe[2] = {-1, -1};

/* A watcher of one held lease (its thread runs until the process exits). */
struct watch {
    const struct ctl_args *args; /* gateway and options (borrowed) */
    const char *name;            /* the lock or semaphore (borrowed) */
    long long fence;             /* the watched lease */
    char reason[16];             /* how it ended, once ended is set */
    atomic_bool ended;           /* the gateway said the lease no longer holds */
};

static struct watch watches[CTL_SET_MAX];
static bool lease_ended; /* a watcher's WATCH_BYTE came through the self-pipe (main thread only) */

/* The lease (or the leases of a lock set) being held. */
struct held {
    const struct ctl_args *args;    /* what was asked for (borrowed) */
    size_t n;                       /* leases held: 1, or the locks of --set */
    char *tokens[CTL_SET_MAX];      /* their tokens (owned) */
    long long fences[CTL_SET_MAX];  /* their fences */
    const char *names[CTL_SET_MAX]; /* their locks or semaphore (borrowed from args) */
    long long ttl_ms;               /* its length, as last granted or renewed */
    long long valid_until;          /* monotonic ms by which it ends unless renewed */
    long long next_renew;           /* monotonic ms of the next renewal attempt */
    pid_t child;                    /* the command (and its process group) */
    bool terminal;                  /* the command got the terminal's foreground */
    bool gone;                      /* the gateway said the lease no longer exists (410) */
};

static void on_signal(int sig)
{
    int saved = errno;
    unsigned char b = (unsigned char)sig;
    ssize_t n = write(signal_pipe[1], &b, 1);
    (void)n; /* a full pipe already holds a wake-up */
    errno = saved;
}

static int install_handlers(void)
{
    if (pipe2(signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0)
        return -1;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_NOCLDSTOP;
    if (sigaction(SIGCHLD, &sa, NULL) != 0)
        return -1;
    for (size_t i = 0; i < sizeof forwarded / sizeof forwarded[0]; i++)
        if (sigaction(forwarded[i], &sa, NULL) != 0)
            return -1;
    return 0;
}

static const char *kind_of(const struct ctl_args *a)
{
    return a->semaphore ? "semaphore" : a->set != NULL ? "lock set" : "lock";
}

/* What the messages call the lease: the name, or the --set list. */
static const char *what_of(const struct ctl_args *a)
{
    return a->set != NULL ? a->set : a->name;
}

/* Long-polls the watch of one lease until it ends, then tells the loop. */
static void *watch_main(void *arg)
{
    struct watch *w = arg;
    for (;;) {
        struct ctl_answer ans;
        int rc = ctl_api_watch(w->args, w->name, w->args->semaphore, w->fence, WATCH_WAIT_MS, &ans);
        bool ended = rc == 0 && json_is_false(json_object_get(ans.json, "held"));
        if (ended) {
            const char *reason = json_string_value(json_object_get(ans.json, "reason"));
            snprintf(w->reason, sizeof w->reason, "%s", reason ? reason : "ended");
        }
        ctl_answer_free(&ans);
        if (ended) {
            atomic_store(&w->ended, true);
            unsigned char b = WATCH_BYTE;
            ssize_t n = write(signal_pipe[1], &b, 1);
            (void)n; /* a full pipe already holds a wake-up */
            return NULL;
        }
        if (rc != 0)
            clock_sleep_ms(WATCH_RETRY_MS);
    }
}

/* Starts one watcher per held lease; a lease that cannot be watched is still renewed. */
static void start_watchers(const struct held *h)
{
    for (size_t i = 0; i < h->n; i++) {
        watches[i].args = h->args;
        watches[i].name = h->names[i];
        watches[i].fence = h->fences[i];
        pthread_t thread;
        if (pthread_create(&thread, NULL, watch_main, &watches[i]) == 0)
            pthread_detach(thread);
    }
}

/* The watcher whose lease ended, or NULL. */
static const struct watch *ended_watch(const struct held *h)
{
    for (size_t i = 0; i < h->n; i++)
        if (atomic_load(&watches[i].ended))
            return &watches[i];
    return NULL;
}

/* Joins values (tokens or fences) with commas into a new string. */
static char *comma_list(const struct held *h, bool fences)
{
    size_t cap = 1;
    for (size_t i = 0; i < h->n; i++)
        cap += (fences ? 24 : strlen(h->tokens[i])) + 1;
    char *out = calloc(cap, 1);
    FG_ASSERT(out != NULL);
    for (size_t i = 0; i < h->n; i++) {
        size_t len = strlen(out);
        if (fences)
            snprintf(out + len, cap - len, "%s%lld", i ? "," : "", h->fences[i]);
        else
            snprintf(out + len, cap - len, "%s%s", i ? "," : "", h->tokens[i]);
    }
    return out;
}

/* In the child: a process group of its own (in the terminal's foreground if
 * fencectl had it, so that an interactive command can read it), the environment,
 * then the command. */
static void exec_command(const struct held *h)
{
    setpgid(0, 0);
    if (h->terminal) {
        signal(SIGTTOU, SIG_IGN);
        tcsetpgrp(STDIN_FILENO, getpid());
        signal(SIGTTOU, SIG_DFL);
    }
    char *tokens = comma_list(h, false), *fences = comma_list(h, true);
    bool set = h->args->set != NULL;
    if (setenv(set ? "FENCE_TOKENS" : "FENCE_TOKEN", tokens, 1) != 0 ||
        setenv(set ? "FENCES" : "FENCE", fences, 1) != 0 ||
        setenv("FENCEGATE_URL", h->args->url, 1) != 0)
        _exit(CTL_EXIT_NOT_EXECUTABLE);
    execvp(h->args->argv[0], h->args->argv);
    int why = errno;
    fprintf(stderr, "fencectl: cannot run '%s': %s\n", h->args->argv[0], strerror(why));
    _exit(why == ENOENT ? CTL_EXIT_NOT_FOUND : CTL_EXIT_NOT_EXECUTABLE);
}

/* Gives the terminal's foreground back to fencectl's group once the command ended. */
static void take_terminal_back(const struct held *h)
{
    if (!h->terminal)
        return;
    void (*saved)(int) = signal(SIGTTOU, SIG_IGN);
    tcsetpgrp(STDIN_FILENO, getpgrp());
    signal(SIGTTOU, saved);
}

/* Sends sig to the command's process group (and to the command itself, in case
 * it had not yet moved into its group). */
static void signal_command(const struct held *h, int sig)
{
    kill(-h->child, sig);
    kill(h->child, sig);
}

/* Reads the self-pipe and passes on the signals found there. */
static void drain_signals(const struct held *h)
{
    unsigned char sigs[64];
    ssize_t n;
    while ((n = read(signal_pipe[0], sigs, sizeof sigs)) > 0)
        for (ssize_t i = 0; i < n; i++)
            if (sigs[i] == WATCH_BYTE)
                lease_ended = true;
            else if (sigs[i] != SIGCHLD)
                signal_command(h, sigs[i]);
}

/* Sleeps until a signal arrives or timeout_ms pass, then handles the signals. */
static void wait_signals(const struct held *h, long long timeout_ms)
{
    struct pollfd p = {.fd = signal_pipe[0], .events = POLLIN};
    if (timeout_ms < 0)
        timeout_ms = 0;
    poll(&p, 1, timeout_ms > 60000 ? 60000 : (int)timeout_ms);
    drain_signals(h);
}

/* True once the command has exited, with its wait status in *status. */
static bool reaped(const struct held *h, int *status)
{
    return waitpid(h->child, status, WNOHANG) == h->child;
}

/* SIGTERM to the command's group, SIGKILL after the grace period; reaps it. */
static void stop_command(const struct held *h, int *status)
{
    signal_command(h, SIGTERM);
    long long deadline = clock_mono_ms() + h->args->grace_ms;
    while (!reaped(h, status)) {
        if (clock_mono_ms() >= deadline) {
            signal_command(h, SIGKILL);
            while (waitpid(h->child, status, 0) < 0 && errno == EINTR)
                ;
            return;
        }
        wait_signals(h, deadline - clock_mono_ms());
    }
}

enum renewal { RENEWAL_OK, RENEWAL_RETRY, RENEWAL_LOST };

/* The shortest ttl_ms of a renewal's answer (one lease, or every lock of a set); 0 if none. */
static long long renewed_ttl(const json_t *json)
{
    const json_t *locks = json_object_get(json, "locks");
    if (locks == NULL)
        return json_integer_value(json_object_get(json, "ttl_ms"));
    long long shortest = 0;
    size_t i;
    const json_t *lock;
    json_array_foreach(locks, i, lock)
    {
        long long ttl = json_integer_value(json_object_get(lock, "ttl_ms"));
        if (shortest == 0 || (ttl > 0 && ttl < shortest))
            shortest = ttl;
    }
    return shortest;
}

/* Says how the last renewal attempt before the lease ran out ended. An attempt
 * without an answer only ran out of the lease's remaining time: that says
 * nothing about whether the gateway can be reached, so it is not called so. */
static void report_last_attempt(const struct ctl_answer *ans)
{
    if (ans->response.status != 0)
        ctl_answer_report(ans);
    else
        fprintf(stderr, "fencectl: last renewal attempt: no answer (%s)\n", ans->err.msg);
}

/* One renewal attempt; on refusal, says why on stderr. */
static enum renewal renew(struct held *h)
{
    const struct ctl_args *a = h->args;
    long long sent = clock_mono_ms();
    struct ctl_answer ans;
    int rc = a->set != NULL
                 ? ctl_api_lockset_renew(a, h->tokens, h->n, a->ttl_ms, h->valid_until - sent, &ans)
                 : ctl_api_renew(a, h->tokens[0], a->ttl_ms, h->valid_until - sent, &ans);
    enum renewal result = RENEWAL_OK;
    if (rc == 0) {
        long long ttl = renewed_ttl(ans.json);
        if (ttl > 0)
            h->ttl_ms = ttl;
        h->valid_until = sent + h->ttl_ms;
        h->next_renew = sent + h->ttl_ms / 3;
    } else if (ans.response.status >= 400 && ans.response.status < 500) {
        fprintf(stderr, "fencectl: the lease on %s %s was lost: renewal refused\n", kind_of(a),
                what_of(a));
        ctl_answer_report(&ans);
        h->gone = ans.response.status == 410 && a->set == NULL;
        result = RENEWAL_LOST;
    } else {
        long long retry = h->ttl_ms / 10 > RETRY_MIN_MS ? h->ttl_ms / 10 : RETRY_MIN_MS;
        h->next_renew = clock_mono_ms() + retry;
        result = RENEWAL_RETRY;
        if (h->next_renew >= h->valid_until) {
            fprintf(stderr,
                    "fencectl: the lease on %s %s was lost: no renewal got through "
                    "before it expired\n",
                    kind_of(a), what_of(a));
            report_last_attempt(&ans);
            result = RENEWAL_LOST;
        }
    }
    ctl_answer_free(&ans);
    return result;
}

/* Releases every held lease (one call, waiting up to timeout_ms); fills *ans. */
static int release_all(struct held *h, long long timeout_ms, struct ctl_answer *ans)
{
    if (h->args->set != NULL)
        return ctl_api_lockset_release(h->args, h->tokens, h->n, timeout_ms, ans);
    return ctl_api_release(h->args, h->tokens[0], timeout_ms, ans);
}

/* Gives the lease back after the command ended with status; returns the exit status. */
static int release_after(struct held *h, int status)
{
    int code = ctl_exit_of_child(status);
    struct ctl_answer ans;
    if (release_all(h, CTL_CALL_TIMEOUT_MS, &ans) != 0) {
        bool lost = ans.exit == CTL_EXIT_LEASE_LOST;
        fprintf(stderr, "fencectl: %s %s: %s\n", kind_of(h->args), what_of(h->args),
                lost ? "the lease had been lost before the command ended"
                     : "could not release the lease (it ends by itself when its TTL runs out)");
        ctl_answer_report(&ans);
        if (lost && code == 0)
            code = CTL_EXIT_LEASE_LOST;
    }
    ctl_answer_free(&ans);
    return code;
}

/* Gives back a lease the command no longer runs under but that may still exist
 * (cut short by max_hold_ms, not renewed in time, or the other locks of a set
 * one of which was lost); a 410 then is no news. The command is already
 * stopped, so this waits at most CTL_GIVE_BACK_MS: a lease nobody gives back
 * ends by itself when its TTL runs out. */
static void give_back(struct held *h)
{
    if (h->gone)
        return;
    struct ctl_answer ans;
    if (release_all(h, CTL_GIVE_BACK_MS, &ans) != 0 && ans.response.status != 410)
        fprintf(stderr,
                "fencectl: did not give the lease back (%s); it ends by itself within "
                "its TTL\n",
                ans.response.status == 0 ? ans.err.msg : (ans.problem ? ans.problem : "refused"));
    ctl_answer_free(&ans);
}

/* Says which watched lease ended, and how. */
static void report_ended(const struct held *h)
{
    const struct watch *w = ended_watch(h);
    fprintf(stderr, "fencectl: the lease on %s %s (fence %lld) ended: %s\n",
            h->args->semaphore ? "semaphore" : "lock", w ? w->name : what_of(h->args),
            w ? w->fence : h->fences[0], w ? w->reason : "ended");
}

/* Runs the command under the lease until it ends or the lease is lost. */
static int supervise(struct held *h)
{
    if (install_handlers() != 0) {
        fprintf(stderr, "fencectl: cannot set up signal handling: %s\n", strerror(errno));
        return CTL_EXIT_ERROR;
    }
    fflush(NULL);
    h->terminal = isatty(STDIN_FILENO) && tcgetpgrp(STDIN_FILENO) == getpgrp();
    h->child = fork();
    if (h->child < 0) {
        fprintf(stderr, "fencectl: cannot fork: %s\n", strerror(errno));
        return CTL_EXIT_ERROR;
    }
    if (h->child == 0)
        exec_command(h);
    setpgid(h->child, h->child);
    start_watchers(h);
    int status = 0;
    for (;;) {
        wait_signals(h, h->next_renew - clock_mono_ms());
        if (reaped(h, &status)) {
            take_terminal_back(h);
            return release_after(h, status);
        }
        if (lease_ended)
            report_ended(h);
        else if (clock_mono_ms() < h->next_renew || renew(h) != RENEWAL_LOST)
            continue;
        stop_command(h, &status);
        take_terminal_back(h);
        fprintf(stderr, "fencectl: stopped '%s' (%s)\n", h->args->argv[0],
                WIFSIGNALED(status) ? strsignal(WTERMSIG(status)) : "it exited");
        give_back(h);
        return CTL_EXIT_LEASE_LOST;
    }
}

/* Takes one lease's token and fence from a grant (obj) into h's entry i. */
static int take_grant(struct held *h, size_t i, const json_t *obj, const char *name)
{
    const char *token = json_string_value(json_object_get(obj, "token"));
    json_t *fence = json_object_get(obj, "fence");
    if (token == NULL || !json_is_integer(fence))
        return -1;
    h->tokens[i] = strdup(token);
    FG_ASSERT(h->tokens[i] != NULL);
    h->fences[i] = (long long)json_integer_value(fence);
    h->names[i] = name;
    h->n = i + 1;
    return 0;
}

/* Fills h from the answer of the acquire (a lease, or a lock set's leases). */
static int take_grants(struct held *h, const json_t *json)
{
    const struct ctl_args *a = h->args;
    const json_t *locks = json_object_get(json, "locks"), *ttl = json_object_get(json, "ttl_ms");
    if (a->set == NULL) {
        h->ttl_ms = json_integer_value(ttl);
        return take_grant(h, 0, json, a->name) == 0 && h->ttl_ms > 0 ? 0 : -1;
    }
    if (json_array_size(locks) != a->set_size)
        return -1;
    for (size_t i = 0; i < a->set_size; i++)
        if (take_grant(h, i, json_array_get(locks, i), a->set_names[i]) != 0)
            return -1;
    h->ttl_ms = renewed_ttl(json);
    return h->ttl_ms > 0 ? 0 : -1;
}

int ctl_run(const struct ctl_args *a, const char *owner)
{
    struct ctl_answer ans;
    int rc =
        a->set != NULL ? ctl_api_lockset_acquire(a, owner, &ans) : ctl_api_acquire(a, owner, &ans);
    if (rc != 0) {
        enum ctl_exit code = ans.exit;
        ctl_answer_report(&ans);
        ctl_answer_free(&ans);
        return code;
    }
    struct held h = {.args = a};
    int code = CTL_EXIT_ERROR;
    if (take_grants(&h, ans.json) != 0) {
        fprintf(stderr, "fencectl: the gateway's grant lacks token, fence or ttl_ms\n");
        goto out;
    }
    /* The grant happened shortly before its answer arrived (after a wait in the queue, only
     * the doorbell's delay): keep a tenth of the TTL as margin for that. */
    h.valid_until = clock_mono_ms() + h.ttl_ms - h.ttl_ms / 10;
    h.next_renew = clock_mono_ms() + h.ttl_ms / 3;
    code = supervise(&h);
out:
    ctl_answer_free(&ans);
    for (size_t i = 0; i < h.n; i++)
        free(h.tokens[i]);
    return code;
}
