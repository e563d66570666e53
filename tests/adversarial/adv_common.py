# SPDX-License-Identifier: Apache-2.0
"""Shared set-up of the adversarial and fault tests: the gateway configuration with the writable invoices
table, the test-owned commit history of public.invoices (an AFTER INSERT OR UPDATE trigger appending
(key, note) to a table with a bigserial: writes to one row serialize on its fence row lock, so the
history's order per row is commit order), and readers of what Postgres and the gateway hold.

Owns: those helpers. Must not: start Redis or Postgres (scripts/test does), or leave the trigger behind
(uninstall_history runs in each test's tearDown).
"""

from __future__ import annotations

import os
import random
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))

from harness import Gateway, psql  # noqa: E402,F401

TABLE = "invoices"
GATEWAY_CONFIG = {
    "tables": {TABLE: {"key": "id", "columns": ["customer", "amount_cents", "status", "note"]}},
    "redis_prefixes": ["app:"],
}

HISTORY_SQL = """
CREATE TABLE IF NOT EXISTS public.adv_history (
    seq  bigserial PRIMARY KEY,
    id   text NOT NULL,
    note text,
    op   text NOT NULL
);
CREATE OR REPLACE FUNCTION public.adv_history_append() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO public.adv_history (id, note, op) VALUES (NEW.id, NEW.note, TG_OP);
    RETURN NEW;
END $$;
DROP TRIGGER IF EXISTS adv_history ON public.invoices;
CREATE TRIGGER adv_history AFTER INSERT OR UPDATE ON public.invoices
    FOR EACH ROW EXECUTE FUNCTION public.adv_history_append();
"""


def seed_from_env(name: str = "FG_ADV_SEED") -> int:
    """FG_ADV_SEED if set (to replay a run), else a fresh one; printed either way."""
    raw = os.environ.get(name)
    seed = int(raw) if raw else random.SystemRandom().randrange(1, 2**31)
    print(f"adversarial: {name}={seed} (set it to replay this run)", flush=True)
    return seed


def run_tag(seed: int) -> str:
    """A prefix for every lock, row and key of one run, so runs never see each other's data."""
    return f"adv{seed % 100000}x{int(time.time() * 1000) % 10**7}"


def install_history() -> None:
    psql(HISTORY_SQL)


def uninstall_history() -> None:
    psql("DROP TRIGGER IF EXISTS adv_history ON public.invoices;")


def history(prefix: str) -> list[tuple[int, str, str]]:
    """(seq, key, note) of every committed insert/update of rows whose key starts with prefix."""
    rows = psql("SELECT seq, id, coalesce(note, '') FROM public.adv_history WHERE id LIKE :'p' ORDER BY seq",
                {"p": prefix + "%"})
    return [(int(s), k, n) for s, k, n in (line.split("|", 2) for line in rows)]


def final_notes(prefix: str) -> dict[str, str | None]:
    rows = psql("SELECT id, coalesce(note, '') FROM public.invoices WHERE id LIKE :'p'", {"p": prefix + "%"})
    return dict(line.split("|", 1) for line in rows)


def stored_fences(pattern: str) -> dict[str, int]:
    rows = psql("SELECT resource, fence FROM fencegate.resource_fences WHERE resource LIKE :'p'", {"p": pattern})
    return {r: int(f) for r, f in (line.split("|") for line in rows)}


def audit_counts(pattern: str) -> dict[tuple[str, int], int]:
    rows = psql("SELECT resource, presented_fence, count(*) FROM fencegate.rejections WHERE resource LIKE :'p' "
                "GROUP BY 1, 2", {"p": pattern})
    return {(r, int(f)): int(n) for r, f, n in (line.split("|") for line in rows)}


def max_stored_fence() -> int:
    return int(psql("SELECT coalesce(max(fence), 0) FROM fencegate.resource_fences")[0])
