#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# deploy/ha/pg-primary-init.sh — owns: making the primary of docker-compose.ha.yml stream to its standby and
# wait for it on every commit (run once by the postgres image when it initializes the data directory; the
# setting takes effect at the server's real start, so the image's own set-up does not wait for a standby).
set -e
echo "host replication all all scram-sha-256" >> "$PGDATA/pg_hba.conf"
psql -v ON_ERROR_STOP=1 -U "$POSTGRES_USER" -d "$POSTGRES_DB" -c "ALTER SYSTEM SET synchronous_standby_names = '*'"
