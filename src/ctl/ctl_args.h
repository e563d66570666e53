/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ctl_args.h - the command line of fencectl: subcommands, their options and
 * usage texts, and the gateway URL. Pure: the environment is read through a
 * lookup function, and every string in struct ctl_args is borrowed from argv,
 * the environment or static text.
 */
#ifndef FG_CTL_ARGS_H
#define FG_CTL_ARGS_H

#include <stdbool.h>

#include "fglimits.h"
#include "util/error.h"

#define CTL_DEFAULT_URL "http://127.0.0.1:" FG_STR(DEFAULT_LISTEN_PORT)
#define CTL_SET_MAX     LOCKSET_MAX /* locks in a --set: those of one lock set */

enum ctl_command {
    CTL_CMD_NONE, /* no subcommand: only --help or --version make sense */
    CTL_CMD_LOCK,
    CTL_CMD_SEM,
    CTL_CMD_ACQUIRE,
    CTL_CMD_RENEW,
    CTL_CMD_RELEASE,
    CTL_CMD_STATUS,
    CTL_CMD_AUDIT,
    CTL_CMD_REVOKE,
    CTL_CMD_WATCH,
    CTL_CMD_LIST,
    CTL_CMD_COUNT
};

/* Where the gateway is: parsed from http://host[:port][/base]. */
struct ctl_url {
    char host[256];     /* name or address, without IPv6 brackets */
    int port;           /* TCP port (80, or 443 for https, when the URL names none) */
    char base[256];     /* path prefix without the trailing '/', "" for none */
    bool tls;           /* https:// */
    const char *cacert; /* --cacert, else FENCEGATE_CACERT: CA file for https (borrowed);
                           NULL: the system's CAs */
    const char *key;    /* FENCEGATE_KEY: API key sent as a bearer header (borrowed), or NULL */
};

struct ctl_args {
    enum ctl_command command;
    bool help;              /* --help: show the command's usage */
    bool version;           /* --version */
    bool json;              /* --json: print the gateway's JSON answers */
    bool semaphore;         /* the lease is a semaphore's (sem, --sem, acquire --limit) */
    const char *url;        /* --url, else FENCEGATE_URL, else CTL_DEFAULT_URL */
    const char *cacert;     /* --cacert, else FENCEGATE_CACERT */
    struct ctl_url gateway; /* url, parsed */
    const char *name;       /* lock or semaphore name; list: the prefix, NULL for all */
    long long ttl_ms;       /* --ttl, -1 if not given */
    long long wait_ms;      /* --wait, -1 if not given */
    long long max_hold_ms;  /* --max-hold, -1 if not given */
    long long limit;        /* --limit: semaphore limit, audit page size, or list's most items
                               of each kind; -1 if not given */
    long long grace_ms;     /* --grace: SIGTERM to SIGKILL of COMMAND */
    long long since_ms;     /* --since (audit), -1 if not given */
    long long after_id;     /* --after-id (audit), -1 if not given */
    const char *owner;      /* --owner, NULL if not given */
    const char *request_id; /* --request-id, NULL if not given */
    const char *token;      /* --token, else FENCE_TOKEN (renew, release) */
    const char *resource;   /* --resource (audit) */
    const char *lock;       /* --lock (audit) */
    const char *lease_kind; /* --lease-kind (audit): "lock" or "semaphore", NULL if not given */
    const char *reason;     /* --reason (revoke), NULL if not given */
    long long fence;        /* --fence (revoke of a semaphore holder, watch), -1 if not given */
    const char *set;        /* --set a,b,c (lock): a lock set instead of NAME, NULL if none */
    char set_names[CTL_SET_MAX][256]; /* the names of --set, in the order given */
    size_t set_size;                  /* entries in set_names, 0 without --set */
    char **argv;                      /* COMMAND and its arguments (lock, sem), NULL-terminated */
};

/* Looks up one environment variable (getenv in fencectl, a table in tests). */
typedef const char *(*ctl_getenv_fn)(const char *name);

/*
 * Parses argv[1..argc-1] into *out. A wrong option, a missing or malformed value
 * or a missing argument fails with FG_ERR_INVALID_FIELD and a message for the
 * user; --help and --version succeed whatever else is missing.
 */
int ctl_args_parse(int argc, char **argv, ctl_getenv_fn getenv_fn, struct ctl_args *out,
                   struct fg_error *err) FG_WUR;

/* Parses an http:// URL into *out; anything else fails with FG_ERR_INVALID_FIELD. */
int ctl_url_parse(const char *url, struct ctl_url *out, struct fg_error *err) FG_WUR;

/* The usage text of command (CTL_CMD_NONE: the overview), static. */
const char *ctl_usage(enum ctl_command command);

#endif
