#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# examples/close-invoice.sh - owns: the command of the README's fencectl example, run under the lock of
# one invoice: `fencectl lock invoice:42 -- examples/close-invoice.sh 42`. It closes invoice ID with a
# fenced write, presenting the token fencectl put in FENCE_TOKEN, so that the write is refused (409, exit
# 1) if the lease was lost and someone else has written since. FENCEGATE_URL comes from fencectl too.
# Usage: examples/close-invoice.sh ID      Needs: curl. Must not: write without FENCE_TOKEN.
set -euo pipefail

id="${1:?usage: close-invoice.sh ID}"
: "${FENCE_TOKEN:?run me under fencectl lock invoice:ID -- $0 ID}"
url="${FENCEGATE_URL:-http://127.0.0.1:8480}"
auth=()
[[ -n "${FENCEGATE_KEY:-}" ]] && auth=(-H "Authorization: Bearer $FENCEGATE_KEY")

answer="$(curl -s -w '\n%{http_code}' "${auth[@]}" -X PATCH "$url/v1/pg/invoices/$id" \
  -H 'Content-Type: application/json' -H "Fence-Token: $FENCE_TOKEN" -H "Fence-Owner: close-invoice:$$" \
  -d '{"set": {"status": "closed"}}')"
status="${answer##*$'\n'}"
echo "invoice $id (fence $FENCE): HTTP $status ${answer%$'\n'*}"
[[ "$status" == 200 ]]
