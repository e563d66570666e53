/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tls.h - the certificate and key the HTTPS server presents (config
 * tls_cert_file / tls_key_file). Loading checks what a client would refuse
 * later (an expired or not yet valid certificate, a key that is not the
 * certificate's) and says so at start-up. The identity in force is published
 * whole and handed to each new TLS session by a callback, so SIGHUP swaps the
 * certificate on the live server: sessions already open keep theirs.
 */
#ifndef FG_TLS_H
#define FG_TLS_H

#include "util/error.h"

struct tls_identity;

/* Reads and checks the PEM files; *out is owned by the caller (tls_identity_free),
 * or by tls_publish. Failures are FG_ERR_CONFIG naming the file and the fault. */
int tls_identity_load(const char *cert_file, const char *key_file, struct tls_identity **out,
                      struct fg_error *err) FG_WUR;

/* Frees an identity that was never published (NULL is fine). */
void tls_identity_free(struct tls_identity *id);

/* Puts id (owned from now on) in force for new TLS sessions. */
void tls_publish(struct tls_identity *id);

/* True once an identity has been published. */
int tls_enabled(void);

/* The libmicrohttpd option value for MHD_OPTION_HTTPS_CERT_CALLBACK (a
 * gnutls_certificate_retrieve_function2 *), as an opaque pointer. */
void *tls_cert_callback(void);

/* The protocol floor every priority string ends with: TLS 1.2 and 1.3 only. */
#define TLS_FLOOR ":-VERS-SSL3.0:-VERS-TLS1.0:-VERS-TLS1.1:-VERS-DTLS-ALL"

/* The priorities used when tls_priorities is not set: GnuTLS's NORMAL without
 * SHA-1 MACs (CBC-SHA1 suites), the server's order first. */
#define TLS_DEFAULT_PRIORITIES "NORMAL:-SHA1:%SERVER_PRECEDENCE"

/*
 * The GnuTLS priority string of HTTPS: configured (tls_priorities, NULL for
 * the default) followed by TLS_FLOOR, so a configured string tightens the
 * floor and never lowers it. Checked with GnuTLS; a string it refuses fails
 * with FG_ERR_CONFIG quoting where. *out is owned by the caller.
 */
int tls_priorities_build(const char *configured, char **out, struct fg_error *err) FG_WUR;

/* Frees every identity ever published. The server must be stopped. */
void tls_shutdown(void);

#endif
