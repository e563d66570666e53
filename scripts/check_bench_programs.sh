#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# scripts/check_bench_programs.sh - the benchmarks of bench/ still build and run, as far as a test can
# check that in a few seconds: a benchmark that no longer runs, or runs calls the scripts refuse,
# measures nothing. In a scratch folder:
#  1. every C program of bench/ builds with bench/common.sh's bench_c_program, the way the benchmarks
#     build it, against the gateway's sources and generated script table of now, with -Wall -Wextra
#     -Werror;
#  2. every Python tool of bench/ answers --help (so it compiles, and its imports and options hold),
#     and every shell tool parses (bash -n);
#  3. raw_pairs, which calls the gateway's lease scripts with keys and arguments it builds itself, runs
#     a moment of each of its modes, and its acquire-args once, against a redis-server of its own on a
#     unix socket: it stops on an argument it does not fill and on any answer it does not expect;
#  4. each bench command that docs/performance.md and bench/README.md name (in `code`) exists, and
#     takes the --flags and the VAR= settings written with it.
#
# Usage: check_bench_programs.sh BUILD_DIR   (a configured build: its generated/ is used)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

build="$(mktemp -d)"
redis_pid=""
cleanup() {
  [[ -n "$redis_pid" ]] && kill "$redis_pid" 2>/dev/null && wait "$redis_pid" 2>/dev/null
  rm -rf "$build"
}
trap cleanup EXIT
ln -s "$(cd "$1" && pwd)/generated" "$build/generated"
# shellcheck source=bench/common.sh
source bench/common.sh

# 1. The C programs.
export FG_BENCH_CFLAGS="-Wall -Wextra -Werror"
for program in bench/*.c; do
  name="$(basename "$program" .c)"
  bench_c_program "$name"
  echo "built $name"
done

# 2. The Python and shell tools. Each Python tool's --help compiles it, imports what it imports
# (bench/lean_http.py, the one module, with the tools that use it) and reads its options, as the
# interpreter of the tests sees them.
python_tools=(bench/*.py bench/backend_cost bench/lua_floor)
export PYTHONDONTWRITEBYTECODE=1 # nothing written to bench/
for tool in "${python_tools[@]}"; do
  [[ "$tool" == bench/lean_http.py ]] && continue # a module, not a command
  python3 "$tool" --help >/dev/null || { echo "$tool --help failed" >&2; exit 1; }
done
echo "ran each --help of ${python_tools[*]}"
for tool in bench/*.sh; do
  bash -n "$tool"
done
echo "parsed bench/*.sh"

# 3. raw_pairs against a Redis of its own: every mode, 0.3 s each.
socket="$build/redis.sock"
redis-server --port 0 --unixsocket "$socket" --save '' --appendonly no --dir "$build" >"$build/redis.log" 2>&1 &
redis_pid=$!
for _ in $(seq 100); do
  redis-cli -s "$socket" PING 2>/dev/null | grep -q PONG && break
  sleep 0.05
done
redis-cli -s "$socket" SET fg:fence 1 >/dev/null
redis-cli -s "$socket" SET fg:fence_limit 1000000000000000 >/dev/null
for mode in "1 distinct" "2 shared" "1 distinct semaphore" "3 shared semaphore" "1 distinct redis-py"; do
  read -r connections names kind <<<"$mode"
  # shellcheck disable=SC2086 # kind is one word or none
  out=$("$build/raw_pairs" "$socket" "$connections" 0.3 "$names" $kind)
  pairs=$(sed -nE 's/.*\(([0-9]+) pairs,.*/\1/p' <<<"$out")
  if [[ -z "$pairs" || "$pairs" == 0 ]]; then
    echo "raw_pairs $mode made no pair: $out" >&2
    exit 1
  fi
  echo "raw_pairs $mode: $out"
done
mapfile -t acquire < <("$build/raw_pairs" acquire-args bench-check 0123456789abcdef0123456789abcdef)
answer=$(redis-cli -s "$socket" FCALL "${acquire[@]}")
if [[ "$answer" != granted* ]]; then
  echo "raw_pairs acquire-args: its acquire answered: $answer" >&2
  exit 1
fi
echo "raw_pairs acquire-args: $answer"

# 4. The commands the documents name.
python3 - docs/performance.md bench/README.md <<'EOF'
import os
import re
import sys

# Settings every bench command takes, or that its tools pass on (bench/common.sh).
COMMON = open("bench/common.sh").read()


def text_of(tool):
    """The tool's text and that of the bench files it names (a shell tool's Python workers)."""
    text = open(tool).read()
    for other in sorted(set(re.findall(r"bench/(\w+\.py)", text))):
        if os.path.exists(os.path.join("bench", other)):
            text += open(os.path.join("bench", other)).read()
    return text


bad, checked = [], 0
for doc in sys.argv[1:]:
    for span in re.findall(r"`([^`]+)`", open(doc).read()):
        for part in re.split(r"&&|\|\||;|\|", " ".join(span.split())):
            words = part.split()
            at = next((i for i, w in enumerate(words) if re.fullmatch(r"bench/[\w.]+", w)), None)
            if at is None:
                continue
            tool = words[at]
            if (tool.startswith("bench/results") or re.search(r"\.(c|h|md|txt)$", tool) or tool == "bench/common.sh"
                    or os.path.exists(tool + ".c")):  # a C program, built by the commands
                continue
            if not os.path.isfile(tool):
                bad.append(f"{doc}: `{span}`: there is no {tool}")
                continue
            text = text_of(tool)
            checked += 1
            settings = [w.split("=")[0] for w in words[:at] if re.fullmatch(r"[A-Z][A-Z0-9_]*=.*", w)]
            for name in settings:
                if name not in text and name not in COMMON:
                    bad.append(f"{doc}: `{span}`: {tool} does not read {name}")
            for flag in (w.split("=")[0] for w in words[at + 1:] if w.startswith("--")):
                if not re.search(r"""["']""" + re.escape(flag) + r"""["']""", text):
                    bad.append(f"{doc}: `{span}`: {tool} takes no {flag}")
if bad:
    print("\n".join(bad), file=sys.stderr)
    sys.exit(1)
print(f"{checked} bench commands of {' and '.join(sys.argv[1:])}: each takes what it is given")
EOF
