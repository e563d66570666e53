/* SPDX-License-Identifier: Apache-2.0 */
/*
 * secret.c - finds the token secret: configuration first, then the row
 * 'token_secret' of fencegate.settings, created with a fresh random value by
 * whichever gateway gets there first (INSERT ... ON CONFLICT DO NOTHING).
 * Keys from the configuration never go to the database.
 */
#include "store/backend/secret.h"

#include <stdlib.h>
#include <string.h>

#include "auth/token.h"
#include "store/backend/pg.h"
#include "util/published.h"

int secret_load(const struct config *cfg, struct token_keyring *ring, struct fg_error *err)
{
    memset(ring, 0, sizeof *ring);
    if (cfg->keyring != NULL) {
        *ring = *cfg->keyring;
        return 0;
    }
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
    int rc = value ? token_keyring_add(ring, TOKEN_LEGACY_KEY, value, err)
                   : fg_fail(err, FG_ERR_INTERNAL, "token secret missing after insert");
    json_decref(rows);
    return rc;
}

static struct published in_force = PUBLISHED_INIT(free);

void secret_publish(struct token_keyring *ring)
{
    published_set(&in_force, ring);
}

const struct token_keyring *secret_current(void)
{
    return published_get(&in_force);
}

void secret_shutdown(void)
{
    published_clear(&in_force);
}
