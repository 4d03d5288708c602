#!/bin/sh
# surface.sh counts the exported names per public package: top-level funcs,
# types, vars and consts, and exported methods on exported types, over
# non-test files (issue 27: goal <= 200 in total).
# Usage: scripts/surface.sh [-v]   (-v lists the names)
#
# Recorded (issue 27, item 2):
#   package             2026-12-01 before   after the cut
#   stream                     73               72
#   stream/streamtest          37               32
#   cursor                     23               17
#   errclass                   24               23
#   backoff                    16               13
#   adapters/sse                8                7
#   adapters/k8s               44               28
#   adapters/etcd              54               (being redesigned)
#   metrics/prom               11               (being redesigned)
#   total                     290
cd "$(dirname "$0")/.." && exec go run scripts/surface.go "$@"
