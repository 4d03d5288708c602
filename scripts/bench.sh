#!/usr/bin/env bash
# bench.sh runs every benchmark of the library COUNT times (default 6) and
# prints them through benchstat: the core (stream, cursor) on their own, and
# the Kubernetes adapter side by side with client-go's RetryWatcher, measured
# in the same process so that machine noise cancels (column "resumable" vs
# the base column "client-go": the percentage is ours/client-go − 1).
#
# Usage: scripts/bench.sh [go test -bench regexp]   (default: .)
# Raw results are kept in .cache/bench/ for later comparisons.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
count=${COUNT:-6}
pattern=${1:-.}
out="$root/.cache/bench"
mkdir -p "$out"
benchstat=(go run golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da)

echo "# machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $(go version | cut -d' ' -f3-)"
echo "# count=$count; raw results in $out" >&2

go test -run '^$' -bench "$pattern" -benchmem -count "$count" ./stream/ ./cursor/ >"$out/core.txt"
go test -run '^$' -bench "$pattern" -benchmem -count "$count" ./adapters/k8s/ >"$out/k8s.txt"

echo
echo "## Core: Run and All per event, reconnect cost, stores"
"${benchstat[@]}" "$out/core.txt"
echo
echo "## Kubernetes adapter (resumable) vs client-go's RetryWatcher"
"${benchstat[@]}" -col /impl "$out/k8s.txt"
