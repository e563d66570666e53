/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tls.c - certificates for the HTTPS server, through GnuTLS (the library
 * libmicrohttpd is built on in Debian). Only this file and server.c know that
 * TLS exists; nothing here touches connections.
 */
#include "http/tls.h"

#include <gnutls/abstract.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fglimits.h"
#include "util/published.h"
#include "util/utf8.h"

struct tls_identity {
    gnutls_pcert_st chain[TLS_CHAIN_MAX]; /* the certificate, then its issuers */
    unsigned nchain;                      /* entries of chain in use */
    gnutls_privkey_t key;                 /* the certificate's private key */
};

void tls_identity_free(struct tls_identity *id)
{
    if (id == NULL)
        return;
    for (unsigned i = 0; i < id->nchain; i++)
        gnutls_pcert_deinit(&id->chain[i]);
    if (id->key != NULL)
        gnutls_privkey_deinit(id->key);
    free(id);
}

/* Refuses a certificate outside its validity period. */
static int check_dates(gnutls_x509_crt_t crt, const char *file, struct fg_error *err)
{
    time_t now = time(NULL), from = gnutls_x509_crt_get_activation_time(crt),
           until = gnutls_x509_crt_get_expiration_time(crt);
    char when[32];
    if (until != (time_t)-1 && until < now) {
        strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", gmtime(&until));
        return fg_fail(err, FG_ERR_CONFIG, "tls_cert_file %s: the certificate expired on %s", file,
                       when);
    }
    if (from != (time_t)-1 && from > now) {
        strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", gmtime(&from));
        return fg_fail(err, FG_ERR_CONFIG,
                       "tls_cert_file %s: the certificate is not valid before %s", file, when);
    }
    return 0;
}

/* Refuses a key that is not the certificate's (their key ids differ). */
static int check_pair(gnutls_x509_crt_t crt, gnutls_x509_privkey_t key, const char *key_file,
                      struct fg_error *err)
{
    unsigned char a[64], b[64];
    size_t alen = sizeof a, blen = sizeof b;
    if (gnutls_x509_crt_get_key_id(crt, 0, a, &alen) < 0 ||
        gnutls_x509_privkey_get_key_id(key, 0, b, &blen) < 0 || alen != blen ||
        memcmp(a, b, alen) != 0)
        return fg_fail(err, FG_ERR_CONFIG,
                       "tls_key_file %s: the key does not belong to the certificate", key_file);
    return 0;
}

/* Imports the certificates of cert (PEM) into id after checking the first;
 * *leaf gets the first (the caller deinitializes it), or NULL if none. */
static int load_chain(struct tls_identity *id, const gnutls_datum_t *cert, const char *file,
                      gnutls_x509_crt_t *leaf, struct fg_error *err)
{
    gnutls_x509_crt_t crts[TLS_CHAIN_MAX];
    unsigned n = TLS_CHAIN_MAX;
    *leaf = NULL;
    int rc = gnutls_x509_crt_list_import(crts, &n, cert, GNUTLS_X509_FMT_PEM, 0);
    if (rc <= 0)
        return fg_fail(err, FG_ERR_CONFIG, "tls_cert_file %s: no PEM certificate (%s)", file,
                       rc < 0 ? gnutls_strerror(rc) : "empty");
    int status = check_dates(crts[0], file, err);
    for (unsigned i = 0; status == 0 && i < n; i++) {
        if (gnutls_pcert_import_x509(&id->chain[i], crts[i], 0) != 0)
            status =
                fg_fail(err, FG_ERR_CONFIG, "tls_cert_file %s: certificate %u unusable", file, i);
        else
            id->nchain++;
    }
    for (unsigned i = 1; i < n; i++)
        gnutls_x509_crt_deinit(crts[i]);
    *leaf = crts[0];
    return status;
}

/* Imports the private key of key (PEM), checked against leaf. */
static int load_key(struct tls_identity *id, const gnutls_datum_t *key, const char *file,
                    gnutls_x509_crt_t leaf, struct fg_error *err)
{
    gnutls_x509_privkey_t xkey;
    FG_ASSERT(gnutls_x509_privkey_init(&xkey) == 0);
    int rc = gnutls_x509_privkey_import(xkey, key, GNUTLS_X509_FMT_PEM);
    if (rc < 0) {
        gnutls_x509_privkey_deinit(xkey);
        return fg_fail(err, FG_ERR_CONFIG, "tls_key_file %s: no PEM private key (%s)", file,
                       gnutls_strerror(rc));
    }
    if (check_pair(leaf, xkey, file, err) != 0) {
        gnutls_x509_privkey_deinit(xkey);
        return -1;
    }
    FG_ASSERT(gnutls_privkey_init(&id->key) == 0);
    FG_ASSERT(gnutls_privkey_import_x509(id->key, xkey, GNUTLS_PRIVKEY_IMPORT_AUTO_RELEASE) == 0);
    return 0;
}

int tls_identity_load(const char *cert_file, const char *key_file, struct tls_identity **out,
                      struct fg_error *err)
{
    gnutls_datum_t cert = {NULL, 0}, key = {NULL, 0};
    gnutls_x509_crt_t leaf = NULL;
    struct tls_identity *id = calloc(1, sizeof *id);
    FG_ASSERT(id != NULL);
    int rc = -1;
    if (gnutls_load_file(cert_file, &cert) < 0)
        fg_fail(err, FG_ERR_CONFIG, "tls_cert_file %s: cannot read the file", cert_file);
    else if (gnutls_load_file(key_file, &key) < 0)
        fg_fail(err, FG_ERR_CONFIG, "tls_key_file %s: cannot read the file", key_file);
    else if (load_chain(id, &cert, cert_file, &leaf, err) == 0)
        rc = load_key(id, &key, key_file, leaf, err);
    if (leaf != NULL)
        gnutls_x509_crt_deinit(leaf);
    gnutls_free(cert.data);
    gnutls_free(key.data);
    if (rc != 0) {
        tls_identity_free(id);
        id = NULL;
    }
    *out = id;
    return rc;
}

static void identity_free_any(void *id)
{
    tls_identity_free(id);
}

static struct published in_force = PUBLISHED_INIT(identity_free_any);

void tls_publish(struct tls_identity *id)
{
    published_set(&in_force, id);
}

int tls_enabled(void)
{
    return published_get(&in_force) != NULL;
}

/* GnuTLS asks for the certificate of each new session: the identity in force.
 * GnuTLS does not free what it is given here (retrieve_function2). */
static int retrieve(gnutls_session_t session, const gnutls_datum_t *req_ca_dn, int nreqs,
                    const gnutls_pk_algorithm_t *algos, int nalgos, gnutls_pcert_st **pcert,
                    unsigned int *pcert_length, gnutls_privkey_t *pkey)
{
    (void)session;
    (void)req_ca_dn;
    (void)nreqs;
    (void)algos;
    (void)nalgos;
    struct tls_identity *id = published_get(&in_force);
    if (id == NULL)
        return -1;
    *pcert = id->chain;
    *pcert_length = id->nchain;
    *pkey = id->key;
    return 0;
}

void *tls_cert_callback(void)
{
    return (void *)(gnutls_certificate_retrieve_function2 *)retrieve;
}

void tls_shutdown(void)
{
    published_clear(&in_force);
}

int tls_priorities_build(const char *configured, char **out, struct fg_error *err)
{
    const char *base = configured != NULL ? configured : TLS_DEFAULT_PRIORITIES;
    size_t len = strlen(base) + sizeof TLS_FLOOR;
    *out = malloc(len);
    FG_ASSERT(*out != NULL);
    snprintf(*out, len, "%s" TLS_FLOOR, base);
    gnutls_priority_t cache;
    const char *where = NULL;
    int rc = gnutls_priority_init(&cache, *out, &where);
    if (rc == GNUTLS_E_SUCCESS) {
        gnutls_priority_deinit(cache);
        return 0;
    }
    const char *at = where != NULL ? where : base;
    return fg_fail(err, FG_ERR_CONFIG, "tls_priorities: %s at '%.*s'", gnutls_strerror(rc),
                   utf8_cut_len(at, 60), at);
}
