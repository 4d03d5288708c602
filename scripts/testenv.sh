#!/usr/bin/env bash
# testenv.sh builds and locates the kube-apiserver and etcd binaries that the
# integration tests run (packages internal/testkit/kubetest and internal/testkit/etcdcluster;
# internal/testkit/testbin finds them).
#
# Usage:
#   scripts/testenv.sh build     build both binaries and etcdutl unless already cached; print the directory
#   scripts/testenv.sh etcdutl   build etcdutl alone unless already cached; print the directory
#   scripts/testenv.sh dir       print the directory (whether or not it is built yet)
#
# Both binaries are compiled from the Go module proxy by the nested module
# adapters/k8s/internal/testenv/build (kube-apiserver from k8s.io/kubernetes,
# etcd from go.etcd.io/etcd/server/v3). The first build takes about ten minutes
# on two cores; later calls return at once. The directory is
#   ${RESUMABLE_TESTENV_CACHE:-$HOME/.cache/resumable/testenv}/k8s-<version>
# and is what RESUMABLE_TESTENV_BIN should name when it is set by hand.
# A stamp file (the hash of the build module's go.mod and go.sum) makes a change
# of pinned versions rebuild; a killed build leaves no half-written binary.
# etcdutl (the etcd adapter's snapshot-restore tests run it) comes from its own
# module, adapters/etcd/internal/etcdutl, into the same directory with its own
# stamp (etcdutl.stamp): a change there never rebuilds kube-apiserver or etcd.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
mod="$root/adapters/k8s/internal/testenv/build"
version=$(awk '$1 == "k8s.io/kubernetes" { print $2; exit }' "$mod/go.mod")
if [[ -z "$version" ]]; then
	echo "testenv.sh: no k8s.io/kubernetes requirement in $mod/go.mod" >&2
	exit 1
fi
cache="${RESUMABLE_TESTENV_CACHE:-${HOME}/.cache/resumable/testenv}"
dir="$cache/k8s-$version"

stamp() {
	cat "$mod/go.mod" "$mod/go.sum" | sha256sum | cut -d' ' -f1
}

built() {
	[[ -x "$dir/kube-apiserver" && -x "$dir/etcd" && -f "$dir/stamp" ]] &&
		[[ "$(cat "$dir/stamp")" == "$(stamp)" ]]
}

build() {
	mkdir -p "$dir"
	# One build at a time per directory; a second caller waits, then finds it built.
	exec 9>"$dir/.lock"
	flock 9
	if built; then
		echo "$dir"
		return
	fi
	rm -f "$dir/stamp"
	local start=$SECONDS
	(
		cd "$mod"
		export GOWORK=off GOFLAGS=-buildvcs=false CGO_ENABLED=0
		# kube-apiserver first: it is the long one, and etcd reuses its packages.
		for target in kube-apiserver=k8s.io/kubernetes/cmd/kube-apiserver etcd=go.etcd.io/etcd/server/v3; do
			name=${target%%=*}
			echo "testenv.sh: building $name ($version) into $dir" >&2
			go build -ldflags='-s -w' -o "$dir/.$name.tmp" "${target#*=}"
			mv -f "$dir/.$name.tmp" "$dir/$name"
		done
	)
	stamp >"$dir/stamp"
	echo "testenv.sh: built in $((SECONDS - start))s" >&2
	echo "$dir"
}

umod="$root/adapters/etcd/internal/etcdutl"

etcdutl_stamp() {
	cat "$umod/go.mod" "$umod/go.sum" | sha256sum | cut -d' ' -f1
}

etcdutl_built() {
	[[ -x "$dir/etcdutl" && -f "$dir/etcdutl.stamp" ]] &&
		[[ "$(cat "$dir/etcdutl.stamp")" == "$(etcdutl_stamp)" ]]
}

# build_etcdutl builds etcdutl unless built; it prints only progress, to stderr.
build_etcdutl() {
	mkdir -p "$dir"
	exec 8>"$dir/.etcdutl.lock"
	flock 8
	if etcdutl_built; then
		return
	fi
	rm -f "$dir/etcdutl.stamp"
	local start=$SECONDS
	echo "testenv.sh: building etcdutl into $dir" >&2
	(
		cd "$umod"
		export GOWORK=off GOFLAGS=-buildvcs=false CGO_ENABLED=0
		go build -ldflags='-s -w' -o "$dir/.etcdutl.tmp" go.etcd.io/etcd/etcdutl/v3
	)
	mv -f "$dir/.etcdutl.tmp" "$dir/etcdutl"
	etcdutl_stamp >"$dir/etcdutl.stamp"
	echo "testenv.sh: etcdutl built in $((SECONDS - start))s" >&2
}

case "${1:-}" in
build)
	build
	build_etcdutl
	;;
etcdutl)
	build_etcdutl
	echo "$dir"
	;;
dir) echo "$dir" ;;
*)
	echo "usage: $0 build|etcdutl|dir" >&2
	exit 2
	;;
esac
