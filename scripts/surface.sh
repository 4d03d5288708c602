#!/bin/sh
# surface.sh counts the exported names per public package (issue 27: goal <= 200).
# Usage: scripts/surface.sh [-v]   (-v lists the names)
cd "$(dirname "$0")/.." && exec go run scripts/surface.go "$@"
