#!/bin/sh
# installcheck.sh checks README.md's install recipe for every nested module a
# user imports: it builds a throw-away user module outside the workspace,
# once with exactly the README's go.mod lines (adapters/k8s replaced by the
# module) and `go mod tidy`, once with the README's `go work init` line, and
# runs `go build` in each. Everything comes through replace lines, the
# workspace and the module cache: GOPROXY=off, no network.
# Usage: scripts/installcheck.sh
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
modules="adapters/k8s adapters/etcd adapters/kafka adapters/postgres adapters/redis metrics/prom"

# The go.mod block after "add to your `go.mod`:", and the go work line.
block=$(awk 'f==2 && /^```/ {exit} f==2 {print} f==1 && /^```/ {f=2} /add to your `go.mod`:/ {f=1}' "$root/README.md")
work=$(grep -o 'go work init [^`]*' "$root/README.md" | head -1)
[ -n "$block" ] && [ -n "$work" ] || { echo "installcheck: README.md has no install recipe"; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ln -s "$root" "$tmp/resumable"
export GOPROXY=off GOSUMDB=off GOFLAGS=-mod=mod
for m in $modules; do
	for route in replace workspace; do
		dir="$tmp/user-$(echo "$m" | tr / -)-$route"
		mkdir "$dir"
		printf 'module example.com/user\n\ngo 1.26.0\n' >"$dir/go.mod"
		printf 'package main\n\nimport _ "github.com/resumable-go/resumable/%s"\n\nfunc main() {}\n' "$m" >"$dir/main.go"
		if [ "$route" = replace ]; then
			printf '\n%s\n' "$block" | sed "s#adapters/k8s#$m#g" >>"$dir/go.mod"
			# Offline, tidy cannot fetch third-party test-only modules missing
			# from the cache (client-go's testify/objx): those alone are
			# tolerated (tidy -e); one of this repository's is the failure
			# the recipe must not have.
			if ! out=$(cd "$dir" && GOWORK=off go mod tidy 2>&1); then
				if echo "$out" | grep 'module lookup disabled\|cannot find module\|reading .*: 4[0-9][0-9]' | grep -q 'resumable-go/resumable'; then
					echo "$out"; echo "installcheck: $m: go mod tidy with the README's go.mod lines fails"; cat "$dir/go.mod"; exit 1
				fi
				(cd "$dir" && GOWORK=off go mod tidy -e >/dev/null 2>&1)
			fi
			(cd "$dir" && GOWORK=off go build ./...) ||
				{ echo "installcheck: $m: the README's go.mod lines do not build"; cat "$dir/go.mod"; exit 1; }
		else
			(cd "$dir" && GOWORK= GOFLAGS= sh -c "$(echo "$work" | sed "s#adapters/k8s#$m#g")" && GOWORK= GOFLAGS= go build ./...) ||
				{ echo "installcheck: $m: the README's workspace line does not build"; exit 1; }
		fi
		echo "installcheck: $m ($route) ok"
	done
done
