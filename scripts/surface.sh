#!/bin/sh
# surface.sh counts the exported names per public package: top-level funcs,
# types, vars and consts, and exported methods on exported types, over
# non-test files; the budgets per package are in docs/contributing.md
# (-check fails past them).
# Usage: scripts/surface.sh [-v]   (-v lists the names)
#
# Recorded (issue 27, item 2):
#   package             before the cut   round 1   round 2
#   stream                     73            67        55
#   stream/streamtest          37            32        29
#   cursor                     23            17        16
#   errclass                   24            23        23
#   backoff                    16            13        12
#   adapters/sse                8             7         5
#   adapters/k8s               44            28        27
#   adapters/etcd              54            43        27
#   metrics/prom               11             9         6
#   total                     290           239       200
# Round 4 (issue 31) counts every public package, found rather than listed:
# adapters/postgres and deadletter had not been counted (247 names, not 200).
cd "$(dirname "$0")/.." && exec go run scripts/surface.go "$@"
