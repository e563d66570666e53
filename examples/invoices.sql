-- SPDX-License-Identifier: Apache-2.0
-- examples/invoices.sql: the example application table of the README walk-through, of
-- examples/fencegate.json and of the tests: invoice-style rows. Not a migration: the gateway never
-- creates application tables. scripts/services.sh applies it to the dev and test databases and
-- docker-compose.yml to the compose database; a deployment creates its own tables instead.
CREATE TABLE IF NOT EXISTS public.invoices (
    id           text PRIMARY KEY,
    customer     text,
    amount_cents bigint,
    status       text,
    note         text,
    updated_at   timestamptz NOT NULL DEFAULT clock_timestamp()
);
