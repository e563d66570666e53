#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# scripts/deps.sh — owns: the Debian packages fencegate needs to build, test and run locally (haproxy for the
# fault lab of tests/ha/), and the
# unprivileged system user that runs the test/dev Postgres cluster when the scripts run as root.
# Idempotent and quiet when everything is already there; it installs only what is missing.
# `scripts/deps.sh bench` adds the tools of bench/ (jq, python3-redis, python3-psycopg2, linux-perf, strace,
# valgrind); curl is always there (the README's walk-through, integration.readme), and prometheus for its
# promtool (integration.monitoring checks deploy/prometheus/; the service is never started by the tests).
# golang-go (Go 1.19) builds and tests the Go client of clients/go; the TypeScript client of clients/node is
# compiled with the typescript and @types/node locked in its package-lock.json, installed into
# FG_NODE_CLIENT_DIR (default /var/cache/fencegate/node-client as root, ~/.cache/fencegate/node-client
# otherwise); it has no runtime dependencies. python3-venv: the README's install of the Python client into a
# venv (integration.readme runs it).
# The browser tests of the operator console (tests/browser/) need Debian's chromium, node and the npm
# packages locked in tests/browser/package-lock.json, installed into FG_BROWSER_DIR (default
# /var/cache/fencegate/browser-tests as root, ~/.cache/fencegate/browser-tests otherwise); no browser is
# ever downloaded: the tests drive /usr/bin/chromium. The OpenAPI conformance test (integration.openapi_conformance)
# needs the linter and validating proxy locked in tests/openapi/package-lock.json, installed the same way into
# FG_OPENAPI_TOOLS_DIR (default .../fencegate/openapi-tools).
# Must not: build anything, start services, or touch the repository.
set -euo pipefail

PACKAGES=(
  build-essential cmake pkg-config openssl
  libhiredis-dev libpq-dev libmicrohttpd-dev libgnutls28-dev libjansson-dev libcmocka-dev libssl-dev
  redis-server redis-tools postgresql-15 postgresql-client-15
  python3 python3-yaml python3-pip python3-setuptools python3-wheel python3-venv clang libclang-rt-14-dev haproxy
  chromium nodejs curl golang-go prometheus
)
# Debian's nodejs ships npm apart; node from elsewhere may bring its own.
command -v npm >/dev/null 2>&1 || PACKAGES+=(npm)
if [[ "${1:-}" == bench ]]; then
  PACKAGES+=(jq python3-redis python3-psycopg2 linux-perf strace valgrind)
fi
# Unprivileged user that owns and runs the Postgres clusters of scripts/services.sh (postgres refuses root).
PG_OS_USER="${FG_PG_OS_USER:-fencegate-pg}"

die() { echo "deps.sh: $*" >&2; exit 1; }

is_installed() {
  [[ "$(dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null || true)" == "installed" ]]
}

command -v dpkg-query >/dev/null 2>&1 ||
  die "dpkg-query not found: this script supports Debian 12 (bookworm) and derivatives only"

missing=()
for pkg in "${PACKAGES[@]}"; do
  is_installed "$pkg" || missing+=("$pkg")
done

if ((${#missing[@]} > 0)); then
  if ((EUID == 0)); then
    as_root=()
  elif command -v sudo >/dev/null 2>&1; then
    as_root=(sudo)
  else
    die "missing packages (${missing[*]}) and not root, and sudo is not available; run as root: apt-get install ${missing[*]}"
  fi
  echo "deps.sh: installing missing packages: ${missing[*]}"
  "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q ||
    die "apt-get update failed"
  "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -q --no-install-recommends "${missing[@]}" ||
    die "apt-get install failed for: ${missing[*]}"
  still=()
  for pkg in "${missing[@]}"; do
    is_installed "$pkg" || still+=("$pkg")
  done
  ((${#still[@]} == 0)) || die "still missing after install: ${still[*]}"
fi

if ((EUID == 0)) && ! getent passwd "$PG_OS_USER" >/dev/null; then
  echo "deps.sh: creating system user $PG_OS_USER (runs the local Postgres clusters)"
  useradd --system --user-group --no-create-home --home-dir /nonexistent \
    --shell /usr/sbin/nologin --comment "fencegate dev/test postgres" "$PG_OS_USER" ||
    die "could not create system user $PG_OS_USER"
fi

# --- npm packages of the browser tests, the TypeScript client's build and the OpenAPI conformance test------------------------------
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if ((EUID == 0)); then
  cache_dir=/var/cache/fencegate
else
  cache_dir="${HOME}/.cache/fencegate"
fi

# npm_locked SOURCE TARGET MARKER: installs the packages locked in SOURCE/package-lock.json into TARGET unless
# TARGET already holds that lock file and MARKER (a package directory under node_modules).
npm_locked() {
  local source="$1" target="$2" marker="$3"
  if ! cmp -s "$source/package-lock.json" "$target/package-lock.json" || [[ ! -d "$target/node_modules/$marker" ]]; then
    echo "deps.sh: installing the npm packages of $source into $target"
    mkdir -p "$target"
    cp "$source/package.json" "$source/package-lock.json" "$target/"
    (cd "$target" && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund --ignore-scripts --loglevel=error) ||
      die "npm ci failed in $target"
  fi
}
npm_locked "$root/tests/browser" "${FG_BROWSER_DIR:-$cache_dir/browser-tests}" playwright-core
npm_locked "$root/clients/node" "${FG_NODE_CLIENT_DIR:-$cache_dir/node-client}" typescript
npm_locked "$root/tests/openapi" "${FG_OPENAPI_TOOLS_DIR:-$cache_dir/openapi-tools}" @stoplight/prism-cli
