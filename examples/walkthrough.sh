#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# examples/walkthrough.sh - owns: the README's walk-through, as a script that runs it against a gateway
# started with examples/fencegate.json: a worker takes the lock guarding an invoice, stalls until its lease
# runs out, another worker takes over and writes, the first one's late write is refused and audited; then
# renew, release, a semaphore and a fenced Redis key. Each step prints a comment, the curl command (with
# $J, $AUTH and the tokens as variables, so it can be pasted, and the gateway's real URL) and the gateway's
# status and answer; each grant is followed by the `export` line that sets its token's variable
# (A_TOKEN, B_TOKEN, S_TOKEN). The README shows this output. CI runs it (integration.readme) and compares
# it with the README.
# Usage: examples/walkthrough.sh [INVOICE_ID]     (default 42)
#   FENCEGATE_URL  the gateway (default http://127.0.0.1:8480); FENCEGATE_KEY  an API key, when auth is on
# Needs curl and python3 (to read the tokens out of the answers). Must not: write anything but through
# the gateway, or depend on what an earlier run left behind (run it with another INVOICE_ID).
set -euo pipefail

ID="${1:-42}"
URL="${FENCEGATE_URL:-http://127.0.0.1:8480}"
J='Content-Type: application/json'
AUTH="Authorization: Bearer ${FENCEGATE_KEY:-none}"
LOCK="invoice:$ID"

# say COMMENT: begins a step with "# COMMENT", after a blank line unless it is the first.
STARTED=""
say() {
  [[ -n "$STARTED" ]] && echo
  STARTED=1
  printf '# %s\n' "$1"
}

# step COMMENT SHOWN METHOD PATH [BODY [HEADER...]]: prints "# COMMENT", "$ curl ..." (SHOWN: how the
# command reads after `curl -s -H "$AUTH"`, tokens as variables) and "STATUS ANSWER"; the answer is kept in $ANSWER.
step() {
  local comment="$1" shown="$2" method="$3" path="$4" body="${5:-}"
  shift $(($# < 5 ? $# : 5))
  local args=(-s -w '\n%{http_code}' -H "$AUTH" -X "$method" "$URL$path")
  [[ -n "$body" ]] && args+=(-H "$J" -d "$body")
  local header
  for header in "$@"; do args+=(-H "$header"); done
  say "$comment"
  printf '$ curl -s -H "$AUTH" %s\n' "$shown"
  local out
  out="$(curl "${args[@]}")"
  ANSWER="${out%$'\n'*}"
  printf '%s %s\n' "${out##*$'\n'}" "$ANSWER"
}

# keep NAME: sets NAME to the token of $ANSWER and prints the line that sets it in the reader's shell.
keep() {
  local token
  token="$(field token)"
  printf -v "$1" '%s' "$token"
  printf '$ export %s=%s\n' "$1" "$token"
}

# field NAME: member NAME of $ANSWER.
field() {
  python3 -c 'import json, sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$ANSWER" "$1"
}

step "Worker A takes the lock guarding invoice $ID, for 2 s" \
  "-X POST $URL/v1/locks/$LOCK/acquire -H \"\$J\" -d '{\"ttl_ms\": 2000, \"owner\": \"worker-A\"}'" \
  POST "/v1/locks/$LOCK/acquire" '{"ttl_ms": 2000, "owner": "worker-A"}'
keep A_TOKEN

step "A writes the invoice, presenting its token (the fence is inside it, signed)" \
  "-X PUT $URL/v1/pg/invoices/$ID -H \"\$J\" -H \"Fence-Token: \$A_TOKEN\" -d '{\"row\": {\"customer\": \"acme\", \"amount_cents\": 12000, \"status\": \"open\"}}'" \
  PUT "/v1/pg/invoices/$ID" '{"row": {"customer": "acme", "amount_cents": 12000, "status": "open"}}' \
  "Fence-Token: $A_TOKEN"

say "A stalls (a GC pause, a slow disk) for 2.5 s: its lease runs out, and nothing renews it"
echo '$ sleep 2.5'
sleep 2.5

step "Worker B takes the lock: a new lease with a higher fence" \
  "-X POST $URL/v1/locks/$LOCK/acquire -H \"\$J\" -d '{\"ttl_ms\": 30000, \"owner\": \"worker-B\"}'" \
  POST "/v1/locks/$LOCK/acquire" '{"ttl_ms": 30000, "owner": "worker-B"}'
keep B_TOKEN

step "B marks the invoice paid" \
  "-X PATCH $URL/v1/pg/invoices/$ID -H \"\$J\" -H \"Fence-Token: \$B_TOKEN\" -d '{\"set\": {\"status\": \"paid\"}}'" \
  PATCH "/v1/pg/invoices/$ID" '{"set": {"status": "paid"}}' "Fence-Token: $B_TOKEN"

step "A wakes up and writes with its old token: refused, nothing is written" \
  "-X PATCH $URL/v1/pg/invoices/$ID -H \"\$J\" -H \"Fence-Token: \$A_TOKEN\" -H 'Fence-Owner: worker-A' -d '{\"set\": {\"status\": \"void\"}}'" \
  PATCH "/v1/pg/invoices/$ID" '{"set": {"status": "void"}}' "Fence-Token: $A_TOKEN" "Fence-Owner: worker-A"

step "The refusal is in the audit" \
  "'$URL/v1/audit/rejections?resource=pg:invoices/$ID'" \
  GET "/v1/audit/rejections?resource=pg:invoices/$ID"

step "A's renew: its lease is gone" \
  "-X POST $URL/v1/locks/$LOCK/renew -H \"\$J\" -d \"{\\\"token\\\": \\\"\$A_TOKEN\\\"}\"" \
  POST "/v1/locks/$LOCK/renew" "{\"token\": \"$A_TOKEN\"}"

step "B renews while it works" \
  "-X POST $URL/v1/locks/$LOCK/renew -H \"\$J\" -d \"{\\\"token\\\": \\\"\$B_TOKEN\\\"}\"" \
  POST "/v1/locks/$LOCK/renew" "{\"token\": \"$B_TOKEN\"}"

step "Redis keys under a configured prefix (app:) are fenced the same way, here with B's token" \
  "-X PUT $URL/v1/redis/app:$LOCK:state -H \"\$J\" -H \"Fence-Token: \$B_TOKEN\" -d '{\"value\": \"paid\"}'" \
  PUT "/v1/redis/app:$LOCK:state" '{"value": "paid"}' "Fence-Token: $B_TOKEN"

step "Who holds the lock" "$URL/v1/locks/$LOCK" GET "/v1/locks/$LOCK"

step "B is done" \
  "-X POST $URL/v1/locks/$LOCK/release -H \"\$J\" -d \"{\\\"token\\\": \\\"\$B_TOKEN\\\"}\"" \
  POST "/v1/locks/$LOCK/release" "{\"token\": \"$B_TOKEN\"}"

step "The lock is free" "$URL/v1/locks/$LOCK" GET "/v1/locks/$LOCK"

step "Up to five holders at once: a semaphore, each holder with its own lease and fence" \
  "-X POST $URL/v1/semaphores/exporters-$ID/acquire -H \"\$J\" -d '{\"limit\": 5}'" \
  POST "/v1/semaphores/exporters-$ID/acquire" '{"limit": 5}'
keep S_TOKEN

step "The semaphore" "$URL/v1/semaphores/exporters-$ID" GET "/v1/semaphores/exporters-$ID"

step "Its holder is done" \
  "-X POST $URL/v1/semaphores/exporters-$ID/release -H \"\$J\" -d \"{\\\"token\\\": \\\"\$S_TOKEN\\\"}\"" \
  POST "/v1/semaphores/exporters-$ID/release" "{\"token\": \"$S_TOKEN\"}"
