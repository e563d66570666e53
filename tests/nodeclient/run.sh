#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/nodeclient/run.sh — owns: compiling the TypeScript client (clients/node) with strict tsc and running
# its node:test suites under tests/conformance/driver.py, which provides the gateways (FG_CONF_*).
#   run.sh tests OUT        the unit tests and the tests against the gateway
#   run.sh conformance OUT  the conformance scenarios through the TypeScript client
# OUT is a scratch directory for the compiled JavaScript. tsc and @types/node come from
# FG_NODE_CLIENT_MODULES (installed from clients/node/package-lock.json by scripts/deps.sh).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
modules="${FG_NODE_CLIENT_MODULES:?run through scripts/test, which sets FG_NODE_CLIENT_MODULES}"
out="${2:?usage: run.sh tests|conformance OUT}"
rm -rf "$out"
node "$modules/typescript/bin/tsc" -p "$root/clients/node/tsconfig.json" --outDir "$out" --typeRoots "$modules/@types"
echo '{"type": "module"}' >"$out/package.json"
export FG_CODES_JSON="$root/clients/conformance/codes.json"
case "$1" in
  tests) node --test "$out/test/unit.test.js" "$out/test/gateway.test.js" ;;
  conformance) node --test "$out/test/conformance.test.js" ;;
  *) echo "usage: run.sh tests|conformance OUT" >&2; exit 2 ;;
esac
