// Package testbin finds the server binaries that scripts/testenv.sh builds
// from the Go module proxy (kube-apiserver, etcd, etcdutl) for the
// integration tests, and holds the one rule of every test server here for
// them: without a binary a local run skips, naming the one command that
// builds it ([BuildCommand]); with CI set the test fails instead, for CI
// never skips (childproc.Missing).
//
// The binaries are looked for in $RESUMABLE_TESTENV_BIN when it is set,
// else in $RESUMABLE_TESTENV_CACHE/k8s-<KubernetesVersion>, the cache
// defaulting to $HOME/.cache/resumable/testenv as in scripts/testenv.sh.
package testbin

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/resumable-go/resumable/internal/testkit/childproc"
)

// KubernetesVersion is the release that scripts/testenv.sh builds
// kube-apiserver from (the k8s.io/kubernetes requirement of
// adapters/k8s/internal/testenv/build/go.mod); the default directory is
// named after it.
const KubernetesVersion = "v1.37.2"

// BuildCommand is the one command that builds every binary of the
// directory, named when one is missing. It prints the directory.
const BuildCommand = "bash scripts/testenv.sh build"

// Environment variables read by the package.
const (
	// EnvBin names the directory holding the binaries.
	EnvBin = childproc.EnvBin
	// EnvCache names the cache root that scripts/testenv.sh builds into;
	// used when EnvBin is unset.
	EnvCache = childproc.EnvCache
)

// Dir returns the directory the binaries are looked for in.
func Dir() string { return childproc.BinDir("k8s-" + KubernetesVersion) }

// Find reports whether every one of names is an executable file in [Dir]:
// it returns the directory and, when one is missing, a one-line reason
// that names it and [BuildCommand].
func Find(names ...string) (dir, reason string) {
	dir = Dir()
	for _, name := range names {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil || fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
			return dir, fmt.Sprintf("testbin: no %s binary in %s: build it with: %s (or set %s)", name, dir, BuildCommand, EnvBin)
		}
	}
	return dir, ""
}

// Require returns [Dir] when every one of names is there ([Find]); else it
// ends t by childproc.Missing: it fails t when CI is set and skips it
// otherwise, naming [BuildCommand].
func Require(t testing.TB, names ...string) string {
	t.Helper()
	dir, reason := Find(names...)
	if reason != "" {
		childproc.Missing(t, reason)
	}
	return dir
}
