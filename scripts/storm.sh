#!/usr/bin/env bash
# Regenerates docs/storm.svg, the reconnect storm figure (docs/storm.md):
# runs the benchmark program bench/storm (10,000 watchers, each variant in
# turn; about a minute on two cores), which prints its table and writes
# docs/storm.csv and docs/storm-summary.csv, then draws the CSV with
# bench/storm/plot.
#
#   scripts/storm.sh              run the benchmark, then draw
#   scripts/storm.sh -limit 500   the same, passing flags to the benchmark
#   scripts/storm.sh plot         only redraw docs/storm.svg from the CSV
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "${1:-}" != plot ]; then
	go run ./bench/storm -n 10000 -csv docs/storm.csv -summary docs/storm-summary.csv "$@"
fi
go run ./bench/storm/plot -csv docs/storm.csv -summary docs/storm-summary.csv -o docs/storm.svg
echo "wrote docs/storm.svg"
