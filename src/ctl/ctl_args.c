/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ctl_args.c - fencectl's command line. Two tables drive it: the subcommands
 * (what each takes, its usage text) and the options (which field of struct
 * ctl_args each sets, its range, the subcommands it applies to). Parsing only
 * fills the struct; it never talks to the gateway or runs anything.
 */
#include "ctl/ctl_args.h"

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fglimits.h"
#include "util/integer.h"
#include "util/names.h"

#define CMD(c)       (1u << (c))
#define ALL_COMMANDS (CMD(CTL_CMD_COUNT) - 1)
#define LEASED       (CMD(CTL_CMD_LOCK) | CMD(CTL_CMD_SEM))
#define SCRIPTED     (CMD(CTL_CMD_ACQUIRE) | CMD(CTL_CMD_RENEW) | CMD(CTL_CMD_RELEASE))
#define ANSWERS_JSON                                                                               \
    (SCRIPTED | CMD(CTL_CMD_STATUS) | CMD(CTL_CMD_AUDIT) | CMD(CTL_CMD_REVOKE) |                   \
     CMD(CTL_CMD_WATCH) | CMD(CTL_CMD_LIST))

/* The limits and defaults of fglimits.h that the usage texts state, as string literals. */
#define TEXT_LOCKSET_MAX   FG_STR(LOCKSET_MAX)
#define TEXT_TTL           FG_STR(TTL_MIN_MS) ".." FG_STR(TTL_MAX_MS)
#define TEXT_TTL_DEFAULT   FG_STR(DEFAULT_TTL_MS)
#define TEXT_WAIT          "0.." FG_STR(WAIT_MAX_MS)
#define TEXT_WAIT_DEFAULT  FG_STR(DEFAULT_WAIT_MS)
#define TEXT_WATCH_DEFAULT FG_STR(WATCH_WAIT_DEFAULT_MS)
#define TEXT_GRACE_DEFAULT FG_STR(CTL_GRACE_DEFAULT_MS)
#define TEXT_SEM_LIMIT     "1.." FG_STR(SEMAPHORE_MAX_LIMIT)
#define TEXT_AUDIT_PAGE    FG_STR(AUDIT_LIMIT_DEFAULT)
#define TEXT_NAME_MAX      FG_STR(NAME_MAX_LEN)

static const char usage_overview[] =
    "usage: fencectl [--url URL] COMMAND [ARGS...]\n"
    "\n"
    "Command-line client of fencegate: run a command under a lock or semaphore lease, or\n"
    "manage leases from scripts.\n"
    "\n"
    "  lock NAME [OPTIONS] -- COMMAND [ARGS...]   run COMMAND while holding lock NAME\n"
    "  lock --set A,B,C [OPTIONS] -- COMMAND      run COMMAND holding every lock of a set\n"
    "  sem NAME --limit N [OPTIONS] -- COMMAND     run COMMAND holding a slot of semaphore NAME\n"
    "  acquire NAME [OPTIONS]                      take a lease and print its token and fence\n"
    "  renew NAME [--token T] [--ttl MS] [--sem]   extend a lease\n"
    "  release NAME [--token T] [--sem]            give a lease back\n"
    "  status NAME [--sem]                         show who holds NAME and how many wait\n"
    "  audit [--resource R] [--lock L] [--lease-kind K] [--since MS]\n"
    "        [--limit N] [--after-id ID]           list rejected (stale) writes\n"
    "  revoke NAME [--reason R] [--sem --fence N]  end a holder's lease at once (admin)\n"
    "  watch NAME --fence N [--sem] [--wait MS]    wait until the lease with fence N ends\n"
    "  list [PREFIX] [--sem] [--limit N]           locks and semaphores held or waited for\n"
    "\n"
    "Every command takes -h or --help. Options for all commands:\n"
    "  --url URL   the gateway, http:// or https:// (default $FENCEGATE_URL, else " CTL_DEFAULT_URL
    ")\n"
    "  --cacert F  CA certificate(s) to trust for https (default $FENCEGATE_CACERT, else the\n"
    "              system's)\n"
    "  --json      print the gateway's JSON answer (acquire, renew, release, status, audit,\n"
    "              revoke, watch, list)\n"
    "  --version   show the version\n"
    "The API key, when the gateway requires one, comes from $FENCEGATE_KEY (never an option:\n"
    "command lines are visible to other users).\n"
    "\n"
    "Exit status:\n"
    "  0  success          3  the lease was lost (410 lease_lost, 409 max_hold_exceeded,\n"
    "                         or it could not be renewed in time)\n"
    "  1  usage error      4  gateway unreachable, or a backend is down (503)\n"
    "  2  busy (409 lock_busy, 429 too_many_waiters)\n"
    "  5  any other error  lock and sem: otherwise COMMAND's own status (128+N if killed\n"
    "                      by signal N; 126 not executable, 127 not found)\n";

static const char usage_lock[] =
    "usage: fencectl lock NAME [--ttl MS] [--wait MS] [--owner S] [--max-hold MS] [--grace MS]\n"
    "                          [--] COMMAND [ARGS...]\n"
    "       fencectl lock --set A,B,C [OPTIONS] [--] COMMAND [ARGS...]\n"
    "\n"
    "Acquires lock NAME, runs COMMAND with FENCE_TOKEN (the lease's token, for the Fence-Token\n"
    "header of fenced writes), FENCE (its fence) and FENCEGATE_URL in its environment, renews\n"
    "the lease every third of its TTL while COMMAND runs, releases it when COMMAND exits, and\n"
    "exits with COMMAND's status. COMMAND runs in its own process group; SIGINT, SIGTERM,\n"
    "SIGHUP and SIGQUIT sent to fencectl are passed on to it.\n"
    "\n"
    "If a renewal is refused (410 lease_lost, 409 max_hold_exceeded) or cannot get through\n"
    "before the lease would expire, COMMAND's process group gets SIGTERM, then SIGKILL after\n"
    "the grace period, and fencectl exits 3. fencectl also watches the lease: when it ends\n"
    "(revoked by an operator, or expired and taken over), COMMAND is stopped the same way\n"
    "within about 100 ms, not at the next renewal.\n"
    "\n"
    "With --set A,B,C (up to " TEXT_LOCKSET_MAX
    " distinct locks, instead of NAME), fencectl takes every lock of\n"
    "the set, all or none, in the gateway's one global order (sets never deadlock), and gives\n"
    "COMMAND FENCE_TOKENS and FENCES: the tokens and fences, comma-separated, in the order\n"
    "given. Losing any lock of the set stops COMMAND.\n"
    "\n"
    "  --set A,B,C    a lock set instead of NAME\n"
    "  --ttl MS       lease length, " TEXT_TTL " (default: the gateway's, " TEXT_TTL_DEFAULT ")\n"
    "  --wait MS      how long to queue for the lock, " TEXT_WAIT
    " (default: the gateway's, " TEXT_WAIT_DEFAULT ")\n"
    "  --owner S      holder label shown by status and the audit (default fencectl:HOST:PID)\n"
    "  --max-hold MS  cap on the whole hold, renewals included\n"
    "  --grace MS     SIGTERM to SIGKILL after a lost lease (default " TEXT_GRACE_DEFAULT ")\n"
    "  --url URL      the gateway (default $FENCEGATE_URL, else " CTL_DEFAULT_URL ")\n"
    "\n"
    "Exit status: COMMAND's, or 1 usage, 2 busy, 3 lease lost, 4 unreachable, 5 other error.\n";

static const char usage_sem[] =
    "usage: fencectl sem NAME --limit N [--ttl MS] [--wait MS] [--owner S] [--max-hold MS]\n"
    "                                   [--grace MS] [--] COMMAND [ARGS...]\n"
    "\n"
    "As `fencectl lock`, holding one of the N slots of semaphore NAME. --limit (" TEXT_SEM_LIMIT
    ") is\n"
    "required and must match the limit in force (409 limit_mismatch otherwise, exit 5).\n"
    "\n"
    "Exit status: COMMAND's, or 1 usage, 2 busy, 3 lease lost, 4 unreachable, 5 other error.\n";

static const char usage_acquire[] =
    "usage: fencectl acquire NAME [--ttl MS] [--wait MS] [--owner S] [--max-hold MS]\n"
    "                             [--request-id ID] [--sem --limit N] [--json]\n"
    "\n"
    "Takes a lease on lock NAME (or a slot of semaphore NAME with --sem or --limit) and prints\n"
    "exported shell variables, for eval \"$(fencectl acquire NAME)\":\n"
    "  export FENCE_TOKEN=...  export FENCE=...  export FENCE_EXPIRES_AT_MS=...\n"
    "With --json, prints the gateway's answer instead. The lease lasts its TTL unless renewed.\n"
    "A retry with the same --request-id keeps its place and gets the same lease.\n"
    "\n"
    "Exit status: 0 granted, 1 usage, 2 busy, 3 lease lost, 4 unreachable, 5 other error.\n";

static const char usage_renew[] =
    "usage: fencectl renew NAME [--token T] [--ttl MS] [--sem] [--json]\n"
    "\n"
    "Extends the lease whose token is T (default $FENCE_TOKEN) by MS (default its own TTL),\n"
    "and prints export FENCE=... and export FENCE_EXPIRES_AT_MS=... (the fence never\n"
    "changes).\n"
    "\n"
    "Exit status: 0 renewed, 1 usage, 3 lease lost (410 lease_lost, 409 max_hold_exceeded),\n"
    "4 unreachable, 5 other error.\n";

static const char usage_release[] =
    "usage: fencectl release NAME [--token T] [--sem] [--json]\n"
    "\n"
    "Gives back the lease whose token is T (default $FENCE_TOKEN). Releasing an already\n"
    "released lease succeeds again.\n"
    "\n"
    "Exit status: 0 released, 1 usage, 3 lease lost, 4 unreachable, 5 other error.\n";

static const char usage_status[] =
    "usage: fencectl status NAME [--sem] [--json]\n"
    "\n"
    "Shows whether lock NAME is held, its fence, owner and remaining time, and how many wait\n"
    "(with --sem: the semaphore's limit, holders and waiters). Never shows a token.\n"
    "\n"
    "Exit status: 0 answered, 1 usage, 4 unreachable, 5 other error.\n";

static const char usage_audit[] =
    "usage: fencectl audit [--resource R] [--lock L] [--lease-kind K] [--since MS] [--limit N]\n"
    "                      [--after-id ID] [--json]\n"
    "\n"
    "Lists the rejected (stale or forged) writes, oldest first, as a table.\n"
    "  --resource R   only this resource, e.g. pg:invoices/42 or redis:app:x\n"
    "  --lock L       only writes whose token was issued for lock or semaphore L (the table's\n"
    "                 KIND column says which)\n"
    "  --lease-kind K only writes whose token was issued for a lease of kind K, lock or\n"
    "                 semaphore (with --lock L: the lock L, or the semaphore L)\n"
    "  --since MS     only records at or after this epoch time in milliseconds\n"
    "  --limit N      at most N records (the gateway's default page is " TEXT_AUDIT_PAGE ")\n"
    "  --after-id ID  the page after record ID (printed when a page is full: more may follow)\n"
    "\n"
    "Exit status: 0 answered, 1 usage, 4 unreachable, 5 other error.\n";

static const char usage_revoke[] =
    "usage: fencectl revoke NAME [--reason R] [--json]\n"
    "       fencectl revoke NAME --sem --fence N [--reason R] [--json]\n"
    "\n"
    "Ends the lease of lock NAME's holder at once (or, with --sem, of the holder of semaphore\n"
    "NAME with fence N): the lock passes to the next waiter, and no write presenting the revoked\n"
    "token is accepted from now on, on any resource. Needs the admin scope when keys are on.\n"
    "Prints \"revoked fence N\", or \"nothing to revoke\" when no such lease holds.\n"
    "\n"
    "Exit status: 0 answered, 1 usage, 4 unreachable, 5 other error.\n";

static const char usage_watch[] =
    "usage: fencectl watch NAME --fence N [--sem] [--wait MS] [--json]\n"
    "\n"
    "Waits until the lease with fence N on lock NAME (semaphore NAME with --sem) no longer holds,\n"
    "then prints how it ended: released, expired or revoked. --wait MS (" TEXT_WAIT
    ", default " TEXT_WATCH_DEFAULT ")\n"
    "bounds the wait; if the lease still holds then, prints its time left.\n"
    "\n"
    "Exit status: 0 the lease ended, 2 it still holds after --wait, 1 usage, 4 unreachable,\n"
    "5 other error.\n";

static const char usage_list[] =
    "usage: fencectl list [PREFIX] [--sem] [--limit N] [--json]\n"
    "\n"
    "Lists the locks and the semaphores whose names start with PREFIX (default: all) that are\n"
    "held or have waiters, in name order, as one table: kind, name, whether held (a semaphore:\n"
    "holders/limit), fence(s), owner(s), time left and waiters. Never shows a token. With --sem\n"
    "only semaphores. --limit N stops after N of each kind (default: every one; the gateway is\n"
    "asked a page at a time). With --json prints {\"locks\": [...], \"semaphores\": [...]}, the\n"
    "items of GET /v1/locks?prefix= and /v1/semaphores?prefix=.\n"
    "  PREFIX   0 to " TEXT_NAME_MAX " bytes of A-Z a-z 0-9 . _ : / -\n"
    "\n"
    "Exit status: 0 answered, 1 usage, 4 unreachable, 5 other error.\n";

static const struct {
    const char *word;
    enum ctl_command command;
    bool takes_name;    /* NAME follows the subcommand */
    bool takes_command; /* COMMAND [ARGS...] follows NAME */
    const char *usage;
} commands[] = {
    {NULL, CTL_CMD_NONE, false, false, usage_overview},
    {"lock", CTL_CMD_LOCK, true, true, usage_lock},
    {"sem", CTL_CMD_SEM, true, true, usage_sem},
    {"acquire", CTL_CMD_ACQUIRE, true, false, usage_acquire},
    {"renew", CTL_CMD_RENEW, true, false, usage_renew},
    {"release", CTL_CMD_RELEASE, true, false, usage_release},
    {"status", CTL_CMD_STATUS, true, false, usage_status},
    {"audit", CTL_CMD_AUDIT, false, false, usage_audit},
    {"revoke", CTL_CMD_REVOKE, true, false, usage_revoke},
    {"watch", CTL_CMD_WATCH, true, false, usage_watch},
    {"list", CTL_CMD_LIST, true, false, usage_list},
};

/* How an option's value is read: none, a string, a number, or a number
 * written as a fence is (integer_parse_exact: no leading zero). */
enum option_type { OPTION_FLAG, OPTION_STRING, OPTION_NUMBER, OPTION_FENCE };

/* One option: the field of struct ctl_args it sets, and where it applies. */
static const struct option_spec {
    const char *name;
    enum option_type type;
    size_t field;      /* offsetof the bool, const char * or long long it sets */
    unsigned commands; /* CMD() bits of the subcommands that take it */
    long long min;     /* range of a number */
    long long max;
} options[] = {
    {"--help", OPTION_FLAG, offsetof(struct ctl_args, help), ALL_COMMANDS, 0, 0},
    {"-h", OPTION_FLAG, offsetof(struct ctl_args, help), ALL_COMMANDS, 0, 0},
    {"--version", OPTION_FLAG, offsetof(struct ctl_args, version), ALL_COMMANDS, 0, 0},
    {"--url", OPTION_STRING, offsetof(struct ctl_args, url), ALL_COMMANDS, 0, 0},
    {"--cacert", OPTION_STRING, offsetof(struct ctl_args, cacert), ALL_COMMANDS, 0, 0},
    {"--json", OPTION_FLAG, offsetof(struct ctl_args, json), ANSWERS_JSON, 0, 0},
    {"--ttl", OPTION_NUMBER, offsetof(struct ctl_args, ttl_ms),
     LEASED | CMD(CTL_CMD_ACQUIRE) | CMD(CTL_CMD_RENEW), TTL_MIN_MS, TTL_MAX_MS},
    {"--wait", OPTION_NUMBER, offsetof(struct ctl_args, wait_ms),
     LEASED | CMD(CTL_CMD_ACQUIRE) | CMD(CTL_CMD_WATCH), 0, WAIT_MAX_MS},
    {"--max-hold", OPTION_NUMBER, offsetof(struct ctl_args, max_hold_ms),
     LEASED | CMD(CTL_CMD_ACQUIRE), 1, LLONG_MAX},
    {"--owner", OPTION_STRING, offsetof(struct ctl_args, owner), LEASED | CMD(CTL_CMD_ACQUIRE), 0,
     0},
    {"--request-id", OPTION_STRING, offsetof(struct ctl_args, request_id), CMD(CTL_CMD_ACQUIRE), 0,
     0},
    {"--limit", OPTION_NUMBER, offsetof(struct ctl_args, limit),
     CMD(CTL_CMD_SEM) | CMD(CTL_CMD_ACQUIRE) | CMD(CTL_CMD_AUDIT) | CMD(CTL_CMD_LIST), 1,
     SEMAPHORE_MAX_LIMIT},
    {"--sem", OPTION_FLAG, offsetof(struct ctl_args, semaphore),
     SCRIPTED | CMD(CTL_CMD_STATUS) | CMD(CTL_CMD_REVOKE) | CMD(CTL_CMD_WATCH) | CMD(CTL_CMD_LIST),
     0, 0},
    {"--token", OPTION_STRING, offsetof(struct ctl_args, token),
     CMD(CTL_CMD_RENEW) | CMD(CTL_CMD_RELEASE), 0, 0},
    {"--grace", OPTION_NUMBER, offsetof(struct ctl_args, grace_ms), LEASED, 0, CTL_GRACE_MAX_MS},
    {"--resource", OPTION_STRING, offsetof(struct ctl_args, resource), CMD(CTL_CMD_AUDIT), 0, 0},
    {"--lock", OPTION_STRING, offsetof(struct ctl_args, lock), CMD(CTL_CMD_AUDIT), 0, 0},
    {"--lease-kind", OPTION_STRING, offsetof(struct ctl_args, lease_kind), CMD(CTL_CMD_AUDIT), 0,
     0},
    {"--since", OPTION_NUMBER, offsetof(struct ctl_args, since_ms), CMD(CTL_CMD_AUDIT), 0,
     LLONG_MAX},
    {"--after-id", OPTION_NUMBER, offsetof(struct ctl_args, after_id), CMD(CTL_CMD_AUDIT), 0,
     LLONG_MAX},
    {"--reason", OPTION_STRING, offsetof(struct ctl_args, reason), CMD(CTL_CMD_REVOKE), 0, 0},
    {"--fence", OPTION_FENCE, offsetof(struct ctl_args, fence),
     CMD(CTL_CMD_REVOKE) | CMD(CTL_CMD_WATCH), 1, LLONG_MAX},
    {"--set", OPTION_STRING, offsetof(struct ctl_args, set), CMD(CTL_CMD_LOCK), 0, 0},
};

#define NOPTIONS  (sizeof options / sizeof options[0])
#define NCOMMANDS (sizeof commands / sizeof commands[0])

const char *ctl_usage(enum ctl_command command)
{
    for (size_t i = 0; i < NCOMMANDS; i++)
        if (commands[i].command == command)
            return commands[i].usage;
    return usage_overview;
}

static const char *command_word(enum ctl_command command)
{
    for (size_t i = 1; i < NCOMMANDS; i++)
        if (commands[i].command == command)
            return commands[i].word;
    return "fencectl";
}

/* Reads text, the value of option spec (OPTION_NUMBER or OPTION_FENCE), into *out. */
static int parse_number(const struct option_spec *spec, const char *text, long long *out,
                        struct fg_error *err)
{
    bool fence = spec->type == OPTION_FENCE;
    enum integer_parse read = fence ? integer_parse_exact(text, spec->min, spec->max, out)
                                    : integer_parse(text, spec->min, spec->max, out);
    if (read != INTEGER_OK) {
        if (spec->max == LLONG_MAX)
            return fg_fail(err, FG_ERR_INVALID_FIELD, "%s: expected an integer >= %lld%s, got '%s'",
                           spec->name, spec->min, fence ? " without leading zeros" : "", text);
        return fg_fail(err, FG_ERR_INVALID_FIELD,
                       "%s: expected an integer from %lld to %lld, got '%s'", spec->name, spec->min,
                       spec->max, text);
    }
    return 0;
}

/* Sets the field of spec in out from value (NULL for a flag). */
static int apply_option(const struct option_spec *spec, const char *value, struct ctl_args *out,
                        struct fg_error *err)
{
    char *field = (char *)out + spec->field;
    switch (spec->type) {
    case OPTION_FLAG: *(bool *)(void *)field = true; return 0;
    case OPTION_STRING: *(const char **)(void *)field = value; return 0;
    case OPTION_NUMBER:
    case OPTION_FENCE: return parse_number(spec, value, (long long *)(void *)field, err);
    }
    return fg_fail(err, FG_ERR_INTERNAL, "option %s has no type", spec->name);
}

/* Parses the option at argv[*i] (advancing *i past its value), remembering it in given. */
static int take_option(int argc, char **argv, int *i, struct ctl_args *out, bool *given,
                       struct fg_error *err)
{
    const char *arg = argv[*i];
    const char *eq = strchr(arg, '=');
    size_t name_len = eq ? (size_t)(eq - arg) : strlen(arg);
    for (size_t k = 0; k < NOPTIONS; k++) {
        const struct option_spec *spec = &options[k];
        if (strlen(spec->name) != name_len || strncmp(spec->name, arg, name_len) != 0)
            continue;
        const char *value = NULL;
        if (spec->type == OPTION_FLAG && eq != NULL)
            return fg_fail(err, FG_ERR_INVALID_FIELD, "%s takes no value", spec->name);
        if (spec->type != OPTION_FLAG) {
            if (eq != NULL)
                value = eq + 1;
            else if (*i + 1 < argc)
                value = argv[++*i];
            else
                return fg_fail(err, FG_ERR_INVALID_FIELD, "%s needs a value", spec->name);
        }
        given[k] = true;
        return apply_option(spec, value, out, err);
    }
    return fg_fail(err, FG_ERR_INVALID_FIELD, "unknown option '%.*s'", (int)name_len, arg);
}

/* Takes a word that is not an option: the subcommand, NAME, or the start of COMMAND.
 * Returns 1 when the rest of argv is COMMAND, 0 to go on, -1 on error. */
static int take_word(char **argv, int i, struct ctl_args *out, struct fg_error *err)
{
    if (out->command == CTL_CMD_NONE) {
        for (size_t k = 1; k < NCOMMANDS; k++)
            if (strcmp(argv[i], commands[k].word) == 0) {
                out->command = commands[k].command;
                return 0;
            }
        return fg_fail(err, FG_ERR_INVALID_FIELD, "unknown command '%s'; see fencectl --help",
                       argv[i]);
    }
    for (size_t k = 1; k < NCOMMANDS; k++) {
        if (commands[k].command != out->command)
            continue;
        if (commands[k].takes_name && out->name == NULL && out->set == NULL) {
            out->name = argv[i];
            return 0;
        }
        if (commands[k].takes_command) {
            out->argv = &argv[i];
            return 1;
        }
    }
    return fg_fail(err, FG_ERR_INVALID_FIELD, "unexpected argument '%s'", argv[i]);
}

/* Splits --set into out->set_names: 1 to CTL_SET_MAX distinct valid lock names. */
static int split_set(struct ctl_args *out, struct fg_error *err)
{
    const char *p = out->set;
    for (;;) {
        size_t len = strcspn(p, ",");
        if (out->set_size == CTL_SET_MAX)
            return fg_fail(err, FG_ERR_INVALID_FIELD, "--set: at most %d locks", CTL_SET_MAX);
        if (!name_is_valid_lock(p, len))
            return fg_fail(err, FG_ERR_INVALID_FIELD,
                           "--set: invalid name '%.*s': 1 to %d bytes of A-Z a-z 0-9 . _ : / -",
                           (int)(len > NAME_MAX_LEN ? NAME_MAX_LEN : len), p, NAME_MAX_LEN);
        memcpy(out->set_names[out->set_size], p, len);
        out->set_names[out->set_size][len] = '\0';
        for (size_t i = 0; i < out->set_size; i++)
            if (strcmp(out->set_names[i], out->set_names[out->set_size]) == 0)
                return fg_fail(err, FG_ERR_INVALID_FIELD, "--set: '%s' is named twice",
                               out->set_names[i]);
        out->set_size++;
        if (p[len] == '\0')
            return 0;
        p += len + 1;
    }
}

/* Checks what the whole command line says once it has been read. */
static int check_args(struct ctl_args *out, const bool *given, ctl_getenv_fn getenv_fn,
                      struct fg_error *err)
{
    const char *word = command_word(out->command);
    if (out->command == CTL_CMD_NONE)
        return fg_fail(err, FG_ERR_INVALID_FIELD, "no command given; see fencectl --help");
    for (size_t k = 0; k < NOPTIONS; k++)
        if (given[k] && !(options[k].commands & CMD(out->command)))
            return fg_fail(err, FG_ERR_INVALID_FIELD, "%s does not apply to '%s'", options[k].name,
                           word);
    if (out->set != NULL && out->name != NULL)
        return fg_fail(err, FG_ERR_INVALID_FIELD, "'lock' takes NAME or --set, not both");
    if (out->set != NULL && split_set(out, err) != 0)
        return -1;
    if (out->command == CTL_CMD_LIST && out->name != NULL && out->name[0] != '\0' &&
        !name_is_valid_lock(out->name, strlen(out->name)))
        return fg_fail(err, FG_ERR_INVALID_FIELD,
                       "invalid prefix '%s': 0 to %d bytes of A-Z a-z 0-9 . _ : / -", out->name,
                       NAME_MAX_LEN);
    bool needs_name =
        out->command != CTL_CMD_AUDIT && out->command != CTL_CMD_LIST && out->set == NULL;
    if (needs_name && out->name == NULL)
        return fg_fail(err, FG_ERR_INVALID_FIELD, "'%s' needs a NAME; see fencectl %s --help", word,
                       word);
    if (needs_name && !name_is_valid_lock(out->name, strlen(out->name)))
        return fg_fail(err, FG_ERR_INVALID_FIELD,
                       "invalid name '%s': 1 to %d bytes of A-Z a-z 0-9 . _ : / -", out->name,
                       NAME_MAX_LEN);
    if ((out->command == CTL_CMD_LOCK || out->command == CTL_CMD_SEM) &&
        (out->argv == NULL || out->argv[0] == NULL))
        return fg_fail(err, FG_ERR_INVALID_FIELD, "'%s' needs a COMMAND to run after NAME", word);
    if (out->command == CTL_CMD_SEM || (out->command == CTL_CMD_ACQUIRE && out->limit >= 0))
        out->semaphore = true;
    if ((out->command == CTL_CMD_SEM || out->command == CTL_CMD_ACQUIRE) && out->semaphore &&
        out->limit < 0)
        return fg_fail(err, FG_ERR_INVALID_FIELD, "a semaphore needs --limit N");
    if (out->command == CTL_CMD_WATCH && out->fence < 0)
        return fg_fail(err, FG_ERR_INVALID_FIELD, "'watch' needs --fence N");
    if (out->command == CTL_CMD_REVOKE && out->semaphore != (out->fence >= 0))
        return fg_fail(err, FG_ERR_INVALID_FIELD,
                       "'revoke' of a semaphore holder needs --sem and --fence N; a lock's, "
                       "neither");
    if (out->command == CTL_CMD_AUDIT && out->limit > AUDIT_LIMIT_MAX)
        return fg_fail(err, FG_ERR_INVALID_FIELD, "--limit: at most %d records per page",
                       AUDIT_LIMIT_MAX);
    if (out->lease_kind != NULL && strcmp(out->lease_kind, "lock") != 0 &&
        strcmp(out->lease_kind, "semaphore") != 0)
        return fg_fail(err, FG_ERR_INVALID_FIELD,
                       "--lease-kind: expected lock or semaphore, got '%s'", out->lease_kind);
    if (out->command == CTL_CMD_RENEW || out->command == CTL_CMD_RELEASE) {
        if (out->token == NULL)
            out->token = getenv_fn("FENCE_TOKEN");
        if (out->token == NULL || out->token[0] == '\0')
            return fg_fail(err, FG_ERR_INVALID_FIELD, "'%s' needs --token T or FENCE_TOKEN", word);
    }
    return 0;
}

int ctl_args_parse(int argc, char **argv, ctl_getenv_fn getenv_fn, struct ctl_args *out,
                   struct fg_error *err)
{
    *out = (struct ctl_args){.ttl_ms = -1,
                             .wait_ms = -1,
                             .max_hold_ms = -1,
                             .limit = -1,
                             .grace_ms = CTL_GRACE_DEFAULT_MS,
                             .since_ms = -1,
                             .after_id = -1,
                             .fence = -1};
    bool given[NOPTIONS] = {false};
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        bool runs_command = out->command == CTL_CMD_LOCK || out->command == CTL_CMD_SEM;
        if (strcmp(arg, "--") == 0) {
            if (!runs_command)
                return fg_fail(err, FG_ERR_INVALID_FIELD, "'--' only comes before a COMMAND");
            if (i + 1 < argc)
                out->argv = &argv[i + 1];
            break;
        }
        if (arg[0] == '-' && arg[1] != '\0') {
            if (take_option(argc, argv, &i, out, given, err) != 0)
                return -1;
            continue;
        }
        int rc = take_word(argv, i, out, err);
        if (rc < 0)
            return -1;
        if (rc == 1)
            break;
    }
    if (out->help || out->version)
        return 0;
    if (check_args(out, given, getenv_fn, err) != 0)
        return -1;
    if (out->url == NULL)
        out->url = getenv_fn("FENCEGATE_URL");
    if (out->url == NULL || out->url[0] == '\0')
        out->url = CTL_DEFAULT_URL;
    if (out->cacert == NULL)
        out->cacert = getenv_fn("FENCEGATE_CACERT");
    if (ctl_url_parse(out->url, &out->gateway, err) != 0)
        return -1;
    out->gateway.cacert = out->cacert != NULL && out->cacert[0] != '\0' ? out->cacert : NULL;
    const char *key = getenv_fn("FENCEGATE_KEY");
    out->gateway.key = key != NULL && key[0] != '\0' ? key : NULL;
    if (out->gateway.key != NULL && strpbrk(out->gateway.key, " \t\r\n") != NULL)
        return fg_fail(err, FG_ERR_INVALID_FIELD, "FENCEGATE_KEY: a key is one word");
    return 0;
}

int ctl_url_parse(const char *url, struct ctl_url *out, struct fg_error *err)
{
    memset(out, 0, sizeof *out);
    if (strncmp(url, "https://", 8) == 0)
        out->tls = true;
    else if (strncmp(url, "http://", 7) != 0)
        return fg_fail(err, FG_ERR_INVALID_FIELD,
                       "URL '%s': only http://host[:port] and https://host[:port] are supported",
                       url);
    const char *host = url + (out->tls ? 8 : 7);
    const char *slash = strchr(host, '/');
    const char *end = slash ? slash : host + strlen(host);
    const char *host_end, *colon;
    if (host[0] == '[') {
        const char *close = memchr(host, ']', (size_t)(end - host));
        if (close == NULL)
            return fg_fail(err, FG_ERR_INVALID_FIELD, "URL '%s': unclosed '['", url);
        host_end = close;
        host++;
        colon = close + 1 < end && close[1] == ':' ? close + 1 : NULL;
        if (close + 1 < end && colon == NULL)
            return fg_fail(err, FG_ERR_INVALID_FIELD, "URL '%s': junk after ']'", url);
    } else {
        colon = memchr(host, ':', (size_t)(end - host));
        host_end = colon ? colon : end;
    }
    size_t host_len = (size_t)(host_end - host);
    if (host_len == 0 || host_len >= sizeof out->host || memchr(host, '@', host_len) != NULL)
        return fg_fail(err, FG_ERR_INVALID_FIELD, "URL '%s': bad host", url);
    memcpy(out->host, host, host_len);
    out->port = out->tls ? 443 : 80;
    if (colon != NULL) {
        long port = 0;
        const char *p = colon + 1;
        for (; p < end && *p >= '0' && *p <= '9' && port <= 65535; p++)
            port = port * 10 + (*p - '0');
        if (p != end || p == colon + 1 || port < 1 || port > 65535)
            return fg_fail(err, FG_ERR_INVALID_FIELD, "URL '%s': bad port", url);
        out->port = (int)port;
    }
    if (slash != NULL) {
        size_t base_len = strcspn(slash, "?#");
        while (base_len > 0 && slash[base_len - 1] == '/')
            base_len--;
        if (base_len >= sizeof out->base)
            return fg_fail(err, FG_ERR_INVALID_FIELD, "URL '%s': path too long", url);
        memcpy(out->base, slash, base_len);
    }
    return 0;
}
