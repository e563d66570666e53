#!/usr/bin/env bash
# scripts/deps.sh — owns: the Debian packages fencegate needs to build, test and run locally, and the
# unprivileged system user that runs the test/dev Postgres cluster when the scripts run as root.
# Idempotent and quiet when everything is already there; it installs only what is missing.
# `scripts/deps.sh bench` adds the tools of bench/ (curl, jq).
# Must not: build anything, start services, or touch the repository.
set -euo pipefail

PACKAGES=(
  build-essential cmake pkg-config
  libhiredis-dev libpq-dev libmicrohttpd-dev libjansson-dev libcmocka-dev libssl-dev
  redis-server redis-tools postgresql-15 postgresql-client-15
  python3 python3-yaml python3-pip python3-setuptools python3-wheel clang libclang-rt-14-dev
)
if [[ "${1:-}" == bench ]]; then
  PACKAGES+=(curl jq)
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
