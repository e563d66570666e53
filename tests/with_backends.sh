#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/with_backends.sh — owns: pointing one test at the pair of test backends ctest gave it.
#
# scripts/test starts one Redis and one Postgres per pair (a, b, ...) and runs ctest with a resource spec
# that lists the pairs; a test that talks to them declares RESOURCE_GROUPS backends:1, and ctest names the
# pair it holds in CTEST_RESOURCE_GROUP_0_BACKENDS ("id:b,slots:1"). This sets the FG_TEST_* variables of
# that pair from FG_TEST_PAIR_<id> ("<redis port> <postgres port> <services datadir>", exported by
# scripts/test), then runs the test. Run without a resource spec, the test gets pair a.
#
# usage: tests/with_backends.sh <test command> [args...]
set -euo pipefail

pair=a
if [[ -n "${CTEST_RESOURCE_GROUP_0_BACKENDS:-}" ]]; then
  pair="${CTEST_RESOURCE_GROUP_0_BACKENDS#id:}"
  pair="${pair%%,*}"
fi
spec_var="FG_TEST_PAIR_${pair}"
[[ -n "${!spec_var:-}" ]] || {
  echo "with_backends.sh: error: $spec_var is not set; run the tests through scripts/test" >&2
  exit 1
}
read -r redis_port pg_port svc_dir <<<"${!spec_var}"

export FG_TEST_REDIS_PORT="$redis_port"
export FG_TEST_PG_PORT="$pg_port"
export FG_TEST_REDIS_URL="redis://127.0.0.1:$redis_port/0"
export FG_TEST_PG_DSN="postgresql://fencegate@127.0.0.1:$pg_port/fencegate"
export FG_TEST_SVC_DIR="$svc_dir"
export FG_TEST_DATA="$svc_dir/scratch"
exec "$@"
