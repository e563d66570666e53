/* SPDX-License-Identifier: Apache-2.0 */
/*
 * keygen.h - `fencegate keys new --id ID --scope S ...`: makes a fresh random
 * API key, prints it once, and prints the configuration entry that holds only
 * its SHA-256. Needs no backend.
 */
#ifndef FG_KEYGEN_H
#define FG_KEYGEN_H

#include <stdio.h>

/* Runs `keys` with its arguments (argv[0] is "keys"); writes the key and the
 * entry to out and complaints to errs. Returns the process exit status. */
int keygen_main(int argc, char **argv, FILE *out, FILE *errs);

#endif
