#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/goclient/run.sh — owns: running the Go client's checks under tests/conformance/driver.py, which
# provides the gateways (FG_CONF_*).
#   run.sh tests        go vet, then the client's tests (unit and against the gateway, under the race
#                       detector: the keeper's goroutines share the lease's state) and the example's
#   run.sh conformance  the conformance scenarios through the Go client
# Offline: the module has no dependencies, and GOPROXY=off makes sure nothing is fetched.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
export GOPROXY=off GOFLAGS=-mod=mod GOCACHE="${GOCACHE:-${HOME:-/tmp}/.cache/go-build}"
case "${1:-}" in
  tests)
    (cd "$root/clients/go" && go vet ./... && go test -race -count=1 -run 'TestUnit|TestGateway' -v ./...)
    (cd "$root/examples/go" && go vet ./... && go test -count=1 -v ./...)
    ;;
  conformance)
    cd "$root/clients/go" && go test -count=1 -run TestConformance -v ./...
    ;;
  *) echo "usage: run.sh tests|conformance" >&2; exit 2 ;;
esac
