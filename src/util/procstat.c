/* SPDX-License-Identifier: Apache-2.0 */
/*
 * procstat.c - the process's own resource figures for /metrics: CPU seconds
 * (getrusage), resident and virtual memory (/proc/self/statm), open and maximum
 * file descriptors (/proc/self/fd, RLIMIT_NOFILE) and the start time. Linux
 * only, read-only, no allocation beyond opendir. Must not: log or fail the
 * scrape; a figure it cannot read is reported as -1 and left out.
 */
#include "util/procstat.h"

#include <dirent.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static double start_time_s = -1;

void procstat_init(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    start_time_s = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double timeval_s(struct timeval tv)
{
    return (double)tv.tv_sec + (double)tv.tv_usec / 1e6;
}

/* Entries of /proc/self/fd, minus the one opendir itself holds; -1 if unreadable. */
static long count_open_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (d == NULL)
        return -1;
    long n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n - 1;
}

/* Virtual and resident sizes in bytes from /proc/self/statm (in pages there). */
static void read_memory(struct metrics_process *out)
{
    FILE *f = fopen("/proc/self/statm", "re");
    unsigned long long size = 0, resident = 0;
    if (f != NULL && fscanf(f, "%llu %llu", &size, &resident) == 2) {
        long long page = sysconf(_SC_PAGESIZE);
        out->virtual_bytes = (long long)size * page;
        out->resident_bytes = (long long)resident * page;
    }
    if (f != NULL)
        fclose(f);
}

void procstat_read(struct metrics_process *out)
{
    *out = (struct metrics_process){.cpu_seconds = -1,
                                    .resident_bytes = -1,
                                    .virtual_bytes = -1,
                                    .open_fds = -1,
                                    .max_fds = -1,
                                    .start_time_seconds = start_time_s};
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) == 0)
        out->cpu_seconds = timeval_s(ru.ru_utime) + timeval_s(ru.ru_stime);
    read_memory(out);
    out->open_fds = count_open_fds();
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
        out->max_fds = rl.rlim_cur == RLIM_INFINITY ? -1 : (long long)rl.rlim_cur;
}
