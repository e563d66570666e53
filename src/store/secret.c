/*
 * secret.c - finds the token secret: configuration first, then the row
 * 'token_secret' of fencegate.settings, created with a fresh random value by
 * whichever gateway gets there first (INSERT ... ON CONFLICT DO NOTHING).
 */
#include "store/secret.h"

#include <string.h>

#include "lease/token.h"
#include "store/pg.h"

static int copy_secret(const char *value, unsigned char *out, size_t cap, size_t *len,
                       struct fg_error *err)
{
    size_t n = strlen(value);
    if (n > cap)
        return fg_fail(err, FG_ERR_CONFIG, "secret longer than %zu bytes", cap);
    memcpy(out, value, n);
    *len = n;
    return 0;
}

int secret_load(const struct config *cfg, unsigned char *out, size_t cap, size_t *len,
                struct fg_error *err)
{
    if (cfg->secret != NULL)
        return copy_secret(cfg->secret, out, cap, len, err);
    char fresh[2 * (LEASE_ID_LEN + 1)];
    if (token_new_lease_id(fresh, err) != 0 || token_new_lease_id(fresh + LEASE_ID_LEN, err) != 0)
        return -1;
    const char *params[] = {fresh};
    json_t *rows = NULL;
    if (pg_query(NULL,
                 "INSERT INTO fencegate.settings (name, value) VALUES ('token_secret', $1) "
                 "ON CONFLICT (name) DO NOTHING",
                 1, params, NULL, err) != 0 ||
        pg_query(NULL, "SELECT value FROM fencegate.settings WHERE name = 'token_secret'", 0, NULL,
                 &rows, err) != 0)
        return -1;
    const char *value = json_string_value(json_object_get(json_array_get(rows, 0), "value"));
    int rc = value ? copy_secret(value, out, cap, len, err)
                   : fg_fail(err, FG_ERR_INTERNAL, "token secret missing after insert");
    json_decref(rows);
    return rc;
}
